package gobgp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
)

// TestBIRDInterop runs BIRD 2 as a passive peer on loopback: it must receive
// the node's pod CIDRs (IPv4, and IPv6 over the same IPv4 session) and see
// them withdrawn.
func TestBIRDInterop(t *testing.T) {
	birdPath, err := exec.LookPath("bird")
	if err != nil {
		birdPath = "/usr/sbin/bird"
	}
	birdcPath, errc := exec.LookPath("birdc")
	if errc != nil {
		birdcPath = "/usr/sbin/birdc"
	}
	for _, p := range []string{birdPath, birdcPath} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("BIRD 2 is not installed (%s missing): install the Debian package bird2 to run this test", p)
		}
	}

	const birdAddr, localAddr = "127.0.0.10", "127.0.0.9"
	port := freePort(t, birdAddr)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "bird.conf")
	sock := filepath.Join(dir, "bird.ctl")
	cfg := fmt.Sprintf(`router id %s;
log "%s" all;
protocol device {}
protocol direct { ipv4; ipv6; interface "lo"; }
protocol bgp gobgp {
	local %s port %d as 65100;
	neighbor %s as 65009;
	passive on;
	multihop 2;
	hold time 9;
	ipv4 { import all; export none; };
	ipv6 { import all; export none; };
}
`, birdAddr, filepath.Join(dir, "bird.log"), birdAddr, port, localAddr)
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))

	cmd := exec.Command(birdPath, "-f", "-c", cfgPath, "-s", sock, "-P", filepath.Join(dir, "bird.pid"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "bird.log")); err == nil {
				t.Logf("bird.log:\n%s", b)
			}
		}
	})
	birdc := func(args ...string) string {
		out, _ := exec.Command(birdcPath, append([]string{"-s", sock}, args...)...).CombinedOutput()
		return string(out)
	}
	require.Eventually(t, func() bool { return strings.Contains(birdc("show", "status"), "Daemon is up") },
		waitFor, 50*time.Millisecond, "bird did not start")

	ctx := context.Background()
	m := runManager(t, Config{})
	n := bgp.Neighbor{
		PeerAddress: netip.MustParseAddr(birdAddr), PeerPort: uint16(port), PeerASN: 65100,
		LocalAddress: netip.MustParseAddr(localAddr), EBGPMultihopTTL: 2,
		ConnectRetryTime: MinConnectRetryTime, HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second,
	}
	state := testState(testNode("10.244.9.0/24", "fd00:10:244:9::/64"))
	state.IPv4 = net.ParseIP(localAddr)
	state.IPv6 = net.ParseIP("::1")
	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65009, n), state))
	waitEstablished(t, m, n.PeerAddress)

	require.Eventually(t, func() bool {
		out := birdc("show", "route", "protocol", "gobgp")
		return strings.Contains(out, "10.244.9.0/24") && strings.Contains(out, "fd00:10:244:9::/64")
	}, waitFor, 100*time.Millisecond, "bird routes: %s", birdc("show", "route", "all"))

	// Withdraw by policy change (no export), then by nil.
	p := testPolicy(65009, n)
	p.VirtualRouters[0].ExportPodCIDR = false
	require.NoError(t, m.ConfigurePeers(ctx, p, state))
	require.Eventually(t, func() bool {
		out := birdc("show", "route", "protocol", "gobgp")
		return !strings.Contains(out, "10.244.9.0/24") && !strings.Contains(out, "fd00:10:244:9::/64")
	}, waitFor, 100*time.Millisecond, "bird routes: %s", birdc("show", "route"))
	require.Contains(t, birdc("show", "protocols", "gobgp"), "Established", "withdrawal keeps the session")

	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65009, n), state))
	require.Eventually(t, func() bool { return strings.Contains(birdc("show", "route", "protocol", "gobgp"), "10.244.9.0/24") },
		waitFor, 100*time.Millisecond)
	require.NoError(t, m.ConfigurePeers(ctx, nil, nil))
	require.Eventually(t, func() bool {
		out := birdc("show", "route", "protocol", "gobgp")
		return !strings.Contains(out, "10.244.9.0/24") && !strings.Contains(birdc("show", "protocols", "gobgp"), "Established")
	}, waitFor, 100*time.Millisecond)
}

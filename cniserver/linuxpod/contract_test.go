package linuxpod_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/cniserver/cniservertest"
	"github.com/vswitchkit/vswitchkit/cniserver/linuxpod"
)

// world is a cniserver.Linux with the means to set up a test: namespaces
// and foreign links. The netlink implementation runs in real network
// namespaces (root only), FakeLinux in memory; both must pass the same
// contract test.
type world struct {
	linux cniserver.Linux
	// netns creates an empty namespace and returns its path; removed at
	// the end of the test.
	netns func(t *testing.T) string
	// foreign creates a link that is not the server's in netns.
	foreign func(t *testing.T, netns, name string)
	// moveOnly moves a link of the host namespace into netns without
	// renaming it (an EnsureVeth interrupted between move and rename);
	// nil if the world cannot.
	moveOnly func(t *testing.T, name, netns string)
}

func worlds(t *testing.T) map[string]func(t *testing.T) world {
	return map[string]func(t *testing.T) world{
		"fake": func(*testing.T) world {
			f := cniservertest.NewFakeLinux()
			n := 0
			return world{
				linux: f,
				netns: func(t *testing.T) string {
					n++
					p := "/run/netns/fake" + string(rune('a'+n))
					require.NoError(t, f.AddNetns(p))
					return p
				},
				foreign: func(t *testing.T, netns, name string) { require.NoError(t, f.AddLink(netns, name, "dummy")) },
			}
		},
		"netlink": func(t *testing.T) world {
			requireRoot(t)
			return world{
				linux: linuxpod.New(),
				netns: newNetns,
				foreign: func(t *testing.T, netns, name string) {
					run(t, "ip", "-n", nsName(netns), "link", "add", name, "type", "veth", "peer", "name", name+"x")
				},
				moveOnly: func(t *testing.T, name, netns string) {
					run(t, "ip", "link", "set", name, "netns", nsName(netns))
				},
			}
		},
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test creates network namespaces (ip netns add) and veth pairs")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs the ip command (iproute2)")
	}
}

func run(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	require.NoError(t, err, "%v: %s", args, out)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newNetns creates a named network namespace, deleted at the end of the
// test.
func newNetns(t *testing.T) string {
	name := "vsklp-" + randHex(4)
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	return "/run/netns/" + name
}

func nsName(path string) string { return path[len("/run/netns/"):] }

// vethNames returns unique host and peer names, and deletes the host end
// at the end of the test (which deletes the pair).
func vethNames(t *testing.T, l cniserver.Linux) (host, peer string) {
	id := randHex(5)
	host, peer = "vskt"+id, "vspt"+id
	t.Cleanup(func() { _ = l.DeleteLink(context.Background(), "", host) })
	return host, peer
}

func TestContract(t *testing.T) {
	for name, mk := range worlds(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("veth into the namespace", func(t *testing.T) { testVeth(t, mk(t)) })
			t.Run("veth prepared in the host, moved later", func(t *testing.T) { testVethPrepared(t, mk(t)) })
			t.Run("interface name taken", func(t *testing.T) { testNameTaken(t, mk(t)) })
			t.Run("stale host end re-created", func(t *testing.T) { testStaleHostEnd(t, mk(t)) })
			t.Run("interrupted move is completed", func(t *testing.T) { testInterruptedMove(t, mk(t)) })
			t.Run("configure and inspect", func(t *testing.T) { testConfigure(t, mk(t)) })
			t.Run("gateway outside the prefix", func(t *testing.T) { testOffLinkGateway(t, mk(t)) })
			t.Run("missing namespace and link", func(t *testing.T) { testMissing(t, mk(t)) })
			t.Run("cancelled context", func(t *testing.T) { testCancelled(t, mk(t)) })
		})
	}
}

var bg = context.Background()

func testVeth(t *testing.T, w world) {
	ns := w.netns(t)
	host, peer := vethNames(t, w.linux)
	v := cniserver.Veth{HostName: host, PeerName: peer, Netns: ns, IfName: "eth0", MTU: 1400}
	mac, err := w.linux.EnsureVeth(bg, v)
	require.NoError(t, err)
	hs, err := w.linux.InspectLink(bg, "", host)
	require.NoError(t, err)
	assert.Equal(t, mac, hs.MAC)
	assert.True(t, hs.Up)
	assert.Equal(t, 1400, hs.MTU)
	ps, err := w.linux.InspectLink(bg, ns, "eth0")
	require.NoError(t, err)
	assert.Equal(t, 1400, ps.MTU)
	_, err = w.linux.InspectLink(bg, "", peer)
	assert.ErrorIs(t, err, cniserver.ErrLinkNotFound, "the pod end left the host namespace")

	// Idempotent.
	again, err := w.linux.EnsureVeth(bg, v)
	require.NoError(t, err)
	assert.Equal(t, mac, again)
	ps2, err := w.linux.InspectLink(bg, ns, "eth0")
	require.NoError(t, err)
	assert.Equal(t, ps.MAC, ps2.MAC, "the same pod end")

	// Deleting the host end deletes both; deleting again is fine.
	require.NoError(t, w.linux.DeleteLink(bg, "", host))
	require.NoError(t, w.linux.DeleteLink(bg, "", host))
	_, err = w.linux.InspectLink(bg, ns, "eth0")
	assert.ErrorIs(t, err, cniserver.ErrLinkNotFound)
}

func testVethPrepared(t *testing.T, w world) {
	ns := w.netns(t)
	host, peer := vethNames(t, w.linux)
	_, err := w.linux.EnsureVeth(bg, cniserver.Veth{HostName: host, PeerName: peer})
	require.NoError(t, err)
	_, err = w.linux.InspectLink(bg, "", peer)
	require.NoError(t, err, "the pod end waits in the host namespace")
	_, err = w.linux.EnsureVeth(bg, cniserver.Veth{HostName: host, PeerName: peer, Netns: ns, IfName: "net1"})
	require.NoError(t, err)
	_, err = w.linux.InspectLink(bg, ns, "net1")
	require.NoError(t, err)
	_, err = w.linux.InspectLink(bg, "", peer)
	assert.ErrorIs(t, err, cniserver.ErrLinkNotFound)
}

func testNameTaken(t *testing.T, w world) {
	ns := w.netns(t)
	w.foreign(t, ns, "eth0")
	host, peer := vethNames(t, w.linux)
	_, err := w.linux.EnsureVeth(bg, cniserver.Veth{HostName: host, PeerName: peer, Netns: ns, IfName: "eth0"})
	assert.ErrorIs(t, err, cniserver.ErrLinkExists)
	_, err = w.linux.InspectLink(bg, "", host)
	assert.ErrorIs(t, err, cniserver.ErrLinkNotFound, "nothing created")

	// Prepared first, then the name is taken when it is moved.
	ns2 := w.netns(t)
	_, err = w.linux.EnsureVeth(bg, cniserver.Veth{HostName: host, PeerName: peer})
	require.NoError(t, err)
	w.foreign(t, ns2, "eth0")
	_, err = w.linux.EnsureVeth(bg, cniserver.Veth{HostName: host, PeerName: peer, Netns: ns2, IfName: "eth0"})
	assert.ErrorIs(t, err, cniserver.ErrLinkExists)
}

func testStaleHostEnd(t *testing.T, w world) {
	nsA, nsB := w.netns(t), w.netns(t)
	host, peer := vethNames(t, w.linux)
	_, err := w.linux.EnsureVeth(bg, cniserver.Veth{HostName: host, PeerName: peer, Netns: nsA, IfName: "eth0"})
	require.NoError(t, err)
	// The same host name for another namespace: the pair is re-created.
	_, err = w.linux.EnsureVeth(bg, cniserver.Veth{HostName: host, PeerName: peer, Netns: nsB, IfName: "eth0"})
	require.NoError(t, err)
	_, err = w.linux.InspectLink(bg, nsB, "eth0")
	require.NoError(t, err)
	_, err = w.linux.InspectLink(bg, nsA, "eth0")
	assert.ErrorIs(t, err, cniserver.ErrLinkNotFound)
}

func testInterruptedMove(t *testing.T, w world) {
	if w.moveOnly == nil {
		t.Skip("this world cannot move a link without renaming it")
	}
	ns := w.netns(t)
	host, peer := vethNames(t, w.linux)
	_, err := w.linux.EnsureVeth(bg, cniserver.Veth{HostName: host, PeerName: peer})
	require.NoError(t, err)
	w.moveOnly(t, peer, ns)
	_, err = w.linux.EnsureVeth(bg, cniserver.Veth{HostName: host, PeerName: peer, Netns: ns, IfName: "eth0"})
	require.NoError(t, err)
	_, err = w.linux.InspectLink(bg, ns, "eth0")
	require.NoError(t, err)
}

func testConfigure(t *testing.T, w world) {
	ns := w.netns(t)
	host, peer := vethNames(t, w.linux)
	_, err := w.linux.EnsureVeth(bg, cniserver.Veth{HostName: host, PeerName: peer, Netns: ns, IfName: "eth0"})
	require.NoError(t, err)
	gwMAC, _ := net.ParseMAC("02:fe:00:00:00:01")
	podMAC, _ := net.ParseMAC("02:fe:00:00:00:02")
	cfg := cniserver.LinkConfig{
		Name: "eth0", MAC: podMAC, MTU: 1450,
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.1.5.2/24"), netip.MustParsePrefix("fd00:1:5::2/64")},
		Routes: []cniserver.Route{
			{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("10.1.5.1")},
			{Dst: netip.MustParsePrefix("::/0"), Gateway: netip.MustParseAddr("fd00:1:5::1")},
			{Dst: netip.MustParsePrefix("10.96.0.0/12"), Gateway: netip.MustParseAddr("10.1.5.1")},
		},
		Neighbors: []cniserver.Neighbor{
			{IP: netip.MustParseAddr("10.1.5.1"), MAC: gwMAC},
			{IP: netip.MustParseAddr("fd00:1:5::1"), MAC: gwMAC},
		},
	}
	mac, err := w.linux.ConfigureLink(bg, ns, cfg)
	require.NoError(t, err)
	assert.Equal(t, podMAC, mac)
	want := cniserver.LinkState{Name: "eth0", MAC: podMAC, MTU: 1450, Up: true,
		Addresses: cfg.Addresses, Routes: cfg.Routes, Neighbors: cfg.Neighbors}
	want.Sort()
	st, err := w.linux.InspectLink(bg, ns, "eth0")
	require.NoError(t, err)
	assert.Equal(t, want.String(), st.String())

	// Idempotent, and addresses are replaced. (Removing the last address
	// of a subnet makes the kernel flush its routes and neighbor entries:
	// a caller gives them again, as the server does.)
	_, err = w.linux.ConfigureLink(bg, ns, cfg)
	require.NoError(t, err)
	st, err = w.linux.InspectLink(bg, ns, "eth0")
	require.NoError(t, err)
	assert.Equal(t, want.String(), st.String())

	cfg2 := cfg
	cfg2.MAC = nil
	cfg2.Addresses = []netip.Prefix{netip.MustParsePrefix("10.1.5.3/24"), netip.MustParsePrefix("fd00:1:5::2/64")}
	cfg2.Routes = cfg.Routes[:2]
	cfg2.Neighbors = cfg.Neighbors[:1]
	_, err = w.linux.ConfigureLink(bg, ns, cfg2)
	require.NoError(t, err)
	st, err = w.linux.InspectLink(bg, ns, "eth0")
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.1.5.3/24"), netip.MustParsePrefix("fd00:1:5::2/64")}, st.Addresses)
	assert.Equal(t, podMAC, st.MAC, "a nil MAC keeps the link's")
	assert.Subset(t, st.Routes, cfg2.Routes)
	assert.Subset(t, st.Neighbors, cfg2.Neighbors)
}

func testOffLinkGateway(t *testing.T, w world) {
	ns := w.netns(t)
	host, peer := vethNames(t, w.linux)
	_, err := w.linux.EnsureVeth(bg, cniserver.Veth{HostName: host, PeerName: peer, Netns: ns, IfName: "eth0"})
	require.NoError(t, err)
	gw := netip.MustParseAddr("169.254.1.1")
	cfg := cniserver.LinkConfig{Name: "eth0",
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.1.5.9/32")},
		Routes:    []cniserver.Route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: gw}},
	}
	_, err = w.linux.ConfigureLink(bg, ns, cfg)
	require.NoError(t, err)
	st, err := w.linux.InspectLink(bg, ns, "eth0")
	require.NoError(t, err)
	assert.Equal(t, []cniserver.Route{
		{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: gw},
		{Dst: netip.MustParsePrefix("169.254.1.1/32")},
	}, st.Routes)
}

func testMissing(t *testing.T, w world) {
	_, err := w.linux.InspectLink(bg, "/run/netns/vsk-does-not-exist", "eth0")
	assert.ErrorIs(t, err, cniserver.ErrNetnsNotFound)
	_, err = w.linux.ConfigureLink(bg, "/run/netns/vsk-does-not-exist", cniserver.LinkConfig{Name: "eth0"})
	assert.ErrorIs(t, err, cniserver.ErrNetnsNotFound)
	_, err = w.linux.EnsureVeth(bg, cniserver.Veth{HostName: "vsktmissing", PeerName: "vsptmissing", Netns: "/run/netns/vsk-does-not-exist", IfName: "eth0"})
	assert.ErrorIs(t, err, cniserver.ErrNetnsNotFound)
	assert.NoError(t, w.linux.DeleteLink(bg, "/run/netns/vsk-does-not-exist", "eth0"))
	ns := w.netns(t)
	_, err = w.linux.InspectLink(bg, ns, "eth0")
	assert.ErrorIs(t, err, cniserver.ErrLinkNotFound)
	_, err = w.linux.ConfigureLink(bg, ns, cniserver.LinkConfig{Name: "eth0"})
	assert.ErrorIs(t, err, cniserver.ErrLinkNotFound)
	assert.NoError(t, w.linux.DeleteLink(bg, ns, "eth0"))
}

func testCancelled(t *testing.T, w world) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	ns := w.netns(t)
	_, err := w.linux.EnsureVeth(ctx, cniserver.Veth{HostName: "vsktcancel", PeerName: "vsptcancel", Netns: ns, IfName: "eth0"})
	assert.ErrorIs(t, err, context.Canceled)
	_, err = w.linux.InspectLink(bg, "", "vsktcancel")
	assert.ErrorIs(t, err, cniserver.ErrLinkNotFound)
	_, err = w.linux.ConfigureLink(ctx, ns, cniserver.LinkConfig{Name: "eth0"})
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, w.linux.DeleteLink(ctx, ns, "eth0"), context.Canceled)
	_, err = w.linux.InspectLink(ctx, ns, "eth0")
	assert.ErrorIs(t, err, context.Canceled)
}

package gobgp

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

const waitFor = 20 * time.Second

// testPeer wraps a gobgptest.Peer (a GoBGP speaker in a child process)
// with the shorthands of this package's tests.
type testPeer struct {
	*gobgptest.Peer
	addr netip.Addr
	port int
	asn  uint32
}

type peerOpts struct {
	neighbor netip.Addr // the manager's address
	asn      uint32     // the manager's ASN
	password string
	active   bool     // connect to the neighbor instead of waiting
	port     int      // the neighbor's port when active
	families []string // "v4" and/or "v6"; default both
	// restartTime > 0 enables graceful restart (helper, with the
	// notification flag) with this restart time in seconds.
	restartTime int
}

func fam(s string) bgp.Family {
	if s == "v6" {
		return bgp.IPv6Unicast
	}
	return bgp.IPv4Unicast
}

// startTestPeer starts a peer speaker listening on addr.
func startTestPeer(t testing.TB, addr string, asn uint32, opts ...peerOpts) *testPeer {
	t.Helper()
	p := gobgptest.StartPeer(t, gobgptest.PeerConfig{Address: netip.MustParseAddr(addr), ASN: asn})
	tp := &testPeer{Peer: p, addr: p.Address(), port: p.Port(), asn: asn}
	for _, o := range opts {
		tp.addNeighbor(t, o)
	}
	return tp
}

func (p *testPeer) addNeighbor(t testing.TB, o peerOpts) {
	t.Helper()
	n := gobgptest.Neighbor{Address: o.neighbor, ASN: o.asn, Password: o.password, Active: o.active, Port: o.port,
		RestartTime: time.Duration(o.restartTime) * time.Second}
	for _, f := range o.families {
		n.Families = append(n.Families, fam(f))
	}
	p.AddNeighbor(t, n)
}

func (p *testPeer) addPath(t testing.TB, prefix, nh string) {
	t.Helper()
	p.AddPath(t, netip.MustParsePrefix(prefix), netip.MustParseAddr(nh))
}

// routes returns the routes the peer holds in its RIB for a family ("v4" or
// "v6").
func (p *testPeer) routes(t testing.TB, f string) map[netip.Prefix]gobgptest.Route {
	t.Helper()
	return p.Routes(t, fam(f))
}

// received returns the prefixes (and next hops) the peer holds in its RIB
// for a family ("v4" or "v6").
func (p *testPeer) received(t testing.TB, f string) map[netip.Prefix]netip.Addr {
	t.Helper()
	out := make(map[netip.Prefix]netip.Addr)
	for pfx, r := range p.Routes(t, fam(f)) {
		out[pfx] = r.NextHop
	}
	return out
}

// count returns the number of prefixes in the peer's RIB for a family, -1
// on error.
func (p *testPeer) count(f string) int { return p.Count(fam(f)) }

func (p *testPeer) grFlags(t testing.TB, neighbor netip.Addr) (r, n, ok bool) {
	t.Helper()
	return p.GracefulRestartFlags(t, neighbor)
}

// waitPrefix blocks until the peer has (or no longer has) a prefix.
func (p *testPeer) waitPrefix(t testing.TB, _ string, prefix string, present bool) {
	t.Helper()
	p.WaitPrefix(t, netip.MustParsePrefix(prefix), present)
}

// waitCount blocks until the peer has exactly n routes of a family.
func (p *testPeer) waitCount(t testing.TB, f string, n int) {
	t.Helper()
	p.WaitCount(t, fam(f), n)
}

// freePort returns a TCP port that was free on addr a moment ago.
func freePort(t testing.TB, addr string) int {
	t.Helper()
	return gobgptest.FreePort(t, netip.MustParseAddr(addr))
}

// runManager starts a manager's Run and stops it at cleanup.
func runManager(t testing.TB, cfg Config) *Manager {
	t.Helper()
	m, err := New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// Wait until Run has marked the manager running.
	require.Eventually(t, func() bool {
		_, err := m.Peers(context.Background())
		return err == nil
	}, waitFor, time.Millisecond)
	return m
}

func testNode(podCIDRs ...string) *kubemodel.Node {
	return &kubemodel.Node{Name: "node-1", Labels: map[string]string{"bgp": "yes"}, PodCidrs: podCIDRs}
}

func testState(node *kubemodel.Node) *bgp.ControlPlaneState {
	return &bgp.ControlPlaneState{Node: node, IPv4: net.ParseIP("127.0.0.1"), IPv6: net.ParseIP("fd00::1")}
}

func testPolicy(localASN uint32, peers ...bgp.Neighbor) *bgp.PeeringPolicy {
	return &bgp.PeeringPolicy{
		Name: "test",
		VirtualRouters: []bgp.VirtualRouter{{
			LocalASN:      localASN,
			ExportPodCIDR: true,
			Neighbors:     peers,
		}},
	}
}

func neighborOf(p *testPeer, local string) bgp.Neighbor {
	return p.NeighborFor(netip.MustParseAddr(local))
}

func waitEstablished(t testing.TB, m *Manager, peer netip.Addr) {
	t.Helper()
	require.Eventually(t, func() bool {
		ps, err := m.Peers(context.Background())
		if err != nil {
			return false
		}
		for _, p := range ps {
			if p.PeerAddress == peer && p.State == bgp.SessionEstablished {
				return true
			}
		}
		return false
	}, waitFor, 20*time.Millisecond, "session to %s not Established", peer)
}

// md5Supported tries to set TCP_MD5SIG on a socket, as GoBGP does.
func md5Supported(t testing.TB, p *testPeer) bool {
	t.Helper()
	return setMD5(p.addr.String()) == nil
}

// tcpMD5Failures returns the kernel's count of TCP segments dropped for a
// wrong MD5 signature in this network namespace (TcpExt TCPMD5Failure in
// /proc/net/netstat); ok is false where the kernel does not report it.
func tcpMD5Failures(t testing.TB) (n uint64, ok bool) {
	t.Helper()
	raw, err := os.ReadFile("/proc/net/netstat")
	if err != nil {
		return 0, false
	}
	lines := strings.Split(string(raw), "\n")
	for i := 0; i+1 < len(lines); i++ {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != "TcpExt:" || len(values) != len(names) || values[0] != "TcpExt:" {
			continue
		}
		for j, name := range names {
			if name == "TCPMD5Failure" {
				n, err := strconv.ParseUint(values[j], 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

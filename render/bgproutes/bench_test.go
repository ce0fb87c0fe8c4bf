package bgproutes_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	"github.com/vswitchkit/vswitchkit/render/bgproutes"
	"github.com/vswitchkit/vswitchkit/render/internal/rendertest"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// BenchmarkLearned10kRoutes: a GoBGP peer (a child process) announces
// 10000 /24 routes; each iteration turns the import prefix list on and
// waits until the stand-in's FIB holds all of them (via the uplink): the
// soft reset in, GoBGP's import policy and best-path events, the learned
// routes, the handler's RoutesChanged events, the loop's transactions and
// the driver's VPP requests. Turning the list off again (all withdrawn)
// is not timed.
func BenchmarkLearned10kRoutes(b *testing.B) {
	const n = 10000
	local := netip.MustParseAddr("127.0.0.84")
	peer := gobgptest.StartPeer(b, gobgptest.PeerConfig{Address: netip.MustParseAddr("127.0.0.85"), ASN: 65084})
	peer.AddNeighbor(b, gobgptest.Neighbor{Address: local, ASN: 65084, Families: []bgp.Family{bgp.IPv4Unicast}})
	prefixes := make([]netip.Prefix, n)
	for i := range prefixes {
		prefixes[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 64 + byte(i>>8), byte(i), 0}), 24)
	}
	peer.AddPaths(b, prefixes, netip.MustParseAddr("192.168.16.254"))

	vpp := vppsim.New(vppsim.Config{HostInterfaces: []string{"eth1"}})
	sig := bgp.NewSignaler()
	mgr, err := gobgp.New(gobgp.Config{LearnedRoutes: sig})
	require.NoError(b, err)
	var loop lateLoop
	h, err := bgproutes.New(mgr, sig, &loop, bgproutes.Config{Uplink: nodeconn.DefaultUplinkName})
	require.NoError(b, err)
	agent := rendertest.Start(b, rendertest.Options{Name: "node-1", DB: nodesynctest.NewMemDB(), NewAdapter: func() adapter.VppAPI { return vpp.NewAdapter() },
		NodeConn: nodeconn.Config{Uplink: nodeconn.Uplink{AfPacketHostIf: "eth1"}}, After: []controller.EventHandler{h}})
	loop.p.Store(agent.Loop)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = mgr.Run(ctx) })
	wg.Go(func() { _ = h.Run(ctx) })
	b.Cleanup(func() { cancel(); wg.Wait() })

	n4 := peer.NeighborFor(local)
	p := peerOf(n4)
	p.PeerFamilies[0].Import = nil
	spec := &bgp.NodeSpec{Source: "bench", Instances: []bgp.Instance{{Name: "main", LocalASN: 65084, Peers: []bgp.Peer{p}}}}
	state := &bgp.ControlPlaneState{Node: &kubemodel.Node{Name: "node-1"}, IPv4: local.AsSlice()}
	require.Eventually(b, func() bool { return mgr.ApplySpec(ctx, spec, state) == nil }, waitFor, 10*time.Millisecond)
	require.Eventually(b, func() bool {
		ps, _ := mgr.Peers(ctx)
		return len(ps) == 1 && ps[0].Received[bgp.IPv4Unicast] == n
	}, time.Minute, 20*time.Millisecond, "the peer's routes received")
	learnedInVPP := func() int {
		c := 0
		for _, r := range vpp.Snapshot().Routes {
			if r.Prefix.Addr().As4()[0] == 100 {
				c++
			}
		}
		return c
	}
	on := spec.Clone()
	on.Instances[0].Peers[0].PeerFamilies[0].Import = []bgp.PrefixMatch{{Prefix: netip.MustParsePrefix("100.64.0.0/10"), LE: 24}}

	b.ResetTimer()
	var total time.Duration
	for range b.N {
		start := time.Now()
		require.NoError(b, mgr.ApplySpec(ctx, on, state))
		for learnedInVPP() < n {
			time.Sleep(5 * time.Millisecond)
		}
		total += time.Since(start)
		b.StopTimer()
		require.NoError(b, mgr.ApplySpec(ctx, spec, state))
		require.Eventually(b, func() bool { return learnedInVPP() == 0 }, time.Minute, 20*time.Millisecond)
		b.StartTimer()
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "routes/s")
	b.ReportMetric(float64(h.Stats().Events)/float64(2*b.N), "events/change")
}

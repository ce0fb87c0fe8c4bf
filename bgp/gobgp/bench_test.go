package gobgp

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
)

// BenchmarkAdvertise10kPaths advertises 10000 /32 service routes to a
// loopback GoBGP peer (in a child process) and waits until the peer has
// received all of them (the peer polls its RIB every 5ms). The withdrawal between iterations is not timed.
func BenchmarkAdvertise10kPaths(b *testing.B) {
	const n = 10000
	vips := make([]netip.Addr, n)
	base := netip.MustParseAddr("100.64.0.0").As4()
	for i := range vips {
		a := base
		a[2], a[3] = byte(i>>8), byte(i)
		vips[i] = netip.AddrFrom4(a)
	}
	svc := []bgp.Service{{Namespace: "bench", Name: "vips", Labels: map[string]string{"bgp": "yes"}, LoadBalancerIPs: vips}}
	peer := startTestPeer(b, "127.0.0.12", 65012, peerOpts{neighbor: netip.MustParseAddr("127.0.0.11"), asn: 65011})
	m := runManager(b, Config{Services: bgp.ServiceListerFunc(func() []bgp.Service { return svc })})
	ctx := context.Background()
	state := testState(testNode())
	state.IPv4 = netip.MustParseAddr("127.0.0.11").AsSlice()
	nb := neighborOf(peer, "127.0.0.11")
	nb.Families = []bgp.Family{bgp.IPv4Unicast}
	on := testPolicy(65011, nb)
	on.VirtualRouters[0].ServiceSelector = &bgp.LabelSelector{MatchLabels: map[string]string{"bgp": "yes"}}
	off := testPolicy(65011, nb)
	require.NoError(b, m.ConfigurePeers(ctx, off, state))
	waitEstablished(b, m, peer.addr)

	b.ResetTimer()
	var total, configure time.Duration
	for range b.N {
		start := time.Now()
		require.NoError(b, m.ConfigurePeers(ctx, on, state))
		configure += time.Since(start)
		peer.waitCount(b, "v4", n)
		total += time.Since(start)
		b.StopTimer()
		require.NoError(b, m.ConfigurePeers(ctx, off, state))
		peer.waitCount(b, "v4", 0)
		b.StartTimer()
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "routes/s")
	b.ReportMetric(float64(configure.Milliseconds())/float64(b.N), "configure-ms/op")
}

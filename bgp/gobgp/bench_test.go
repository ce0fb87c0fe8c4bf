package gobgp

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
)

// vipRange returns n consecutive IPv4 addresses from 100.64.0.0.
func vipRange(n int) []netip.Addr {
	vips := make([]netip.Addr, n)
	for i := range vips {
		vips[i] = netip.AddrFrom4([4]byte{100, 64 + byte(i>>16), byte(i >> 8), byte(i)})
	}
	return vips
}

// BenchmarkAdvertise10kPaths advertises 10000 /32 service routes to a
// loopback GoBGP peer (in a child process) and waits until the peer has
// received all of them (the peer polls its RIB every 5ms). The withdrawal
// between iterations is not timed.
func BenchmarkAdvertise10kPaths(b *testing.B) {
	const n = 10000
	svc := []bgp.Service{{Namespace: "bench", Name: "vips", Labels: map[string]string{"bgp": "yes"}, LoadBalancerIPs: vipRange(n)}}
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
	var total, configure, cpu time.Duration
	for range b.N {
		start := time.Now()
		cpu0, _ := processCPU()
		require.NoError(b, m.ConfigurePeers(ctx, on, state))
		configure += time.Since(start)
		peer.waitCount(b, "v4", n)
		total += time.Since(start)
		cpu1, _ := processCPU()
		cpu += cpu1 - cpu0
		b.StopTimer()
		require.NoError(b, m.ConfigurePeers(ctx, off, state))
		peer.waitCount(b, "v4", 0)
		b.StartTimer()
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "routes/s")
	b.ReportMetric(float64(configure.Microseconds())/1e3/float64(b.N), "configure-ms/op")
	if _, ok := processCPU(); ok {
		b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "speaker-cpu-ms/op")
	}
}

// BenchmarkOneServiceChange10k has 10000 LoadBalancer services advertised to
// a loopback GoBGP peer and changes the ingress IP of one of them per
// iteration: ConfigurePeers (the reconcile after the change) and the wait
// until the peer has the new route. configure-ms/op is ConfigurePeers
// alone.
func BenchmarkOneServiceChange10k(b *testing.B) {
	const n = 10000
	vips := vipRange(n + 1)
	svcs := make([]bgp.Service, n)
	for i := range svcs {
		svcs[i] = bgp.Service{Namespace: "bench", Name: fmt.Sprintf("svc-%d", i), Labels: map[string]string{"bgp": "yes"},
			LoadBalancerIPs: vips[i : i+1]}
	}
	cur := svcs
	peer := startTestPeer(b, "127.0.0.14", 65014, peerOpts{neighbor: netip.MustParseAddr("127.0.0.13"), asn: 65013})
	m := runManager(b, Config{Services: bgp.ServiceListerFunc(func() []bgp.Service { return cur })})
	ctx := context.Background()
	state := testState(testNode())
	state.IPv4 = netip.MustParseAddr("127.0.0.13").AsSlice()
	nb := neighborOf(peer, "127.0.0.13")
	nb.Families = []bgp.Family{bgp.IPv4Unicast}
	policy := testPolicy(65013, nb)
	policy.VirtualRouters[0].ServiceSelector = &bgp.LabelSelector{MatchLabels: map[string]string{"bgp": "yes"}}
	require.NoError(b, m.ConfigurePeers(ctx, policy, state))
	waitEstablished(b, m, peer.addr)
	peer.waitCount(b, "v4", n)

	b.ResetTimer()
	var configure, cpu time.Duration
	for i := range b.N {
		// Service 0 moves between the spare address and its own.
		next := make([]bgp.Service, n)
		copy(next, svcs)
		want := vips[0]
		if i%2 == 0 {
			want = vips[n]
		}
		next[0].LoadBalancerIPs = []netip.Addr{want}
		cur = next
		start := time.Now()
		cpu0, _ := processCPU()
		require.NoError(b, m.ConfigurePeers(ctx, policy, state))
		configure += time.Since(start)
		cpu1, _ := processCPU()
		cpu += cpu1 - cpu0
		peer.waitPrefix(b, "v4", netip.PrefixFrom(want, 32).String(), true)
	}
	b.ReportMetric(float64(configure.Microseconds())/1e3/float64(b.N), "configure-ms/op")
	if _, ok := processCPU(); ok {
		b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "configure-cpu-ms/op")
	}
}

// BenchmarkOneServiceChange10kV2 is BenchmarkOneServiceChange10k through
// the v2 path (ApplySpec): the 10000 services' routes carry an
// advertisement's community and local preference, through the per-peer
// export policy (prefix sets edited in place), and the pod CIDR another
// advertisement's attributes.
func BenchmarkOneServiceChange10kV2(b *testing.B) {
	const n = 10000
	vips := vipRange(n + 1)
	svcs := make([]bgp.Service, n)
	for i := range svcs {
		svcs[i] = bgp.Service{Namespace: "bench", Name: fmt.Sprintf("svc-%d", i), Labels: map[string]string{"bgp": "yes"},
			LoadBalancerIPs: vips[i : i+1]}
	}
	cur := svcs
	peer := startTestPeer(b, "127.0.0.16", 65015, peerOpts{neighbor: netip.MustParseAddr("127.0.0.15"), asn: 65015})
	m := runManager(b, Config{Services: bgp.ServiceListerFunc(func() []bgp.Service { return cur })})
	ctx := context.Background()
	state := testState(testNode("10.244.15.0/24"))
	state.IPv4 = netip.MustParseAddr("127.0.0.15").AsSlice()
	lp := uint32(200)
	fam := v4Family(
		bgp.Advert{Type: bgp.PodCIDRAdvert, Attributes: mustAttrs(b, bgp.AttributesSpec{Standard: []string{"65015:1"}})},
		bgp.Advert{Type: bgp.ServiceAdvert, ServiceSelector: &bgp.LabelSelector{MatchLabels: map[string]string{"bgp": "yes"}},
			Attributes: mustAttrs(b, bgp.AttributesSpec{Standard: []string{"65015:2"}, LocalPreference: &lp})},
	)
	spec := specOf(65015, specPeer(peer, "127.0.0.15", fam))
	require.NoError(b, m.ApplySpec(ctx, spec, state))
	waitEstablished(b, m, peer.addr)
	peer.waitCount(b, "v4", n+1)

	b.ResetTimer()
	var configure, cpu time.Duration
	for i := range b.N {
		next := make([]bgp.Service, n)
		copy(next, svcs)
		want := vips[0]
		if i%2 == 0 {
			want = vips[n]
		}
		next[0].LoadBalancerIPs = []netip.Addr{want}
		cur = next
		start := time.Now()
		cpu0, _ := processCPU()
		require.NoError(b, m.ApplySpec(ctx, spec, state))
		configure += time.Since(start)
		cpu1, _ := processCPU()
		cpu += cpu1 - cpu0
		peer.waitPrefix(b, "v4", netip.PrefixFrom(want, 32).String(), true)
	}
	b.StopTimer()
	r := peer.routes(b, "v4")[netip.PrefixFrom(vips[1], 32)]
	require.Equal(b, []string{"65015:2"}, r.Communities)
	require.NotNil(b, r.LocalPref)
	b.ReportMetric(float64(configure.Microseconds())/1e3/float64(b.N), "configure-ms/op")
	if _, ok := processCPU(); ok {
		b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "configure-cpu-ms/op")
	}
}

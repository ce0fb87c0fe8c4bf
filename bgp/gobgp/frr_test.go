package gobgp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
)

// frrNeighbor is the bgp.Neighbor that reaches f from local.
func frrNeighbor(f *gobgptest.FRR, local string) bgp.Neighbor {
	return bgp.Neighbor{
		PeerAddress: f.Address(), PeerPort: uint16(f.Port()), PeerASN: f.ASN(),
		LocalAddress: netip.MustParseAddr(local), EBGPMultihopTTL: 2,
		ConnectRetryTime: MinConnectRetryTime, HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second,
	}
}

// TestFRRInterop runs FRR's bgpd as a passive external peer on loopback:
// it receives the node's pod CIDRs of both families over one IPv4 session,
// each with the node's next hop of its family, and sees them withdrawn.
// The node's addresses are documentation addresses, not the session's
// loopback ones: FRR refuses an UPDATE whose next hop is in 127.0.0.0/8
// or ::1 (a martian next hop: NOTIFICATION 3/8, the session resets),
// where BIRD takes it.
func TestFRRInterop(t *testing.T) {
	const localAddr = "127.0.0.91"
	f := gobgptest.StartFRR(t, gobgptest.FRRConfig{Address: netip.MustParseAddr("127.0.0.92"), Neighbor: netip.MustParseAddr(localAddr)})
	ctx := context.Background()
	m := runManager(t, Config{})
	n := frrNeighbor(f, localAddr)
	state := testState(testNode("10.244.91.0/24", "fd00:10:244:91::/64"))
	state.IPv4 = net.ParseIP("192.0.2.91")
	state.IPv6 = net.ParseIP("2001:db8::91")
	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65009, n), state))
	waitEstablished(t, m, n.PeerAddress)
	require.Eventually(t, f.Established, waitFor, 100*time.Millisecond)

	v4, v6 := netip.MustParsePrefix("10.244.91.0/24"), netip.MustParsePrefix("fd00:10:244:91::/64")
	require.Eventually(t, func() bool { return len(f.Route(v4)) == 1 && len(f.Route(v6)) == 1 },
		waitFor, 100*time.Millisecond, "frr: %s %s", f.Vtysh("show bgp ipv4 unicast"), f.Vtysh("show bgp ipv6 unicast"))
	require.NotEmpty(t, f.Route(v4)[0].NextHops)
	assert.Equal(t, "192.0.2.91", f.Route(v4)[0].NextHops[0].IP)
	require.NotEmpty(t, f.Route(v6)[0].NextHops)
	assert.Equal(t, "2001:db8::91", f.Route(v6)[0].NextHops[0].IP)

	p := testPolicy(65009, n)
	p.VirtualRouters[0].ExportPodCIDR = false
	require.NoError(t, m.ConfigurePeers(ctx, p, state))
	require.Eventually(t, func() bool { return len(f.Route(v4)) == 0 && len(f.Route(v6)) == 0 }, waitFor, 100*time.Millisecond)
	assert.True(t, f.Established(), "withdrawal keeps the session")

	require.NoError(t, m.ConfigurePeers(ctx, nil, nil))
	require.Eventually(t, func() bool { return !f.Established() }, waitFor, 100*time.Millisecond)
}

// TestFRRCommunitiesLocalPrefAggregation: FRR, an internal peer, sees the
// advertisements' standard, well-known and large communities and local
// preference, and the aggregate instead of its members.
func TestFRRCommunitiesLocalPrefAggregation(t *testing.T) {
	const localAddr = "127.0.0.93"
	f := gobgptest.StartFRR(t, gobgptest.FRRConfig{Address: netip.MustParseAddr("127.0.0.94"), Neighbor: netip.MustParseAddr(localAddr),
		ASN: 65093, NeighborASN: 65093})
	ctx := context.Background()
	store := bgp.NewStore(bgp.Signaler{})
	for i, ip := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.3"} {
		store.SetService(bgp.Service{Namespace: "n", Name: fmt.Sprint("s", i), LoadBalancerIPs: []netip.Addr{netip.MustParseAddr(ip)}})
	}
	m := runManager(t, Config{Services: store})
	pods := bgp.Advert{Type: bgp.PodCIDRAdvert, Attributes: mustAttrs(t, bgp.AttributesSpec{
		Standard: []string{"65000:100"}, WellKnown: []string{"no-advertise"}, Large: []string{"65000:7:8"}, LocalPreference: lpOf(250)})}
	svcs := bgp.Advert{Type: bgp.ServiceAdvert, ServiceSelector: &bgp.LabelSelector{}, AggregationLengthIPv4: 24,
		Attributes: mustAttrs(t, bgp.AttributesSpec{Standard: []string{"65000:200"}})}
	n := frrNeighbor(f, localAddr)
	n.Families = []bgp.Family{bgp.IPv4Unicast}
	spec := specOf(65093, bgp.Peer{Name: "frr", Neighbor: withDefaults(n), PeerFamilies: []bgp.PeerFamily{v4Family(pods, svcs)}})
	require.NoError(t, m.ApplySpec(ctx, spec, stateAt("192.0.2.93", "10.244.93.0/24"))) // not 127/8: see TestFRRInterop
	waitEstablished(t, m, n.PeerAddress)

	pod, agg := netip.MustParsePrefix("10.244.93.0/24"), netip.MustParsePrefix("198.51.100.0/24")
	require.Eventually(t, func() bool { return len(f.Route(pod)) == 1 && len(f.Route(agg)) == 1 },
		waitFor, 100*time.Millisecond, "frr: %s", f.Vtysh("show bgp ipv4 unicast"))
	pp, sp := f.Route(pod)[0], f.Route(agg)[0]
	require.NotNil(t, pp.Community)
	assert.Equal(t, "65000:100 no-advertise", pp.Community.String)
	require.NotNil(t, pp.LargeCommunity)
	assert.Equal(t, "65000:7:8", pp.LargeCommunity.String)
	assert.Equal(t, 250, pp.LocalPref)
	require.NotNil(t, sp.Community)
	assert.Equal(t, "65000:200", sp.Community.String)
	assert.Len(t, f.Routes("ipv4"), 2, "exactly the pod CIDR and the aggregate, not its members: %s", f.Vtysh("show bgp ipv4 unicast"))
}

// TestFRRLearnedDefaultRoute: FRR originates a default route towards the
// node; a peer family with an import prefix list for it learns it, with
// FRR's address as next hop, and forgets it when FRR stops originating it.
func TestFRRLearnedDefaultRoute(t *testing.T) {
	const localAddr = "127.0.0.95"
	f := gobgptest.StartFRR(t, gobgptest.FRRConfig{Address: netip.MustParseAddr("127.0.0.96"), Neighbor: netip.MustParseAddr(localAddr),
		Extra: []string{"default-originate"}})
	ctx := context.Background()
	sig := bgp.NewSignaler()
	m := runManager(t, Config{LearnedRoutes: sig})
	n := frrNeighbor(f, localAddr)
	n.Families = []bgp.Family{bgp.IPv4Unicast}
	fam := v4Family()
	fam.Import = []bgp.PrefixMatch{{Prefix: netip.MustParsePrefix("0.0.0.0/0")}}
	spec := specOf(65009, bgp.Peer{Name: "frr", Neighbor: withDefaults(n), PeerFamilies: []bgp.PeerFamily{fam}})
	require.NoError(t, m.ApplySpec(ctx, spec, stateAt(localAddr)))
	waitEstablished(t, m, n.PeerAddress)
	require.Eventually(t, func() bool { return len(m.LearnedRoutes()) == 1 }, waitFor, 50*time.Millisecond)
	assert.Equal(t, []bgp.LearnedRoute{{Prefix: netip.MustParsePrefix("0.0.0.0/0"), NextHop: f.Address(),
		LocalASN: 65009, Peer: f.Address()}}, m.LearnedRoutes())

	f.Configure(fmt.Sprintf("no neighbor %s default-originate", localAddr))
	require.Eventually(t, func() bool { return len(m.LearnedRoutes()) == 0 }, waitFor, 50*time.Millisecond,
		"withdrawn by FRR: forgotten")
}

package gobgp

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
)

// withDefaults returns n with the defaults of package bgp applied.
func withDefaults(n bgp.Neighbor) bgp.Neighbor {
	p := &bgp.PeeringPolicy{VirtualRouters: []bgp.VirtualRouter{{LocalASN: 1, Neighbors: []bgp.Neighbor{n}}}}
	return p.WithDefaults().VirtualRouters[0].Neighbors[0]
}

// specPeer is a peer of a spec that reaches p from local, with families.
func specPeer(p *testPeer, local string, fams ...bgp.PeerFamily) bgp.Peer {
	n := neighborOf(p, local)
	for _, f := range fams {
		n.Families = append(n.Families, f.Family)
	}
	return bgp.Peer{Name: p.addr.String(), Neighbor: withDefaults(n), PeerFamilies: fams}
}

func specOf(asn uint32, peers ...bgp.Peer) *bgp.NodeSpec {
	return &bgp.NodeSpec{Source: "test", Instances: []bgp.Instance{{Name: "main", LocalASN: asn, Peers: peers}}}
}

func v4Family(adverts ...bgp.Advert) bgp.PeerFamily {
	return bgp.PeerFamily{Family: bgp.IPv4Unicast, Adverts: adverts}
}

func stateAt(local string, podCIDRs ...string) *bgp.ControlPlaneState {
	s := testState(testNode(podCIDRs...))
	s.IPv4 = net.ParseIP(local)
	return s
}

func lpOf(v uint32) *uint32 { return &v }

func mustAttrs(t testing.TB, s bgp.AttributesSpec) bgp.Attributes {
	t.Helper()
	a, err := s.Parse("test")
	require.NoError(t, err)
	return a
}

// TestCommunitiesAndLocalPreference: an internal peer receives the routes
// with the advertisement's standard, well-known and large communities and
// its local preference; an external peer gets the communities but never a
// local preference; a change of attributes reaches the peers.
func TestCommunitiesAndLocalPreference(t *testing.T) {
	ctx := context.Background()
	const local = "127.0.0.61"
	ibgp := startTestPeer(t, "127.0.0.62", 65061, peerOpts{neighbor: netip.MustParseAddr(local), asn: 65061})
	ebgp := startTestPeer(t, "127.0.0.63", 65063, peerOpts{neighbor: netip.MustParseAddr(local), asn: 65061})
	m := runManager(t, Config{})
	attrs := mustAttrs(t, bgp.AttributesSpec{Standard: []string{"65000:100"}, WellKnown: []string{"no-export"},
		Large: []string{"65000:1:2"}, LocalPreference: lpOf(200)})
	pods := bgp.Advert{Type: bgp.PodCIDRAdvert, Attributes: attrs}
	spec := specOf(65061, specPeer(ibgp, local, v4Family(pods)), specPeer(ebgp, local, v4Family(pods)))
	state := stateAt(local, "10.244.61.0/24")
	require.NoError(t, m.ApplySpec(ctx, spec, state))
	pfx := netip.MustParsePrefix("10.244.61.0/24")
	ibgp.waitPrefix(t, "v4", pfx.String(), true)
	ebgp.waitPrefix(t, "v4", pfx.String(), true)
	r := ibgp.routes(t, "v4")[pfx]
	assert.Equal(t, []string{"65000:100", "65535:65281"}, r.Communities)
	assert.Equal(t, []string{"65000:1:2"}, r.LargeCommunities)
	require.NotNil(t, r.LocalPref)
	assert.Equal(t, uint32(200), *r.LocalPref)
	r = ebgp.routes(t, "v4")[pfx]
	assert.Equal(t, []string{"65000:100", "65535:65281"}, r.Communities, "communities to external peers too")
	assert.Equal(t, []string{"65000:1:2"}, r.LargeCommunities)
	assert.Nil(t, r.LocalPref, "RFC 4271: no LOCAL_PREF to external peers")

	adv, err := m.Routes(ctx, RouteQuery{LocalASN: 65061, Peer: ibgp.addr})
	require.NoError(t, err)
	require.Len(t, adv, 1)
	assert.Equal(t, attrs.String(), adv[0].Attributes.String(), "Routes reports what the peer is sent")

	// New attributes for the same route.
	spec.Instances[0].Peers[0].PeerFamilies[0].Adverts[0].Attributes = mustAttrs(t, bgp.AttributesSpec{Standard: []string{"65000:7"}, LocalPreference: lpOf(50)})
	require.NoError(t, m.ApplySpec(ctx, spec, state))
	require.Eventually(t, func() bool {
		r := ibgp.routes(t, "v4")[pfx]
		return slices.Equal(r.Communities, []string{"65000:7"}) && r.LocalPref != nil && *r.LocalPref == 50 && len(r.LargeCommunities) == 0
	}, waitFor, 20*time.Millisecond, "%+v", ibgp.routes(t, "v4"))
	r = ebgp.routes(t, "v4")[pfx]
	assert.Equal(t, []string{"65000:100", "65535:65281"}, r.Communities, "the other peer keeps its attributes")
}

// TestAggregation: the peer gets the aggregates, not the members; an
// aggregate stays while one member is left and goes with the last.
func TestAggregation(t *testing.T) {
	ctx := context.Background()
	const local = "127.0.0.64"
	peer := startTestPeer(t, "127.0.0.65", 65065, peerOpts{neighbor: netip.MustParseAddr(local), asn: 65064})
	a := netip.MustParseAddr
	svcs := []bgp.Service{
		{Namespace: "n", Name: "a", LoadBalancerIPs: []netip.Addr{a("198.51.100.1")}},
		{Namespace: "n", Name: "b", LoadBalancerIPs: []netip.Addr{a("198.51.100.2"), a("198.51.101.9")}},
		{Namespace: "n", Name: "l", LoadBalancerIPs: []netip.Addr{a("198.51.100.3")}, ExternalTrafficPolicyLocal: true, HasLocalBackend: true},
	}
	store := bgp.NewStore(bgp.Signaler{})
	for _, s := range svcs {
		store.SetService(s)
	}
	m := runManager(t, Config{Services: store})
	fam := v4Family(
		bgp.Advert{Type: bgp.PodCIDRAdvert, AggregationLengthIPv4: 16},
		bgp.Advert{Type: bgp.ServiceAdvert, ServiceSelector: &bgp.LabelSelector{}, AggregationLengthIPv4: 24},
	)
	spec := specOf(65064, specPeer(peer, local, fam))
	state := stateAt(local, "10.244.64.0/24")
	require.NoError(t, m.ApplySpec(ctx, spec, state))
	want := func(prefixes ...string) {
		t.Helper()
		require.Eventually(t, func() bool {
			got := peer.received(t, "v4")
			if len(got) != len(prefixes) {
				return false
			}
			for _, p := range prefixes {
				if _, ok := got[netip.MustParsePrefix(p)]; !ok {
					return false
				}
			}
			return true
		}, waitFor, 20*time.Millisecond, "want %v, peer has %v", prefixes, peer.received(t, "v4"))
	}
	want("10.244.0.0/16", "198.51.100.0/24", "198.51.101.0/24", "198.51.100.3/32")

	store.DeleteService("n", "a")
	require.NoError(t, m.ApplySpec(ctx, spec, state))
	want("10.244.0.0/16", "198.51.100.0/24", "198.51.101.0/24", "198.51.100.3/32")
	store.DeleteService("n", "b")
	require.NoError(t, m.ApplySpec(ctx, spec, state))
	want("10.244.0.0/16", "198.51.100.3/32")
}

// TestPerPeerAdvertisements: each peer is sent only what its families
// select, with its own attributes, also when another peer's selection
// changes for a route that stays advertised.
func TestPerPeerAdvertisements(t *testing.T) {
	ctx := context.Background()
	const local = "127.0.0.66"
	pa := startTestPeer(t, "127.0.0.67", 65067, peerOpts{neighbor: netip.MustParseAddr(local), asn: 65066})
	pb := startTestPeer(t, "127.0.0.68", 65068, peerOpts{neighbor: netip.MustParseAddr(local), asn: 65066})
	store := bgp.NewStore(bgp.Signaler{})
	store.SetService(bgp.Service{Namespace: "n", Name: "s", LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("198.51.100.66")}})
	m := runManager(t, Config{Services: store})
	pods := bgp.Advert{Type: bgp.PodCIDRAdvert, Attributes: mustAttrs(t, bgp.AttributesSpec{Standard: []string{"65000:1"}})}
	svcs := bgp.Advert{Type: bgp.ServiceAdvert, ServiceSelector: &bgp.LabelSelector{}, Attributes: mustAttrs(t, bgp.AttributesSpec{Standard: []string{"65000:2"}})}
	spec := specOf(65066, specPeer(pa, local, v4Family(pods)), specPeer(pb, local, v4Family(svcs)))
	state := stateAt(local, "10.244.66.0/24")
	require.NoError(t, m.ApplySpec(ctx, spec, state))
	pa.waitPrefix(t, "v4", "10.244.66.0/24", true)
	pb.waitPrefix(t, "v4", "198.51.100.66/32", true)
	assert.Len(t, pa.routes(t, "v4"), 1)
	assert.Len(t, pb.routes(t, "v4"), 1)

	// A also takes the services (the path is already originated for B):
	// it must get it, with A's attributes for it.
	spec.Instances[0].Peers[0].PeerFamilies[0].Adverts = []bgp.Advert{pods, {Type: bgp.ServiceAdvert, ServiceSelector: &bgp.LabelSelector{},
		Attributes: mustAttrs(t, bgp.AttributesSpec{Standard: []string{"65000:3"}})}}
	require.NoError(t, m.ApplySpec(ctx, spec, state))
	pa.waitPrefix(t, "v4", "198.51.100.66/32", true)
	assert.Equal(t, []string{"65000:3"}, pa.routes(t, "v4")[netip.MustParsePrefix("198.51.100.66/32")].Communities)
	assert.Equal(t, []string{"65000:2"}, pb.routes(t, "v4")[netip.MustParsePrefix("198.51.100.66/32")].Communities)

	// B stops taking it while A keeps it: withdrawn from B only.
	spec.Instances[0].Peers[1].PeerFamilies[0].Adverts = nil
	require.NoError(t, m.ApplySpec(ctx, spec, state))
	pb.waitCount(t, "v4", 0)
	assert.Len(t, pa.routes(t, "v4"), 2)
}

// TestImportAndLearnedRoutes: nothing is learned by default; an import
// prefix list accepts the routes it matches (exact, ge/le), which become
// learned routes (signalled) and are never re-advertised to other peers;
// a withdrawal by the peer and a narrower list remove them.
func TestImportAndLearnedRoutes(t *testing.T) {
	ctx := context.Background()
	const local = "127.0.0.69"
	tor := startTestPeer(t, "127.0.0.70", 65070, peerOpts{neighbor: netip.MustParseAddr(local), asn: 65069})
	other := startTestPeer(t, "127.0.0.71", 65071, peerOpts{neighbor: netip.MustParseAddr(local), asn: 65069})
	for _, p := range []string{"0.0.0.0/0", "10.99.0.0/16", "10.99.1.0/24", "10.99.1.128/25"} {
		tor.addPath(t, p, "127.0.0.70")
	}
	sig := bgp.NewSignaler()
	m := runManager(t, Config{LearnedRoutes: sig})
	pods := bgp.Advert{Type: bgp.PodCIDRAdvert}
	torFam := v4Family(pods)
	spec := specOf(65069, specPeer(tor, local, torFam), specPeer(other, local, v4Family(pods)))
	state := stateAt(local, "10.244.69.0/24")
	require.NoError(t, m.ApplySpec(ctx, spec, state))
	waitEstablished(t, m, tor.addr)
	other.waitPrefix(t, "v4", "10.244.69.0/24", true)
	require.Eventually(t, func() bool {
		ps, _ := m.Peers(ctx)
		return len(ps) == 2 && ps[0].Received[bgp.IPv4Unicast] == 4
	}, waitFor, 20*time.Millisecond)
	assert.Empty(t, m.LearnedRoutes(), "import nothing by default")

	learned := func() []string {
		var out []string
		for _, r := range m.LearnedRoutes() {
			out = append(out, r.Prefix.String()+" via "+r.NextHop.String())
		}
		slices.Sort(out)
		return out
	}
	spec.Instances[0].Peers[0].PeerFamilies[0].Import = []bgp.PrefixMatch{
		{Prefix: netip.MustParsePrefix("0.0.0.0/0")},
		{Prefix: netip.MustParsePrefix("10.99.0.0/16"), GE: 24, LE: 24},
	}
	for len(sig.Sig) > 0 {
		<-sig.Sig
	}
	require.NoError(t, m.ApplySpec(ctx, spec, state))
	require.Eventually(t, func() bool {
		return slices.Equal(learned(), []string{"0.0.0.0/0 via 127.0.0.70", "10.99.1.0/24 via 127.0.0.70"})
	}, waitFor, 20*time.Millisecond, "learned %v", learned())
	select {
	case <-sig.Sig:
	default:
		t.Fatal("a change of the learned routes is signalled")
	}
	lr := m.LearnedRoutes()[0]
	assert.Equal(t, uint32(65069), lr.LocalASN)
	assert.Equal(t, tor.addr, lr.Peer)
	ps, err := m.Peers(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, ps[0].Accepted[bgp.IPv4Unicast], "accepted by the import list")
	assert.Equal(t, 4, ps[0].Received[bgp.IPv4Unicast])

	// Learned routes are not re-advertised (a leaf, not a transit): a
	// route originated after they were learned reaches the other peer
	// alone (updates to a peer go out in order).
	state = stateAt(local, "10.244.69.0/24", "10.244.169.0/24")
	require.NoError(t, m.ApplySpec(ctx, spec, state))
	other.waitPrefix(t, "v4", "10.244.169.0/24", true)
	assert.Equal(t, map[netip.Prefix]netip.Addr{netip.MustParsePrefix("10.244.69.0/24"): netip.MustParseAddr(local),
		netip.MustParsePrefix("10.244.169.0/24"): netip.MustParseAddr(local)}, other.received(t, "v4"))

	// The peer withdraws the default route.
	tor.DeletePath(t, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("127.0.0.70"))
	require.Eventually(t, func() bool { return slices.Equal(learned(), []string{"10.99.1.0/24 via 127.0.0.70"}) },
		waitFor, 20*time.Millisecond, "learned %v", learned())

	// A narrower import list.
	spec.Instances[0].Peers[0].PeerFamilies[0].Import = []bgp.PrefixMatch{{Prefix: netip.MustParsePrefix("0.0.0.0/0")}}
	require.NoError(t, m.ApplySpec(ctx, spec, state))
	require.Eventually(t, func() bool { return len(learned()) == 0 }, waitFor, 20*time.Millisecond, "learned %v", learned())
	tor.addPath(t, "0.0.0.0/0", "127.0.0.70")
	require.Eventually(t, func() bool { return slices.Equal(learned(), []string{"0.0.0.0/0 via 127.0.0.70"}) },
		waitFor, 20*time.Millisecond, "learned %v", learned())

	// Withdrawing everything forgets what was learned.
	require.NoError(t, m.ApplySpec(ctx, nil, nil))
	assert.Empty(t, m.LearnedRoutes())
}

// TestLearnedRoutesSessionDown: routes learned from a peer without
// graceful restart go with its session.
func TestLearnedRoutesSessionDown(t *testing.T) {
	ctx := context.Background()
	const local = "127.0.0.72"
	plain := startTestPeer(t, "127.0.0.74", 65074, peerOpts{neighbor: netip.MustParseAddr(local), asn: 65072})
	plain.addPath(t, "192.0.2.0/24", "127.0.0.74")
	m := runManager(t, Config{})
	f := v4Family()
	f.Import = []bgp.PrefixMatch{{Prefix: netip.MustParsePrefix("192.0.2.0/24")}}
	require.NoError(t, m.ApplySpec(ctx, specOf(65072, specPeer(plain, local, f)), stateAt(local)))
	require.Eventually(t, func() bool { return len(m.LearnedRoutes()) == 1 }, waitFor, 20*time.Millisecond)
	plain.Kill(t)
	require.Eventually(t, func() bool { return len(m.LearnedRoutes()) == 0 }, waitFor, 20*time.Millisecond,
		"without graceful restart the routes go with the session")
}

// TestLearnedRoutesGracefulRestart: when a peer with graceful restart
// dies, its learned routes stay for the restart time it announced, then
// go.
//
// The manager runs in a child process: GoBGP (v4.8.0) reads a path's
// stale flag outside its lock whenever it converts paths for its API (the
// best-path watch, ListPath) while a graceful-restart peer-down sets it
// under a read lock, which the race detector reports; it is GoBGP's, not
// ours (see the package documentation).
func TestLearnedRoutesGracefulRestart(t *testing.T) {
	const local = "127.0.0.72"
	gr := startTestPeer(t, "127.0.0.73", 65073, peerOpts{neighbor: netip.MustParseAddr(local), asn: 65072, restartTime: 4})
	gr.addPath(t, "0.0.0.0/0", "127.0.0.73")
	f := v4Family()
	f.Import = []bgp.PrefixMatch{{Prefix: netip.MustParsePrefix("0.0.0.0/0")}}
	p := specPeer(gr, local, f)
	p.GracefulRestart = bgp.GracefulRestart{Enabled: true, RestartTime: time.Minute}
	s := startSpeaker(t)
	s.apply(t, speakerSpec{Spec: specOf(65072, p), IPv4: netip.MustParseAddr(local)})
	require.Eventually(t, func() bool { return len(s.learned(t)) == 1 }, waitFor, 20*time.Millisecond)

	gr.Kill(t)
	killed := time.Now()
	require.Eventually(t, func() bool { return len(s.learned(t)) == 0 }, waitFor, 50*time.Millisecond,
		"gone after the peer's restart time")
	assert.GreaterOrEqual(t, time.Since(killed), 3*time.Second,
		"kept while graceful restart waited for the peer (it announced 4s), not dropped with the session")
}

// TestV1AndV2SameAtThePeer applies a v1 policy with ConfigurePeers, then
// the equivalent v2 objects (resolved) with ApplySpec: the peer holds the
// same routes and the session is not reset.
func TestV1AndV2SameAtThePeer(t *testing.T) {
	ctx := context.Background()
	const local = "127.0.0.75"
	peer := startTestPeer(t, "127.0.0.76", 65076, peerOpts{neighbor: netip.MustParseAddr(local), asn: 65075})
	store := bgp.NewStore(bgp.Signaler{})
	store.SetService(bgp.Service{Namespace: "n", Name: "s", Labels: map[string]string{"bgp": "yes"},
		LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("198.51.100.75")}})
	store.SetService(bgp.Service{Namespace: "n", Name: "t", LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("198.51.100.76")}})
	m := runManager(t, Config{Services: store})
	nb := neighborOf(peer, local)
	nb.Families = []bgp.Family{bgp.IPv4Unicast}
	v1 := testPolicy(65075, nb)
	v1.VirtualRouters[0].ServiceSelector = &bgp.LabelSelector{MatchLabels: map[string]string{"bgp": "yes"}}
	state := stateAt(local, "10.244.75.0/24")
	require.NoError(t, m.ConfigurePeers(ctx, v1, state))
	peer.waitCount(t, "v4", 2)
	waitEstablished(t, m, peer.addr)
	q := RouteQuery{LocalASN: 65075, Peer: peer.addr}
	before, err := m.Routes(ctx, q)
	require.NoError(t, err)
	require.Len(t, before, 2)
	ps, err := m.Peers(ctx)
	require.NoError(t, err)
	since := ps[0].Since
	require.False(t, since.IsZero())

	objs := &bgp.Objects{
		ClusterConfigs: []*bgp.ClusterConfig{{Name: "cc", Instances: []bgp.ClusterInstance{{Name: "i", LocalASN: 65075,
			Peers: []bgp.ClusterPeer{{Name: "p", PeerAddress: peer.addr, PeerASN: peer.asn, PeerConfigRef: "pc"}}}}}},
		PeerConfigs: map[string]*bgp.PeerConfig{"pc": {Name: "pc", PeerPort: uint16(peer.port), ConnectRetryTime: nb.ConnectRetryTime,
			HoldTime: nb.HoldTime, KeepaliveTime: nb.KeepaliveTime,
			Families: []bgp.PeerConfigFamily{{Family: bgp.IPv4Unicast, Advertisements: &bgp.LabelSelector{}}}}},
		Advertisements: []*bgp.Advertisement{{Name: "a", Adverts: []bgp.Advert{{Type: bgp.PodCIDRAdvert},
			{Type: bgp.ServiceAdvert, ServiceSelector: &bgp.LabelSelector{MatchLabels: map[string]string{"bgp": "yes"}}}}}},
		Overrides: map[string]*bgp.NodeConfigOverride{"node-1": {Name: "node-1", Instances: []bgp.OverrideInstance{{Name: "i",
			Peers: []bgp.OverridePeer{{Name: "p", LocalAddress: netip.MustParseAddr(local)}}}}}},
	}
	res, err := bgp.Resolve(ctx, state.Node, objs)
	require.NoError(t, err)
	require.NoError(t, m.ApplySpec(ctx, res.Spec, state))
	after, err := m.Routes(ctx, q)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the same routes, with the same attributes, to the peer")
	ps, err = m.Peers(ctx)
	require.NoError(t, err)
	assert.Equal(t, since, ps[0].Since, "the same session: not re-created")
	peer.waitCount(t, "v4", 2)
}

package gobgp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
)

// bird is a BIRD 2 daemon run by a test (gobgptest.BIRD).
type bird struct {
	*gobgptest.BIRD
	addr netip.Addr
}

// birdConfig configures startBIRDWith (see gobgptest.BIRDConfig).
type birdConfig struct {
	Addr, Neighbor   string
	ASN, NeighborASN uint32
	Options          string
	Import, Export   string
	Extra            string
}

// startBIRD runs BIRD 2 with one passive BGP protocol "gobgp" towards
// neighbor (AS 65009) and the given extra protocol options; it skips the
// test when BIRD is not installed.
func startBIRD(t *testing.T, addr, neighbor string, options string) *bird {
	t.Helper()
	return startBIRDWith(t, birdConfig{Addr: addr, Neighbor: neighbor, Options: options})
}

// startBIRDWith runs BIRD 2 as c says; it skips the test when BIRD is not
// installed.
func startBIRDWith(t *testing.T, c birdConfig) *bird {
	t.Helper()
	b := gobgptest.StartBIRD(t, gobgptest.BIRDConfig{Address: netip.MustParseAddr(c.Addr), Neighbor: netip.MustParseAddr(c.Neighbor),
		ASN: c.ASN, NeighborASN: c.NeighborASN, Options: c.Options, Import: c.Import, Export: c.Export, Extra: c.Extra})
	return &bird{BIRD: b, addr: b.Address()}
}

// c runs birdc.
func (b *bird) c(args ...string) string { return b.C(args...) }

func (b *bird) routes() string { return b.Routes() }

func (b *bird) established() bool { return b.Established() }

func (b *bird) neighbor(local string) bgp.Neighbor {
	return bgp.Neighbor{
		PeerAddress: b.addr, PeerPort: uint16(b.Port()), PeerASN: b.ASN(),
		LocalAddress: netip.MustParseAddr(local), EBGPMultihopTTL: 2,
		ConnectRetryTime: MinConnectRetryTime, HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second,
	}
}

// TestBIRDInterop runs BIRD 2 as a passive peer on loopback: it must receive
// the node's pod CIDRs (IPv4, and IPv6 over the same IPv4 session) and see
// them withdrawn.
func TestBIRDInterop(t *testing.T) {
	const localAddr = "127.0.0.9"
	b := startBIRD(t, "127.0.0.10", localAddr, "")
	ctx := context.Background()
	m := runManager(t, Config{})
	n := b.neighbor(localAddr)
	state := testState(testNode("10.244.9.0/24", "fd00:10:244:9::/64"))
	state.IPv4 = net.ParseIP(localAddr)
	state.IPv6 = net.ParseIP("::1")
	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65009, n), state))
	waitEstablished(t, m, n.PeerAddress)

	require.Eventually(t, func() bool {
		out := b.routes()
		return strings.Contains(out, "10.244.9.0/24") && strings.Contains(out, "fd00:10:244:9::/64")
	}, waitFor, 100*time.Millisecond, "bird routes: %s", b.c("show", "route", "all"))

	// Withdraw by policy change (no export), then by nil.
	p := testPolicy(65009, n)
	p.VirtualRouters[0].ExportPodCIDR = false
	require.NoError(t, m.ConfigurePeers(ctx, p, state))
	require.Eventually(t, func() bool {
		out := b.routes()
		return !strings.Contains(out, "10.244.9.0/24") && !strings.Contains(out, "fd00:10:244:9::/64")
	}, waitFor, 100*time.Millisecond, "bird routes: %s", b.c("show", "route"))
	require.True(t, b.established(), "withdrawal keeps the session")

	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65009, n), state))
	require.Eventually(t, func() bool { return strings.Contains(b.routes(), "10.244.9.0/24") },
		waitFor, 100*time.Millisecond)
	require.NoError(t, m.ConfigurePeers(ctx, nil, nil))
	require.Eventually(t, func() bool {
		return !strings.Contains(b.routes(), "10.244.9.0/24") && !b.established()
	}, waitFor, 100*time.Millisecond)
}

// TestBIRDDualStackIPv6Session peers with BIRD over IPv6 (both on ::1): the
// IPv4 routes carry the node's IPv4 next hop, the IPv6 routes its IPv6 one.
func TestBIRDDualStackIPv6Session(t *testing.T) {
	b := startBIRD(t, "::1", "::1", "")
	ctx := context.Background()
	m := runManager(t, Config{})
	n := b.neighbor("::1")
	state := testState(testNode("10.244.19.0/24", "fd00:10:244:19::/64"))
	state.IPv4 = net.ParseIP("127.0.0.19")
	state.IPv6 = net.ParseIP("::1")
	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65009, n), state))
	waitEstablished(t, m, n.PeerAddress)
	require.Eventually(t, func() bool {
		out := b.c("show", "route", "all", "protocol", "gobgp")
		return strings.Contains(out, "10.244.19.0/24") && strings.Contains(out, "BGP.next_hop: 127.0.0.19") &&
			strings.Contains(out, "fd00:10:244:19::/64") && strings.Contains(out, "BGP.next_hop: ::1")
	}, waitFor, 100*time.Millisecond, "bird routes: %s", b.c("show", "route", "all"))
	ps, err := m.Peers(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, []bgp.Family{bgp.IPv4Unicast, bgp.IPv6Unicast}, ps[0].Negotiated)
	assert.Equal(t, map[bgp.Family]int{bgp.IPv4Unicast: 1, bgp.IPv6Unicast: 1}, ps[0].Advertised)
}

// TestBIRDGracefulRestart kills the speaker process: BIRD keeps the routes
// while the speaker is away and takes the restarted speaker's routes, fresh;
// an explicit withdrawal flushes at once.
func TestBIRDGracefulRestart(t *testing.T) {
	const localAddr = "127.0.0.17"
	b := startBIRD(t, "127.0.0.18", localAddr, "graceful restart on;")
	n := b.neighbor(localAddr)
	n.GracefulRestart = bgp.GracefulRestart{Enabled: true, RestartTime: 10 * time.Minute}
	spec := speakerSpec{Policy: testPolicy(65009, n), PodCIDRs: []string{"10.244.17.0/24"}, IPv4: netip.MustParseAddr(localAddr)}

	s1 := startSpeaker(t)
	s1.apply(t, spec)
	require.Eventually(t, func() bool { return strings.Contains(b.routes(), "10.244.17.0/24") },
		waitFor, 100*time.Millisecond, "bird routes: %s", b.c("show", "route", "all"))
	s1.kill(t)
	require.Eventually(t, func() bool { return !b.established() }, waitFor, 50*time.Millisecond)
	assert.Contains(t, b.routes(), "10.244.17.0/24", "BIRD keeps the routes of the restarting speaker")
	proto := b.c("show", "protocols", "all", "gobgp")
	assert.Contains(t, proto, "Neighbor graceful restart active", "BIRD acts as graceful-restart helper")
	assert.Contains(t, proto, "Restart timer:    59", "with our 10m restart time: %s", proto)

	spec.PodCIDRs = []string{"10.244.117.0/24"}
	s2 := startSpeaker(t)
	s2.apply(t, spec)
	require.Eventually(t, func() bool {
		out := b.routes()
		return strings.Contains(out, "10.244.117.0/24") && !strings.Contains(out, "10.244.17.0/24") && b.established()
	}, waitFor, 100*time.Millisecond, "bird routes: %s", b.c("show", "route", "all"))

	s2.apply(t, speakerSpec{}) // nil policy: explicit withdrawal
	require.Eventually(t, func() bool { return !strings.Contains(b.routes(), "10.244.117.0/24") },
		waitFor, 100*time.Millisecond, "an explicit withdrawal flushes at once, not after the 10m restart time")
}

// TestBIRDCommunitiesLocalPrefAggregation: BIRD, an internal peer, sees
// the advertisements' standard, well-known and large communities and local
// preference, and the aggregates instead of their members.
func TestBIRDCommunitiesLocalPrefAggregation(t *testing.T) {
	const localAddr = "127.0.0.77"
	b := startBIRDWith(t, birdConfig{Addr: "127.0.0.78", Neighbor: localAddr, ASN: 65077, NeighborASN: 65077})
	ctx := context.Background()
	store := bgp.NewStore(bgp.Signaler{})
	for i, ip := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.3"} {
		store.SetService(bgp.Service{Namespace: "n", Name: fmt.Sprint("s", i), LoadBalancerIPs: []netip.Addr{netip.MustParseAddr(ip)}})
	}
	m := runManager(t, Config{Services: store})
	lp := uint32(250)
	pods := bgp.Advert{Type: bgp.PodCIDRAdvert, Attributes: mustAttrs(t, bgp.AttributesSpec{
		Standard: []string{"65000:100"}, WellKnown: []string{"no-advertise"}, Large: []string{"65000:7:8"}, LocalPreference: &lp})}
	svcs := bgp.Advert{Type: bgp.ServiceAdvert, ServiceSelector: &bgp.LabelSelector{}, AggregationLengthIPv4: 24,
		Attributes: mustAttrs(t, bgp.AttributesSpec{Standard: []string{"65000:200"}})}
	n := b.neighbor(localAddr)
	n.Families = []bgp.Family{bgp.IPv4Unicast}
	spec := specOf(65077, bgp.Peer{Name: "bird", Neighbor: withDefaults(n), PeerFamilies: []bgp.PeerFamily{v4Family(pods, svcs)}})
	require.NoError(t, m.ApplySpec(ctx, spec, stateAt(localAddr, "10.244.77.0/24")))
	waitEstablished(t, m, n.PeerAddress)
	var out string
	require.Eventually(t, func() bool {
		out = b.c("show", "route", "all", "protocol", "gobgp")
		return strings.Contains(out, "10.244.77.0/24") && strings.Contains(out, "198.51.100.0/24")
	}, waitFor, 100*time.Millisecond, "bird routes: %s", b.c("show", "route", "all"))
	pod, svc, _ := strings.Cut(out[strings.Index(out, "10.244.77.0/24"):], "198.51.100.0/24")
	if strings.Index(out, "198.51.100.0/24") < strings.Index(out, "10.244.77.0/24") {
		svc, pod, _ = strings.Cut(out[strings.Index(out, "198.51.100.0/24"):], "10.244.77.0/24")
	}
	assert.Contains(t, pod, "BGP.community: (65000,100) (65535,65282)", "standard and well-known communities: %s", out)
	assert.Contains(t, pod, "BGP.large_community: (65000, 7, 8)")
	assert.Contains(t, pod, "BGP.local_pref: 250")
	assert.Contains(t, svc, "BGP.community: (65000,200)")
	assert.NotContains(t, out, "198.51.100.1/32", "the aggregate, not its members")
	assert.Equal(t, 2, strings.Count(b.routes(), "[gobgp "), "exactly the pod CIDR and the aggregate: %s", b.routes())
}

// TestBIRDLearnedDefaultRoute: BIRD announces a default route (next hop
// on the node's uplink subnet); a peer family with an import prefix list
// for it learns it, and forgets it when BIRD withdraws it.
func TestBIRDLearnedDefaultRoute(t *testing.T) {
	const localAddr = "127.0.0.79"
	b := startBIRDWith(t, birdConfig{Addr: "127.0.0.80", Neighbor: localAddr,
		Extra:  "protocol static defroute { ipv4; route 0.0.0.0/0 blackhole; route 10.80.0.0/16 blackhole; }",
		Export: `filter { if proto = "defroute" then { bgp_next_hop = 192.168.16.254; accept; } reject; }`,
	})
	ctx := context.Background()
	sig := bgp.NewSignaler()
	m := runManager(t, Config{LearnedRoutes: sig})
	n := b.neighbor(localAddr)
	n.Families = []bgp.Family{bgp.IPv4Unicast}
	fam := v4Family()
	fam.Import = []bgp.PrefixMatch{{Prefix: netip.MustParsePrefix("0.0.0.0/0")}}
	spec := specOf(65009, bgp.Peer{Name: "bird", Neighbor: withDefaults(n), PeerFamilies: []bgp.PeerFamily{fam}})
	require.NoError(t, m.ApplySpec(ctx, spec, stateAt(localAddr)))
	waitEstablished(t, m, n.PeerAddress)
	require.Eventually(t, func() bool { return len(m.LearnedRoutes()) == 1 }, waitFor, 50*time.Millisecond)
	assert.Equal(t, []bgp.LearnedRoute{{Prefix: netip.MustParsePrefix("0.0.0.0/0"), NextHop: netip.MustParseAddr("192.168.16.254"),
		LocalASN: 65009, Peer: b.addr}}, m.LearnedRoutes(), "the default route only, with BIRD's next hop")
	ps, err := m.Peers(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, ps[0].Received[bgp.IPv4Unicast])
	assert.Equal(t, 1, ps[0].Accepted[bgp.IPv4Unicast])

	assert.Contains(t, b.c("disable", "defroute"), "disabled")
	require.Eventually(t, func() bool { return len(m.LearnedRoutes()) == 0 }, waitFor, 50*time.Millisecond,
		"withdrawn by BIRD: forgotten")
}

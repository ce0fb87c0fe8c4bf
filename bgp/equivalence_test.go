package bgp_test

import (
	"cmp"
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// v2Model is a set of v2 objects as stored (bgpmodel).
type v2Model struct {
	clusterConfigs []*bgpmodel.ClusterConfig
	peerConfigs    []*bgpmodel.PeerConfig
	adverts        []*bgpmodel.Advertisement
	overrides      []*bgpmodel.NodeConfigOverride
	secrets        map[string]string
}

// objects converts the model as an EventSource does; conversion errors
// fail the test.
func (m v2Model) objects(t testing.TB) *bgp.Objects {
	t.Helper()
	o := &bgp.Objects{PeerConfigs: map[string]*bgp.PeerConfig{}, Overrides: map[string]*bgp.NodeConfigOverride{}, AuthSecrets: m.secrets}
	for _, c := range m.clusterConfigs {
		cc, err := bgp.ClusterConfigFromModel(c)
		require.NoError(t, err)
		o.ClusterConfigs = append(o.ClusterConfigs, cc)
	}
	for _, c := range m.peerConfigs {
		pc, err := bgp.PeerConfigFromModel(c)
		require.NoError(t, err)
		o.PeerConfigs[pc.Name] = pc
	}
	for _, a := range m.adverts {
		ad, err := bgp.AdvertisementFromModel(a)
		require.NoError(t, err)
		o.Advertisements = append(o.Advertisements, ad)
	}
	for _, ov := range m.overrides {
		no, err := bgp.NodeConfigOverrideFromModel(ov)
		require.NoError(t, err)
		o.Overrides[no.Name] = no
	}
	return o
}

// session is what a peer's session is, independent of naming.
type session struct {
	LocalASN  uint32
	RouterID  netip.Addr
	LocalPort uint16
	Neighbor  bgp.Neighbor
	Routes    map[string]string // prefix -> attributes
}

// sessionsOf resolves a spec for the node: router IDs as the manager
// would, each peer's neighbor and routes, sorted by ASN and peer address.
func sessionsOf(t testing.TB, spec *bgp.NodeSpec, state *bgp.ControlPlaneState, services []bgp.Service) []session {
	t.Helper()
	pods, err := state.PodCIDRs()
	require.NoError(t, err)
	cache := bgp.NewAdvertCache(pods, func(yield func(*bgp.Service) bool) {
		for i := range services {
			if !yield(&services[i]) {
				return
			}
		}
	})
	var out []session
	for _, in := range spec.Instances {
		rid := in.RouterID
		if !rid.IsValid() {
			rid, err = state.RouterID(in.LocalASN)
			require.NoError(t, err)
		}
		for i := range in.Peers {
			p := &in.Peers[i]
			routes, err := cache.PeerRoutes(p)
			require.NoError(t, err)
			s := session{LocalASN: in.LocalASN, RouterID: rid, LocalPort: in.LocalPort, Neighbor: p.Neighbor, Routes: map[string]string{}}
			for pfx, a := range routes {
				s.Routes[pfx.String()] = a.String()
			}
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b session) int {
		return cmp.Or(cmp.Compare(a.LocalASN, b.LocalASN), a.Neighbor.PeerAddress.Compare(b.Neighbor.PeerAddress))
	})
	return out
}

func equivalenceServices() []bgp.Service {
	a := netip.MustParseAddr
	return []bgp.Service{
		{Namespace: "web", Name: "front", Labels: map[string]string{"bgp": "blue"}, ClusterIPs: []netip.Addr{a("10.96.0.10")},
			LoadBalancerIPs: []netip.Addr{a("198.51.100.10"), a("2001:db8:100::10")}},
		{Namespace: "web", Name: "api", Labels: map[string]string{"bgp": "blue"}, ClusterIPs: []netip.Addr{a("10.96.0.11")},
			ExternalIPs: []netip.Addr{a("203.0.113.11")}, LoadBalancerIPs: []netip.Addr{a("198.51.100.11")}, LoadBalancerClass: "example.com/lb"},
		{Namespace: "db", Name: "pg", Labels: map[string]string{"bgp": "red"}, ClusterIPs: []netip.Addr{a("10.96.0.12")},
			LoadBalancerIPs: []netip.Addr{a("198.51.100.12")}},
		{Namespace: "web", Name: "local", Labels: map[string]string{"bgp": "blue"}, ExternalIPs: []netip.Addr{a("203.0.113.13")},
			ExternalTrafficPolicyLocal: true},
	}
}

func equivalenceNode() (*kubemodel.Node, *bgp.ControlPlaneState) {
	n := &kubemodel.Node{Name: "node-1", Labels: map[string]string{"rack": "r1"}, PodCidrs: []string{"10.244.1.0/24", "fd00:10:244:1::/64"}}
	return n, &bgp.ControlPlaneState{Node: n, IPv4: net.ParseIP("10.0.0.1"), IPv6: net.ParseIP("fd00::1")}
}

// TestV1AndV2Equivalent runs one table of configurations through both
// models: a v1 BGPPeeringPolicy, and the v2 objects that say the same
// (cluster config, peer configs, advertisements, node override, auth
// secret). Both must give the same sessions (local ASN, router ID,
// listening port, and every field of every neighbor's session) and the
// same routes to each peer.
func TestV1AndV2Equivalent(t *testing.T) {
	sel := func(k, v string) *bgpmodel.LabelSelector {
		return &bgpmodel.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	rack := sel("rack", "r1")
	tests := []struct {
		name        string
		v1          *bgpmodel.PeeringPolicy
		annotations map[string]string
		v2          v2Model
	}{
		{
			name: "pod CIDRs to one neighbor with defaults",
			v1: &bgpmodel.PeeringPolicy{Name: "p", NodeSelector: rack, VirtualRouters: []*bgpmodel.VirtualRouter{{
				LocalAsn: 65001, ExportPodCidr: true, Neighbors: []*bgpmodel.Neighbor{{PeerAddress: "10.0.0.254", PeerAsn: 65000}}}}},
			v2: v2Model{
				clusterConfigs: []*bgpmodel.ClusterConfig{{Name: "c", NodeSelector: rack, BgpInstances: []*bgpmodel.ClusterInstance{{
					Name: "i", LocalAsn: 65001, Peers: []*bgpmodel.ClusterPeer{{Name: "tor", PeerAddress: "10.0.0.254", PeerAsn: 65000,
						PeerConfigRef: &bgpmodel.PeerConfigReference{Name: "pc"}}}}}}},
				peerConfigs: []*bgpmodel.PeerConfig{{Name: "pc", Families: []*bgpmodel.PeerFamily{
					{Afi: "ipv4", Safi: "unicast", Advertisements: sel("adv", "pods")},
					{Afi: "ipv6", Safi: "unicast", Advertisements: sel("adv", "pods")}}}},
				adverts: []*bgpmodel.Advertisement{{Name: "pods", Labels: map[string]string{"adv": "pods"},
					Advertisements: []*bgpmodel.AdvertisementEntry{{AdvertisementType: "PodCIDR"}}}},
			},
		},
		{
			name: "pod CIDRs and load-balancer IPs, timers, graceful restart, TCP-MD5, multihop, port",
			v1: &bgpmodel.PeeringPolicy{Name: "p", NodeSelector: rack, VirtualRouters: []*bgpmodel.VirtualRouter{{
				LocalAsn: 65001, ExportPodCidr: true, ServiceSelector: sel("bgp", "blue"),
				Neighbors: []*bgpmodel.Neighbor{{PeerAddress: "192.0.2.254", PeerAsn: 65000, PeerPort: 1790, EbgpMultihopTtl: 3,
					ConnectRetryTimeSeconds: 5, HoldTimeSeconds: 9, KeepaliveTimeSeconds: 3, Password: "s3cret",
					GracefulRestart: &bgpmodel.GracefulRestart{Enabled: true, RestartTimeSeconds: 60}}}}}},
			v2: v2Model{
				clusterConfigs: []*bgpmodel.ClusterConfig{{Name: "c", NodeSelector: rack, BgpInstances: []*bgpmodel.ClusterInstance{{
					Name: "i", LocalAsn: 65001, Peers: []*bgpmodel.ClusterPeer{{Name: "tor", PeerAddress: "192.0.2.254", PeerAsn: 65000,
						PeerConfigRef: &bgpmodel.PeerConfigReference{Name: "pc"}}}}}}},
				peerConfigs: []*bgpmodel.PeerConfig{{Name: "pc", Transport: &bgpmodel.PeerTransport{PeerPort: 1790}, EbgpMultihop: 3,
					Timers:          &bgpmodel.PeerTimers{ConnectRetryTimeSeconds: 5, HoldTimeSeconds: 9, KeepAliveTimeSeconds: 3},
					GracefulRestart: &bgpmodel.GracefulRestart{Enabled: true, RestartTimeSeconds: 60}, AuthSecretRef: "tor-md5",
					Families: []*bgpmodel.PeerFamily{
						{Afi: "ipv4", Safi: "unicast", Advertisements: sel("adv", "all")},
						{Afi: "ipv6", Safi: "unicast", Advertisements: sel("adv", "all")}}}},
				adverts: []*bgpmodel.Advertisement{
					{Name: "pods", Labels: map[string]string{"adv": "all"}, Advertisements: []*bgpmodel.AdvertisementEntry{{AdvertisementType: "PodCIDR"}}},
					{Name: "lb", Labels: map[string]string{"adv": "all"}, Advertisements: []*bgpmodel.AdvertisementEntry{{
						AdvertisementType: "Service", Service: &bgpmodel.ServiceOptions{Addresses: []string{"LoadBalancerIP"}}, Selector: sel("bgp", "blue")}}},
				},
				secrets: map[string]string{"tor-md5": "s3cret"},
			},
		},
		{
			name: "cluster and external IPs of other load-balancer classes, IPv4 only, no pod CIDR",
			v1: &bgpmodel.PeeringPolicy{Name: "p", NodeSelector: rack, VirtualRouters: []*bgpmodel.VirtualRouter{{
				LocalAsn: 65001, ServiceSelector: &bgpmodel.LabelSelector{},
				ServiceAdvertisements: []string{"ClusterIP", "ExternalIP", "LoadBalancerIP"}, LoadBalancerClasses: []string{"example.com/lb"},
				Neighbors: []*bgpmodel.Neighbor{{PeerAddress: "10.0.0.254", PeerAsn: 65000, Families: []string{"ipv4-unicast"}}}}}},
			v2: v2Model{
				clusterConfigs: []*bgpmodel.ClusterConfig{{Name: "c", BgpInstances: []*bgpmodel.ClusterInstance{{
					Name: "i", LocalAsn: 65001, Peers: []*bgpmodel.ClusterPeer{{Name: "tor", PeerAddress: "10.0.0.254", PeerAsn: 65000,
						PeerConfigRef: &bgpmodel.PeerConfigReference{Name: "pc", Group: "bgp.vswitchkit.io", Kind: "BGPPeerConfig"}}}}}}},
				peerConfigs: []*bgpmodel.PeerConfig{{Name: "pc", Families: []*bgpmodel.PeerFamily{
					{Afi: "ipv4", Safi: "unicast", Advertisements: &bgpmodel.LabelSelector{}}}}},
				adverts: []*bgpmodel.Advertisement{{Name: "svc", Advertisements: []*bgpmodel.AdvertisementEntry{{
					AdvertisementType: "Service", Selector: &bgpmodel.LabelSelector{},
					Service: &bgpmodel.ServiceOptions{Addresses: []string{"ClusterIP", "ExternalIP", "LoadBalancerIP"},
						LoadBalancerClasses: []string{"example.com/lb"}}}}}},
			},
		},
		{
			name: "two virtual routers, router ID and local port of the node, a passive neighbor, a local address",
			annotations: map[string]string{
				bgp.AnnotationPrefix + "65001": "router-id=10.255.0.1,local-port=1790",
				bgp.AnnotationPrefix + "65002": "router-id=10.255.0.2",
			},
			v1: &bgpmodel.PeeringPolicy{Name: "p", NodeSelector: rack, VirtualRouters: []*bgpmodel.VirtualRouter{
				{LocalAsn: 65001, ExportPodCidr: true, Neighbors: []*bgpmodel.Neighbor{{PeerAddress: "10.0.0.254", PeerAsn: 65000, Passive: true}}},
				{LocalAsn: 65002, Neighbors: []*bgpmodel.Neighbor{{PeerAddress: "fd00::fe", PeerAsn: 65000, LocalAddress: "fd00::1"}}},
			}},
			v2: v2Model{
				clusterConfigs: []*bgpmodel.ClusterConfig{{Name: "c", NodeSelector: rack, BgpInstances: []*bgpmodel.ClusterInstance{
					{Name: "a", LocalAsn: 65001, Peers: []*bgpmodel.ClusterPeer{{Name: "rr", PeerAddress: "10.0.0.254", PeerAsn: 65000,
						PeerConfigRef: &bgpmodel.PeerConfigReference{Name: "passive"}}}},
					{Name: "b", LocalAsn: 65002, Peers: []*bgpmodel.ClusterPeer{{Name: "tor6", PeerAddress: "fd00::fe", PeerAsn: 65000,
						PeerConfigRef: &bgpmodel.PeerConfigReference{Name: "plain"}}}},
				}}},
				peerConfigs: []*bgpmodel.PeerConfig{
					{Name: "passive", Transport: &bgpmodel.PeerTransport{Passive: true}, Families: []*bgpmodel.PeerFamily{
						{Afi: "ipv4", Safi: "unicast", Advertisements: sel("adv", "pods")}, {Afi: "ipv6", Safi: "unicast", Advertisements: sel("adv", "pods")}}},
					{Name: "plain"},
				},
				adverts: []*bgpmodel.Advertisement{{Name: "pods", Labels: map[string]string{"adv": "pods"},
					Advertisements: []*bgpmodel.AdvertisementEntry{{AdvertisementType: "PodCIDR"}}}},
				overrides: []*bgpmodel.NodeConfigOverride{{Name: "node-1", BgpInstances: []*bgpmodel.OverrideInstance{
					{Name: "a", RouterId: "10.255.0.1", LocalPort: 1790},
					{Name: "b", RouterId: "10.255.0.2", Peers: []*bgpmodel.OverridePeer{{Name: "tor6", LocalAddress: "fd00::1"}}},
				}}},
			},
		},
	}
	services := equivalenceServices()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, state := equivalenceNode()
			node.Annotations = tt.annotations
			ctx := context.Background()

			policy, err := bgp.PolicyFromModel(tt.v1)
			require.NoError(t, err)
			sel, err := bgp.PolicySelection(ctx, node, []*bgp.PeeringPolicy{policy})
			require.NoError(t, err)
			require.NotNil(t, sel)
			v1State := *state
			v1State.Annotations, err = bgp.ParseAnnotations(node.Annotations)
			require.NoError(t, err)
			require.NoError(t, sel.WithDefaults().Validate())
			v1Spec := bgp.SpecFromPolicy(sel, &v1State)
			require.NoError(t, v1Spec.Validate())

			res, err := bgp.Resolve(ctx, node, tt.v2.objects(t))
			require.NoError(t, err)
			require.NotNil(t, res.Spec)
			assert.Empty(t, res.Excluded)
			assert.Empty(t, res.Conditions)
			require.NoError(t, res.Spec.Validate())

			v1 := sessionsOf(t, v1Spec, &v1State, services)
			v2 := sessionsOf(t, res.Spec, state, services)
			require.NotEmpty(t, v1)
			for _, s := range v1 {
				assert.NotEmpty(t, s.Neighbor.Families)
			}
			assert.Equal(t, v1, v2, "the same sessions and routes from both models")
			assert.Equal(t, v1Spec.GracefulRestart(), res.Spec.GracefulRestart())
			t.Logf("%d sessions, routes of the first: %v", len(v1), v1[0].Routes)
		})
	}
}

// TestEquivalenceRoutesAreWhatV1Advertised pins the routes of the second
// case, so that the table above cannot pass with both models wrong in the
// same way.
func TestEquivalenceRoutesAreWhatV1Advertised(t *testing.T) {
	_, state := equivalenceNode()
	p := &bgp.PeeringPolicy{Name: "p", VirtualRouters: []bgp.VirtualRouter{{LocalASN: 65001, ExportPodCIDR: true,
		ServiceSelector: &bgp.LabelSelector{MatchLabels: map[string]string{"bgp": "blue"}},
		Neighbors:       []bgp.Neighbor{{PeerAddress: netip.MustParseAddr("192.0.2.254"), PeerASN: 65000}}}}}
	s := sessionsOf(t, bgp.SpecFromPolicy(p, state), state, equivalenceServices())
	require.Len(t, s, 1)
	var got []string
	for p := range s[0].Routes {
		got = append(got, p)
	}
	slices.Sort(got)
	assert.Equal(t, []string{"10.244.1.0/24", "198.51.100.10/32", "2001:db8:100::10/128", "fd00:10:244:1::/64"}, got,
		"pod CIDRs and the load-balancer IPs of the default class; not the local-traffic service without a backend here")
}

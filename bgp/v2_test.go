package bgp_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

func u32(v uint32) *uint32 { return &v }

// TestV2BadInput: every kind of bad input is an error naming the object
// and the field.
func TestV2BadInput(t *testing.T) {
	badSel := &bgpmodel.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}
	tests := []struct {
		name    string
		convert func() error
		fields  []string
	}{
		{name: "cluster config: invalid selector, ASN 0, bad peer address, duplicate names", convert: func() error {
			_, err := bgp.ClusterConfigFromModel(&bgpmodel.ClusterConfig{Name: "c", NodeSelector: badSel, BgpInstances: []*bgpmodel.ClusterInstance{
				{Name: "i", LocalAsn: 0, LocalPort: 70000, Peers: []*bgpmodel.ClusterPeer{
					{Name: "p", PeerAddress: "10.0.0.300", PeerAsn: 0},
					{Name: "p", PeerAddress: "10.0.0.1", PeerAsn: 1, PeerConfigRef: &bgpmodel.PeerConfigReference{Name: "x", Kind: "Other"}}}},
				{Name: "i", LocalAsn: 1}}})
			return err
		}, fields: []string{`BGPClusterConfig "c"`, "spec.nodeSelector", "spec.bgpInstances[0].localASN", "spec.bgpInstances[0].localPort",
			"spec.bgpInstances[0].peers[0].peerAddress", "spec.bgpInstances[0].peers[0].peerASN", "spec.bgpInstances[0].peers[1].name",
			"spec.bgpInstances[0].peers[1].peerConfigRef.kind", "spec.bgpInstances[1].name"}},
		{name: "cluster config without instances", convert: func() error {
			_, err := bgp.ClusterConfigFromModel(&bgpmodel.ClusterConfig{Name: "c"})
			return err
		}, fields: []string{"spec.bgpInstances"}},
		{name: "peer config: prefix lists, timers, families, secret name", convert: func() error {
			_, err := bgp.PeerConfigFromModel(&bgpmodel.PeerConfig{Name: "pc", AuthSecretRef: "Bad_Name", EbgpMultihop: 300,
				Timers: &bgpmodel.PeerTimers{HoldTimeSeconds: 2},
				Families: []*bgpmodel.PeerFamily{
					{Afi: "ipv4", Safi: "unicast", Advertisements: badSel, ImportPrefixes: []*bgpmodel.PrefixMatch{
						{Prefix: "10.0.0.1/8"}, {Prefix: "10.0.0.0/8", Ge: 24, Le: 16}, {Prefix: "2001:db8::/32"}, {Prefix: "banana"}, {Prefix: "0.0.0.0/0", Le: 200}}},
					{Afi: "ipv4", Safi: "unicast"},
					{Afi: "l2vpn", Safi: "evpn"},
				}})
			return err
		}, fields: []string{`BGPPeerConfig "pc"`, "spec.authSecretRef", "spec.ebgpMultihop", "spec.timers.holdTimeSeconds",
			"spec.families[0].advertisements", "spec.families[0].importPrefixes[0]", "spec.families[0].importPrefixes[1]",
			"spec.families[0].importPrefixes[2].prefix", "spec.families[0].importPrefixes[3].prefix", "spec.families[0].importPrefixes[4]",
			"spec.families[1]", "spec.families[2]"}},
		{name: "advertisement: communities, types, aggregation, selector", convert: func() error {
			_, err := bgp.AdvertisementFromModel(&bgpmodel.Advertisement{Name: "a", Labels: map[string]string{"ok": "bad value!"},
				Advertisements: []*bgpmodel.AdvertisementEntry{
					{AdvertisementType: "PodCIDR", PodCidr: &bgpmodel.PodCIDROptions{AggregationLengthIpv4: u32(33)},
						Attributes: &bgpmodel.Attributes{Communities: &bgpmodel.Communities{Standard: []string{"65536:1"}, WellKnown: []string{"no-exprt"}, Large: []string{"1:2"}}}},
					{AdvertisementType: "Service", Selector: badSel, Service: &bgpmodel.ServiceOptions{Addresses: []string{"NodeIP"}, AggregationLengthIpv6: u32(0)}},
					{AdvertisementType: "Service"},
					{AdvertisementType: "Interface"},
				}})
			return err
		}, fields: []string{`BGPAdvertisement "a"`, "metadata.labels.ok", "spec.advertisements[0].podCIDR.aggregationLengthIPv4",
			"spec.advertisements[0].attributes.communities.standard[0]", "spec.advertisements[0].attributes.communities.wellKnown[0]",
			"spec.advertisements[0].attributes.communities.large[0]", "spec.advertisements[1].selector", "spec.advertisements[1].service.addresses[0]",
			"spec.advertisements[1].service.aggregationLengthIPv6", "spec.advertisements[2].service.addresses", "spec.advertisements[3].advertisementType"}},
		{name: "node override: router ID, local address", convert: func() error {
			_, err := bgp.NodeConfigOverrideFromModel(&bgpmodel.NodeConfigOverride{Name: "node-1", BgpInstances: []*bgpmodel.OverrideInstance{
				{Name: "i", RouterId: "fd00::1", Peers: []*bgpmodel.OverridePeer{{Name: "p", LocalAddress: "x"}}}}})
			return err
		}, fields: []string{`BGPNodeConfigOverride "node-1"`, "spec.bgpInstances[0].routerID", "spec.bgpInstances[0].peers[0].localAddress"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.convert()
			require.ErrorIs(t, err, bgp.ErrInvalidPolicy)
			for _, f := range tt.fields {
				assert.ErrorContains(t, err, f)
			}
			var fe *bgp.FieldError
			assert.True(t, errors.As(err, &fe))
		})
	}
}

// v2Objects: a cluster config for the nodes labelled bgp=on, with one
// instance and two peers, one naming the peer config "pc".
func v2Objects() *bgp.Objects {
	ip := netip.MustParseAddr
	return &bgp.Objects{
		ClusterConfigs: []*bgp.ClusterConfig{{Name: "cc", NodeSelector: &bgp.LabelSelector{MatchLabels: map[string]string{"bgp": "on"}},
			Instances: []bgp.ClusterInstance{{Name: "main", LocalASN: 65001, Peers: []bgp.ClusterPeer{
				{Name: "tor-a", PeerAddress: ip("10.0.0.253"), PeerASN: 65000, PeerConfigRef: "pc"},
				{Name: "tor-b", PeerAddress: ip("10.0.0.254"), PeerASN: 65000},
			}}}}},
		PeerConfigs: map[string]*bgp.PeerConfig{"pc": {Name: "pc", HoldTime: 9 * time.Second,
			Families: []bgp.PeerConfigFamily{{Family: bgp.IPv4Unicast, Advertisements: &bgp.LabelSelector{MatchLabels: map[string]string{"to": "tor"}},
				Import: []bgp.PrefixMatch{{Prefix: netip.MustParsePrefix("0.0.0.0/0")}}}}}},
		Advertisements: []*bgp.Advertisement{{Name: "pods", Labels: map[string]string{"to": "tor"}, Adverts: []bgp.Advert{{Type: bgp.PodCIDRAdvert}}}},
	}
}

func nodeNamed(name string, labels map[string]string) *kubemodel.Node {
	return &kubemodel.Node{Name: name, Labels: labels, PodCidrs: []string{"10.244.1.0/24"}}
}

// TestResolveSelectsTwoOfThreeNodes: a cluster config selects the nodes by
// their labels.
func TestResolveSelectsTwoOfThreeNodes(t *testing.T) {
	objs := v2Objects()
	for _, n := range []struct {
		name   string
		labels map[string]string
		want   bool
	}{{"node-1", map[string]string{"bgp": "on"}, true}, {"node-2", map[string]string{"bgp": "on", "x": "y"}, true}, {"node-3", map[string]string{"bgp": "off"}, false}} {
		res, err := bgp.Resolve(context.Background(), nodeNamed(n.name, n.labels), objs)
		require.NoError(t, err)
		assert.Equal(t, n.want, res.Spec != nil, n.name)
		if res.Spec != nil {
			assert.Equal(t, "BGPClusterConfig/cc", res.Spec.Source)
			require.Len(t, res.Spec.Instances, 1)
			assert.Len(t, res.Spec.Instances[0].Peers, 2)
		}
	}
}

func TestResolvePeers(t *testing.T) {
	objs := v2Objects()
	res, err := bgp.Resolve(context.Background(), nodeNamed("node-1", map[string]string{"bgp": "on"}), objs)
	require.NoError(t, err)
	in := res.Spec.Instances[0]
	assert.Equal(t, uint16(0), in.LocalPort, "no listening by default")
	assert.False(t, in.RouterID.IsValid(), "router ID from the node's address by default")
	a, b := in.Peers[0], in.Peers[1]
	assert.Equal(t, "tor-a", a.Name)
	assert.Equal(t, 9*time.Second, a.HoldTime)
	assert.Equal(t, 3*time.Second, a.KeepaliveTime, "defaults applied")
	assert.Equal(t, []bgp.Family{bgp.IPv4Unicast}, a.Families)
	require.Len(t, a.PeerFamilies, 1)
	assert.Equal(t, []bgp.Advert{{Type: bgp.PodCIDRAdvert}}, a.PeerFamilies[0].Adverts)
	assert.Equal(t, "0.0.0.0/0", a.PeerFamilies[0].Import[0].String())
	assert.Equal(t, "tor-b", b.Name)
	assert.Equal(t, []bgp.Family{bgp.IPv4Unicast, bgp.IPv6Unicast}, b.Families, "without a peer config: both families")
	for _, f := range b.PeerFamilies {
		assert.Empty(t, f.Adverts, "nothing advertised by default")
		assert.Empty(t, f.Import, "nothing imported by default")
	}
	require.NoError(t, res.Spec.Validate())
}

// TestResolveOverride: a node's override sets the router ID, the local
// port, the local ASN and a peer's local address; other nodes keep the
// cluster config's.
func TestResolveOverride(t *testing.T) {
	objs := v2Objects()
	objs.Overrides = map[string]*bgp.NodeConfigOverride{"node-1": {Name: "node-1", Instances: []bgp.OverrideInstance{{Name: "main",
		RouterID: netip.MustParseAddr("10.255.0.1"), LocalPort: 1790, LocalASN: 65011,
		Peers: []bgp.OverridePeer{{Name: "tor-b", LocalAddress: netip.MustParseAddr("10.0.0.1")}}}}}}
	res, err := bgp.Resolve(context.Background(), nodeNamed("node-1", map[string]string{"bgp": "on"}), objs)
	require.NoError(t, err)
	in := res.Spec.Instances[0]
	assert.Equal(t, netip.MustParseAddr("10.255.0.1"), in.RouterID)
	assert.Equal(t, uint16(1790), in.LocalPort)
	assert.Equal(t, uint32(65011), in.LocalASN)
	assert.False(t, in.Peers[0].LocalAddress.IsValid())
	assert.Equal(t, netip.MustParseAddr("10.0.0.1"), in.Peers[1].LocalAddress)

	res, err = bgp.Resolve(context.Background(), nodeNamed("node-2", map[string]string{"bgp": "on"}), objs)
	require.NoError(t, err)
	assert.Equal(t, uint16(0), res.Spec.Instances[0].LocalPort, "the override is node-1's only")
	assert.Equal(t, uint32(65001), res.Spec.Instances[0].LocalASN)
}

// TestResolveConditions: a missing peer config, a missing auth secret, a
// passive peer without a port and invalid objects are reported; the other
// peers are configured.
func TestResolveConditions(t *testing.T) {
	node := nodeNamed("node-1", map[string]string{"bgp": "on"})
	ctx := context.Background()

	objs := v2Objects()
	objs.PeerConfigs = nil
	res, err := bgp.Resolve(ctx, node, objs)
	require.NoError(t, err)
	require.Len(t, res.Excluded, 1)
	assert.Equal(t, "tor-a", res.Excluded[0].Peer.Name)
	assert.Equal(t, bgp.ConditionMissingPeerConfig, res.Excluded[0].Conditions[0].Type)
	assert.Equal(t, "BGPPeerConfig/pc", res.Excluded[0].Conditions[0].Object)
	require.Len(t, res.Spec.Instances[0].Peers, 1, "the other peer is configured")
	assert.Equal(t, "tor-b", res.Spec.Instances[0].Peers[0].Name)

	objs = v2Objects()
	objs.PeerConfigs["pc"].AuthSecretRef = "md5"
	res, err = bgp.Resolve(ctx, node, objs)
	require.NoError(t, err)
	require.Len(t, res.Excluded, 1)
	assert.Equal(t, bgp.ConditionMissingAuthSecret, res.Excluded[0].Conditions[0].Type)
	assert.Equal(t, "Secret/md5", res.Excluded[0].Conditions[0].Object)
	objs.AuthSecrets = map[string]string{"md5": "pw"}
	res, err = bgp.Resolve(ctx, node, objs)
	require.NoError(t, err)
	assert.Empty(t, res.Excluded)
	assert.Equal(t, "pw", res.Spec.Instances[0].Peers[0].Password)

	objs = v2Objects()
	objs.PeerConfigs["pc"].Passive = true
	res, err = bgp.Resolve(ctx, node, objs)
	require.NoError(t, err)
	require.Len(t, res.Excluded, 1)
	assert.Equal(t, bgp.ConditionNotListening, res.Excluded[0].Conditions[0].Type)

	objs = v2Objects()
	delete(objs.PeerConfigs, "pc")
	objs.Invalid = []bgp.InvalidObject{
		{Kind: bgp.KindPeerConfig, Name: "pc", Err: errors.New("bad timers")},
		{Kind: bgp.KindAdvertisement, Name: "a1", Err: errors.New("bad community")},
		{Kind: bgp.KindClusterConfig, Name: "other", Err: errors.New("bad selector")},
		{Kind: bgp.KindNodeConfigOverride, Name: "node-9", Err: errors.New("not ours")},
		{Kind: bgp.KindPeerConfig, Name: "unused", Err: errors.New("not ours either")},
	}
	res, err = bgp.Resolve(ctx, node, objs)
	require.NoError(t, err)
	require.Len(t, res.Excluded, 1)
	assert.Contains(t, res.Excluded[0].Conditions[0].Message, "invalid: bad timers")
	var objects []string
	for _, c := range res.Conditions {
		assert.Equal(t, bgp.ConditionInvalidObject, c.Type)
		objects = append(objects, c.Object)
	}
	assert.Equal(t, []string{"BGPAdvertisement/a1", "BGPClusterConfig/other", "BGPPeerConfig/pc"}, objects,
		"invalid objects that could concern this node, not another node's override nor a peer config nobody here names")

	objs = v2Objects()
	objs.ClusterConfigs = append(objs.ClusterConfigs, &bgp.ClusterConfig{Name: "dd", Instances: []bgp.ClusterInstance{{Name: "x", LocalASN: 1}}})
	_, err = bgp.Resolve(ctx, node, objs)
	require.ErrorIs(t, err, bgp.ErrMultipleClusterConfigs)
}

// TestAdvertCacheAggregationAndAttributes: aggregation shortens pod CIDRs
// and service routes to the configured lengths (not local-traffic
// services); overlapping adverts merge their attributes.
func TestAdvertCacheAggregationAndAttributes(t *testing.T) {
	a := netip.MustParseAddr
	lp := uint32(200)
	svcs := []bgp.Service{
		{Namespace: "n", Name: "a", LoadBalancerIPs: []netip.Addr{a("198.51.100.1"), a("198.51.100.77"), a("2001:db8::1")}},
		{Namespace: "n", Name: "b", LoadBalancerIPs: []netip.Addr{a("198.51.100.200")}, Labels: map[string]string{"gold": "yes"}},
		{Namespace: "n", Name: "c", ExternalIPs: []netip.Addr{a("203.0.113.5")}, ExternalTrafficPolicyLocal: true, HasLocalBackend: true},
	}
	all := &bgp.LabelSelector{}
	peer := &bgp.Peer{Name: "p", PeerFamilies: []bgp.PeerFamily{
		{Family: bgp.IPv4Unicast, Adverts: []bgp.Advert{
			{Type: bgp.PodCIDRAdvert, AggregationLengthIPv4: 16, Attributes: bgp.Attributes{Communities: []bgp.Community{65000<<16 | 1}}},
			{Type: bgp.ServiceAdvert, ServiceSelector: all, ServiceAddresses: []bgp.ServiceAddressType{bgp.LoadBalancerIPAddresses, bgp.ExternalIPAddresses},
				AggregationLengthIPv4: 24, AggregationLengthIPv6: 64, Attributes: bgp.Attributes{Communities: []bgp.Community{65000<<16 | 2}}},
			{Type: bgp.ServiceAdvert, ServiceSelector: &bgp.LabelSelector{MatchLabels: map[string]string{"gold": "yes"}},
				AggregationLengthIPv4: 24, Attributes: bgp.Attributes{LocalPreference: &lp, Communities: []bgp.Community{65000<<16 | 3}}},
		}},
		{Family: bgp.IPv6Unicast, Adverts: []bgp.Advert{
			{Type: bgp.ServiceAdvert, ServiceSelector: all, AggregationLengthIPv6: 64},
		}},
	}}
	cache := bgp.NewAdvertCache([]netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")},
		func(yield func(*bgp.Service) bool) {
			for i := range svcs {
				if !yield(&svcs[i]) {
					return
				}
			}
		})
	routes, err := cache.PeerRoutes(peer)
	require.NoError(t, err)
	got := map[string]string{}
	for p, at := range routes {
		got[p.String()] = at.String()
	}
	assert.Equal(t, map[string]string{
		"10.244.0.0/16":   "communities=[65000:1]",
		"198.51.100.0/24": "communities=[65000:2 65000:3] local-pref=200",
		"203.0.113.5/32":  "communities=[65000:2]",
		"2001:db8::/64":   "",
	}, got, "members aggregated; the local-traffic service exact; attributes of overlapping adverts merged; IPv6 routes only on the IPv6 family")
}

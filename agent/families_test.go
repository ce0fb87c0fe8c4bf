package agent_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
	"github.com/vswitchkit/vswitchkit/cniserver/cniplugin"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/render/svccnat"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
)

// addPodAddrs adds a pod through the node's pod server, as the CNI plugin
// does, and returns its addresses (one per IP family).
func (n *simNode) addPodAddrs(t *testing.T, name string) []netip.Addr {
	t.Helper()
	netns := "/run/netns/" + name
	require.NoError(t, n.linux.AddNetns(netns))
	out, err := cniplugin.Call(context.Background(), n.socket, "ADD", &skel.CmdArgs{
		ContainerID: "c-" + name, Netns: netns, IfName: "eth0",
		Args:      "K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + name,
		StdinData: []byte(`{"cniVersion":"1.1.0","name":"vswitchkit","type":"vswitchkit-cni"}`),
	})
	require.NoError(t, err)
	var res struct{ IPs []struct{ Address string } }
	require.NoError(t, json.Unmarshal(out, &res))
	var addrs []netip.Addr
	for _, ip := range res.IPs {
		p, err := netip.ParsePrefix(ip.Address)
		require.NoError(t, err)
		addrs = append(addrs, p.Addr())
	}
	return addrs
}

// TestServicesCnatFamilies runs the whole agent with the cnat service
// renderer in a dual-stack and an IPv6-only cluster (on the stand-in): a
// pod gets an address of each of the cluster's families, the node's
// uplink holds its node address of each, and a service of the cluster's
// families (a cluster IP and a node port per family) becomes cnat
// translations of each family to the pod.
func TestServicesCnatFamilies(t *testing.T) {
	for _, tc := range []struct {
		family     string
		pod        []string // the pod's addresses
		nodeIPs    []string // this node's addresses (node ports)
		clusterIPs []string
		want       []string // cnat's translations
	}{
		{agent.DualStack, []string{"10.1.1.2", "fd00:1::102"}, []string{"192.168.0.1", "192.168.16.1", "fd00:16::1"},
			[]string{"10.96.0.10", "fd00:96::10"}, []string{
				"tcp 10.96.0.10:80 -> 10.1.1.2:8080",
				"tcp 192.168.0.1:30080 -> 10.1.1.2:8080",
				"tcp 192.168.16.1:30080 -> 10.1.1.2:8080",
				"tcp [fd00:16::1]:30080 -> [fd00:1::102]:8080",
				"tcp [fd00:96::10]:80 -> [fd00:1::102]:8080",
			}},
		{agent.IPv6, []string{"fd00:1::102"}, []string{"192.168.0.1", "fd00:16::1"},
			[]string{"fd00:96::10"}, []string{
				"tcp [fd00:16::1]:30080 -> [fd00:1::102]:8080",
				"tcp [fd00:96::10]:80 -> [fd00:1::102]:8080",
			}},
	} {
		t.Run(tc.family, func(t *testing.T) {
			cli := startEtcd(t, "node-1")
			n := startNode(t, cli, "node-1", func(c *agent.Config) { c.Services, c.IPFamily = agent.ServicesCnat, tc.family })
			require.NotNil(t, n.agent.Cnat)
			assert.Nil(t, n.agent.NAT)
			assert.Equal(t, tc.family == agent.DualStack, n.agent.IPAM6 != nil)

			pod := n.addPodAddrs(t, "web")
			assert.Equal(t, tc.pod, strs(pod), "the pod's addresses")
			require.Eventually(t, func() bool {
				return slices.Equal(tc.nodeIPs, strs(n.agent.NodeIPs.NodeIPs()))
			}, time.Minute, 10*time.Millisecond, "node addresses: %v", n.agent.NodeIPs.NodeIPs())

			var eps []*kubemodel.EndpointAddress
			for _, ip := range pod {
				eps = append(eps, &kubemodel.EndpointAddress{Ip: ip.String(), NodeName: "node-1",
					TargetRef: &kubemodel.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}})
			}
			put(t, cli, kubemodel.ServiceKey("default", "web"), &kubemodel.Service{Name: "web", Namespace: "default",
				Type: kubemodel.Service_NODE_PORT, ClusterIps: tc.clusterIPs,
				Ports: []*kubemodel.ServicePort{{Name: "http", Port: 80, TargetPortNumber: 8080, NodePort: 30080}}})
			put(t, cli, kubemodel.EndpointsKey("default", "web"), &kubemodel.Endpoints{Name: "web", Namespace: "default",
				Subsets: []*kubemodel.EndpointSubset{{Addresses: eps, Ports: []*kubemodel.EndpointPort{{Name: "http", Port: 8080}}}}})
			var got vppdrivertest.Cnat
			require.Eventually(t, func() bool {
				var err error
				got, err = vppdrivertest.ReadCnat(context.Background(), n.vpp.NewAdapter())
				require.NoError(t, err)
				return slices.Equal(tc.want, got.Translations)
			}, time.Minute, 10*time.Millisecond, "translations")
			assert.Equal(t, tc.want, got.Translations)
			assert.Empty(t, n.agent.Cnat.Problems())
			nat := n.nat(t)
			assert.Empty(t, nat.Static, "no NAT44 mappings")
			assert.Empty(t, nat.LB, "no NAT44 mappings")
		})
	}
}

func strs(addrs []netip.Addr) []string {
	var out []string
	for _, a := range addrs {
		out = append(out, a.String())
	}
	return out
}

// TestCnatServiceOfAFamilyWithoutNodeAddress: in an IPv4 cluster with the
// cnat renderer a dual-stack NodePort service gets its cluster IPs of both
// families and its IPv4 node ports; its IPv6 node ports cannot be exposed
// (the node has no IPv6 address): a problem of that service alone, which
// goes with the node port.
func TestCnatServiceOfAFamilyWithoutNodeAddress(t *testing.T) {
	cli := startEtcd(t, "node-1")
	n := startNode(t, cli, "node-1", func(c *agent.Config) { c.Services = agent.ServicesCnat })
	put(t, cli, kubemodel.ServiceKey("default", "web"), &kubemodel.Service{Name: "web", Namespace: "default",
		Type: kubemodel.Service_NODE_PORT, ClusterIps: []string{"10.96.0.10", "fd00:96::10"},
		Ports: []*kubemodel.ServicePort{{Name: "http", Port: 80, TargetPortNumber: 8080, NodePort: 30080}}})
	put(t, cli, kubemodel.EndpointsKey("default", "web"), &kubemodel.Endpoints{Name: "web", Namespace: "default",
		Subsets: []*kubemodel.EndpointSubset{{Addresses: []*kubemodel.EndpointAddress{{Ip: "10.1.1.9", NodeName: "node-1"}, {Ip: "fd00:1::109", NodeName: "node-1"}},
			Ports: []*kubemodel.EndpointPort{{Name: "http", Port: 8080}}}}})
	want := []string{
		"tcp 10.96.0.10:80 -> 10.1.1.9:8080",
		"tcp 192.168.0.1:30080 -> 10.1.1.9:8080",
		"tcp 192.168.16.1:30080 -> 10.1.1.9:8080",
		"tcp [fd00:96::10]:80 -> [fd00:1::109]:8080",
	}
	require.Eventually(t, func() bool {
		got, err := vppdrivertest.ReadCnat(context.Background(), n.vpp.NewAdapter())
		require.NoError(t, err)
		return slices.Equal(want, got.Translations)
	}, time.Minute, 10*time.Millisecond, "translations")
	web := kubemodel.ServiceID{Namespace: "default", Name: "web"}
	assert.Equal(t, []svccnat.Problem{{Service: web, Reason: svccnat.NoNodeAddress, Detail: "IPv6"}}, n.agent.Cnat.Problems())

	put(t, cli, kubemodel.ServiceKey("default", "web"), &kubemodel.Service{Name: "web", Namespace: "default",
		ClusterIps: []string{"10.96.0.10", "fd00:96::10"}, Ports: []*kubemodel.ServicePort{{Name: "http", Port: 80, TargetPortNumber: 8080}}})
	require.Eventually(t, func() bool { return len(n.agent.Cnat.Problems()) == 0 }, time.Minute, 10*time.Millisecond,
		"the problem goes with the node port")
}

// TestDualStackBGPAdverts: an agent of a dual-stack cluster advertises its
// pod subnet of each family to a peer (a GoBGP router in a child process)
// over one IPv4 session, each with this node's next hop of its family.
func TestDualStackBGPAdverts(t *testing.T) {
	cli := startEtcd(t, "node-1")
	addr, addr6 := netip.MustParseAddr("127.0.0.97"), netip.MustParseAddr("fd00:97::1")
	port := gobgptest.FreePort(t, addr)
	rr := gobgptest.StartPeer(t, gobgptest.PeerConfig{Address: netip.MustParseAddr("127.0.0.96"), ASN: 65096})
	rr.AddNeighbor(t, gobgptest.Neighbor{Address: addr, ASN: 65097, Active: true, Port: port,
		Families: []bgp.Family{bgp.IPv4Unicast, bgp.IPv6Unicast}})
	put(t, cli, bgpmodel.ObjectKey(bgpmodel.ClusterConfigResourceName, "cc"), &bgpmodel.ClusterConfig{Name: "cc",
		BgpInstances: []*bgpmodel.ClusterInstance{{Name: "main", LocalAsn: 65097, LocalPort: uint32(port), Peers: []*bgpmodel.ClusterPeer{
			{Name: "rr", PeerAddress: "127.0.0.96", PeerAsn: 65096, PeerConfigRef: &bgpmodel.PeerConfigReference{Name: "rr"}}}}}})
	put(t, cli, bgpmodel.ObjectKey(bgpmodel.PeerConfigResourceName, "rr"), &bgpmodel.PeerConfig{Name: "rr",
		Transport: &bgpmodel.PeerTransport{Passive: true}, Timers: &bgpmodel.PeerTimers{HoldTimeSeconds: 9, KeepAliveTimeSeconds: 3},
		Families: []*bgpmodel.PeerFamily{
			{Afi: "ipv4", Safi: "unicast", Advertisements: &bgpmodel.LabelSelector{MatchLabels: map[string]string{"adv": "pods"}}},
			{Afi: "ipv6", Safi: "unicast", Advertisements: &bgpmodel.LabelSelector{MatchLabels: map[string]string{"adv": "pods"}}}}})
	put(t, cli, bgpmodel.ObjectKey(bgpmodel.AdvertisementResourceName, "pods"), &bgpmodel.Advertisement{Name: "pods",
		Labels: map[string]string{"adv": "pods"}, Advertisements: []*bgpmodel.AdvertisementEntry{{AdvertisementType: "PodCIDR"}}})
	n := startNode(t, cli, "node-1", func(c *agent.Config) {
		c.Services, c.IPFamily = agent.ServicesCnat, agent.DualStack
		c.BGP = agent.BGPConfig{IPv4: addr, IPv6: addr6, ListenAddresses: []netip.Addr{addr}, StatusInterval: 100 * time.Millisecond}
	})
	require.NotNil(t, n.agent.IPAM6)
	put(t, cli, kubemodel.NodeKey("node-1"), &kubemodel.Node{Name: "node-1"})

	want := map[bgp.Family]struct {
		prefix  netip.Prefix
		nextHop netip.Addr
	}{
		bgp.IPv4Unicast: {n.agent.IPAM.PodSubnetThisNodePrefix(), addr},
		bgp.IPv6Unicast: {n.agent.IPAM6.PodSubnetThisNodePrefix(), addr6},
	}
	for fam, w := range want {
		require.True(t, w.prefix.IsValid())
		require.Eventually(t, func() bool { _, ok := rr.Routes(t, fam)[w.prefix]; return ok }, time.Minute, 50*time.Millisecond,
			"%v: the pod subnet %v advertised: %v", fam, w.prefix, rr.Routes(t, fam))
		routes := rr.Routes(t, fam)
		assert.Len(t, routes, 1, "%v: the pod subnet only", fam)
		assert.Equal(t, w.nextHop, routes[w.prefix].NextHop, "%v: this node's next hop of the family", fam)
	}
}

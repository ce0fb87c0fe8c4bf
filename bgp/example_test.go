package bgp_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgptest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// ExampleController applies the one policy that selects the node to a fake
// manager, then withdraws everything.
func ExampleController() {
	store := bgp.NewStore(bgp.Signaler{})
	store.SetNode(&kubemodel.Node{
		Name:        "worker-1",
		Labels:      map[string]string{"rack": "r1"},
		Annotations: map[string]string{bgp.AnnotationPrefix + "65001": "router-id=10.0.0.1"},
		PodCidrs:    []string{"10.244.1.0/24"},
	})
	store.SetPolicy(&bgp.PeeringPolicy{
		Name:         "rack-r1",
		NodeSelector: &bgp.LabelSelector{MatchLabels: map[string]string{"rack": "r1"}},
		VirtualRouters: []bgp.VirtualRouter{{
			LocalASN:      65001,
			ExportPodCIDR: true,
			Neighbors:     []bgp.Neighbor{{PeerAddress: netip.MustParseAddr("10.0.0.254"), PeerASN: 65000}},
		}},
	})
	mgr := &bgptest.FakeManager{}
	ctrl, err := bgp.NewController(mgr, store, store, bgp.ControllerConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := ctrl.Reconcile(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	applied := mgr.Applied()
	n := applied.VirtualRouters[0].Neighbors[0]
	fmt.Println("policy:", applied.Name)
	fmt.Println("neighbor:", n.PeerAddress, "AS", n.PeerASN, "hold", n.HoldTime, "keepalive", n.KeepaliveTime)
	fmt.Println("router ID:", mgr.Calls()[0].State.Annotations[65001].RouterID)

	ctrl.FullWithdrawal(context.Background())
	fmt.Println("after withdrawal:", mgr.Applied())
	// Output:
	// policy: rack-r1
	// neighbor: 10.0.0.254 AS 65000 hold 1m30s keepalive 30s
	// router ID: 10.0.0.1
	// after withdrawal: <nil>
}

// ExampleController_v2 configures the node with v2 objects: a cluster
// config selecting it, a peer config advertising the pod CIDR with a
// community and importing a default route, and the node's override of its
// router ID and port.
func ExampleController_v2() {
	store := bgp.NewStore(bgp.Signaler{})
	store.SetNode(&kubemodel.Node{
		Name:     "worker-1",
		Labels:   map[string]string{"bgp": "on"},
		PodCidrs: []string{"10.244.1.0/24"},
	})
	store.SetClusterConfig(&bgp.ClusterConfig{
		Name:         "tor",
		NodeSelector: &bgp.LabelSelector{MatchLabels: map[string]string{"bgp": "on"}},
		Instances: []bgp.ClusterInstance{{
			Name: "main", LocalASN: 65001,
			Peers: []bgp.ClusterPeer{{Name: "tor-1", PeerAddress: netip.MustParseAddr("10.0.0.254"), PeerASN: 65000, PeerConfigRef: "tor"}},
		}},
	})
	community, _ := bgp.ParseCommunity("65001:100")
	defaultRoute, _ := bgp.ParsePrefixMatch("0.0.0.0/0")
	store.SetPeerConfig(&bgp.PeerConfig{Name: "tor", Families: []bgp.PeerConfigFamily{{
		Family:         bgp.IPv4Unicast,
		Advertisements: &bgp.LabelSelector{MatchLabels: map[string]string{"advertise": "pods"}},
		Import:         []bgp.PrefixMatch{defaultRoute},
	}}})
	store.SetAdvertisement(&bgp.Advertisement{
		Name: "pods", Labels: map[string]string{"advertise": "pods"},
		Adverts: []bgp.Advert{{Type: bgp.PodCIDRAdvert, Attributes: bgp.Attributes{Communities: []bgp.Community{community}}}},
	})
	store.SetNodeConfigOverride(&bgp.NodeConfigOverride{Name: "worker-1", Instances: []bgp.OverrideInstance{{
		Name: "main", RouterID: netip.MustParseAddr("10.0.0.1"), LocalPort: 1179,
	}}})
	mgr := &bgptest.FakeManager{}
	ctrl, err := bgp.NewController(mgr, store, store, bgp.ControllerConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := ctrl.Reconcile(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	spec := mgr.AppliedSpec()
	in := spec.Instances[0]
	p := in.Peers[0]
	fmt.Println("source:", spec.Source)
	fmt.Println("instance:", in.Name, "AS", in.LocalASN, "router ID", in.RouterID, "port", in.LocalPort)
	fmt.Println("peer:", p.Name, p.PeerAddress, "AS", p.PeerASN)
	for _, f := range p.PeerFamilies {
		fmt.Println(" ", f.Family, "adverts", len(f.Adverts), "import", f.Import)
	}
	// Output:
	// source: BGPClusterConfig/tor
	// instance: main AS 65001 router ID 10.0.0.1 port 1179
	// peer: tor-1 10.0.0.254 AS 65000
	//   ipv4-unicast adverts 1 import [0.0.0.0/0]
}

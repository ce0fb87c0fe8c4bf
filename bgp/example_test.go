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

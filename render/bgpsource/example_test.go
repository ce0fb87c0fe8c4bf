package bgpsource_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/bgptest"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/render/bgpsource"
)

// A Source under a controller loop feeds a BGP controller: the policy that
// selects the node, IPAM's pod CIDR, the services; a pod CIDR change
// (IPAM's PodCIDRChange) signals the controller, whose next reconcile
// advertises the new prefix.
func Example() {
	var podCIDR atomic.Value // what IPAM would report
	podCIDR.Store(netip.MustParsePrefix("10.244.1.0/24"))
	sig := bgp.NewSignaler()
	src, err := bgpsource.New("worker-1", sig, bgpsource.Config{
		PodSubnets: []bgpsource.PodSubnets{bgpsource.PodSubnetsFunc(func() netip.Prefix { return podCIDR.Load().(netip.Prefix) })},
		IPv4:       netip.MustParseAddr("192.0.2.1"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	loop, _ := controller.New(nil, &controllertest.Southbound{}, controller.Config{})
	_ = loop.Register(src)
	done := make(chan error, 1)
	go func() { done <- loop.Run(context.Background()) }()
	barrier := func() { // wait until the loop has processed what was pushed
		ev := controller.NewExternalConfigChange("example", true)
		_ = loop.PushEvent(ev)
		_ = ev.Wait()
	}

	mgr := &bgptest.FakeManager{}
	ctrl, _ := bgp.NewController(mgr, src, src, bgp.ControllerConfig{Signaler: sig})

	db := controller.NewDBResync()
	db.KubeState[kubemodel.NodeResource] = controller.KeyValuePairs{
		kubemodel.NodeKey("worker-1"): &kubemodel.Node{Name: "worker-1", Labels: map[string]string{"rack": "r1"}},
	}
	db.KubeState[bgpmodel.PolicyResourceName] = controller.KeyValuePairs{
		bgpmodel.PolicyKey("rack-r1"): &bgpmodel.PeeringPolicy{
			Name:         "rack-r1",
			NodeSelector: &bgpmodel.LabelSelector{MatchLabels: map[string]string{"rack": "r1"}},
			VirtualRouters: []*bgpmodel.VirtualRouter{{
				LocalAsn: 65001, ExportPodCidr: true,
				ServiceSelector: &bgpmodel.LabelSelector{},
				Neighbors:       []*bgpmodel.Neighbor{{PeerAddress: "192.0.2.254", PeerAsn: 65000}},
			}},
		},
	}
	db.KubeState[kubemodel.ServiceResource] = controller.KeyValuePairs{
		kubemodel.ServiceKey("default", "web"): &kubemodel.Service{Namespace: "default", Name: "web",
			Type: kubemodel.Service_LOAD_BALANCER, ClusterIps: []string{"10.96.0.10"}, LbIngressIps: []string{"198.51.100.10"}},
	}
	_ = loop.PushEvent(db)
	barrier()

	show := func() {
		if err := ctrl.Reconcile(context.Background()); err != nil {
			fmt.Println(err)
			return
		}
		calls := mgr.Calls()
		state := calls[len(calls)-1].State
		cidrs, _ := state.PodCIDRs()
		vr := mgr.Applied().VirtualRouters[0]
		vips, _ := vr.ServicePrefixes(src.ListServices())
		fmt.Println("policy:", mgr.Applied().Name, "router ID:", state.IPv4, "pod CIDRs:", cidrs, "services:", vips)
	}
	show()

	// IPAM switches the pod subnet and pushes a PodCIDRChange.
	podCIDR.Store(netip.MustParsePrefix("10.244.7.0/24"))
	<-sig.Sig // drain the signals so far
	_ = loop.PushEvent(&ipam.PodCIDRChange{PrevPodCIDR: netip.MustParsePrefix("10.244.1.0/24"), LocalPodCIDR: netip.MustParsePrefix("10.244.7.0/24")})
	barrier()
	fmt.Println("signalled:", len(sig.Sig) == 1)
	show()

	shutdown := controller.NewShutdownEvent()
	_ = loop.PushEvent(shutdown)
	_ = shutdown.Wait()
	fmt.Println("loop:", <-done)
	// Output:
	// policy: rack-r1 router ID: 192.0.2.1 pod CIDRs: [10.244.1.0/24] services: [198.51.100.10/32]
	// signalled: true
	// policy: rack-r1 router ID: 192.0.2.1 pod CIDRs: [10.244.7.0/24] services: [198.51.100.10/32]
	// loop: <nil>
}

package svcprocessor_test

import (
	"fmt"
	"net/netip"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/svcprocessor/svcprocessortest"
)

func Example() {
	// Collaborators: in an application these are the IPAM, node sync and
	// the pod interface configurator; here the in-memory fakes.
	subnets := svcprocessortest.NewSubnets(netip.MustParsePrefix("10.1.1.0/24"), netip.MustParsePrefix("10.1.0.0/16"))
	nodes := svcprocessortest.NewNodeIPs(netip.MustParseAddr("192.168.16.1"), netip.MustParseAddr("192.168.16.2"))
	pods := svcprocessortest.NewPods()
	pods.Connect(kubemodel.PodID{Namespace: "shop", Name: "web-1"}, "tap1")

	sp, err := svcprocessor.New(subnets, nodes, pods, svcprocessor.Config{NodeName: "node1"})
	if err != nil {
		panic(err)
	}
	defer sp.Close()

	// A renderer that prints what it gets.
	_ = sp.RegisterRenderer(svcprocessor.RendererFunc(func(ev svcprocessor.RenderEvent) error {
		switch ev.Kind {
		case svcprocessor.Resync:
			fmt.Printf("resync: %d services, node IPs %v\n", len(ev.Snapshot.Services), ev.Snapshot.NodeIPs)
		case svcprocessor.ServiceAdded, svcprocessor.ServiceUpdated:
			s := ev.NewService
			fmt.Printf("%s %s %v:\n", ev.Kind, s.ID, s.ClusterIPs)
			for _, p := range s.Ports {
				for _, b := range p.Backends {
					fmt.Printf("  %s/%d -> %s:%d local=%v\n", p.Name, p.Port, b.IP, b.Port, b.Local)
				}
			}
		case svcprocessor.FrontendsChanged, svcprocessor.BackendsChanged:
			fmt.Printf("%s: %v -> %v\n", ev.Kind, ev.OldInterfaces, ev.NewInterfaces)
		}
		return nil
	}))

	// Start-up resync with an empty cluster, then the pod gets connected.
	_ = sp.Resync(controller.NewKubeStateData())
	_ = sp.ProcessNewPod("shop", "web-1")

	svc := &kubemodel.Service{
		Namespace: "shop", Name: "web",
		ClusterIps: []string{"10.96.0.20"},
		Ports:      []*kubemodel.ServicePort{{Name: "http", Port: 80}},
	}
	eps := &kubemodel.Endpoints{Namespace: "shop", Name: "web", Subsets: []*kubemodel.EndpointSubset{{
		Addresses: []*kubemodel.EndpointAddress{
			{Ip: "10.1.1.2", TargetRef: &kubemodel.ObjectReference{Kind: "Pod", Name: "web-1"}},
			{Ip: "10.1.2.7", TargetRef: &kubemodel.ObjectReference{Kind: "Pod", Name: "web-2"}},
		},
		Ports: []*kubemodel.EndpointPort{{Name: "http", Port: 8080}},
	}}}
	_ = sp.Update(&controller.KubeStateChange{Resource: kubemodel.ServiceResource, Key: kubemodel.ServiceKey("shop", "web"), NewValue: svc})
	_ = sp.Update(&controller.KubeStateChange{Resource: kubemodel.EndpointsResource, Key: kubemodel.EndpointsKey("shop", "web"), NewValue: eps})

	// Output:
	// resync: 0 services, node IPs [192.168.16.1 192.168.16.2]
	// FrontendsChanged: [] -> [tap1]
	// ServiceAdded shop/web [10.96.0.20]:
	// ServiceUpdated shop/web [10.96.0.20]:
	//   http/80 -> 10.1.1.2:8080 local=true
	//   http/80 -> 10.1.2.7:8080 local=false
	// BackendsChanged: [] -> [tap1]
	// FrontendsChanged: [tap1] -> []
}

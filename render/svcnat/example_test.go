package svcnat_test

import (
	"fmt"
	"net/netip"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/render/svcnat"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/svcprocessor/svcprocessortest"
)

// The renderer under a service processor, driven as the event loop drives
// them: a resync, then a service with two backends on this node. It
// prints the keys each transaction writes.
func Example() {
	thisNode := svcnat.NodeIPsFunc(func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("192.168.16.1")} })
	loopback := svcnat.NATLoopbackFunc(func() netip.Addr { return netip.MustParseAddr("172.30.1.254") }) // e.g. *ipam.IPAM
	nat, err := svcnat.New(thisNode, loopback, svcnat.Config{Uplink: "uplink"})
	if err != nil {
		panic(err)
	}
	pods := svcprocessortest.NewPods()
	subnets := svcprocessortest.NewSubnets(netip.MustParsePrefix("10.1.1.0/24"), netip.MustParsePrefix("10.1.0.0/16"))
	sp, err := svcprocessor.New(subnets, thisNode, pods, svcprocessor.Config{})
	if err != nil {
		panic(err)
	}
	if err := sp.RegisterRenderer(nat); err != nil {
		panic(err)
	}
	h := sp.Handler()
	show := func(what string, txn *controllertest.Txn) {
		fmt.Println(what + ":")
		for _, k := range txn.Keys() {
			if txn.Get(k) == nil {
				k += " (deleted)"
			}
			fmt.Println(" ", k)
		}
	}

	txn := controllertest.NewTxn()
	if err := h.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, txn); err != nil {
		panic(err)
	}
	show("resync", txn)

	for _, pod := range []string{"web-1", "web-2"} {
		pods.Connect(kubemodel.PodID{Namespace: "default", Name: pod}, "pod-"+pod)
		if _, err := h.Update(controller.NewAddPodEvent(kubemodel.PodID{Namespace: "default", Name: pod}, "c", "/ns"), controllertest.NewTxn()); err != nil {
			panic(err)
		}
	}
	svc := &kubemodel.Service{Name: "web", Namespace: "default", Type: kubemodel.Service_NODE_PORT, ClusterIps: []string{"10.96.0.10"},
		Ports: []*kubemodel.ServicePort{{Name: "http", Port: 80, TargetPortNumber: 8080, NodePort: 30080}}}
	eps := &kubemodel.Endpoints{Name: "web", Namespace: "default", Subsets: []*kubemodel.EndpointSubset{{
		Addresses: []*kubemodel.EndpointAddress{
			{Ip: "10.1.1.2", TargetRef: &kubemodel.ObjectReference{Kind: "Pod", Name: "web-1"}},
			{Ip: "10.1.1.3", TargetRef: &kubemodel.ObjectReference{Kind: "Pod", Name: "web-2"}}},
		Ports: []*kubemodel.EndpointPort{{Name: "http", Port: 8080}}}}}
	if _, err := h.Update(&controller.KubeStateChange{Resource: kubemodel.ServiceResource,
		Key: kubemodel.ServiceKey("default", "web"), NewValue: svc}, controllertest.NewTxn()); err != nil {
		panic(err)
	}
	txn = controllertest.NewTxn()
	if _, err := h.Update(&controller.KubeStateChange{Resource: kubemodel.EndpointsResource,
		Key: kubemodel.EndpointsKey("default", "web"), NewValue: eps}, txn); err != nil {
		panic(err)
	}
	show("endpoints of default/web", txn)

	// One backend goes: the load-balanced mappings turn into static ones.
	eps.Subsets[0].Addresses = eps.Subsets[0].Addresses[:1]
	txn = controllertest.NewTxn()
	if _, err := h.Update(&controller.KubeStateChange{Resource: kubemodel.EndpointsResource,
		Key: kubemodel.EndpointsKey("default", "web"), NewValue: eps}, txn); err != nil {
		panic(err)
	}
	show("web-2 gone", txn)
	st := nat.Stats()
	fmt.Printf("services %d, mappings %d, backends %d, interfaces %d\n", st.Services, st.Mappings, st.Backends, st.Interfaces)
	// Output:
	// resync:
	//   vpp/nat44/global
	//   vpp/nat44/interface/uplink
	//   vpp/nat44/pool/172.30.1.254-172.30.1.254/twice-nat
	//   vpp/nat44/pool/if:uplink
	// endpoints of default/web:
	//   vpp/nat44/interface/pod-web-1
	//   vpp/nat44/interface/pod-web-2
	//   vpp/nat44/lb/tcp/10.96.0.10:80
	//   vpp/nat44/lb/tcp/192.168.16.1:30080
	// web-2 gone:
	//   vpp/nat44/interface/pod-web-2
	//   vpp/nat44/lb/tcp/10.96.0.10:80 (deleted)
	//   vpp/nat44/lb/tcp/192.168.16.1:30080 (deleted)
	//   vpp/nat44/static/tcp/10.96.0.10:80
	//   vpp/nat44/static/tcp/192.168.16.1:30080
	// services 1, mappings 2, backends 2, interfaces 2
}

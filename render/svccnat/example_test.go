package svccnat_test

import (
	"fmt"
	"net/netip"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/render/svccnat"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/svcprocessor/svcprocessortest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// The renderer under a service processor, driven as the event loop drives
// them: a resync, then a dual-stack NodePort service with Maglev and one
// backend of each family, then a pod with a hostPort. It prints the
// translations each transaction writes.
func Example() {
	thisNode := svccnat.NodeIPsFunc(func() []netip.Addr {
		return []netip.Addr{netip.MustParseAddr("192.168.16.1"), netip.MustParseAddr("fd00:16::1")}
	})
	cn, err := svccnat.New(thisNode, svccnat.SNATAddrsFunc(thisNode), svccnat.Config{NodeName: "node-1", Uplink: "uplink",
		ExcludedPrefixes: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00:1::/48")}})
	if err != nil {
		panic(err)
	}
	subnets := svcprocessortest.NewSubnets(netip.MustParsePrefix("10.1.1.0/24"), netip.MustParsePrefix("10.1.0.0/16"))
	sp, err := svcprocessor.New(subnets, thisNode, svcprocessortest.NewPods(), svcprocessor.Config{NodeName: "node-1"})
	if err != nil {
		panic(err)
	}
	if err := sp.RegisterRenderer(cn); err != nil {
		panic(err)
	}
	show := func(what string, txn *controllertest.Txn) {
		fmt.Println(what + ":")
		for _, k := range txn.Keys() {
			switch m := txn.Get(k).(type) {
			case nil:
				fmt.Println(" ", k, "(deleted)")
			case *vppmodel.CnatTranslation:
				fmt.Print("  ", vppmodel.CnatProtocolName(m.Protocol), " ", netip.AddrPortFrom(netip.MustParseAddr(m.Vip), uint16(m.Port)), " ->")
				for _, p := range m.Paths {
					fmt.Print(" ", netip.AddrPortFrom(netip.MustParseAddr(p.DstIp), uint16(p.DstPort)))
				}
				fmt.Println(" ", m.LbType)
			default:
				fmt.Println(" ", k)
			}
		}
	}

	// The loop's resync: the processor's handler, then the renderer's.
	ksd := controller.NewKubeStateData()
	txn := controllertest.NewTxn()
	if err := sp.Handler().Resync(controller.NewDBResync(), ksd, 1, txn); err != nil {
		panic(err)
	}
	if err := cn.Resync(controller.NewDBResync(), ksd, 1, txn); err != nil {
		panic(err)
	}
	show("resync", txn)

	svc := &kubemodel.Service{Name: "web", Namespace: "default", Type: kubemodel.Service_NODE_PORT,
		ClusterIps:  []string{"10.96.0.10", "fd00:96::10"},
		Annotations: map[string]string{svccnat.LBAnnotation: svccnat.LBMaglev},
		Ports:       []*kubemodel.ServicePort{{Name: "http", Port: 80, TargetPortNumber: 8080, NodePort: 30080}}}
	eps := &kubemodel.Endpoints{Name: "web", Namespace: "default", Subsets: []*kubemodel.EndpointSubset{{
		Addresses: []*kubemodel.EndpointAddress{{Ip: "10.1.1.2", NodeName: "node-1"}, {Ip: "fd00:1:0:1::2", NodeName: "node-1"}},
		Ports:     []*kubemodel.EndpointPort{{Name: "http", Port: 8080}},
	}}}
	txn = controllertest.NewTxn()
	for _, ch := range []*controller.KubeStateChange{
		{Resource: kubemodel.ServiceResource, Key: kubemodel.ServiceKey("default", "web"), NewValue: svc},
		{Resource: kubemodel.EndpointsResource, Key: kubemodel.EndpointsKey("default", "web"), NewValue: eps},
	} {
		if _, err := sp.Handler().Update(ch, txn); err != nil {
			panic(err)
		}
	}
	show("a dual-stack NodePort service", txn)

	pod := &kubemodel.Pod{Name: "dns", Namespace: "default", NodeName: "node-1", IpAddresses: []string{"10.1.1.3"},
		Containers: []*kubemodel.Container{{Name: "dns", Ports: []*kubemodel.ContainerPort{
			{HostPort: 5353, ContainerPort: 53, Protocol: kubemodel.Protocol_UDP}}}}}
	txn = controllertest.NewTxn()
	if _, err := cn.Update(&controller.KubeStateChange{Resource: kubemodel.PodResource, Key: kubemodel.PodKey("default", "dns"),
		NewValue: pod}, txn); err != nil {
		panic(err)
	}
	show("a pod with a hostPort", txn)
	fmt.Println(cn.Problems())
	// Output:
	// resync:
	//   vpp/cnat/interface/cnat-anchor
	//   vpp/cnat/interface/uplink
	//   vpp/cnat/snat
	//   vpp/interface/cnat-anchor
	// a dual-stack NodePort service:
	//   tcp 10.96.0.10:80 -> 10.1.1.2:8080  MAGLEV
	//   tcp 192.168.16.1:30080 -> 10.1.1.2:8080  MAGLEV
	//   tcp [fd00:16::1]:30080 -> [fd00:1:0:1::2]:8080  MAGLEV
	//   tcp [fd00:96::10]:80 -> [fd00:1:0:1::2]:8080  MAGLEV
	// a pod with a hostPort:
	//   udp 192.168.16.1:5353 -> 10.1.1.3:53  DEFAULT
	// []
}

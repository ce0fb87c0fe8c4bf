package ipam_test

import (
	"fmt"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

// Node 5 with the default configuration: resync (as the event loop does at
// start-up), then allocate three pod IPs, persisting them to a store.
func Example() {
	// An agent uses a durable store: ipam/etcdstore or ipam/boltstore
	// (see their examples).
	store := &ipamtest.MemStore{}
	i, err := ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: store})
	if err != nil {
		panic(err)
	}
	// A pod from before the restart is recovered from the Kubernetes state.
	ks := controller.NewKubeStateData()
	ks[kubemodel.PodResource] = controller.KeyValuePairs{
		kubemodel.PodKey("default", "web-0"): &kubemodel.Pod{Namespace: "default", Name: "web-0", IpAddress: "10.1.5.2"},
	}
	if err := i.Resync(controller.NewDBResync(), ks, 1, controllertest.NewTxn()); err != nil {
		panic(err)
	}
	fmt.Println("pod subnet:", i.PodSubnetThisNode(), "gateway:", i.PodGatewayIP())
	fmt.Println("VPP-host link:", i.HostInterconnectIPInVPP(), i.HostInterconnectIPInLinux(), "NAT loopback:", i.NatLoopbackIP())
	nodeIP, _, _ := i.NodeIPAddress(5)
	fmt.Println("node IP:", nodeIP)

	for _, name := range []string{"web-1", "web-2", "web-3"} {
		ip, err := i.AllocatePodIP(kubemodel.PodID{Namespace: "default", Name: name}, "", "")
		if err != nil {
			panic(err)
		}
		fmt.Println(name, ip)
	}
	fmt.Println("persisted records:", len(store.Records()))
	// Output:
	// pod subnet: 10.1.5.0/24 gateway: 10.1.5.1
	// VPP-host link: 172.30.5.1 172.30.5.2 NAT loopback: 172.30.5.254
	// node IP: 192.168.16.5
	// web-1 10.1.5.3
	// web-2 10.1.5.4
	// web-3 10.1.5.5
	// persisted records: 4
}

// Kubelet re-creates the sandbox of pod web: the CNI ADD of the new sandbox
// (container c2) arrives before the CNI DEL of the old one (c1). The pod
// keeps its address, and only the DEL of the sandbox holding it releases
// it.
func ExampleIPAM_Update_sandboxRecreated() {
	i, err := ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: &ipamtest.MemStore{}})
	if err != nil {
		panic(err)
	}
	if err := i.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, controllertest.NewTxn()); err != nil {
		panic(err)
	}
	web := kubemodel.PodID{Namespace: "default", Name: "web"}
	for _, ev := range []controller.Event{
		controller.NewAddPodEvent(web, "c1", "/var/run/netns/c1"),
		controller.NewAddPodEvent(web, "c2", "/var/run/netns/c2"),
		controller.NewDeletePodEvent(web, "c1"),
		controller.NewDeletePodEvent(web, "c2"),
	} {
		desc, err := i.Update(ev, controllertest.NewTxn())
		if err != nil {
			panic(err)
		}
		fmt.Println(desc)
	}
	// Output:
	// allocated 10.1.5.2 for pod default/web
	// pod default/web keeps 10.1.5.2, now held by sandbox c2 (was c1)
	// kept 10.1.5.2 of pod default/web: held by sandbox c2, not by c1
	// released 10.1.5.2 of pod default/web
}

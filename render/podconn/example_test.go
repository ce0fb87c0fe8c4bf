package podconn_test

import (
	"context"
	"fmt"
	"log"
	"slices"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
	"github.com/vswitchkit/vswitchkit/render/podconn"
)

// A pod connected with af_packet: IPAM allocates its address, the handler
// puts its VPP interface (unnumbered to the gateway loopback), a static
// neighbor and a host route, and fills in what the pod server configures
// inside the pod. The values go to a recording southbound here; in an
// agent, the vppdriver applies them.
func Example() {
	addrs, err := ipam.New(ipamtest.NewNodeID(1), ipam.Config{})
	if err != nil {
		log.Fatal(err)
	}
	pods, err := podconn.New(addrs, podconn.Config{})
	if err != nil {
		log.Fatal(err)
	}
	var sb controllertest.Southbound
	loop, err := controller.New(nil, &sb, controller.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := loop.Register(addrs, pods); err != nil { // IPAM first
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- loop.Run(ctx) }()
	if err := loop.PushEvent(controller.NewDBResync()); err != nil {
		log.Fatal(err)
	}

	// What the pod server does: it made a veth pair, veth-web is the host end.
	add := controller.NewAddPodEvent(kubemodel.PodID{Namespace: "default", Name: "web"}, "c0ffee", "/var/run/netns/web")
	add.HostIfName = "veth-web"
	if err := loop.PushEvent(add); err != nil {
		log.Fatal(err)
	}
	if err := add.Wait(); err != nil {
		log.Fatal(err)
	}
	cancel()
	<-done

	pi := add.Interfaces[0]
	fmt.Printf("pod side: %s %s %v MAC %s, gateway MAC %s, routes %v\n", pi.HostName, pi.Type, pi.IPAddresses, pi.MAC, pi.GatewayMAC, add.Routes)
	name, _ := pods.PodInterface(add.Pod)
	fmt.Println("VPP interface:", name)
	var keys []string
	for k := range sb.State() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Println(k)
	}
	// Output:
	// pod side: eth0 af_packet [10.1.1.2/32] MAC 02:fd:6b:10:30:61, gateway MAC 02:fe:6b:10:30:61, routes [{0.0.0.0/0 10.1.1.1}]
	// VPP interface: pod-6ad2516ced2a
	// vpp/interface/pod-6ad2516ced2a
	// vpp/interface/pod-gw
	// vpp/neighbor/pod-6ad2516ced2a/10.1.1.2
	// vpp/route/0/10.1.1.2/32
}

package nodesync_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
)

// Two nodes join a cluster kept in the in-memory DB: the first gets ID 1,
// the second ID 2. The first publishes its VPP IP, which the second sees.
func ExampleNew() {
	db := nodesynctest.NewMemDB()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := func(name string) (*nodesync.NodeSync, chan error) {
		// In an agent, loop is the controller event loop and the NodeSync is
		// registered as its first event handler.
		loop := &controllertest.EventRecorder{}
		ns, err := nodesync.New(name, db, loop, nodesync.Config{})
		if err != nil {
			panic(err)
		}
		done := make(chan error, 1)
		go func() { done <- ns.Run(ctx) }()
		<-ns.Ready()
		// The start-up resync (normally the loop's first DBResync).
		resync := controller.NewDBResync()
		resync.KubeState[kubemodel.NodeResource] = controller.KeyValuePairs{
			kubemodel.NodeKey(name): &kubemodel.Node{Name: name, PodCidrs: []string{"10.1.0.0/24"}},
		}
		if err := ns.Resync(resync, resync.KubeState, 1, controllertest.NewTxn()); err != nil {
			panic(err)
		}
		return ns, done
	}

	a, doneA := start("node-a")
	fmt.Println("node-a ID:", a.GetNodeID())
	vppIP := nodesync.IPWithNetwork{
		Address: netip.MustParseAddr("192.168.16.1"),
		Network: netip.MustParsePrefix("192.168.16.0/24"),
	}
	if err := a.PublishNodeIPs(nodesync.IPsWithNetworks{vppIP}, nodesync.IPv4); err != nil {
		panic(err)
	}

	b, doneB := start("node-b")
	fmt.Println("node-b ID:", b.GetNodeID())
	fmt.Println(b.GetAllNodes()["node-a"])

	cancel()
	<-doneA
	<-doneB
	// Output:
	// node-a ID: 1
	// node-b ID: 2
	// node node-a (ID 1, VPP IPs [192.168.16.1 (192.168.16.0/24)], management IPs [], pod CIDRs [])
}

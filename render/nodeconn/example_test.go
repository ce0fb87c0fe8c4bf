package nodeconn_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"slices"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// cluster is a fixed view of the cluster's nodes (nodesync.NodeSync in an
// agent).
type cluster struct {
	id    uint32
	nodes nodesync.Nodes
}

func (c cluster) GetNodeID() uint32           { return c.id }
func (c cluster) GetAllNodes() nodesync.Nodes { return c.nodes.Clone() }

// The node connectivity of node 1 in a cluster of two nodes: its uplink
// with the node IP, its VXLAN loopback, and the tunnel, next-hop neighbor
// and routes to node 2's pod and VPP-host subnets. The values go to a
// recording southbound here; in an agent, the vppdriver applies them.
func Example() {
	at := func(ip, network string) nodesync.IPsWithNetworks {
		return nodesync.IPsWithNetworks{{Address: netip.MustParseAddr(ip), Network: netip.MustParsePrefix(network)}}
	}
	nodes := cluster{id: 1, nodes: nodesync.Nodes{
		"node-1": {ID: 1, Name: "node-1", VppIPAddresses: at("192.168.16.1", "192.168.16.0/24")},
		"node-2": {ID: 2, Name: "node-2", VppIPAddresses: at("192.168.16.2", "192.168.16.0/24")},
	}}
	addrs, err := ipam.New(ipamtest.NewNodeID(1), ipam.Config{})
	if err != nil {
		log.Fatal(err)
	}
	h, err := nodeconn.New(nodes, nil, addrs, nodeconn.Config{Uplink: nodeconn.Uplink{AfPacketHostIf: "eth1"}})
	if err != nil {
		log.Fatal(err)
	}
	var sb controllertest.Southbound
	loop, err := controller.New(nil, &sb, controller.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := loop.Register(addrs, h); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- loop.Run(ctx) }()
	if err := loop.PushEvent(controller.NewDBResync()); err != nil {
		log.Fatal(err)
	}
	barrier := controller.NewExternalConfigChange("example", true)
	if err := loop.PushEvent(barrier); err != nil {
		log.Fatal(err)
	}
	if err := barrier.Wait(); err != nil {
		log.Fatal(err)
	}
	cancel()
	<-done

	state := sb.State()
	keys := make([]string, 0, len(state))
	for k := range state {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch v := state[k].(type) {
		case *vppmodel.Interface:
			if x := v.GetVxlan(); x != nil {
				fmt.Println(k, v.GetType(), x.GetSrcAddress(), "->", x.GetDstAddress(), "unnumbered to", v.GetUnnumbered())
			} else {
				fmt.Println(k, v.GetType(), v.GetIpAddresses())
			}
		case *vppmodel.Route:
			fmt.Println(k, "via", v.GetPaths()[0].GetNextHop(), v.GetPaths()[0].GetOutgoingInterface())
		default:
			fmt.Println(k)
		}
	}
	// Output:
	// vpp/interface/uplink AF_PACKET [192.168.16.1/24]
	// vpp/interface/vxlan LOOPBACK [192.168.30.1/32]
	// vpp/interface/vxlan-2 VXLAN_TUNNEL 192.168.16.1 -> 192.168.16.2 unnumbered to vxlan
	// vpp/neighbor/vxlan-2/192.168.30.2
	// vpp/route/0/10.1.2.0/24 via 192.168.30.2 vxlan-2
	// vpp/route/0/172.30.2.0/24 via 192.168.30.2 vxlan-2
}

package nodeconn_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"go.fd.io/govpp/adapter"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// bigLayout is an IPAM layout with room for 16k nodes.
var bigLayout = ipam.Config{
	PodSubnetCIDR:        netip.MustParsePrefix("10.0.0.0/8"),
	VPPHostSubnetCIDR:    netip.MustParsePrefix("100.64.0.0/10"),
	NodeInterconnectCIDR: netip.MustParsePrefix("192.168.0.0/16"),
	VXLANCIDR:            netip.MustParsePrefix("172.16.0.0/16"),
	ServiceCIDR:          netip.MustParsePrefix("198.18.0.0/16"),
}

func benchNode(id uint32) *nodesync.Node {
	a := netip.AddrFrom4([4]byte{192, 168, byte(id >> 8), byte(id)})
	return &nodesync.Node{ID: id, Name: fmt.Sprintf("node-%d", id),
		VppIPAddresses: nodesync.IPsWithNetworks{{Address: a, Network: netip.MustParsePrefix("192.168.0.0/16")}}}
}

// BenchmarkNodeJoinLeave: one node joins and leaves (two NodeUpdates,
// each through the controller loop, the handler and the driver into the
// VPP stand-in) while n nodes are installed (n tunnels, neighbors and 2n
// routes). The cost of a join or leave should not grow with n.
func BenchmarkNodeJoinLeave(b *testing.B) {
	for _, n := range []int{500, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			all := nodesync.Nodes{}
			for id := uint32(1); id <= uint32(n); id++ {
				all[fmt.Sprintf("node-%d", id)] = benchNode(id)
			}
			addrs, err := ipam.New(ipamtest.NewNodeID(1), bigLayout)
			if err != nil {
				b.Fatal(err)
			}
			h, err := nodeconn.New(cluster{id: 1, nodes: all}, nil, addrs, nodeconn.Config{})
			if err != nil {
				b.Fatal(err)
			}
			vpp := vppsim.New(vppsim.Config{})
			d, err := vppdriver.New(func() adapter.VppAPI { return vpp.NewAdapter() }, vppdriver.Config{})
			if err != nil {
				b.Fatal(err)
			}
			loop, err := controller.New(nil, d, controller.Config{HistorySize: -1})
			if err != nil {
				b.Fatal(err)
			}
			if err := loop.Register(addrs, h); err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); _ = d.Run(ctx) }()
			go func() { defer wg.Done(); _ = loop.Run(ctx) }()
			defer func() { cancel(); wg.Wait() }()
			barrier := func() {
				ev := controller.NewExternalConfigChange("bench", true)
				if err := loop.PushEvent(ev); err != nil {
					b.Fatal(err)
				}
				if err := ev.Wait(); err != nil {
					b.Fatal(err)
				}
			}
			if err := loop.PushEvent(controller.NewDBResync()); err != nil {
				b.Fatal(err)
			}
			barrier()
			for d.Stats().Configured < 4*(n-1)+1 {
				barrier() // the driver connects and applies the resync
			}
			joiner := benchNode(uint32(n + 1))
			b.ResetTimer()
			for range b.N {
				for _, ev := range []*nodesync.NodeUpdate{{NodeName: joiner.Name, NewState: joiner}, {NodeName: joiner.Name, PrevState: joiner}} {
					if err := loop.PushEvent(ev); err != nil {
						b.Fatal(err)
					}
				}
				barrier()
			}
			b.StopTimer()
			if st := d.Stats(); st.Configured != 4*(n-1)+1 || st.Failed != 0 {
				b.Fatalf("driver: %+v", st)
			}
		})
	}
}

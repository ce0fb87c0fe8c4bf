package gobgp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// A Manager applies a policy; what GoBGP cannot do is a validation error,
// and a family the node has no next hop for is reported, not sent.
func ExampleManager() {
	m, err := gobgp.New(gobgp.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	state := &bgp.ControlPlaneState{
		Node: &kubemodel.Node{Name: "worker-1", PodCidrs: []string{"10.244.1.0/24", "fd00:10:244:1::/64"}},
		IPv4: net.ParseIP("127.0.0.1"), // no IPv6 address
	}
	policy := &bgp.PeeringPolicy{Name: "example", VirtualRouters: []bgp.VirtualRouter{{
		LocalASN: 65001, ExportPodCIDR: true,
		Neighbors: []bgp.Neighbor{{PeerAddress: netip.MustParseAddr("127.0.0.2"), PeerASN: 65002, ConnectRetryTime: time.Second}},
	}}}
	for {
		err = m.ConfigurePeers(ctx, policy, state)
		if !errors.Is(err, gobgp.ErrNotRunning) { // Run has not started yet
			break
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Println(err)

	policy.VirtualRouters[0].Neighbors[0].ConnectRetryTime = 5 * time.Second
	fmt.Println(m.ConfigurePeers(ctx, policy, state))
	peers, _ := m.Peers(ctx)
	for _, p := range peers {
		fmt.Println(p.PeerAddress, "AS", p.PeerASN, "disabled:", p.Disabled)
	}
	fmt.Println(m.ConfigurePeers(ctx, nil, nil)) // withdraw everything
	// Output:
	// policy "example": virtualRouters[0].neighbors[0].connectRetryTime: must be at least 2s: GoBGP does not retry connections more often (got 1s)
	// <nil>
	// 127.0.0.2 AS 65002 disabled: map[ipv6-unicast:the node has no IPv6 address for the next hop of IPv6 routes]
	// <nil>
}

package bgpstatus_test

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/bgpstatus"
)

// A publisher writes the node's status under its key; here the source is a
// function (a bgp.Controller in an agent) and the writer prints what etcd
// would get (bgpstatus.EtcdWriter in an agent).
func Example() {
	src := bgpstatus.SourceFunc(func(context.Context) (*bgp.NodeStatus, error) { return status(3), nil })
	ctx, cancel := context.WithCancel(context.Background())
	w := bgpstatus.WriterFunc(func(_ context.Context, key string, value []byte) error {
		var m bgpmodel.NodeStatus
		_ = proto.Unmarshal(value, &m)
		p := m.GetBgpInstances()[0].GetPeers()[0]
		fmt.Println(key, m.GetSource(), p.GetName(), p.GetPeeringState(), p.GetRouteCount()[0].GetAfi(), p.GetRouteCount()[0].GetReceived())
		cancel()
		return nil
	})
	p, _ := bgpstatus.New("node-1", src, w, bgpstatus.Config{})
	fmt.Println(p.Run(ctx))
	// Output:
	// /vswitchkit/bgpstatus/node-1 BGPClusterConfig/cc tor Established ipv4 3
	// context canceled
}

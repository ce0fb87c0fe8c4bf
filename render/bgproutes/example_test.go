package bgproutes_test

import (
	"fmt"
	"net/netip"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/render/bgproutes"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// noLoop stands in for the event loop: the example calls the handler
// directly, as the loop would.
type noLoop struct{}

func (noLoop) PushEvent(controller.Event) error { return nil }

// The speaker learned a default route and a route inside the cluster's pod
// range; the handler's transaction holds the default route, via the
// uplink.
func Example() {
	learned := &fakeLearned{sig: bgp.NewSignaler()}
	learned.set(lr("0.0.0.0/0", "192.168.16.254"), lr("10.1.7.0/24", "192.168.16.254"))
	h, _ := bgproutes.New(learned, learned.sig, noLoop{}, bgproutes.Config{Uplink: "uplink",
		Reserved: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}})
	txn := controllertest.NewTxn()
	_ = h.Resync(controller.NewDBResync(), nil, 1, txn)
	for _, k := range txn.Keys() {
		p := txn.Get(k).(*vppmodel.Route).GetPaths()[0]
		fmt.Println(k, "via", p.GetOutgoingInterface(), p.GetNextHop())
	}
	// Output:
	// vpp/route/0/0.0.0.0/0 via uplink 192.168.16.254
}

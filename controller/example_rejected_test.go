package controller_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// An invalid value in the external configuration does not stop the agent:
// the southbound rejects that key and applies the rest, the loop reports the
// key and does not heal it, and a corrected value clears the report.
func ExampleLoop_RejectedKeys() {
	sb := &controllertest.Southbound{RejectKey: func(_ string, v proto.Message) error {
		_, err := netip.ParseAddr(v.(*wrapperspb.StringValue).GetValue())
		return err
	}}
	loop, err := controller.New(nil, sb, controller.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()

	db := controller.NewDBResync()
	db.ExternalConfig["vpp/nexthop/a"] = wrapperspb.String("10.0.0.1")
	db.ExternalConfig["vpp/nexthop/b"] = wrapperspb.String("10.0.0.300")
	_ = loop.PushEvent(db)
	change := controller.NewExternalConfigChange("user", true)
	change.UpdatedKVs["vpp/nexthop/c"] = wrapperspb.String("10.0.0.3")
	_ = loop.PushEvent(change)
	fmt.Println("change:", change.Wait())
	fmt.Println("applied:", slices.Sorted(maps.Keys(sb.State())))
	fmt.Println("rejected:", loop.RejectedKeys())
	fmt.Println("healthy:", loop.Healthy())

	fix := controller.NewExternalConfigChange(controller.RemoteDBSource, true)
	fix.UpdatedKVs["vpp/nexthop/b"] = wrapperspb.String("10.0.0.2")
	_ = loop.PushEvent(fix)
	fmt.Println("fix:", fix.Wait())
	fmt.Println("rejected:", loop.RejectedKeys())
	fmt.Println("healthy:", loop.Healthy())
	st := loop.Stats()
	fmt.Println("healing scheduled:", st.HealingScheduled, "permanent errors:", st.PermanentErrors)

	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// change: <nil>
	// applied: [vpp/nexthop/a vpp/nexthop/c]
	// rejected: map[vpp/nexthop/b:ParseAddr("10.0.0.300"): IPv4 field has value >255]
	// healthy: controller: degraded: 1 keys rejected, the first key vpp/nexthop/b: ParseAddr("10.0.0.300"): IPv4 field has value >255
	// fix: <nil>
	// rejected: map[]
	// healthy: <nil>
	// healing scheduled: 0 permanent errors: 1
	// Run: context canceled
}

package controller_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// An application that embeds the loop waits until the start-up resync was
// processed before it reports ready, and uses Sync as a barrier: once it
// returns, every event pushed before it has been processed.
func ExampleLoop_WaitStartupResync() {
	sb := &controllertest.Southbound{}
	loop, err := controller.New(nil, sb, controller.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()

	// The watcher pushes the start-up resync; an event pushed before it
	// waits for it.
	change := controller.NewExternalConfigChange("user", false)
	change.UpdatedKVs["vpp/b"] = wrapperspb.String("2")
	_ = loop.PushEvent(change)
	db := controller.NewDBResync()
	db.ExternalConfig["vpp/a"] = wrapperspb.String("1")
	_ = loop.PushEvent(db)

	waitCtx, cancelWait := context.WithTimeout(ctx, time.Minute)
	defer cancelWait()
	fmt.Println("start-up resync:", loop.WaitStartupResync(waitCtx))
	fmt.Println("sync:", loop.Sync(waitCtx))
	fmt.Println("applied:", slices.Sorted(maps.Keys(sb.State())))

	cancel() // Ctrl-C
	fmt.Println("Run:", <-done)
	// Output:
	// start-up resync: <nil>
	// sync: <nil>
	// applied: [vpp/a vpp/b]
	// Run: context canceled
}

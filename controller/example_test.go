package controller_test

import (
	"context"
	"fmt"
	"sort"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A handler that keeps one route per pod in the desired state: the loop
// commits one transaction per event to the southbound.
func Example() {
	routes := &controller.HandlerFuncs{
		Name: "pod-routes",
		ResyncFunc: func(_ controller.Event, ks controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
			for _, v := range ks[kubemodel.PodResource] {
				pod := v.(*kubemodel.Pod)
				txn.Put("route/"+pod.GetIpAddress(), wrapperspb.String(pod.ID().String()))
			}
			return nil
		},
		UpdateFunc: func(ev controller.Event, txn controller.UpdateOperations) (string, error) {
			ch, ok := ev.(*controller.KubeStateChange)
			if !ok || ch.Resource != kubemodel.PodResource {
				return "", nil
			}
			if prev, ok := ch.PrevValue.(*kubemodel.Pod); ok {
				txn.Delete("route/" + prev.GetIpAddress())
			}
			if pod, ok := ch.NewValue.(*kubemodel.Pod); ok {
				txn.Put("route/"+pod.GetIpAddress(), wrapperspb.String(pod.ID().String()))
			}
			return "pod route", nil
		},
	}

	sb := &controllertest.Southbound{}
	loop, err := controller.New([]controller.EventHandler{routes}, sb, controller.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- loop.Run(context.Background()) }()

	web := &kubemodel.Pod{Namespace: "default", Name: "web", IpAddress: "10.1.1.2"}
	db := controller.NewDBResync()
	db.KubeState[kubemodel.PodResource] = controller.KeyValuePairs{kubemodel.PodKey("default", "web"): web}
	_ = loop.PushEvent(db)
	if err := loop.WaitStartupResync(context.Background()); err != nil {
		fmt.Println("start-up resync:", err)
	}
	_ = loop.PushEvent(&controller.KubeStateChange{
		Resource: kubemodel.PodResource, Key: kubemodel.PodKey("default", "api"),
		NewValue: &kubemodel.Pod{Namespace: "default", Name: "api", IpAddress: "10.1.1.3"},
	})
	shutdown := controller.NewShutdownEvent()
	_ = loop.PushEvent(shutdown)
	_ = shutdown.Wait()
	fmt.Println("Run:", <-done)

	for _, c := range sb.Commits() {
		keys := make([]string, 0, len(c.Values))
		for k := range c.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Println(c.Seq, c.Kind, c.EventName, keys)
	}
	for _, r := range loop.History().Last(3) {
		fmt.Printf("event %d: %s (%s) err=%v\n", r.Seq, r.Name, r.Method, r.Err)
	}
	// Output:
	// Run: <nil>
	// 1 Resync Database Resync [route/10.1.1.2]
	// 2 Update Kubernetes State Change [route/10.1.1.3]
	// event 1: Database Resync (FullResync) err=<nil>
	// event 2: Kubernetes State Change (Update) err=<nil>
	// event 3: Shutdown (Update) err=<nil>
}

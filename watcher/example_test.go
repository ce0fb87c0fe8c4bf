package watcher_test

import (
	"context"
	"fmt"
	"os"
	"sort"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	"github.com/vswitchkit/vswitchkit/watcher"
	"google.golang.org/protobuf/proto"
)

// The watcher delivers the state under the prefix as one DBResync, then
// every change as a KubeStateChange. An in-process etcd stands in for the
// cluster's, and an EventRecorder for the event loop.
func Example() {
	dir, _ := os.MkdirTemp("", "watcher-example")
	defer os.RemoveAll(dir)
	srv, err := etcdtest.Start(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	cli, _ := srv.Client()
	defer cli.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	putPod := func(ns, name, ip string) {
		v, _ := proto.Marshal(&kubemodel.Pod{Namespace: ns, Name: name, IpAddress: ip})
		cli.Put(ctx, "/vswitchkit/"+kubemodel.PodKey(ns, name), string(v))
	}
	putPod("default", "web", "10.1.1.2")
	putPod("default", "db", "10.1.1.3")

	loop := &controllertest.EventRecorder{} // a controller.Loop in an application
	w, err := watcher.NewWithClient(cli, loop, watcher.Config{KubeStatePrefix: "/vswitchkit/"})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	evs, _ := loop.WaitFor(ctx, 1)
	resync := evs[0].(*controller.DBResync)
	var keys []string
	for key, v := range resync.KubeState[kubemodel.PodResource] {
		keys = append(keys, key+" "+v.(*kubemodel.Pod).GetIpAddress())
	}
	sort.Strings(keys)
	fmt.Println(resync.GetName(), "local:", resync.Local)
	for _, k := range keys {
		fmt.Println(" ", k)
	}

	putPod("default", "web", "10.1.1.9")
	evs, _ = loop.WaitFor(ctx, 2)
	change := evs[1].(*controller.KubeStateChange)
	fmt.Println(change.String(), change.PrevValue.(*kubemodel.Pod).GetIpAddress(), "->", change.NewValue.(*kubemodel.Pod).GetIpAddress())

	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// Database Resync local: false
	//   k8s/pod/default/db 10.1.1.3
	//   k8s/pod/default/web 10.1.1.2
	// Kubernetes State Change: update pod k8s/pod/default/web 10.1.1.2 -> 10.1.1.9
	// Run: context canceled
}

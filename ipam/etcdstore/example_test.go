package etcdstore_test

import (
	"context"
	"fmt"
	"os"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/etcdstore"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// IPAM of node worker-5 persisting its allocations in etcd (here an
// in-process etcd; an agent uses its etcd client).
func Example() {
	dir, _ := os.MkdirTemp("", "etcdstore-example")
	defer os.RemoveAll(dir)
	srv, err := etcdtest.Start(dir)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	cli, err := srv.Client()
	if err != nil {
		panic(err)
	}
	defer cli.Close()

	store, err := etcdstore.New(cli, "worker-5", etcdstore.Config{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- store.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-store.Owned() // or let the first Resync wait (bounded by ipam.Config.StoreTimeout)

	i, err := ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: store})
	if err != nil {
		panic(err)
	}
	if err := i.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, nil); err != nil {
		panic(err)
	}
	for _, name := range []string{"web-0", "web-1", "web-2"} {
		ip, err := i.AllocatePodIP(kubemodel.PodID{Namespace: "default", Name: name}, "", "")
		if err != nil {
			panic(err)
		}
		fmt.Println(name, ip)
	}
	if err := i.ReleasePodIP(kubemodel.PodID{Namespace: "default", Name: "web-1"}); err != nil {
		panic(err)
	}
	resp, err := cli.Get(ctx, "/vswitchkit/ipam/worker-5/", clientv3.WithPrefix())
	if err != nil {
		panic(err)
	}
	for _, kv := range resp.Kvs {
		fmt.Printf("%s = %s\n", kv.Key, kv.Value)
	}
	// Output:
	// web-0 10.1.5.2
	// web-1 10.1.5.3
	// web-2 10.1.5.4
	// /vswitchkit/ipam/worker-5/default/web-0 = 10.1.5.2
	// /vswitchkit/ipam/worker-5/default/web-2 = 10.1.5.4
}

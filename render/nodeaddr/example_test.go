package nodeaddr_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"go.fd.io/govpp/adapter"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/boltstore"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/etcddb"
	"github.com/vswitchkit/vswitchkit/render/nodeaddr"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
	"github.com/vswitchkit/vswitchkit/watcher"
)

// A minimal agent: an embedded etcd holding the Kubernetes state, the event
// loop committing to the VPP driver on the in-memory VPP stand-in, the etcd
// watcher feeding the loop (with a local mirror), nodesync allocating the
// node ID (with local state for starts without etcd), ipam with a durable
// store, and the service processor with a renderer that prints what it
// gets. Then a pod is added the way the CNI server adds one.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "agent-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// The cluster-wide etcd, with the Kubernetes state a reflector writes.
	etcd, err := embedetcd.Start(ctx, embedetcd.Config{UnsafeNoFsync: true})
	if err != nil {
		log.Fatal(err)
	}
	defer etcd.Close()
	cli, err := etcd.Client()
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	for key, value := range map[string]proto.Message{
		kubemodel.NodeKey("node-1"): &kubemodel.Node{Name: "node-1", Addresses: []*kubemodel.NodeAddress{
			{Type: kubemodel.NodeAddress_INTERNAL_IP, Address: "192.168.0.11"}}},
		kubemodel.ServiceKey("default", "db"): &kubemodel.Service{Name: "db", Namespace: "default",
			ClusterIps: []string{"10.96.0.10"}, Ports: []*kubemodel.ServicePort{{Name: "pg", Port: 5432, TargetPortNumber: 5432}}},
	} {
		raw, err := proto.Marshal(value)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := cli.Put(ctx, kubemodel.EtcdKey("", key), string(raw)); err != nil {
			log.Fatal(err)
		}
	}

	// VPP (here the stand-in) and the driver that programs it.
	vpp := vppsim.New(vppsim.Config{})
	driver, err := vppdriver.New(func() adapter.VppAPI { return vpp.NewAdapter() }, vppdriver.Config{})
	if err != nil {
		log.Fatal(err)
	}

	// The loop first, then the components that push events into it.
	loop, err := controller.New(nil, driver, controller.Config{})
	if err != nil {
		log.Fatal(err)
	}
	db, err := etcddb.NewFromClient(cli, etcddb.Config{})
	if err != nil {
		log.Fatal(err)
	}
	nodeSync, err := nodesync.New("node-1", db, loop, nodesync.Config{
		LocalState: nodesync.NewStateFile(filepath.Join(dir, "nodesync.json")),
	})
	if err != nil {
		log.Fatal(err)
	}
	store, err := boltstore.Open(filepath.Join(dir, "ipam.db"), boltstore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	pods, err := ipam.New(nodeSync, ipam.Config{Store: store})
	if err != nil {
		log.Fatal(err)
	}
	nodeIPs := nodeaddr.NewNodeIPSet(nodeSync, nodeaddr.NodeIPSetConfig{})
	// The pod handler (vppdriver's reference handlers) names the VPP
	// interface of each pod; this agent has none, so a function stands in.
	podIfs := svcprocessor.PodInterfacesFunc(func(pod kubemodel.PodID) (string, bool) { return "pod-" + pod.Name, true })
	services, err := svcprocessor.New(svcprocessor.SubnetsFromIPNet(pods), nodeIPs, podIfs,
		svcprocessor.Config{NodeName: "node-1"})
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	var rendered []string
	err = services.RegisterRenderer(svcprocessor.RendererFunc(func(ev svcprocessor.RenderEvent) error {
		mu.Lock()
		defer mu.Unlock()
		if ev.Kind == svcprocessor.Resync {
			for _, s := range ev.Snapshot.Services {
				rendered = append(rendered, fmt.Sprintf("%s %v", s.ID, s.ClusterIPs))
			}
		}
		return nil
	}))
	if err != nil {
		log.Fatal(err)
	}
	// Dependency order: node IDs, pod IPs, node addresses, services.
	if err := loop.Register(nodeSync, pods, nodeIPs, services.Handler()); err != nil {
		log.Fatal(err)
	}
	w, err := watcher.NewWithClient(cli, loop, watcher.Config{MirrorPath: filepath.Join(dir, "mirror.db")})
	if err != nil {
		log.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return driver.Run(gctx) })
	g.Go(func() error { return nodeSync.Run(gctx) })
	g.Go(func() error { return w.Run(gctx) })
	g.Go(func() error { return loop.Run(gctx) })
	// The start-up resync (the watcher's DBResync) processed; a forgotten
	// loop.Run is named within seconds (controller.ErrNotRunning).
	if err := loop.WaitStartupResync(gctx); err != nil {
		log.Fatal(err)
	}

	// What the CNI server does for a new pod.
	add := controller.NewAddPodEvent(kubemodel.PodID{Namespace: "default", Name: "web"}, "c0ffee", "/var/run/netns/web")
	if err := loop.PushEvent(add); err != nil {
		log.Fatal(err)
	}
	if err := add.Wait(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("node-1 has node ID %d, pod subnet %v\n", nodeSync.GetNodeID(), pods.PodSubnetThisNode())
	fmt.Printf("pod default/web: %v\n", pods.GetPodIP(add.Pod))
	fmt.Printf("node addresses: %v\n", nodeIPs.NodeIPs())
	mu.Lock()
	slices.Sort(rendered)
	fmt.Printf("services rendered: %v\n", rendered)
	mu.Unlock()

	stop()
	if err := g.Wait(); err != nil && err != context.Canceled {
		log.Fatal(err)
	}
	// Output:
	// node-1 has node ID 1, pod subnet 10.1.1.0/24
	// pod default/web: 10.1.1.2/24
	// node addresses: [192.168.0.11]
	// services rendered: [default/db [10.96.0.10]]
}

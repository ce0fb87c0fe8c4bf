package clustersim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/examples/scale/internal/synth"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/etcdstore"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/etcddb"
	"github.com/vswitchkit/vswitchkit/watcher"
)

// NodeName returns the name of simulated node i (0-based).
func NodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// agent is the cluster-facing part of one node's agent: its own etcd
// client, the real watcher, nodesync (with its etcd adapter) and IPAM
// with the etcd store, registered in a real event loop (nodesync, IPAM
// and a handler that publishes the node's VPP address after the start-up
// resync, as render/nodeconn does) whose southbound discards commits.
// There is no VPP.
type agent struct {
	idx   int
	name  string
	cli   *clientv3.Client
	rpc   rpcCounters
	loop  *controller.Loop
	ns    *nodesync.NodeSync
	store *etcdstore.Store
	ipam  *ipam.IPAM
	w     *watcher.Watcher

	readyAt atomic.Int64 // unix nanos; 0 until Ready
	// Unix nanos of the phases of the start: nodesync Ready (ID claimed,
	// records read), the watcher's first DBResync pushed, the IPAM store
	// owning the node's records.
	nodesyncAt, snapshotAt, ownedAt atomic.Int64
	published                       atomic.Bool
	failed                          atomic.Pointer[error] // a component's Run that ended with an error while running

	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// agentOptions are the settings shared by the agents of a group.
type agentOptions struct {
	Endpoints []string
	Layout    int
	LeaseTTL  time.Duration
	Logger    *slog.Logger
}

// start creates the agent's client and components and runs them; it
// returns once they run. onReady is called once when the agent is Ready.
func startAgent(ctx context.Context, idx int, o agentOptions, onReady func(*agent)) (*agent, error) {
	a := &agent{idx: idx, name: NodeName(idx)}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: o.Endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithStatsHandler(&a.rpc)},
	})
	if err != nil {
		return nil, fmt.Errorf("agent %s: etcd client: %w", a.name, err)
	}
	a.cli = cli
	log := o.Logger.With(slog.String("node", a.name))
	a.loop, err = controller.New(nil, controller.SouthboundFunc(func(context.Context, *controller.Commit) (uint64, error) { return 0, nil }),
		controller.Config{Logger: log, HistorySize: -1})
	if err != nil {
		return nil, err
	}
	db, err := etcddb.NewFromClient(cli, etcddb.Config{Logger: log})
	if err != nil {
		return nil, err
	}
	nodeIPs := func(id uint32) (nodesync.IPsWithNetworks, error) {
		return nodesync.IPsWithNetworks{{Address: synth.NodeIP(id), Network: synth.NodeInterconnectCIDR}}, nil
	}
	// The agent's wiring: the VPP address goes with the claim of the ID.
	if a.ns, err = nodesync.New(a.name, db, a.loop, nodesync.Config{Logger: log, InitialNodeIPs: nodeIPs}); err != nil {
		return nil, err
	}
	if a.store, err = etcdstore.New(cli, a.name, etcdstore.Config{Logger: log, LeaseTTL: o.LeaseTTL}); err != nil {
		return nil, err
	}
	ipamCfg := synth.IPAMConfig()
	ipamCfg.Store, ipamCfg.Logger = a.store, log
	if a.ipam, err = ipam.New(a.ns, ipamCfg); err != nil {
		return nil, err
	}
	publisher := &controller.HandlerFuncs{
		Name:    "publish-node-ip",
		Handles: func(ev controller.Event) bool { return ev.Method() == controller.FullResync },
		ResyncFunc: func(_ controller.Event, _ controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
			if a.published.Load() {
				return nil
			}
			ips, _ := nodeIPs(a.ns.GetNodeID())
			if err := a.ns.PublishNodeIPsContext(controller.ContextOf(txn), ips, nodesync.IPv4); err != nil {
				return err
			}
			a.published.Store(true)
			a.readyAt.Store(time.Now().UnixNano())
			onReady(a)
			return nil
		},
	}
	if err := a.loop.Register(a.ns, a.ipam, publisher); err != nil {
		return nil, err
	}
	// The agent's wiring: this node's pods.
	wcfg := watcher.Config{
		NodeName:             a.name,
		ExternalConfigPrefix: "/vswitchkit/config/" + a.name + "/",
		Logger:               log,
	}
	// The agents keep their own node's Kubernetes node object only. etcd
	// sends each of them every node object as it sends a real agent, but
	// N agents' decoded copies of N node objects (N² of them, 25 million
	// at 5000 nodes) would not fit in this machine's memory; a real agent
	// keeps them, on a node of its own.
	ownNode := kubemodel.NodeKey(a.name)
	wcfg.Keep = func(resource, key string, _ []byte) bool {
		return resource != kubemodel.NodeResource || key == ownNode
	}
	first := controller.EventLoop(pushFunc(func(ev controller.Event) error {
		if _, ok := ev.(*controller.DBResync); ok {
			a.snapshotAt.CompareAndSwap(0, time.Now().UnixNano())
		}
		return a.loop.PushEvent(ev)
	}))
	if a.w, err = watcher.NewWithClient(cli, first, wcfg); err != nil {
		return nil, err
	}
	ctx, a.cancel = context.WithCancel(ctx)
	for _, p := range []struct {
		ch <-chan struct{}
		at *atomic.Int64
	}{{a.ns.Ready(), &a.nodesyncAt}, {a.store.Owned(), &a.ownedAt}} {
		a.wg.Go(func() {
			select {
			case <-p.ch:
				p.at.Store(time.Now().UnixNano())
			case <-ctx.Done():
			}
		})
	}
	for _, run := range []struct {
		name string
		f    func(context.Context) error
	}{{"loop", a.loop.Run}, {"nodesync", a.ns.Run}, {"ipam-etcdstore", a.store.Run}, {"watcher", a.w.Run}} {
		a.wg.Go(func() {
			err := run.f(ctx)
			if err != nil && !errors.Is(err, context.Canceled) {
				err = fmt.Errorf("%s: %w", run.name, err)
				a.failed.CompareAndSwap(nil, &err)
			}
		})
	}
	return a, nil
}

// stop stops the components and closes the client.
func (a *agent) stop() {
	if a.cancel != nil {
		a.cancel()
	}
	a.wg.Wait()
	if a.cli != nil {
		_ = a.cli.Close()
	}
}

// err returns what ended a component early, nil if nothing did.
func (a *agent) err() error {
	if p := a.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// pushFunc adapts a function into a controller.EventLoop.
type pushFunc func(controller.Event) error

func (f pushFunc) PushEvent(ev controller.Event) error { return f(ev) }

// phases returns the unix nanos of the phases of the agent's start.
func (a *agent) phases() map[string]int64 {
	return map[string]int64{"nodesync": a.nodesyncAt.Load(), "snapshot": a.snapshotAt.Load(),
		"ipam store": a.ownedAt.Load(), "ready": a.readyAt.Load()}
}

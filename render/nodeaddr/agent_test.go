package nodeaddr_test

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.uber.org/goleak"
	"golang.org/x/sync/errgroup"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/boltstore"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/etcddb"
	"github.com/vswitchkit/vswitchkit/render/nodeaddr"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
	"github.com/vswitchkit/vswitchkit/watcher"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// agent is the part of a vswitch agent that must work without etcd: the
// loop, the watcher with its mirror, nodesync with local state and ipam with
// a local store, all keeping their state in dir.
type agent struct {
	loop  *controller.Loop
	nodes *nodesync.NodeSync
	ipam  *ipam.IPAM
	stop  func() error
}

func startAgent(t *testing.T, endpoints []string, dir string) *agent {
	t.Helper()
	vpp := vppsim.New(vppsim.Config{})
	driver, err := vppdriver.New(func() adapter.VppAPI { return vpp.NewAdapter() }, vppdriver.Config{})
	require.NoError(t, err)
	loop, err := controller.New(nil, driver, controller.Config{})
	require.NoError(t, err)
	db, err := etcddb.New(etcddb.Config{Endpoints: endpoints, DialTimeout: time.Second, RequestTimeout: time.Second})
	require.NoError(t, err)
	ns, err := nodesync.New("node-1", db, loop, nodesync.Config{
		LocalState:         nodesync.NewStateFile(filepath.Join(dir, "nodesync.json")),
		LocalFallbackDelay: 500 * time.Millisecond,
		RequestTimeout:     time.Second,
	})
	require.NoError(t, err)
	store, err := boltstore.Open(filepath.Join(dir, "ipam.db"), boltstore.Config{})
	require.NoError(t, err)
	pods, err := ipam.New(ns, ipam.Config{Store: store})
	require.NoError(t, err)
	require.NoError(t, loop.Register(ns, pods))
	w, err := watcher.New(loop, watcher.Config{
		Etcd:                watcher.EtcdConfig{Endpoints: endpoints, DialTimeout: time.Second},
		MirrorPath:          filepath.Join(dir, "mirror.db"),
		MirrorFallbackDelay: 500 * time.Millisecond,
	})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return driver.Run(gctx) })
	g.Go(func() error { return db.Run(gctx) })
	g.Go(func() error { return ns.Run(gctx) })
	g.Go(func() error { return w.Run(gctx) })
	g.Go(func() error { return loop.Run(gctx) })
	a := &agent{loop: loop, nodes: ns, ipam: pods}
	stopped := false
	a.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		err := g.Wait()
		store.Close()
		db.Close()
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	t.Cleanup(func() { _ = a.stop() })
	return a
}

func (a *agent) addPod(t *testing.T, name string) netip.Addr {
	t.Helper()
	ev := controller.NewAddPodEvent(kubemodel.PodID{Namespace: "default", Name: name}, "c-"+name, "/var/run/netns/"+name)
	require.NoError(t, a.loop.PushEvent(ev))
	require.NoError(t, ev.Wait(), "AddPod %s", name)
	addr, ok := a.ipam.PodAddr(ev.Pod)
	require.True(t, ok)
	return addr
}

// TestAgentStartsWithoutEtcd: an agent that ran once starts again while
// etcd is down: the watcher delivers its mirror, nodesync its saved node ID,
// ipam its stored allocations, and AddPod succeeds. When etcd returns the
// node ID is confirmed and the agent keeps working.
func TestAgentStartsWithoutEtcd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	etcd, err := embedetcd.Start(ctx, embedetcd.Config{UnsafeNoFsync: true})
	require.NoError(t, err)
	defer etcd.Close()
	dir := t.TempDir()

	first := startAgent(t, etcd.Endpoints(), dir)
	webIP := first.addPod(t, "web")
	id := first.nodes.GetNodeID()
	require.NotZero(t, id)
	require.NoError(t, first.stop())

	etcd.Stop()
	second := startAgent(t, etcd.Endpoints(), dir)
	dbIP := second.addPod(t, "db")
	assert.Equal(t, id, second.nodes.GetNodeID(), "the node starts with its saved ID")
	assert.NotEqual(t, webIP, dbIP, "web's stored address is not handed out again")
	again, ok := second.ipam.PodAddr(kubemodel.PodID{Namespace: "default", Name: "web"})
	assert.True(t, ok)
	assert.Equal(t, webIP, again, "web keeps its address")
	assert.Equal(t, uint64(1), second.loop.Stats().Resyncs, "one start-up resync, from the mirror")

	require.NoError(t, etcd.Restart(ctx))
	require.Eventually(t, func() bool { return second.loop.Stats().Resyncs >= 2 }, time.Minute, 20*time.Millisecond,
		"the watcher resyncs from etcd when it returns")
	cacheIP := second.addPod(t, "cache")
	assert.NotContains(t, []netip.Addr{webIP, dbIP}, cacheIP)
	assert.Equal(t, id, second.nodes.GetNodeID())
	require.NoError(t, second.stop(), "nodesync confirmed its ID; nothing failed")
}

func TestNodeIPSet(t *testing.T) {
	node := func(name string, vpp string, mgmt ...string) *nodesync.Node {
		n := &nodesync.Node{Name: name}
		if vpp != "" {
			p := netip.MustParsePrefix(vpp)
			n.VppIPAddresses = nodesync.IPsWithNetworks{{Address: p.Addr(), Network: p.Masked()}}
		}
		for _, m := range mgmt {
			n.MgmtIPAddresses = append(n.MgmtIPAddresses, netip.MustParseAddr(m).AsSlice())
		}
		return n
	}
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	all := nodesync.Nodes{
		"a": node("a", "192.168.16.1/24", "10.0.0.1"),
		"b": node("b", "192.168.16.2/24", "10.0.0.2", "10.0.0.1"), // shares 10.0.0.1 with a
	}
	lister := listerFunc(func() nodesync.Nodes { return all })

	s := nodeaddr.NewNodeIPSet(lister, nodeaddr.NodeIPSetConfig{})
	require.NoError(t, s.Resync(controller.NewDBResync(), nil, 1, nil))
	assert.Equal(t, addrs("10.0.0.1", "10.0.0.2", "192.168.16.1", "192.168.16.2"), s.NodeIPs())

	for _, tc := range []struct {
		name    string
		ev      *nodesync.NodeUpdate
		changed bool
		want    []netip.Addr
	}{
		{"a leaves, its shared address stays", &nodesync.NodeUpdate{NodeName: "a", PrevState: all["a"]}, true,
			addrs("10.0.0.1", "10.0.0.2", "192.168.16.2")},
		{"c joins", &nodesync.NodeUpdate{NodeName: "c", NewState: node("c", "192.168.16.3/24")}, true,
			addrs("10.0.0.1", "10.0.0.2", "192.168.16.2", "192.168.16.3")},
		{"c changes nothing", &nodesync.NodeUpdate{NodeName: "c", NewState: node("c", "192.168.16.3/24")}, false,
			addrs("10.0.0.1", "10.0.0.2", "192.168.16.2", "192.168.16.3")},
		{"b moves", &nodesync.NodeUpdate{NodeName: "b", NewState: node("b", "192.168.16.20/24")}, true,
			addrs("192.168.16.3", "192.168.16.20")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.True(t, s.HandlesEvent(tc.ev))
			desc, err := s.Update(tc.ev, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.changed, desc != "")
			assert.Equal(t, tc.want, s.NodeIPs())
		})
	}

	only := nodeaddr.NewNodeIPSet(lister, nodeaddr.NodeIPSetConfig{OnlyNode: "b"})
	require.NoError(t, only.Resync(controller.NewDBResync(), nil, 1, nil))
	assert.Equal(t, addrs("10.0.0.1", "10.0.0.2", "192.168.16.2"), only.NodeIPs())
	desc, err := only.Update(&nodesync.NodeUpdate{NodeName: "a", NewState: node("a", "192.168.16.9/24")}, nil)
	require.NoError(t, err)
	assert.Empty(t, desc, "other nodes change nothing")
	assert.False(t, only.HandlesEvent(&controller.KubeStateChange{}))
}

type listerFunc func() nodesync.Nodes

func (f listerFunc) GetAllNodes() nodesync.Nodes { return f() }

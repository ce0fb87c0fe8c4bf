package nodesync_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/etcddb"
	"github.com/vswitchkit/vswitchkit/nodesync/internal/etcdtest"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesyncmodel"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"go.uber.org/zap"
)

const testPrefix = nodesync.DefaultPrefix

// harness runs one NodeSync against a MemDB and plays the event loop: it
// feeds the events that Run pushes back into the handler, like the loop
// does, and collects the NodeUpdate events.
type harness struct {
	t       *testing.T
	name    string
	db      testDB
	rec     *controllertest.EventRecorder
	ns      *nodesync.NodeSync
	next    int    // index of the next recorded event to process
	applied uint64 // record changes applied when pump last returned
	updates []*nodesync.NodeUpdate
	done    chan error
}

func startHarness(t *testing.T, db testDB, name string, cfg nodesync.Config) *harness {
	t.Helper()
	h := launchHarness(t, db, name, cfg, &controllertest.EventRecorder{})
	h.waitReady()
	return h
}

// launchHarness starts Run without waiting for the ID.
func launchHarness(t *testing.T, db testDB, name string, cfg nodesync.Config, rec *controllertest.EventRecorder) *harness {
	t.Helper()
	h := &harness{t: t, name: name, db: db, rec: rec, done: make(chan error, 1)}
	ns, err := nodesync.New(name, db, h.rec, cfg)
	require.NoError(t, err)
	h.ns = ns
	ctx, cancel := context.WithCancel(context.Background())
	go func() { h.done <- ns.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-h.done
	})
	return h
}

func (h *harness) waitReady() {
	h.t.Helper()
	t := h.t
	ns := h.ns
	select {
	case <-ns.Ready():
	case err := <-h.done:
		h.done <- err
		t.Fatalf("Run ended before the ID was allocated: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no node ID within 30s")
	}
}

// resync runs the start-up (or a later) resync with the given Kubernetes nodes.
func (h *harness) resync(count int, nodes ...*kubemodel.Node) {
	h.t.Helper()
	ev := controller.NewDBResync()
	kvs := make(controller.KeyValuePairs)
	for _, n := range nodes {
		kvs[kubemodel.NodeKey(n.GetName())] = n
	}
	ev.KubeState[kubemodel.NodeResource] = kvs
	require.True(h.t, h.ns.HandlesEvent(ev))
	require.NoError(h.t, h.ns.Resync(ev, ev.KubeState, count, controllertest.NewTxn()))
}

// kubeChange applies a Kubernetes node change through Update.
func (h *harness) kubeChange(prev, next *kubemodel.Node) {
	h.t.Helper()
	name := prev.GetName()
	if next != nil {
		name = next.GetName()
	}
	ev := &controller.KubeStateChange{Key: kubemodel.NodeKey(name), Resource: kubemodel.NodeResource}
	if prev != nil {
		ev.PrevValue = prev
	}
	if next != nil {
		ev.NewValue = next
	}
	require.True(h.t, h.ns.HandlesEvent(ev))
	_, err := h.ns.Update(ev, controllertest.NewTxn())
	require.NoError(h.t, err)
}

// process feeds the recorded events not processed yet to the handler, as
// the loop does, and collects the NodeUpdate events. After each event the
// handler takes, it asks stop, and returns at once, true, when stop says so.
// n is the number of recorded events it looked at.
func (h *harness) process(stop func(controller.Event) bool) (n int, stopped bool) {
	h.t.Helper()
	evs := h.rec.Events()
	for ; h.next < len(evs); h.next++ {
		ev := evs[h.next]
		if nu, ok := ev.(*nodesync.NodeUpdate); ok {
			h.updates = append(h.updates, nu)
			continue
		}
		if !h.ns.HandlesEvent(ev) {
			continue
		}
		_, err := h.ns.Update(ev, controllertest.NewTxn())
		require.NoError(h.t, err, "Update(%v)", ev)
		if stop(ev) {
			h.next++
			return len(evs), true
		}
	}
	return len(evs), false
}

// pump processes recorded events until wantRecordEvents more record
// changes (pushed by Run's watch, several per event when they arrive
// together) or record snapshots (pushed after the confirmation of a saved
// ID or a broken watch) have been applied, and returns the NodeUpdate
// events pushed meanwhile.
func (h *harness) pump(wantRecordEvents int) []*nodesync.NodeUpdate {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	snapshots := 0
	count := func(ev controller.Event) bool {
		if ev.GetName() == "Vswitch Node Record Resync" {
			snapshots++
		}
		return false
	}
	got := func() int { return int(h.ns.AppliedRecordChangesForTest()-h.applied) + snapshots }
	for {
		n, _ := h.process(count)
		if got() >= wantRecordEvents {
			// NodeUpdates pushed by the last Update are recorded already.
			h.process(count)
			h.applied = h.ns.AppliedRecordChangesForTest()
			out := h.updates
			h.updates = nil
			return out
		}
		_, err := h.rec.WaitFor(ctx, n+1)
		require.NoError(h.t, err, "waiting for %d record changes, got %d", wantRecordEvents, got())
	}
}

func putRecord(t *testing.T, db testDB, rec *nodesyncmodel.VswitchNode) {
	t.Helper()
	_, err := db.NewBroker(testPrefix).Put(context.Background(), "node/"+rec.GetName(), rec)
	require.NoError(t, err)
}

func deleteRecord(t *testing.T, db testDB, name string) {
	t.Helper()
	ok, err := db.NewBroker(testPrefix).Delete(context.Background(), "node/"+name, 0)
	require.NoError(t, err)
	require.True(t, ok)
}

func kubeNode(name string, podCIDRs []string, internal ...string) *kubemodel.Node {
	n := &kubemodel.Node{Name: name, PodCidrs: podCIDRs}
	for _, a := range internal {
		n.Addresses = append(n.Addresses, &kubemodel.NodeAddress{Type: kubemodel.NodeAddress_INTERNAL_IP, Address: a})
	}
	return n
}

func ipNet(addr, network string) nodesync.IPWithNetwork {
	return nodesync.IPWithNetwork{Address: netip.MustParseAddr(addr), Network: netip.MustParsePrefix(network)}
}

func mgmt(addrs ...string) []net.IP {
	var out []net.IP
	for _, a := range addrs {
		out = append(out, net.IP(netip.MustParseAddr(a).AsSlice()))
	}
	return out
}

func prefixes(ps ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func netipPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// putRecordRaw writes a record while the DB may be disconnected.
func putRecordRaw(t *testing.T, db testDB, rec *nodesyncmodel.VswitchNode) {
	t.Helper()
	db.PutRaw(testPrefix+"node/"+rec.GetName(), mustMarshal(t, rec))
}

// testDB is a ClusterWideDB that tests can also read and write raw.
type testDB interface {
	nodesync.ClusterWideDB
	PutRaw(key string, value []byte) int64
	Keys() []string
	Value(key string) ([]byte, bool)
}

var _ testDB = (*nodesynctest.MemDB)(nil)

// etcdTestDB is an etcddb.DB on a client confined to its own namespace, so
// that the cases of one test can share one etcd server.
type etcdTestDB struct {
	*etcddb.DB
	cli *clientv3.Client
}

var etcdNamespaces atomic.Int64

func newEtcdTestDB(t *testing.T, endpoint string) *etcdTestDB {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	ns := fmt.Sprintf("/test%d", etcdNamespaces.Add(1))
	cli.KV = namespace.NewKV(cli.KV, ns)
	cli.Watcher = namespace.NewWatcher(cli.Watcher, ns)
	db, err := etcddb.NewFromClient(cli, etcddb.Config{})
	require.NoError(t, err)
	return &etcdTestDB{DB: db, cli: cli}
}

func (d *etcdTestDB) PutRaw(key string, value []byte) int64 {
	resp, err := d.cli.Put(context.Background(), key, string(value))
	if err != nil {
		panic(err)
	}
	return resp.Header.GetRevision()
}

func (d *etcdTestDB) Keys() []string {
	resp, err := d.cli.Get(context.Background(), "", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		panic(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

func (d *etcdTestDB) Value(key string) ([]byte, bool) {
	resp, err := d.cli.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) == 0 {
		return nil, false
	}
	return resp.Kvs[0].Value, true
}

// backends returns constructors of the DBs the table tests run against: the
// in-memory fake and an in-process etcd (one server per test).
func backends(t *testing.T) map[string]func(t *testing.T) testDB {
	var endpoint string
	return map[string]func(t *testing.T) testDB{
		"memdb": func(*testing.T) testDB { return nodesynctest.NewMemDB() },
		"etcd": func(sub *testing.T) testDB {
			if endpoint == "" {
				endpoint = etcdtest.Start(t)
			}
			return newEtcdTestDB(sub, endpoint)
		},
	}
}

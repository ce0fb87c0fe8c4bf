package nodesync_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/internal/etcdtest"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesyncmodel"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// failLists returns a List hook that fails the list requests whose
// numbers (from 1) are in fail.
func failLists(fail ...int) func(string) error {
	var mu sync.Mutex
	n := 0
	return func(string) error {
		mu.Lock()
		defer mu.Unlock()
		n++
		for _, f := range fail {
			if n == f {
				return nodesynctest.ErrInjected
			}
		}
		return nil
	}
}

// TestNodeListReadOnce: a node reads the node records once, in pages; a
// failed request repeats its page, not the whole list (issue 29: with
// thousands of nodes starting at once, whole-list retries multiplied the
// records read).
func TestNodeListReadOnce(t *testing.T) {
	const others = 2500
	db := nodesynctest.NewMemDB()
	db.SetPageSize(1000)
	for i := range others {
		putRecordRaw(t, db, &nodesyncmodel.VswitchNode{Id: uint32(i + 2), Name: fmt.Sprintf("node-%04d", i)})
	}
	db.SetHooks(nodesynctest.Hooks{List: failLists(2, 3)}) // the second page fails twice
	h := startHarness(t, db, "node-a", nodesync.Config{RetryBackoff: 1})
	h.resync(1)
	assert.Len(t, h.ns.GetAllNodes(), others+1)
	assert.Equal(t, nodesynctest.ListStats{Requests: 3 + 2, Pairs: others + 1}, db.ListStats(),
		"three pages, two failed requests, every record read once")
}

// wholeLister hides the PageLister of a DB's brokers: NodeSync reads the
// records with List, as with a ClusterWideDB that cannot read pages.
type wholeLister struct{ *nodesynctest.MemDB }

func (w wholeLister) NewBroker(prefix string) nodesync.ProtoBroker {
	return struct{ nodesync.ProtoBroker }{w.MemDB.NewBroker(prefix)}
}

// TestNodeListWithoutPages: a broker without PageLister is listed whole,
// and a failed list is retried.
func TestNodeListWithoutPages(t *testing.T) {
	db := nodesynctest.NewMemDB()
	seedNode(t, db, 2, "node-b")
	_, paged := wholeLister{db}.NewBroker(testPrefix).(nodesync.PageLister)
	require.False(t, paged)
	db.SetHooks(nodesynctest.Hooks{List: failLists(1, 2)})
	h := startHarness(t, wholeLister{db}, "node-a", nodesync.Config{RetryBackoff: 1})
	h.resync(1)
	assert.Len(t, h.ns.GetAllNodes(), 2)
	assert.Equal(t, nodesynctest.ListStats{Requests: 3, Pairs: 2}, db.ListStats(), "two failed lists, then one")
}

// failingKV counts the keys that Get requests return and fails the Get
// requests whose numbers (from 1) are in fail.
type failingKV struct {
	clientv3.KV
	mu    sync.Mutex
	gets  int
	keys  int
	fail  []int
	armed bool
}

func (f *failingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	f.mu.Lock()
	if f.armed {
		f.gets++
		if slices.Contains(f.fail, f.gets) {
			f.mu.Unlock()
			return nil, errors.New("injected: request timed out")
		}
	}
	f.mu.Unlock()
	resp, err := f.KV.Get(ctx, key, opts...)
	if err == nil {
		f.mu.Lock()
		if f.armed {
			f.keys += len(resp.Kvs)
		}
		f.mu.Unlock()
	}
	return resp, err
}

// TestNodeListReadOnceEtcd is TestNodeListReadOnce against etcd, where a
// list is several requests: the second page fails twice, and still every
// record is read once (a whole-list retry read the first page three times).
func TestNodeListReadOnceEtcd(t *testing.T) {
	const others = 2500
	db := newEtcdTestDB(t, etcdtest.Start(t))
	ctx := context.Background()
	b := db.NewBroker(testPrefix)
	for i := 0; i < others; i += 100 {
		var txn nodesync.Txn
		for j := i; j < i+100; j++ {
			v := mustMarshal(t, &nodesyncmodel.VswitchNode{Id: uint32(j + 2), Name: fmt.Sprintf("node-%04d", j)})
			txn.Then = append(txn.Then, nodesync.Op{Type: nodesync.OpPut, Key: fmt.Sprintf("node/node-%04d", j), Value: v})
		}
		_, err := b.Txn(ctx, txn)
		require.NoError(t, err)
	}
	kv := &failingKV{KV: db.cli.KV, fail: []int{2, 3}, armed: true}
	db.cli.KV = kv
	h := startHarness(t, db, "node-a", nodesync.Config{RetryBackoff: 1})
	h.resync(1)
	assert.Len(t, h.ns.GetAllNodes(), others+1)
	kv.mu.Lock()
	defer kv.mu.Unlock()
	assert.Equal(t, 5, kv.gets, "three pages of 1000, two failed requests")
	assert.Equal(t, others+1, kv.keys, "every record read once")
}

// TestReadyWaitsForTheRecords pins what Ready and GetNodeID document: the
// ID is claimed in the database before the records are read, but Ready
// closes (and GetNodeID returns it) only once the records are read too.
func TestReadyWaitsForTheRecords(t *testing.T) {
	db := nodesynctest.NewMemDB()
	seedNode(t, db, 1, "node-b")
	listing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	db.SetHooks(nodesynctest.Hooks{List: func(string) error {
		once.Do(func() {
			close(listing)
			<-release // the MemDB is locked meanwhile: only NodeSync's getters run
		})
		return nil
	}})
	h := launchHarness(t, db, "node-a", nodesync.Config{}, &controllertest.EventRecorder{})
	<-listing
	select {
	case <-h.ns.Ready():
		t.Fatal("Ready closed before the records were read")
	default:
	}
	assert.Zero(t, h.ns.GetNodeID(), "no ID before Ready")
	close(release)
	h.waitReady()
	assert.Equal(t, uint32(2), h.ns.GetNodeID())
	v, ok := db.Value(testPrefix + "id/2")
	require.True(t, ok, "the claim")
	var c nodesyncmodel.NodeIDClaim
	require.NoError(t, proto.Unmarshal(v, &c))
	assert.Equal(t, "node-a", c.GetName())
}

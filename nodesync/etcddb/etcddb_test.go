package etcddb_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/etcddb"
	"github.com/vswitchkit/vswitchkit/nodesync/internal/dbtest"
	"github.com/vswitchkit/vswitchkit/nodesync/internal/etcdtest"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesyncmodel"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// runDB starts db.Run and waits until it is connected.
func runDB(t *testing.T, db *etcddb.DB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- db.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
	connected := make(chan struct{})
	db.OnConnect(func() error { close(connected); return nil })
	select {
	case <-connected:
	case err := <-done:
		t.Fatalf("Run ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not connected within 30s")
	}
}

func rawClient(t *testing.T, endpoint string, cfg clientv3.Config) *clientv3.Client {
	t.Helper()
	cfg.Endpoints = []string{endpoint}
	cfg.DialTimeout = 10 * time.Second
	cfg.Logger = zap.NewNop()
	cli, err := clientv3.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func TestNewValidates(t *testing.T) {
	_, err := etcddb.New(etcddb.Config{})
	require.Error(t, err, "endpoints are required")
	_, err = etcddb.New(etcddb.Config{Endpoints: []string{"http://127.0.0.1:1"}, DialTimeout: -1})
	require.Error(t, err)
	_, err = etcddb.NewFromClient(nil, etcddb.Config{})
	require.Error(t, err)
}

func TestNotConnectedBeforeRun(t *testing.T) {
	db, err := etcddb.New(etcddb.Config{Endpoints: []string{"http://127.0.0.1:1"}})
	require.NoError(t, err)
	_, err = db.PutIfNotExists("/k", []byte("v"))
	require.ErrorIs(t, err, nodesync.ErrNotConnected)
	b := db.NewBroker("/p/")
	_, err = b.List(context.Background(), "")
	require.ErrorIs(t, err, nodesync.ErrNotConnected)
	_, err = b.Put(context.Background(), "k", &nodesyncmodel.NodeIDClaim{})
	require.ErrorIs(t, err, nodesync.ErrNotConnected)
	_, err = b.Delete(context.Background(), "k", 0)
	require.ErrorIs(t, err, nodesync.ErrNotConnected)
	err = b.Watch(context.Background(), "", 1, func(nodesync.WatchEvent) {})
	require.ErrorIs(t, err, nodesync.ErrNotConnected)
}

func TestRunRetriesUnreachableUntilCancelled(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	db, err := etcddb.New(etcddb.Config{Endpoints: []string{"http://" + addr}, DialTimeout: 50 * time.Millisecond, RetryBackoff: time.Millisecond})
	require.NoError(t, err)
	called := make(chan struct{})
	db.OnConnect(func() error { close(called); return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, db.Run(ctx), context.DeadlineExceeded)
	select {
	case <-called:
		t.Fatal("OnConnect callback called without a connection")
	default:
	}
	require.Error(t, db.Run(context.Background()), "second Run")
}

func TestDB(t *testing.T) {
	endpoint := etcdtest.Start(t)
	db, err := etcddb.New(etcddb.Config{Endpoints: []string{endpoint}})
	require.NoError(t, err)
	before := make(chan struct{})
	db.OnConnect(func() error { close(before); return nil })
	runDB(t, db)
	<-before // registered before Run: called on connect
	calledNow := false
	db.OnConnect(func() error { calledNow = true; return nil })
	require.True(t, calledNow, "OnConnect after connecting calls back synchronously")

	ctx := context.Background()
	t.Run("PutIfNotExists", func(t *testing.T) {
		ok, err := db.PutIfNotExists("/a/id/1", []byte("first"))
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = db.PutIfNotExists("/a/id/1", []byte("second"))
		require.NoError(t, err)
		require.False(t, ok, "the key exists")
		ok, err = db.PutIfNotExists("/a/empty", nil)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = db.PutIfNotExists("/a/empty", nil)
		require.NoError(t, err)
		require.False(t, ok, "an empty value exists too")
	})

	b := db.NewBroker("/b/")
	t.Run("Put and List", func(t *testing.T) {
		r1, err := b.Put(ctx, "node/x", &nodesyncmodel.VswitchNode{Id: 1, Name: "x"})
		require.NoError(t, err)
		r2, err := b.Put(ctx, "node/y", &nodesyncmodel.VswitchNode{Id: 2, Name: "y"})
		require.NoError(t, err)
		require.Greater(t, r2, r1)
		_, err = b.Put(ctx, "other", &nodesyncmodel.VswitchNode{})
		require.NoError(t, err)
		list, err := b.List(ctx, "node/")
		require.NoError(t, err)
		require.GreaterOrEqual(t, list.Revision, r2)
		require.Len(t, list.KVs, 2)
		assert.Equal(t, "node/x", list.KVs[0].Key)
		assert.Equal(t, r1, list.KVs[0].CreateRevision)
		var m nodesyncmodel.VswitchNode
		require.NoError(t, list.KVs[1].Unmarshal(&m))
		assert.Equal(t, "y", m.GetName())
		assert.NotNil(t, list.KVs[0].Value)
	})

	t.Run("Delete", func(t *testing.T) {
		rev, err := b.Put(ctx, "del/k", &nodesyncmodel.NodeIDClaim{Id: 1, Name: "n"})
		require.NoError(t, err)
		tests := []struct {
			name   string
			modRev int64
			want   bool
		}{
			{"wrong revision keeps the key", rev + 100, false},
			{"matching revision deletes", rev, true},
			{"missing key", 0, false},
		}
		for _, tc := range tests {
			ok, err := b.Delete(ctx, "del/k", tc.modRev)
			require.NoError(t, err, tc.name)
			require.Equal(t, tc.want, ok, tc.name)
		}
	})

	t.Run("Watch", func(t *testing.T) {
		start, err := b.Put(ctx, "w/a", &nodesyncmodel.VswitchNode{Id: 1, Name: "a"})
		require.NoError(t, err)
		_, err = b.Put(ctx, "w/b", &nodesyncmodel.VswitchNode{Name: "b"})
		require.NoError(t, err)
		delRev := int64(0)
		_, err = b.Delete(ctx, "w/a", 0)
		require.NoError(t, err)
		list, err := b.List(ctx, "w/")
		require.NoError(t, err)
		delRev = list.Revision

		wctx, cancel := context.WithCancel(ctx)
		var got []nodesync.WatchEvent
		err = b.Watch(wctx, "w/", start, func(ev nodesync.WatchEvent) {
			got = append(got, ev)
			if len(got) == 3 {
				cancel()
			}
		})
		require.ErrorIs(t, err, context.Canceled)
		require.Len(t, got, 3)
		assert.Equal(t, "w/a", got[0].Key)
		assert.Equal(t, start, got[0].Revision)
		assert.False(t, got[0].Deleted())
		assert.Equal(t, "w/b", got[1].Key)
		assert.Equal(t, "w/a", got[2].Key)
		assert.True(t, got[2].Deleted())
		assert.Equal(t, delRev, got[2].Revision)
	})

	t.Run("Watch of a compacted revision", func(t *testing.T) {
		rev, err := b.Put(ctx, "c/a", &nodesyncmodel.VswitchNode{Name: "a"})
		require.NoError(t, err)
		_, err = b.Put(ctx, "c/a", &nodesyncmodel.VswitchNode{Name: "a", Id: 2})
		require.NoError(t, err)
		cli := rawClient(t, endpoint, clientv3.Config{})
		_, err = cli.Compact(ctx, rev+1)
		require.NoError(t, err)
		err = b.Watch(ctx, "c/", rev, func(nodesync.WatchEvent) {})
		require.ErrorIs(t, err, nodesync.ErrCompacted)
	})

	t.Run("Close", func(t *testing.T) {
		db2, err := etcddb.New(etcddb.Config{Endpoints: []string{endpoint}})
		require.NoError(t, err)
		runDB(t, db2)
		require.NoError(t, db2.Close())
		require.NoError(t, db2.Close(), "second Close")
		_, err = db2.PutIfNotExists("/x", nil)
		require.ErrorIs(t, err, nodesync.ErrNotConnected)
	})
}

func TestAuth(t *testing.T) {
	endpoint := etcdtest.Start(t)
	ctx := context.Background()
	root := rawClient(t, endpoint, clientv3.Config{})
	_, err := root.RoleAdd(ctx, "root")
	require.NoError(t, err)
	_, err = root.UserAdd(ctx, "root", "secret")
	require.NoError(t, err)
	_, err = root.UserGrantRole(ctx, "root", "root")
	require.NoError(t, err)
	_, err = root.AuthEnable(ctx)
	require.NoError(t, err)

	good, err := etcddb.New(etcddb.Config{Endpoints: []string{endpoint}, Username: "root", Password: "secret"})
	require.NoError(t, err)
	runDB(t, good)
	ok, err := good.PutIfNotExists("/auth/k", []byte("v"))
	require.NoError(t, err)
	require.True(t, ok)

	bad, err := etcddb.New(etcddb.Config{Endpoints: []string{endpoint}, Username: "root", Password: "wrong", RetryBackoff: time.Millisecond})
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, bad.Run(cctx), context.DeadlineExceeded, "wrong password never connects")
	_, err = bad.PutIfNotExists("/auth/k2", nil)
	require.ErrorIs(t, err, nodesync.ErrNotConnected)
}

func TestNewFromClient(t *testing.T) {
	endpoint := etcdtest.Start(t)
	cli := rawClient(t, endpoint, clientv3.Config{})
	db, err := etcddb.NewFromClient(cli, etcddb.Config{})
	require.NoError(t, err)
	called := false
	db.OnConnect(func() error { called = true; return nil })
	require.True(t, called)
	ok, err := db.PutIfNotExists("/fc/k", []byte("v"))
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, db.Close())
	_, err = cli.Get(context.Background(), "/fc/k")
	require.NoError(t, err, "Close leaves a caller-owned client open")
}

func TestRunAfterClose(t *testing.T) {
	db, err := etcddb.New(etcddb.Config{Endpoints: []string{"http://127.0.0.1:1"}})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.Error(t, db.Run(context.Background()), "Run of a closed DB ends at once")
}

func TestTxn(t *testing.T) {
	endpoint := etcdtest.Start(t)
	cli := rawClient(t, endpoint, clientv3.Config{})
	db, err := etcddb.NewFromClient(cli, etcddb.Config{})
	require.NoError(t, err)
	dbtest.TestTxn(t, db, func(rev int64) {
		_, err := cli.Compact(context.Background(), rev)
		require.NoError(t, err)
	})
}

func TestListPage(t *testing.T) {
	endpoint := etcdtest.Start(t)
	cli := rawClient(t, endpoint, clientv3.Config{})
	db, err := etcddb.NewFromClient(cli, etcddb.Config{})
	require.NoError(t, err)
	dbtest.TestListPage(t, db, func(rev int64) {
		_, err := cli.Compact(context.Background(), rev)
		require.NoError(t, err)
	})
}

// TestListPages: a range larger than a page is read in pages, at one
// revision, so writes made between the pages are not seen.
func TestListPages(t *testing.T) {
	endpoint := etcdtest.Start(t)
	cli := rawClient(t, endpoint, clientv3.Config{})
	ctx := context.Background()
	for i := range 10 {
		_, err := cli.Put(ctx, fmt.Sprintf("/l/k%02d", i), "v")
		require.NoError(t, err)
	}
	var pages int
	cli.KV = pageCounter{KV: cli.KV, n: &pages, onPage: func() {
		if pages == 1 { // between the first and the second page
			_, err := cli.Put(ctx, "/l/k00a", "late")
			require.NoError(t, err)
		}
	}}
	db, err := etcddb.NewFromClient(cli, etcddb.Config{ListPageSize: 3})
	require.NoError(t, err)
	list, err := db.NewBroker("/l/").List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, 4, pages, "10 keys in pages of 3")
	require.Len(t, list.KVs, 10, "the key written between pages is not in the snapshot")
	for i, kv := range list.KVs {
		require.Equal(t, fmt.Sprintf("k%02d", i), kv.Key)
	}
	_, err = etcddb.New(etcddb.Config{Endpoints: []string{endpoint}, ListPageSize: -1})
	require.Error(t, err)
}

// pageCounter counts the Get requests of a clientv3.KV.
type pageCounter struct {
	clientv3.KV
	n      *int
	onPage func()
}

func (p pageCounter) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := p.KV.Get(ctx, key, opts...)
	*p.n++
	p.onPage()
	return resp, err
}

// TestRunTwice: a second Run returns the module's one ErrAlreadyRunning
// (CONTRIBUTING R4) and does not disturb the first.
func TestRunTwice(t *testing.T) {
	db, err := etcddb.New(etcddb.Config{Endpoints: []string{"http://127.0.0.1:1"}, DialTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- db.Run(ctx) }()
	go func() { done <- db.Run(ctx) }()
	err = <-done // the one that started second
	require.ErrorIs(t, err, etcddb.ErrAlreadyRunning)
	require.ErrorIs(t, err, nodesync.ErrAlreadyRunning, "one value across packages")
	assert.EqualError(t, err, "etcddb: Run called more than once")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled, "Run returns ctx.Err() when its context ends it")
}

// TestConfigDurations: zero is the default, negative an error naming the
// field (every bad field at once).
func TestConfigDurations(t *testing.T) {
	_, err := etcddb.New(etcddb.Config{Endpoints: []string{"http://127.0.0.1:1"}, DialTimeout: -1, RetryBackoff: -time.Second, ListPageSize: -2})
	require.Error(t, err)
	for _, want := range []string{"DialTimeout -1ns is negative", "RetryBackoff -1s is negative", "ListPageSize -2 is negative"} {
		assert.ErrorContains(t, err, want)
	}
}

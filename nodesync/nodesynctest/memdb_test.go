package nodesynctest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/internal/dbtest"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesyncmodel"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemDB(t *testing.T) {
	ctx := context.Background()
	db := nodesynctest.NewMemDB()
	b := db.NewBroker("/p/")

	ok, err := db.PutIfNotExists("/p/id/1", []byte("x"))
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = db.PutIfNotExists("/p/id/1", []byte("y"))
	require.NoError(t, err)
	require.False(t, ok)

	r1, err := b.Put(ctx, "node/a", &nodesyncmodel.VswitchNode{Name: "a"})
	require.NoError(t, err)
	r2, err := b.Put(ctx, "node/a", &nodesyncmodel.VswitchNode{Name: "a", Id: 1})
	require.NoError(t, err)
	list, err := b.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, r2, list.Revision)
	require.Equal(t, []string{"id/1", "node/a"}, []string{list.KVs[0].Key, list.KVs[1].Key})
	require.Equal(t, r1, list.KVs[1].CreateRevision)
	require.Equal(t, r2, list.KVs[1].ModRevision)

	ok, err = b.Delete(ctx, "node/a", r1)
	require.NoError(t, err)
	require.False(t, ok, "stale revision")
	ok, err = b.Delete(ctx, "node/a", r2)
	require.NoError(t, err)
	require.True(t, ok)

	var got []nodesync.WatchEvent
	wctx, cancel := context.WithCancel(ctx)
	err = b.Watch(wctx, "node/", r1, func(ev nodesync.WatchEvent) {
		got = append(got, ev)
		if len(got) == 3 {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []int64{r1, r2, r2 + 1}, []int64{got[0].Revision, got[1].Revision, got[2].Revision})
	require.True(t, got[2].Deleted())

	db.Compact(r2)
	err = b.Watch(ctx, "node/", r2, func(nodesync.WatchEvent) {})
	require.ErrorIs(t, err, nodesync.ErrCompacted)

	db.SetHooks(nodesynctest.Hooks{List: func(string) error { return nodesynctest.ErrInjected }})
	_, err = b.List(ctx, "")
	require.ErrorIs(t, err, nodesynctest.ErrInjected)

	require.NoError(t, db.Close())
	_, err = db.PutIfNotExists("/q", nil)
	require.ErrorIs(t, err, nodesync.ErrNotConnected)
}

func TestMemDBConnect(t *testing.T) {
	db := nodesynctest.NewDisconnectedMemDB()
	called := make(chan struct{})
	db.OnConnect(func() error { close(called); return nil })
	_, err := db.PutIfNotExists("/k", nil)
	require.ErrorIs(t, err, nodesync.ErrNotConnected)

	// A watch started while connected ends when the DB disconnects.
	db.SetConnected(true)
	<-called
	done := make(chan error, 1)
	go func() { done <- db.NewBroker("/").Watch(context.Background(), "", 1, func(nodesync.WatchEvent) {}) }()
	db.SetConnected(false)
	require.ErrorIs(t, <-done, nodesync.ErrNotConnected)
}

func TestMemDBTxn(t *testing.T) {
	db := nodesynctest.NewMemDB()
	dbtest.TestTxn(t, db, db.Compact)
}

func TestMemDBListPage(t *testing.T) {
	db := nodesynctest.NewMemDB()
	dbtest.TestListPage(t, db, db.Compact)
	st := db.ListStats()
	assert.Equal(t, nodesynctest.ListStats{Requests: 5, Pairs: 11}, st, "requests and pairs read are counted")
}

func TestMemDBTxnApplied(t *testing.T) {
	db := nodesynctest.NewMemDB()
	db.SetHooks(nodesynctest.Hooks{TxnApplied: func(string) error { return nodesynctest.ErrInjected }})
	_, err := db.NewBroker("/").Txn(context.Background(), nodesync.Txn{Then: []nodesync.Op{{Type: nodesync.OpPut, Key: "k"}}})
	require.ErrorIs(t, err, nodesynctest.ErrInjected)
	require.Equal(t, []string{"/k"}, db.Keys(), "applied although the call failed")
}

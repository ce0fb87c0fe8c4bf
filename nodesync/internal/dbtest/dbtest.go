// Package dbtest checks that a [nodesync.ProtoBroker] implements the
// contract of Txn the way etcd does. The tests of nodesynctest (MemDB) and
// etcddb run it, so the fake cannot drift from the real thing.
package dbtest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/nodesync"
)

// TestTxn runs the Txn contract against a fresh, connected db. compact
// compacts the DB's history up to and including rev (no historical read
// at a revision below rev may succeed afterwards).
func TestTxn(t *testing.T, db nodesync.ClusterWideDB, compact func(rev int64)) {
	ctx := context.Background()
	b := db.NewBroker("/dbtest/")
	get := func(key string) nodesync.Op { return nodesync.Op{Type: nodesync.OpGet, Key: key} }
	put := func(key, value string) nodesync.Op {
		return nodesync.Op{Type: nodesync.OpPut, Key: key, Value: []byte(value)}
	}
	absent := func(key string) nodesync.Cmp {
		return nodesync.Cmp{Key: key, Target: nodesync.CreateRevision}
	}

	// Compare-create: the first succeeds, the second runs Else.
	res, err := b.Txn(ctx, nodesync.Txn{If: []nodesync.Cmp{absent("k")}, Then: []nodesync.Op{put("k", "one"), get("k")}, Else: []nodesync.Op{get("k")}})
	require.NoError(t, err)
	require.True(t, res.Succeeded)
	require.Len(t, res.Results, 2)
	require.Nil(t, res.Results[0], "no result for a put")
	require.Len(t, res.Results[1], 1)
	first := res.Results[1][0]
	require.Equal(t, "k", first.Key, "keys are relative to the prefix")
	require.Equal(t, "one", string(first.Value))
	require.Equal(t, res.Revision, first.CreateRevision)
	require.Equal(t, res.Revision, first.ModRevision)
	require.Equal(t, int64(1), first.Version)

	res, err = b.Txn(ctx, nodesync.Txn{If: []nodesync.Cmp{absent("k")}, Then: []nodesync.Op{put("k", "two")}, Else: []nodesync.Op{get("k"), get("missing")}})
	require.NoError(t, err)
	require.False(t, res.Succeeded)
	require.Equal(t, "one", string(res.Results[0][0].Value))
	require.Empty(t, res.Results[1], "a missing key reads as no pair")

	// Mod-revision compare and the version as a counter.
	res, err = b.Txn(ctx, nodesync.Txn{
		If:   []nodesync.Cmp{{Key: "k", Target: nodesync.ModRevision, Revision: first.ModRevision}},
		Then: []nodesync.Op{put("k", "two")},
	})
	require.NoError(t, err)
	require.True(t, res.Succeeded)
	res, err = b.Txn(ctx, nodesync.Txn{Then: []nodesync.Op{put("k", "three"), get("k")}})
	require.NoError(t, err)
	three := res.Results[1][0]
	require.Equal(t, "three", string(three.Value), "a get sees the put before it in the same txn")
	require.Equal(t, int64(3), three.Version, "every put counts")
	require.Equal(t, first.CreateRevision, three.CreateRevision)
	require.Equal(t, res.Revision, three.ModRevision, "all operations of a txn share one revision")

	// A key written twice in one transaction is refused.
	_, err = b.Txn(ctx, nodesync.Txn{Then: []nodesync.Op{put("k", "a"), put("k", "b")}})
	require.Error(t, err)
	_, err = b.Txn(ctx, nodesync.Txn{Then: []nodesync.Op{put("k", "a"), {Type: nodesync.OpDelete, Key: "k"}}})
	require.Error(t, err)
	res, err = b.Txn(ctx, nodesync.Txn{Then: []nodesync.Op{get("k")}})
	require.NoError(t, err)
	require.Equal(t, "three", string(res.Results[0][0].Value), "a refused txn changes nothing")

	// A failed compare on a stale revision.
	res, err = b.Txn(ctx, nodesync.Txn{If: []nodesync.Cmp{{Key: "k", Target: nodesync.ModRevision, Revision: first.ModRevision}}, Then: []nodesync.Op{put("k", "x")}})
	require.NoError(t, err)
	require.False(t, res.Succeeded)

	// Prefix compares: no key under p/ yet, then one.
	noneUnder := nodesync.Cmp{Key: "p/", Prefix: true, Target: nodesync.CreateRevision}
	res, err = b.Txn(ctx, nodesync.Txn{If: []nodesync.Cmp{noneUnder}})
	require.NoError(t, err)
	require.True(t, res.Succeeded, "an empty range satisfies a create-revision-0 compare")
	for _, k := range []string{"p/3", "p/1", "p/2", "p/4"} {
		_, err = b.Txn(ctx, nodesync.Txn{Then: []nodesync.Op{put(k, k)}})
		require.NoError(t, err)
	}
	res, err = b.Txn(ctx, nodesync.Txn{If: []nodesync.Cmp{noneUnder}, Else: []nodesync.Op{{Type: nodesync.OpGet, Key: "p/", Prefix: true, Limit: 2}}})
	require.NoError(t, err)
	require.False(t, res.Succeeded)
	require.Len(t, res.Results[0], 2, "limit")
	require.Equal(t, "p/1", res.Results[0][0].Key, "sorted by key")
	require.Equal(t, "p/2", res.Results[0][1].Key)

	// Delete.
	res, err = b.Txn(ctx, nodesync.Txn{Then: []nodesync.Op{{Type: nodesync.OpDelete, Key: "p/1"}, {Type: nodesync.OpGet, Key: "p/", Prefix: true}}})
	require.NoError(t, err)
	require.Len(t, res.Results[1], 3)
	deletedAt := res.Revision

	// Historical reads.
	res, err = b.Txn(ctx, nodesync.Txn{Then: []nodesync.Op{
		{Type: nodesync.OpGet, Key: "k", Revision: first.ModRevision},
		{Type: nodesync.OpGet, Key: "p/1", Revision: deletedAt - 1},
		{Type: nodesync.OpGet, Key: "p/1", Revision: deletedAt},
	}})
	require.NoError(t, err)
	require.Equal(t, "one", string(res.Results[0][0].Value))
	require.Equal(t, int64(1), res.Results[0][0].Version)
	require.Equal(t, first.ModRevision, res.Results[0][0].ModRevision)
	require.Len(t, res.Results[1], 1, "p/1 before its deletion")
	require.Empty(t, res.Results[2], "p/1 at its deletion")

	// After a compaction, older revisions are gone.
	_, err = b.Txn(ctx, nodesync.Txn{Then: []nodesync.Op{put("k", "four")}})
	require.NoError(t, err)
	compact(deletedAt)
	_, err = b.Txn(ctx, nodesync.Txn{Then: []nodesync.Op{{Type: nodesync.OpGet, Key: "k", Revision: first.ModRevision}}})
	require.ErrorIs(t, err, nodesync.ErrCompacted)
}

// TestListPage runs the [nodesync.PageLister] contract against a fresh,
// connected db whose broker implements it. compact is as for TestTxn.
func TestListPage(t *testing.T, db nodesync.ClusterWideDB, compact func(rev int64)) {
	ctx := context.Background()
	b := db.NewBroker("/pages/")
	pl, ok := b.(nodesync.PageLister)
	require.True(t, ok, "the broker implements nodesync.PageLister")
	put := func(key string) int64 {
		res, err := b.Txn(ctx, nodesync.Txn{Then: []nodesync.Op{{Type: nodesync.OpPut, Key: key, Value: []byte(key)}}})
		require.NoError(t, err)
		return res.Revision
	}
	for _, k := range []string{"r/3", "r/1", "r/5", "r/2", "r/4", "other"} {
		put(k)
	}

	// Pages of 2 at the first page's revision: a write between pages is
	// not seen.
	first, more, err := pl.ListPage(ctx, "r/", "", 0, 2)
	require.NoError(t, err)
	require.True(t, more)
	require.Equal(t, []string{"r/1", "r/2"}, keys(first.KVs), "sorted by key, relative to the prefix")
	rev := first.Revision
	require.Positive(t, rev)
	put("r/2a")
	second, more, err := pl.ListPage(ctx, "r/", "r/2", rev, 2)
	require.NoError(t, err)
	require.True(t, more)
	require.Equal(t, []string{"r/3", "r/4"}, keys(second.KVs), "after r/2, at the first page's revision")
	require.Equal(t, rev, second.Revision)
	last, more, err := pl.ListPage(ctx, "r/", "r/4", rev, 2)
	require.NoError(t, err)
	require.False(t, more)
	require.Equal(t, []string{"r/5"}, keys(last.KVs))
	require.Equal(t, "r/5", string(last.KVs[0].Value))

	// The current revision sees the late write; limit 0 is the
	// implementation's page size (at least a few keys).
	now, more, err := pl.ListPage(ctx, "r/", "", 0, 0)
	require.NoError(t, err)
	require.False(t, more)
	require.Equal(t, []string{"r/1", "r/2", "r/2a", "r/3", "r/4", "r/5"}, keys(now.KVs))
	require.Greater(t, now.Revision, rev)

	// A compacted revision fails with ErrCompacted.
	compact(put("r/6"))
	_, _, err = pl.ListPage(ctx, "r/", "r/2", rev, 2)
	require.ErrorIs(t, err, nodesync.ErrCompacted)
}

func keys(kvs []nodesync.KV) []string {
	out := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, kv.Key)
	}
	return out
}

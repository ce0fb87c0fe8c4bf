package reflector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
)

// TestFenceRefusesDeposedLeader: a transaction built by a leader whose
// election key is gone (its lease was revoked and another replica won) is
// refused by etcd and reported as lost leadership; the new leader's
// transaction goes through.
func TestFenceRefusesDeposedLeader(t *testing.T) {
	srv, err := etcdtest.Start(t.TempDir())
	require.NoError(t, err)
	defer srv.Close()
	cli, err := srv.Client()
	require.NoError(t, err)
	defer cli.Close()
	r, err := New(cli, KubernetesResources(fake.NewSimpleClientset()), Config{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	elect := func() (*concurrency.Session, clientv3.Cmp) {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
		require.NoError(t, err)
		e := concurrency.NewElection(s, r.cfg.ElectionPrefix)
		require.NoError(t, e.Campaign(ctx, "x"))
		return s, clientv3.Compare(clientv3.CreateRevision(e.Key()), "=", e.Rev())
	}
	old, oldFence := elect()
	rs := r.res[0]
	rs.written = map[string][]byte{}
	require.NoError(t, r.commit(ctx, oldFence, []op{{rs: rs, key: "k8s/node/a", value: []byte("1")}}))

	require.NoError(t, old.Close()) // revokes the lease: the key is gone
	cur, curFence := elect()
	defer cur.Close()
	err = r.commit(ctx, oldFence, []op{{rs: rs, key: "k8s/node/a", value: []byte("stale")}, {rs: rs, key: "k8s/node/b", value: []byte("stale")}})
	require.ErrorIs(t, err, errLostLeadership)
	require.NoError(t, r.commit(ctx, curFence, []op{{rs: rs, key: "k8s/node/b", value: []byte("2")}}))

	resp, err := cli.Get(ctx, r.cfg.Prefix+"k8s/node/", clientv3.WithPrefix())
	require.NoError(t, err)
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	require.Equal(t, map[string]string{"/vswitchkit/k8s/node/a": "1", "/vswitchkit/k8s/node/b": "2"}, got)
}

// TestCommitBatches: a commit is split into transactions of at most
// BatchSize operations, and of at most maxTxnBytes of values.
func TestCommitBatches(t *testing.T) {
	srv, err := etcdtest.Start(t.TempDir())
	require.NoError(t, err)
	defer srv.Close()
	cli, err := srv.Client()
	require.NoError(t, err)
	defer cli.Close()
	r, err := New(cli, KubernetesResources(fake.NewSimpleClientset()), Config{BatchSize: 10})
	require.NoError(t, err)
	ctx := context.Background()
	s, err := concurrency.NewSession(cli)
	require.NoError(t, err)
	defer s.Close()
	e := concurrency.NewElection(s, r.cfg.ElectionPrefix)
	require.NoError(t, e.Campaign(ctx, "x"))
	fence := clientv3.Compare(clientv3.CreateRevision(e.Key()), "=", e.Rev())

	var sizes []int
	r.hookCommitted = func(ops []op) { sizes = append(sizes, len(ops)) }
	rs := r.res[0]
	rs.written = map[string][]byte{}
	var ops []op
	for i := range 25 {
		ops = append(ops, op{rs: rs, key: "k8s/node/n" + string(rune('a'+i)), value: []byte("v")})
	}
	require.NoError(t, r.commit(ctx, fence, ops))
	require.Equal(t, []int{10, 10, 5}, sizes)

	sizes = nil
	big := make([]byte, maxTxnBytes/2+1)
	require.NoError(t, r.commit(ctx, fence, []op{{rs: rs, key: "k8s/node/x", value: big}, {rs: rs, key: "k8s/node/y", value: big}, {rs: rs, key: "k8s/node/z"}}))
	require.Equal(t, []int{1, 2}, sizes)
	require.Equal(t, 27, len(rs.written))
}

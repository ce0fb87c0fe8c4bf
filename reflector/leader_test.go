package reflector_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
	"github.com/vswitchkit/vswitchkit/reflector"
)

// leaderOf returns the index of the single leader among rs, failing when
// more than one leads.
func leaderOf(t *testing.T, rs ...*reflector.Reflector) int {
	t.Helper()
	idx := -1
	eventually(t, "one leader", func() bool {
		idx = -1
		n := 0
		for i, r := range rs {
			if s := r.Stats(); s.Leader && s.Reconciles > 0 {
				idx = i
				n++
			}
		}
		require.LessOrEqual(t, n, 1, "two replicas lead at once")
		return n == 1
	})
	return idx
}

// TestTwoReplicas runs two reflectors against one API server and one etcd:
// only the leader writes; when the leader stops, the other takes over and
// reconciles (a key removed behind the reflectors' back comes back, changes
// made during the hand-over arrive).
func TestTwoReplicas(t *testing.T) {
	srv, cli := startEtcd(t)
	k := newKube(pod("default", "a", "10.1.1.2"), node("n1", "192.168.0.1", "10.1.1.0/24"))
	r1 := newReflector(t, newClient(t, srv), k, reflector.Config{Identity: "one"})
	r2 := newReflector(t, newClient(t, srv), k, reflector.Config{Identity: "two"})
	stop1 := run(t, r1)
	stop2 := run(t, r2)
	rs := []*reflector.Reflector{r1, r2}
	stops := []func(){stop1, stop2}
	l := leaderOf(t, rs...)
	f := 1 - l
	waitState(t, cli, wantState(t, k))

	ctx := context.Background()
	for _, name := range []string{"b", "c", "d"} {
		_, err := k.CoreV1().Pods("default").Create(ctx, pod("default", name, "10.1.1.9"), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	waitState(t, cli, wantState(t, k))
	fs := rs[f].Stats()
	assert.False(t, fs.Leader)
	assert.Zero(t, fs.Txns, "the follower wrote")
	assert.Zero(t, fs.Puts+fs.Deletes, "the follower wrote")
	assert.EqualValues(t, 4, fs.Resources[kubemodel.PodResource].Events, "the follower's caches are warm")

	// Stale state the new leader must repair, and changes during the
	// hand-over.
	_, err := cli.Delete(ctx, prefix+kubemodel.NodePodKey("node1", "default", "a"))
	require.NoError(t, err)
	stops[l]()
	require.NoError(t, k.CoreV1().Pods("default").Delete(ctx, "b", metav1.DeleteOptions{}))
	_, err = k.CoreV1().Pods("default").Create(ctx, pod("default", "e", "10.1.1.10"), metav1.CreateOptions{})
	require.NoError(t, err)

	eventually(t, "the follower to lead", func() bool { s := rs[f].Stats(); return s.Leader && s.Reconciles > 0 })
	waitState(t, cli, wantState(t, k))
	assert.False(t, rs[l].Stats().Leader)
	assert.EqualValues(t, 1, rs[f].Stats().Elections)
}

// TestLeaseLossFencesTheLeader revokes the leader's lease from outside, as
// when etcd expires it after a long pause of the leader: the deposed
// leader's writes are refused by the fence, the replicas elect again, and
// the changes reach etcd.
func TestLeaseLossFencesTheLeader(t *testing.T) {
	srv, cli := startEtcd(t)
	k := newKube(pod("default", "a", "10.1.1.2"))
	r1 := newReflector(t, newClient(t, srv), k, reflector.Config{Identity: "one"})
	r2 := newReflector(t, newClient(t, srv), k, reflector.Config{Identity: "two"})
	run(t, r1)
	run(t, r2)
	rs := []*reflector.Reflector{r1, r2}
	l := leaderOf(t, rs...)
	waitState(t, cli, wantState(t, k))

	ctx := context.Background()
	var resp *clientv3.GetResponse
	eventually(t, "both replicas campaign (each once its informers synced)", func() bool {
		var err error
		resp, err = cli.Get(ctx, reflector.DefaultElectionPrefix+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		require.NoError(t, err)
		return len(resp.Kvs) == 2
	})
	_, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	require.NoError(t, err)
	_, err = k.CoreV1().Pods("default").Create(ctx, pod("default", "b", "10.1.1.3"), metav1.CreateOptions{})
	require.NoError(t, err)

	eventually(t, "the deposed leader to notice", func() bool { return rs[l].Stats().LostLeadership == 1 })
	leaderOf(t, rs...)
	waitState(t, cli, wantState(t, k))
}

// TestRunIsSingleUse: a second Run returns the module's one
// ErrAlreadyRunning at once; the first one goes on (and returns
// context.Canceled when stopped, checked by run).
func TestRunIsSingleUse(t *testing.T) {
	_, cli := startEtcd(t)
	r := newReflector(t, cli, newKube(), reflector.Config{})
	run(t, r)
	waitLeader(t, r)
	err := r.Run(context.Background())
	require.ErrorIs(t, err, reflector.ErrAlreadyRunning)
	require.ErrorIs(t, err, lifecycle.ErrAlreadyRunning)
	assert.EqualError(t, err, "reflector: Run called more than once")
	assert.True(t, r.Stats().Leader, "the first Run goes on")
}

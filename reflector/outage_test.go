package reflector_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/testseed"
	"github.com/vswitchkit/vswitchkit/reflector"
)

// churn makes n random changes (creates, reflected and unreflected
// updates, deletes) of pods, services, endpoint slices, nodes and
// namespaces through the fake API server. It keeps the informers at most
// a few dozen events behind (the fake's watch channels hold 100), and
// calls at(i) before change i. seed is the test's fixed seed (-args
// -seed=N replaces it).
func churn(t *testing.T, k *kube, r *reflector.Reflector, seed uint64, n int, at func(i int)) {
	t.Helper()
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(testseed.Fixed(t, seed), 1))
	core, disc := k.CoreV1(), k.DiscoveryV1()
	cr, up := metav1.CreateOptions{}, metav1.UpdateOptions{}
	del := metav1.DeleteOptions{}
	events := func() (sum uint64) { // one per API change: pod peers share the pods' events
		for name, rs := range r.Stats().Resources {
			if name != kubemodel.PodPeerResource {
				sum += rs.Events
			}
		}
		return sum
	}
	base := events()
	exists := map[string]bool{}
	ip := func() string { return fmt.Sprintf("10.%d.%d.%d", rnd.IntN(4), rnd.IntN(256), 1+rnd.IntN(250)) }
	for i := range n {
		if at != nil {
			at(i)
		}
		name := fmt.Sprintf("o%d", rnd.IntN(60))
		kind := rnd.IntN(5)
		id := fmt.Sprint(kind, "/", name)
		var err error
		switch {
		case !exists[id]:
			switch kind {
			case 0:
				_, err = core.Pods("default").Create(ctx, pod("default", name, ip()), cr)
			case 1:
				_, err = core.Services("default").Create(ctx, service("default", name, ip(), int32(1+rnd.IntN(1000))), cr)
			case 2:
				_, err = disc.EndpointSlices("default").Create(ctx, slice("default", name, fmt.Sprintf("svc%d", rnd.IntN(10)), 80, ip(), ip()), cr)
			case 3:
				_, err = core.Nodes().Create(ctx, node(name, ip(), "10.9.0.0/24"), cr)
			case 4:
				_, err = core.Namespaces().Create(ctx, namespace(name), cr)
			}
			exists[id] = true
		case rnd.IntN(4) == 0:
			switch kind {
			case 0:
				err = core.Pods("default").Delete(ctx, name, del)
			case 1:
				err = core.Services("default").Delete(ctx, name, del)
			case 2:
				err = disc.EndpointSlices("default").Delete(ctx, name, del)
			case 3:
				err = core.Nodes().Delete(ctx, name, del)
			case 4:
				err = core.Namespaces().Delete(ctx, name, del)
			}
			exists[id] = false
		default:
			reflected := rnd.IntN(3) > 0
			switch kind {
			case 0:
				p := pod("default", name, ip())
				if !reflected {
					p, err = core.Pods("default").Get(ctx, name, metav1.GetOptions{})
					require.NoError(t, err)
					p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, LastProbeTime: metav1.Now()}}
				}
				_, err = core.Pods("default").UpdateStatus(ctx, p, up)
			case 1:
				s := service("default", name, ip(), int32(1+rnd.IntN(1000)))
				_, err = core.Services("default").Update(ctx, s, up)
			case 2:
				_, err = disc.EndpointSlices("default").Update(ctx, slice("default", name, fmt.Sprintf("svc%d", rnd.IntN(10)), 80, ip()), up)
			case 3:
				nd, gerr := core.Nodes().Get(ctx, name, metav1.GetOptions{})
				require.NoError(t, gerr)
				if reflected {
					nd.Labels["rack"] = fmt.Sprint(rnd.IntN(5))
				} else {
					nd.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, LastHeartbeatTime: metav1.Now()}}
				}
				_, err = core.Nodes().UpdateStatus(ctx, nd, up)
			case 4:
				ns := namespace(name)
				ns.Labels["v"] = fmt.Sprint(rnd.IntN(3))
				_, err = core.Namespaces().Update(ctx, ns, up)
			}
		}
		require.NoError(t, err, "change %d", i)
		for start := time.Now(); int64(events()-base) < int64(i+1-50); {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("change %d: the informers saw %d events, want %d; %+v", i, events()-base, i+1-50, r.Stats())
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestEtcdRestartDuringChanges stops etcd while 10,000 changes flow from
// the API server and restarts it later: the reflector retries with
// backoff, reconciles after the reconnect, and etcd ends equal to the API
// server's state — nothing lost, nothing stale.
func TestEtcdRestartDuringChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 changes")
	}
	srv, cli := startEtcd(t)
	k := newKube()
	r := newReflector(t, newClient(t, srv), k, reflector.Config{
		WriteTimeout: time.Second, RetryMinBackoff: 20 * time.Millisecond, RetryMaxBackoff: 300 * time.Millisecond,
	})
	run(t, r)
	waitLeader(t, r)
	churn(t, k, r, 1, 10_000, func(i int) {
		switch i {
		case 3000:
			srv.Stop()
		case 6000:
			require.NoError(t, srv.Restart())
		}
	})
	waitState(t, cli, wantState(t, k))
	eventually(t, "a reconcile after the outage", func() bool { return r.Stats().Reconciles > 1 })
	s := r.Stats()
	assert.Positive(t, s.WriteErrors, "the outage was noticed")
	t.Logf("stats after the outage: %+v", s)
}

// TestManyChangesModel: without faults, the random changes end in the
// API server's state too (the incremental path alone, no reconcile).
func TestManyChangesModel(t *testing.T) {
	_, cli := startEtcd(t)
	k := newKube()
	r := newReflector(t, cli, k, reflector.Config{})
	run(t, r)
	waitLeader(t, r)
	churn(t, k, r, 2, 2000, nil)
	waitState(t, cli, wantState(t, k))
	assert.EqualValues(t, 1, r.Stats().Reconciles, "only the start-up reconcile")
}

// TestEtcdDownAtStart: the reflector starts while etcd is down; it keeps
// trying (leadership cannot be had without etcd), counting each failed
// attempt, and reflects everything once etcd is up. The outage is logged
// at Warn once when it starts and at Info once when it ends, not per
// attempt (CONTRIBUTING R10).
func TestEtcdDownAtStart(t *testing.T) {
	srv, cli := startEtcd(t)
	k := newKube(pod("default", "a", "10.1.1.2"), node("n1", "192.168.0.1", "10.1.1.0/24"))
	srv.Stop()
	logs := &logBuffer{}
	r := newReflector(t, newClient(t, srv), k, reflector.Config{
		WriteTimeout: 500 * time.Millisecond, RetryMinBackoff: 20 * time.Millisecond, RetryMaxBackoff: 200 * time.Millisecond,
		Logger: logs.logger(),
	})
	run(t, r)
	eventually(t, "the informers to sync", func() bool { return r.Stats().Resources["pod"].Events == 1 })
	// Recorded attempts, not a sleep: three campaigns failed meanwhile.
	eventually(t, "failed campaigns", func() bool { return r.Stats().CampaignErrors >= 3 })
	assert.False(t, r.Stats().Leader)
	assert.Zero(t, r.Stats().Elections)
	require.NoError(t, srv.Restart())
	waitLeader(t, r)
	waitState(t, cli, wantState(t, k))
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), "the outage starts: one Warn\n%s", logs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), "etcd answers again"), "the outage ends: one Info")
}

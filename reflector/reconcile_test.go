package reflector_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/reflector"
)

// recordWatch records every event under prefix+"k8s/" from the current revision
// until stop is called.
type recordWatch struct {
	mu     sync.Mutex
	events []*clientv3.Event
	stop   func()
}

func watchPrefix(t *testing.T, cli *clientv3.Client) *recordWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rev := revision(t, cli)
	wch := cli.Watch(ctx, prefix+kubemodel.KeyRoot, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	rw := &recordWatch{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for resp := range wch {
			rw.mu.Lock()
			rw.events = append(rw.events, resp.Events...)
			rw.mu.Unlock()
		}
	})
	rw.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(rw.stop)
	return rw
}

func (rw *recordWatch) all() []*clientv3.Event {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return append([]*clientv3.Event(nil), rw.events...)
}

// TestStaleEtcdReconciledWithoutGaps starts a reflector on an etcd that
// holds what an earlier reflector left: keys of objects deleted since,
// values that changed since, keys that are fine, and garbage under a
// resource's prefix. The reconcile fixes exactly what is wrong: no key of
// an object that exists is ever deleted (a watching agent never sees a
// present object vanish), unchanged keys are not rewritten, and keys the
// reflector does not own stay.
func TestStaleEtcdReconciledWithoutGaps(t *testing.T) {
	_, cli := startEtcd(t)
	var objs []runtime.Object
	for _, name := range []string{"same", "changed", "missing"} {
		objs = append(objs, pod("default", name, "10.1.1.2"), service("default", name, "10.96.0.1", 80),
			slice("default", name+"-1", name, 80, "10.1.1.2"), node(name, "192.168.0.1", "10.1.1.0/24"), namespace(name))
	}
	k := newKube(objs...)
	want := wantState(t, k)
	require.Len(t, want, 19, "5 kinds and the pods' peer records, 3 each, and the layout key")

	ctx := context.Background()
	put := func(key, value string) {
		_, err := cli.Put(ctx, prefix+key, value)
		require.NoError(t, err)
	}
	for key, v := range want {
		switch {
		case strings.HasSuffix(key, "/same"):
			put(key, v)
		case strings.HasSuffix(key, "/changed"):
			put(key, "stale value")
		}
	}
	deletedKeys := []string{
		kubemodel.NodePodKey("node1", "default", "gone"), kubemodel.ServiceKey("default", "gone"), kubemodel.EndpointsKey("default", "gone"),
		kubemodel.NodeKey("gone"), kubemodel.NamespaceKey("gone"), kubemodel.NodePodKey("node1", "default", "Not_A_Name"),
		kubemodel.PodKey("default", "same"), // the flat layout's key of a present pod: moved
	}
	for _, key := range deletedKeys {
		put(key, "left behind")
	}
	unowned := map[string]string{"k8s/other/x": "not the reflector's", "nodesync/node/1": "neither"}
	for key, v := range unowned {
		put(key, v)
	}

	rw := watchPrefix(t, cli)
	r := newReflector(t, cli, k, reflector.Config{})
	run(t, r)
	waitLeader(t, r)
	wantAll := map[string]string{"k8s/other/x": unowned["k8s/other/x"]}
	for key, v := range want {
		wantAll[key] = v
	}
	waitState(t, cli, wantAll)
	got, err := cli.Get(ctx, prefix+"nodesync/node/1")
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1)
	// Watch events arrive in revision order: once the watch delivered a
	// sentinel written now, it delivered every change before it.
	const sentinel = "k8s/other/sentinel"
	put(sentinel, "end")
	eventually(t, "the watch reaches the sentinel", func() bool {
		return slices.ContainsFunc(rw.all(), func(ev *clientv3.Event) bool { return string(ev.Kv.Key) == prefix+sentinel })
	})
	rw.stop()

	var puts, dels []string
	layoutAt, lastPodPut, flatDelAt := -1, -1, -1
	for i, ev := range rw.all() {
		key := strings.TrimPrefix(string(ev.Kv.Key), prefix)
		if key == sentinel {
			continue
		}
		if ev.Type == mvccpb.DELETE {
			dels = append(dels, key)
			_, present := want[key]
			assert.False(t, present, "key %s of a present object was deleted", key)
			if strings.HasPrefix(key, kubemodel.PodKeyPrefix) {
				flatDelAt = i
			}
		} else {
			puts = append(puts, key)
			assert.False(t, strings.HasSuffix(key, "/same"), "unchanged key %s rewritten", key)
			switch {
			case key == kubemodel.LayoutKey:
				layoutAt = i
			case strings.HasPrefix(key, kubemodel.NodePodKeyPrefix):
				lastPodPut = i
			}
		}
	}
	assert.ElementsMatch(t, deletedKeys, dels)
	assert.Len(t, puts, 13, "the changed and the missing keys, and the layout key: %v", puts)
	// The move from the flat layout: the per-node keys, the layout key,
	// then the flat keys.
	assert.Less(t, lastPodPut, layoutAt)
	assert.Less(t, layoutAt, flatDelAt)
	eventually(t, "the counters of the reconcile", func() bool { return r.Stats().Reconciles == 1 })
	s := r.Stats()
	assert.EqualValues(t, 12, s.Puts)
	assert.EqualValues(t, len(deletedKeys), s.Deletes)
	assert.Positive(t, s.LastReconcile)
}

// TestRelistReconciles breaks the pods watch with 410 Gone, so that the
// informer re-lists; the reflector then reconciles the pods: a key removed
// behind its back comes back, and a foreign key under the pod prefix goes.
func TestRelistReconciles(t *testing.T) {
	_, cli := startEtcd(t)
	k := newKube(pod("default", "a", "10.1.1.2"), pod("default", "b", "10.1.1.3"))
	r := newReflector(t, cli, k, reflector.Config{})
	run(t, r)
	waitLeader(t, r)
	want := wantState(t, k)
	waitState(t, cli, want)

	ctx := context.Background()
	_, err := cli.Delete(ctx, prefix+kubemodel.NodePodKey("node1", "default", "a"))
	require.NoError(t, err)
	_, err = cli.Put(ctx, prefix+kubemodel.NodePodKey("node1", "default", "intruder"), "x")
	require.NoError(t, err)
	// A change made while the watch is down arrives with the re-list.
	k.expire("pods")
	_, err = k.CoreV1().Pods("default").Create(ctx, pod("default", "c", "10.1.1.4"), metav1.CreateOptions{})
	require.NoError(t, err)

	waitState(t, cli, wantState(t, k))
	assert.EqualValues(t, 1, r.Stats().Resources[kubemodel.PodResource].Relists)
}

// TestBadObjectsSkipped reflects a pod with an unparsable IP and a service
// with a port out of range next to good objects: the bad ones are
// reported (Stats and a Warn log) and skipped, the rest is reflected; a
// good object that turns bad loses its key, and comes back when fixed.
func TestBadObjectsSkipped(t *testing.T) {
	_, cli := startEtcd(t)
	badPod := pod("default", "bad", "10.1.1.300")
	badSvc := service("default", "bad", "10.96.0.2", 70000)
	k := newKube(pod("default", "good", "10.1.1.2"), badPod, service("default", "good", "10.96.0.1", 80), badSvc)
	logs := &logBuffer{}
	r := newReflector(t, cli, k, reflector.Config{Logger: logs.logger()})
	run(t, r)
	waitLeader(t, r)
	want := wantState(t, k)
	require.Len(t, want, 4, "the layout key and the good objects")
	require.Contains(t, want, kubemodel.NodePodKey("node1", "default", "good"))
	require.Contains(t, want, kubemodel.PodPeerKey("default", "good"))
	require.Contains(t, want, kubemodel.ServiceKey("default", "good"))
	waitState(t, cli, want)

	s := r.Stats()
	assert.Equal(t, 1, s.Resources[kubemodel.PodResource].BadObjects)
	assert.Equal(t, 1, s.Resources[kubemodel.ServiceResource].BadObjects)
	assert.Contains(t, logs.String(), `status.podIP \"10.1.1.300\": not an IP address`)
	assert.Contains(t, logs.String(), `spec.ports[0].port \"70000\": must be 1..65535`)

	// The good pod turns bad: its key goes. Fixed again: it comes back.
	ctx := context.Background()
	good := pod("default", "good", "")
	good.Status.PodIPs = []corev1.PodIP{{IP: "garbage"}}
	_, err := k.CoreV1().Pods("default").UpdateStatus(ctx, good, metav1.UpdateOptions{})
	require.NoError(t, err)
	delete(want, kubemodel.NodePodKey("node1", "default", "good"))
	delete(want, kubemodel.PodPeerKey("default", "good"))
	waitState(t, cli, want)
	assert.Equal(t, 2, r.Stats().Resources[kubemodel.PodResource].BadObjects)

	_, err = k.CoreV1().Pods("default").UpdateStatus(ctx, pod("default", "good", "10.1.1.5"), metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = k.CoreV1().Services("default").Update(ctx, service("default", "bad", "10.96.0.2", 443), metav1.UpdateOptions{})
	require.NoError(t, err)
	waitState(t, cli, wantState(t, k))
	s = r.Stats()
	assert.Equal(t, 1, s.Resources[kubemodel.PodResource].BadObjects)
	assert.Equal(t, 0, s.Resources[kubemodel.ServiceResource].BadObjects)
	assert.EqualValues(t, 2, s.Resources[kubemodel.PodResource].BadReports)
}

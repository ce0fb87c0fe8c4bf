package watcher

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	"github.com/vswitchkit/vswitchkit/internal/testseed"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestChurnAcrossServerRestarts writes 10000 puts and deletes across 1000
// keys while the etcd server is stopped and restarted twice, and checks
// that the state assembled from the events equals etcd's state exactly and
// that every change applied to the state it followed.
func TestChurnAcrossServerRestarts(t *testing.T) {
	const (
		ops     = 10000
		keys    = 1000
		writers = 16
	)
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	rec := &controllertest.EventRecorder{}
	cfg := baseConfig(srv)
	cfg.MirrorPath = filepath.Join(t.TempDir(), "mirror.db")
	w, err := New(rec, cfg) // the watcher's own client
	require.NoError(t, err)
	start(t, w)
	_, err = rec.WaitFor(ctx, 1)
	require.NoError(t, err)

	var done atomic.Int64
	var wg sync.WaitGroup
	seed := testseed.Fixed(t, 0) // writer i uses seed+i
	for wi := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed+uint64(wi), 42))
			for i := range ops / writers {
				k := rng.IntN(keys/writers)*writers + wi // disjoint key sets
				var err error
				switch r := rng.IntN(10); {
				case r < 6:
					p := pod(fmt.Sprintf("ns%d", k%7), fmt.Sprintf("pod-%d", k), fmt.Sprintf("10.0.%d.%d", i%250, wi))
					_, err = etcdtest.Put(ctx, cli, testKubePrefix+kubemodel.PodKey(p.Namespace, p.Name), mustMarshal(t, p))
				case r < 7:
					_, err = etcdtest.Put(ctx, cli, fmt.Sprintf("%sext-%d", testExtPrefix, k), mustAny(t, wrapperspb.String(fmt.Sprint(i))))
				case r < 8:
					_, err = etcdtest.Delete(ctx, cli, fmt.Sprintf("%sext-%d", testExtPrefix, k))
				default:
					_, err = etcdtest.Delete(ctx, cli, testKubePrefix+kubemodel.PodKey(fmt.Sprintf("ns%d", k%7), fmt.Sprintf("pod-%d", k)))
				}
				if err != nil {
					t.Errorf("write: %v", err)
					return
				}
				done.Add(1)
			}
		}()
	}
	restarts := 0
	for _, at := range []int64{ops * 3 / 10, ops * 65 / 100} {
		waitFor(t, ctx, "writers' progress", func() bool { return done.Load() >= at })
		srv.Stop()
		time.Sleep(300 * time.Millisecond) // writers and the watcher hit a dead server
		require.NoError(t, srv.Restart())
		restarts++
	}
	wg.Wait()
	require.Equal(t, int64(ops), done.Load())
	require.Equal(t, 2, restarts)

	m := &model{}
	next := 0
	waitState(t, ctx, rec, m, &next, func() map[string]string { return etcdState(t, ctx, cli, w.reg) })
	// Nothing stale may arrive later either: write a marker and re-check.
	putPod(t, ctx, cli, pod("default", "marker", ""))
	waitState(t, ctx, rec, m, &next, func() map[string]string { return etcdState(t, ctx, cli, w.reg) })

	st := w.Stats()
	t.Logf("stats: %+v; events: %d (%d resyncs, %d changes)", st, rec.Len(), m.resyncs, m.changes)
	assert.GreaterOrEqual(t, st.RemoteResyncs, uint64(3), "start-up + one per restart")
	assert.Zero(t, st.LocalResyncs)
	assert.Zero(t, st.BadKeys+st.BadValues)
}

// TestCompactionWhileDisconnected cuts the watcher off etcd (the server
// keeps running), changes and compacts the key space, and reconnects.
func TestCompactionWhileDisconnected(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	proxy, err := etcdtest.NewProxy(srv.Endpoint())
	require.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	for i := range 20 {
		putPod(t, ctx, cli, pod("default", fmt.Sprintf("p%d", i), "10.0.0.1"))
	}
	rec := &controllertest.EventRecorder{}
	cfg := baseConfig(nil)
	cfg.Etcd.Endpoints = []string{proxy.Addr()}
	w, err := New(rec, cfg)
	require.NoError(t, err)
	start(t, w)
	m := &model{}
	next := 0
	waitState(t, ctx, rec, m, &next, func() map[string]string { return etcdState(t, ctx, cli, w.reg) })

	proxy.Disconnect()
	var rev int64
	for i := range 20 {
		if i%3 == 0 {
			resp, err := cli.Delete(ctx, testKubePrefix+kubemodel.PodKey("default", fmt.Sprintf("p%d", i)))
			require.NoError(t, err)
			rev = resp.Header.Revision
		} else {
			resp, err := cli.Put(ctx, testKubePrefix+kubemodel.PodKey("default", fmt.Sprintf("p%d", i)), string(mustMarshal(t, pod("default", fmt.Sprintf("p%d", i), "10.0.0.2"))))
			require.NoError(t, err)
			rev = resp.Header.Revision
		}
	}
	putExt(t, ctx, cli, "new", "value")
	_, err = cli.Compact(ctx, rev, clientv3.WithCompactPhysical())
	require.NoError(t, err)
	proxy.Reconnect()

	waitState(t, ctx, rec, m, &next, func() map[string]string { return etcdState(t, ctx, cli, w.reg) })
	assert.GreaterOrEqual(t, m.resyncs, 2, "a fresh DBResync after the reconnect")
	st := w.Stats()
	assert.GreaterOrEqual(t, st.Compactions+st.Reconnects, uint64(1))
	t.Logf("stats: %+v", st)
}

// TestCompactedWatchStartResyncs compacts the key space right after the
// snapshot was read, so the watch starts below the compacted revision.
func TestCompactedWatchStartResyncs(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	putPod(t, ctx, cli, pod("default", "a", "10.0.0.1"))
	rec := &controllertest.EventRecorder{}
	w, err := NewWithClient(cli, rec, baseConfig(srv))
	require.NoError(t, err)
	first := true
	w.hookAfterSnapshot = func(int64) {
		if !first {
			return
		}
		first = false
		putPod(t, ctx, cli, pod("default", "b", "10.0.0.2"))
		resp, err := cli.Delete(ctx, testKubePrefix+kubemodel.PodKey("default", "a"))
		require.NoError(t, err)
		_, err = cli.Compact(ctx, resp.Header.Revision)
		require.NoError(t, err)
	}
	start(t, w)
	m := &model{}
	next := 0
	waitState(t, ctx, rec, m, &next, func() map[string]string { return etcdState(t, ctx, cli, w.reg) })
	evs := rec.Events()
	require.Len(t, evs, 2, "two DBResyncs, no changes in between")
	for _, ev := range evs {
		require.IsType(t, &controller.DBResync{}, ev)
	}
	waitFor(t, ctx, "counters", func() bool { return w.Stats().RemoteResyncs == 2 })
	assert.Equal(t, uint64(1), w.Stats().Compactions)
}

func TestQueueFullIsRetriedInOrder(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	var calls atomic.Int64
	rec := &controllertest.EventRecorder{PushErr: func(controller.Event) error {
		if calls.Add(1)%3 != 0 {
			return controller.ErrQueueFull // two of three pushes are refused
		}
		return nil
	}}
	w, err := NewWithClient(cli, rec, baseConfig(srv))
	require.NoError(t, err)
	start(t, w)
	_, err = rec.WaitFor(ctx, 1)
	require.NoError(t, err)
	for i := range 50 {
		putPod(t, ctx, cli, pod("default", "p", fmt.Sprintf("10.0.0.%d", i)))
	}
	m := &model{}
	next := 0
	waitState(t, ctx, rec, m, &next, func() map[string]string { return etcdState(t, ctx, cli, w.reg) })
	evs, err := rec.WaitFor(ctx, 51)
	require.NoError(t, err)
	for i, ev := range evs[1:] {
		ch := ev.(*controller.KubeStateChange)
		assert.Equal(t, fmt.Sprintf("10.0.0.%d", i), ch.NewValue.(*kubemodel.Pod).IpAddress)
	}
	st := w.Stats()
	assert.GreaterOrEqual(t, st.PushRetries, uint64(100))
	assert.Zero(t, st.ForcedResyncs)
}

func TestQueueFullTooLongForcesResync(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	var refuse atomic.Bool
	refuse.Store(true)
	rec := &controllertest.EventRecorder{PushErr: func(ev controller.Event) error {
		if _, ok := ev.(*controller.DBResync); !ok && refuse.Load() {
			return controller.ErrQueueFull
		}
		return nil
	}}
	cfg := baseConfig(srv)
	cfg.QueueFullTimeout = 50 * time.Millisecond
	w, err := NewWithClient(cli, rec, cfg)
	require.NoError(t, err)
	start(t, w)
	_, err = rec.WaitFor(ctx, 1)
	require.NoError(t, err)
	putPod(t, ctx, cli, pod("default", "a", "10.0.0.1"))
	waitFor(t, ctx, "a forced resync", func() bool { return w.Stats().ForcedResyncs >= 1 })
	putPod(t, ctx, cli, pod("default", "b", "10.0.0.2"))
	refuse.Store(false)
	putPod(t, ctx, cli, pod("default", "c", "10.0.0.3"))
	m := &model{}
	next := 0
	waitState(t, ctx, rec, m, &next, func() map[string]string { return etcdState(t, ctx, cli, w.reg) })
	assert.GreaterOrEqual(t, m.resyncs, 2)
}

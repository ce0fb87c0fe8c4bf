package watcher

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestSnapshotThenChangesInOrder(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	p1 := pod("default", "p1", "10.1.1.2")
	putPod(t, ctx, cli, p1)
	node := &kubemodel.Node{Name: "n1", PodCidrs: []string{"10.1.1.0/24"}}
	put(t, ctx, cli, testKubePrefix+kubemodel.NodeKey("n1"), mustMarshal(t, node))
	putExt(t, ctx, cli, "config/a", "A")
	put(t, ctx, cli, "/elsewhere/k8s/pod/default/x", []byte("not watched"))

	rec := &controllertest.EventRecorder{}
	w, err := NewWithClient(cli, rec, baseConfig(srv))
	require.NoError(t, err)
	start(t, w)

	evs, err := rec.WaitFor(ctx, 1)
	require.NoError(t, err)
	rs, ok := evs[0].(*controller.DBResync)
	require.True(t, ok, "first event is %T", evs[0])
	assert.False(t, rs.Local)
	assert.ElementsMatch(t, []string{"pod", "service", "endpoints", "node", "namespace", "networkpolicy", "podpeer"}, sortedKeys(rs.KubeState))
	assert.Empty(t, rs.KubeState["service"])
	require.Len(t, rs.KubeState["pod"], 1)
	assert.True(t, proto.Equal(p1, rs.KubeState["pod"][kubemodel.PodKey("default", "p1")]))
	assert.True(t, proto.Equal(node, rs.KubeState["node"]["k8s/node/n1"]))
	require.Len(t, rs.ExternalConfig, 1)
	assert.True(t, proto.Equal(wrapperspb.String("A"), rs.ExternalConfig["config/a"]))

	// Changes, in order.
	p2 := pod("default", "p2", "10.1.1.3")
	putPod(t, ctx, cli, p2)
	p1b := pod("default", "p1", "10.1.1.9")
	putPod(t, ctx, cli, p1b)
	_, err = cli.Delete(ctx, testKubePrefix+kubemodel.PodKey("default", "p2"))
	require.NoError(t, err)
	// The two prefixes are watched independently: order across them is
	// not defined, so the external changes are written after the others
	// arrived.
	_, err = rec.WaitFor(ctx, 4)
	require.NoError(t, err)
	putExt(t, ctx, cli, "config/b", "B")
	_, err = cli.Delete(ctx, testExtPrefix+"config/a")
	require.NoError(t, err)
	type change struct {
		res, key   string
		prev, next proto.Message
	}
	want := []change{
		{"pod", "k8s/pod/default/p2", nil, p2},
		{"pod", "k8s/pod/default/p1", p1, p1b},
		{"pod", "k8s/pod/default/p2", p2, nil},
		{"ext", "config/b", nil, wrapperspb.String("B")},
		{"ext", "config/a", nil, nil},
	}
	evs, err = rec.WaitFor(ctx, 1+len(want))
	require.NoError(t, err)
	for i, wc := range want {
		switch e := evs[1+i].(type) {
		case *controller.KubeStateChange:
			require.Equal(t, wc.res, e.Resource, "event %d", i)
			assert.Equal(t, wc.key, e.Key, "event %d", i)
			assert.True(t, equalMsg(wc.prev, e.PrevValue), "event %d prev: %v", i, e.PrevValue)
			assert.True(t, equalMsg(wc.next, e.NewValue), "event %d new: %v", i, e.NewValue)
		case *controller.ExternalConfigChange:
			require.Equal(t, "ext", wc.res, "event %d", i)
			assert.Equal(t, controller.RemoteDBSource, e.Source)
			assert.False(t, e.IsBlocking())
			require.Len(t, e.UpdatedKVs, 1)
			v, ok := e.UpdatedKVs[wc.key]
			require.True(t, ok, "event %d: %v", i, e.UpdatedKVs)
			assert.True(t, equalMsg(wc.next, v), "event %d", i)
		default:
			t.Fatalf("event %d: unexpected %T", i, e)
		}
	}

	// Writing the same value again produces no event: the marker after it
	// is the next event.
	putPod(t, ctx, cli, p1b)
	putPod(t, ctx, cli, pod("default", "marker", ""))
	evs, err = rec.WaitFor(ctx, 2+len(want))
	require.NoError(t, err)
	last := evs[1+len(want)].(*controller.KubeStateChange)
	assert.Equal(t, "k8s/pod/default/marker", last.Key)

	// Counters are updated right after the push returns.
	waitFor(t, ctx, "counters", func() bool { return w.Stats().KubeChanges == 4 })
	st := w.Stats()
	assert.Equal(t, uint64(1), st.RemoteResyncs)
	assert.Equal(t, uint64(2), st.ExternalChanges)
	assert.Zero(t, st.BadKeys+st.BadValues)
	assert.Positive(t, st.Revision)
}

func TestExternalConfigTransactionIsOneEvent(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	putExt(t, ctx, cli, "x", "old")
	rec := &controllertest.EventRecorder{}
	w, err := NewWithClient(cli, rec, baseConfig(srv))
	require.NoError(t, err)
	start(t, w)
	_, err = rec.WaitFor(ctx, 1)
	require.NoError(t, err)

	_, err = cli.Txn(ctx).Then(
		clientv3.OpPut(testExtPrefix+"a", string(mustAny(t, wrapperspb.String("1")))),
		clientv3.OpPut(testExtPrefix+"b", string(mustAny(t, wrapperspb.String("2")))),
		clientv3.OpDelete(testExtPrefix+"x"),
	).Commit()
	require.NoError(t, err)
	evs, err := rec.WaitFor(ctx, 2)
	require.NoError(t, err)
	ch := evs[1].(*controller.ExternalConfigChange)
	require.Len(t, ch.UpdatedKVs, 3)
	assert.True(t, proto.Equal(wrapperspb.String("1"), ch.UpdatedKVs["a"]))
	assert.True(t, proto.Equal(wrapperspb.String("2"), ch.UpdatedKVs["b"]))
	v, ok := ch.UpdatedKVs["x"]
	assert.True(t, ok)
	assert.Nil(t, v)
}

func TestGarbageSkippedCountedAndLaterChangesArrive(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	garbage := []byte{0xff, 0xff, 0xff, 0xff}
	// Present at the snapshot.
	put(t, ctx, cli, testKubePrefix+kubemodel.PodKey("default", "bad"), garbage)              // bad value
	put(t, ctx, cli, testKubePrefix+"k8s/pod/no-namespace", mustMarshal(t, pod("", "x", ""))) // bad key scheme
	put(t, ctx, cli, testKubePrefix+"k8s/unknown/a", []byte("x"))                             // no resource
	put(t, ctx, cli, testKubePrefix+"nodesync/node/n1", garbage)                              // outside the resources' root
	put(t, ctx, cli, testExtPrefix+"notany", garbage)                                         // not an Any
	putPod(t, ctx, cli, pod("default", "good", "10.0.0.1"))

	logs := &logBuffer{}
	rec := &controllertest.EventRecorder{}
	cfg := baseConfig(srv)
	cfg.Logger = logs.logger()
	w, err := NewWithClient(cli, rec, cfg)
	require.NoError(t, err)
	start(t, w)
	evs, err := rec.WaitFor(ctx, 1)
	require.NoError(t, err)
	rs := evs[0].(*controller.DBResync)
	assert.Equal(t, []string{"k8s/pod/default/good"}, sortedKeys(rs.KubeState["pod"]))
	assert.Empty(t, rs.ExternalConfig)
	st := w.Stats()
	assert.Equal(t, uint64(1), st.BadKeys)
	assert.Equal(t, uint64(1), st.UnknownKeys, "a resource this agent does not register is skipped, not bad")
	assert.Equal(t, uint64(2), st.BadValues)
	assertSkipped(t, rs, st, map[string]Skipped{"pod": {BadKeys: 1, BadValues: 1}})
	assert.Equal(t, Skipped{BadValues: 1}, st.SkippedExternal)

	// At run time: garbage of every kind, then a valid change.
	unknownType := mustMarshal(t, &anypb.Any{TypeUrl: "type.googleapis.com/no.such.Type"})
	put(t, ctx, cli, testKubePrefix+kubemodel.PodKey("default", "bad2"), garbage)
	put(t, ctx, cli, testKubePrefix+"k8s/node/UPPER", mustMarshal(t, &kubemodel.Node{}))
	put(t, ctx, cli, testKubePrefix+"nodesync/id/1", garbage) // never watched
	put(t, ctx, cli, testExtPrefix+"unknown-type", unknownType)
	put(t, ctx, cli, testKubePrefix+kubemodel.PodKey("default", "good"), garbage) // valid -> garbage: deleted
	putPod(t, ctx, cli, pod("default", "after", "10.0.0.2"))

	evs, err = rec.WaitFor(ctx, 3)
	require.NoError(t, err)
	del := evs[1].(*controller.KubeStateChange)
	assert.Equal(t, "k8s/pod/default/good", del.Key)
	assert.NotNil(t, del.PrevValue)
	assert.Nil(t, del.NewValue, "a key whose value became garbage is delivered as deleted")
	add := evs[2].(*controller.KubeStateChange)
	assert.Equal(t, "k8s/pod/default/after", add.Key)

	// The external-config stream is independent of the Kubernetes one.
	waitFor(t, ctx, "bad values counted", func() bool { return w.Stats().BadValues >= 5 })
	st = w.Stats()
	assert.Equal(t, uint64(2), st.BadKeys)
	assert.Equal(t, uint64(1), st.UnknownKeys)
	assert.Equal(t, uint64(5), st.BadValues)
	assertSkipped(t, rs, st, map[string]Skipped{"pod": {BadKeys: 1, BadValues: 3}, "node": {BadKeys: 1}})
	assert.Equal(t, Skipped{BadValues: 2}, st.SkippedExternal)
	assert.NotContains(t, logs.String(), "nodesync/", "keys next to the resources' root are never read")
	assert.Contains(t, logs.String(), "k8s/node/UPPER")
	assert.NotContains(t, logs.String(), string(garbage))
}

// assertSkipped checks that st counts the skipped keys per resource as
// want says, and zero for the other resources: every resource of the
// DBResync rs (which has one entry per registered resource) is counted.
func assertSkipped(t *testing.T, rs *controller.DBResync, st Stats, want map[string]Skipped) {
	t.Helper()
	assert.ElementsMatch(t, sortedKeys(rs.KubeState), sortedKeys(st.SkippedByResource), "one entry per registered resource")
	for name, got := range st.SkippedByResource {
		assert.Equal(t, want[name], got, "skipped of %s", name)
	}
}

func TestEventLoopStoppedEndsRun(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	rec := &controllertest.EventRecorder{PushErr: func(controller.Event) error { return controller.ErrStopped }}
	w, err := NewWithClient(cli, rec, baseConfig(srv))
	require.NoError(t, err)
	err = w.Run(ctx)
	require.ErrorIs(t, err, controller.ErrStopped)
	err = w.Run(ctx)
	require.ErrorIs(t, err, ErrAlreadyRunning)
	require.ErrorIs(t, err, lifecycle.ErrAlreadyRunning, "one ErrAlreadyRunning for every package")
	assert.EqualError(t, err, "watcher: Run called more than once")
}

func TestNewRejectsBadArguments(t *testing.T) {
	rec := &controllertest.EventRecorder{}
	_, err := New(nil, Config{})
	require.Error(t, err)
	_, err = NewWithClient(nil, rec, Config{})
	require.Error(t, err)
	_, err = New(rec, Config{Resources: []kubemodel.Resource{{Name: "pod", KeyPrefix: "x/", NewValue: func() proto.Message { return &kubemodel.Pod{} }}}})
	require.ErrorContains(t, err, `"pod" registered twice`)
	_, err = New(rec, Config{MirrorFallbackDelay: -1, Etcd: EtcdConfig{CertFile: "c"}})
	require.Error(t, err)
	for _, want := range []string{"MirrorFallbackDelay", "CertFile"} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestRunReturnsMirrorError(t *testing.T) {
	rec := &controllertest.EventRecorder{}
	dir := t.TempDir()
	w, err := New(rec, Config{MirrorPath: dir}) // a directory is not a bbolt file
	require.NoError(t, err)
	err = w.Run(testCtx(t))
	require.ErrorIs(t, err, ErrMirror)
	require.Zero(t, rec.Len())
}

func TestClosedClientEndsRun(t *testing.T) {
	srv, cli := startEtcd(t)
	own, err := srv.Client()
	require.NoError(t, err)
	rec := &controllertest.EventRecorder{}
	w, err := NewWithClient(own, rec, baseConfig(srv))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(testCtx(t)) }()
	_, err = rec.WaitFor(testCtx(t), 1)
	require.NoError(t, err)
	require.NoError(t, own.Close())
	putPod(t, testCtx(t), cli, pod("default", "x", "")) // the watcher no longer sees it
	require.ErrorIs(t, <-done, ErrClientClosed)
}

// TestChangesBetweenSnapshotAndWatch writes right after the snapshot was
// read, before the watch starts: the watch replays them from the snapshot
// revision + 1, typically in one response holding several revisions.
func TestChangesBetweenSnapshotAndWatch(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	putExt(t, ctx, cli, "keep", "k")
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
		putExt(t, ctx, cli, "x", "1")
		_, err := cli.Delete(ctx, testExtPrefix+"x")
		require.NoError(t, err)
		putExt(t, ctx, cli, "y", "1")
		putExt(t, ctx, cli, "keep", "k2")
		putPod(t, ctx, cli, pod("default", "b", "10.0.0.2"))
		_, err = cli.Delete(ctx, testKubePrefix+kubemodel.PodKey("default", "b"))
		require.NoError(t, err)
		putPod(t, ctx, cli, pod("default", "a", "10.0.0.3"))
	}
	start(t, w)
	m := &model{}
	next := 0
	waitState(t, ctx, rec, m, &next, func() map[string]string { return etcdState(t, ctx, cli, w.reg) })
	putPod(t, ctx, cli, pod("default", "marker", ""))
	waitState(t, ctx, rec, m, &next, func() map[string]string { return etcdState(t, ctx, cli, w.reg) })
	assert.Equal(t, 1, m.resyncs)
	assert.Equal(t, 8, m.changes, "4 external and 4 Kubernetes changes")
}

// TestSnapshotInPages reads a snapshot larger than a page: every key
// arrives in one DBResync at the revision of the first page (a write
// between pages comes as a change after it), and a failed page is
// repeated alone.
func TestSnapshotInPages(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	for i := range 25 {
		putPod(t, ctx, cli, pod("default", fmt.Sprintf("p%02d", i), "10.1.1.2"))
	}
	for i := range 7 {
		putExt(t, ctx, cli, fmt.Sprintf("config/%d", i), "v")
	}
	rec := &controllertest.EventRecorder{}
	cfg := baseConfig(srv)
	cfg.SnapshotPageSize = 4
	w, err := NewWithClient(cli, rec, cfg)
	require.NoError(t, err)
	var requests []int
	late := pod("default", "late", "10.1.1.3")
	w.hookPage = func(n int) error { // 0: the layout key
		requests = append(requests, n)
		switch n {
		case 2:
			putPod(t, ctx, cli, late) // after the snapshot's revision
		case 3:
			return errors.New("page 3 lost")
		}
		return nil
	}
	start(t, w)
	evs, err := rec.WaitFor(ctx, 2)
	require.NoError(t, err)
	rs := evs[0].(*controller.DBResync)
	assert.Len(t, rs.KubeState["pod"], 25)
	assert.Len(t, rs.ExternalConfig, 7)
	ch := evs[1].(*controller.KubeStateChange)
	assert.Equal(t, kubemodel.PodKey("default", "late"), ch.Key)
	assert.Nil(t, ch.PrevValue)
	// 25 pods in 7 pages, 7 external keys in 2: 9 pages, one of them
	// twice; the failed page was not read again from the start.
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, requests, "the layout key, then the pages")
	assert.Equal(t, uint64(1), w.Stats().ConnectErrors)
	assert.Equal(t, uint64(1), w.Stats().RemoteResyncs)
}

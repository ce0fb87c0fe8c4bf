package watcher

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

func TestKubeRanges(t *testing.T) {
	p := testKubePrefix
	cfg, err := Config{KubeStatePrefix: p, NodeName: "n1"}.withDefaults()
	require.NoError(t, err)
	reg, err := newRegistry(cfg)
	require.NoError(t, err)
	assert.Equal(t, []keyRange{{p + "k8s/", p + "k8s0"}}, reg.kubeRanges(kubemodel.LayoutFlat))
	assert.Equal(t, []keyRange{
		{p + "k8s/", p + "k8s/nodepod/"},               // the cluster-wide state before the pods' subtree
		{p + "k8s/nodepod/n1/", p + "k8s/nodepod/n10"}, // this node's pods
		{p + "k8s/nodepod0", p + "k8s0"},               // the cluster-wide state after it (podpeer, service, ...)
	}, reg.kubeRanges(kubemodel.LayoutNodePods))

	cfg.NodeName = ""
	reg, err = newRegistry(cfg)
	require.NoError(t, err)
	assert.Equal(t, []keyRange{
		{p + "k8s/", p + "k8s/nodepod/"},
		{p + "k8s/nodepod/", p + "k8s/nodepod0"}, // every node's pods
		{p + "k8s/nodepod0", p + "k8s0"},
	}, reg.kubeRanges(kubemodel.LayoutNodePods))
}

func TestClassify(t *testing.T) {
	reg := testRegistry(t)
	p := testKubePrefix
	for _, tc := range []struct {
		key    string
		layout int
		kind   keyKind
		rel    string
	}{
		{p + "k8s/layout", kubemodel.LayoutFlat, layoutKey, kubemodel.LayoutKey},
		{p + "k8s/layout", kubemodel.LayoutNodePods, layoutKey, kubemodel.LayoutKey},
		{p + "k8s/pod/ns/a", kubemodel.LayoutFlat, kubeKey, "k8s/pod/ns/a"},
		{p + "k8s/pod/ns/a", kubemodel.LayoutNodePods, flatKey, "k8s/pod/ns/a"},
		{p + "k8s/nodepod/n1/ns/a", kubemodel.LayoutFlat, foreignKey, ""},
		{p + "k8s/nodepod/n1/ns/a", kubemodel.LayoutNodePods, kubeKey, "k8s/pod/ns/a"},
		{p + "k8s/nodepod/n1/bad", kubemodel.LayoutNodePods, kubeKey, "k8s/nodepod/n1/bad"},
		{p + "k8s/podpeer/ns/a", kubemodel.LayoutNodePods, kubeKey, "k8s/podpeer/ns/a"},
		{p + "k8s/service/ns/a", kubemodel.LayoutNodePods, kubeKey, "k8s/service/ns/a"},
		{testExtPrefix + "x", kubemodel.LayoutNodePods, extKey, "x"},
	} {
		kind, rel := reg.classify(tc.key, tc.layout)
		assert.Equal(t, tc.kind, kind, "%s in layout %d", tc.key, tc.layout)
		assert.Equal(t, tc.rel, rel, "%s in layout %d", tc.key, tc.layout)
	}
	// A malformed per-node key is a bad key of the pods.
	_, err := reg.resourceOf("k8s/nodepod/n1/bad")
	require.ErrorIs(t, err, ErrBadKey)
	assert.Equal(t, kubemodel.PodResource, reg.resourceNameOf("k8s/nodepod/n1/bad"))
}

// putNodePod writes pod p in the per-node layout.
func putNodePod(t testing.TB, ctx context.Context, cli *clientv3.Client, p *kubemodel.Pod) {
	t.Helper()
	put(t, ctx, cli, testKubePrefix+kubemodel.NodePodKey(p.NodeName, p.Namespace, p.Name), mustMarshal(t, p))
}

func putPeer(t testing.TB, ctx context.Context, cli *clientv3.Client, p *kubemodel.Pod) {
	t.Helper()
	peer := &kubemodel.PodPeer{Namespace: p.Namespace, Name: p.Name, NodeName: p.NodeName, IpAddresses: []string{p.IpAddress}}
	put(t, ctx, cli, testKubePrefix+kubemodel.PodPeerKey(p.Namespace, p.Name), mustMarshal(t, peer))
}

func putLayout(t testing.TB, ctx context.Context, cli *clientv3.Client, layout int) {
	t.Helper()
	put(t, ctx, cli, testKubePrefix+kubemodel.LayoutKey, kubemodel.FormatLayout(layout))
}

// TestNodePodsLayout: in the per-node layout a watcher with a node name
// reads and watches that node's pods alone (the others are not sent: not
// even counted as left out) and every other resource; pods are delivered
// under their pod keys.
func TestNodePodsLayout(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	putLayout(t, ctx, cli, kubemodel.LayoutNodePods)
	mine, other := podOn("mine", "n1"), podOn("other", "n2")
	for _, p := range []*kubemodel.Pod{mine, other} {
		p.IpAddress = "10.1.1.2"
		putNodePod(t, ctx, cli, p)
		putPeer(t, ctx, cli, p)
	}
	svc := &kubemodel.Service{Namespace: "default", Name: "web"}
	put(t, ctx, cli, testKubePrefix+kubemodel.ServiceKey("default", "web"), mustMarshal(t, svc))

	rec := &controllertest.EventRecorder{}
	cfg := baseConfig(srv)
	cfg.NodeName = "n1"
	w, err := NewWithClient(cli, rec, cfg)
	require.NoError(t, err)
	start(t, w)
	evs, err := rec.WaitFor(ctx, 1)
	require.NoError(t, err)
	rs := evs[0].(*controller.DBResync)
	require.Len(t, rs.KubeState[kubemodel.PodResource], 1)
	assert.True(t, proto.Equal(mine, rs.KubeState[kubemodel.PodResource][kubemodel.PodKey("default", "mine")]))
	assert.Len(t, rs.KubeState[kubemodel.PodPeerResource], 2)
	assert.Len(t, rs.KubeState[kubemodel.ServiceResource], 1)

	// Another node's pod changes: nothing; its peer record: a change.
	other2 := proto.Clone(other).(*kubemodel.Pod)
	other2.Labels = map[string]string{"v": "2"}
	putNodePod(t, ctx, cli, other2)
	putPeer(t, ctx, cli, other2) // same peer record: no event
	other2.IpAddress = "10.1.1.3"
	putPeer(t, ctx, cli, other2)
	// This node's pod: a change under its pod key.
	mine2 := proto.Clone(mine).(*kubemodel.Pod)
	mine2.Labels = map[string]string{"v": "2"}
	putNodePod(t, ctx, cli, mine2)
	// Deleted.
	_, err = cli.Delete(ctx, testKubePrefix+kubemodel.NodePodKey("n1", "default", "mine"))
	require.NoError(t, err)

	evs, err = rec.WaitFor(ctx, 4)
	require.NoError(t, err)
	type change struct{ res, key string }
	var got []change
	for _, ev := range evs[1:] {
		ch := ev.(*controller.KubeStateChange)
		got = append(got, change{ch.Resource, ch.Key})
	}
	assert.ElementsMatch(t, []change{
		{kubemodel.PodPeerResource, kubemodel.PodPeerKey("default", "other")},
		{kubemodel.PodResource, kubemodel.PodKey("default", "mine")},
		{kubemodel.PodResource, kubemodel.PodKey("default", "mine")},
	}, got)
	last := evs[3].(*controller.KubeStateChange)
	if last.Resource == kubemodel.PodResource {
		assert.Nil(t, last.NewValue, "the pod's deletion comes after its change")
	}
	st := w.Stats()
	assert.Zero(t, st.Unkept, "the other node's pods are not even sent")
	assert.Equal(t, kubemodel.LayoutNodePods, st.Layout)
}

// TestLayoutMigration: the reflector moves the state from the flat layout
// to the per-node one in the order it does it (the pods under their
// per-node keys, the layout key, then the flat keys deleted): the watcher
// resyncs once in the new layout, and never delivers the pods as deleted
// meanwhile.
func TestLayoutMigration(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	mine, other := podOn("mine", "n1"), podOn("other", "n2")
	putPod(t, ctx, cli, mine)
	putPod(t, ctx, cli, other)

	rec := &controllertest.EventRecorder{}
	cfg := baseConfig(srv)
	cfg.NodeName = "n1"
	w, err := NewWithClient(cli, rec, cfg)
	require.NoError(t, err)
	start(t, w)
	evs, err := rec.WaitFor(ctx, 1)
	require.NoError(t, err)
	require.Len(t, evs[0].(*controller.DBResync).KubeState[kubemodel.PodResource], 1)
	assert.Equal(t, kubemodel.LayoutFlat, w.Stats().Layout)

	putNodePod(t, ctx, cli, mine)
	putNodePod(t, ctx, cli, other)
	putLayout(t, ctx, cli, kubemodel.LayoutNodePods)
	_, err = cli.Delete(ctx, testKubePrefix+kubemodel.PodKeyPrefix, clientv3.WithPrefix())
	require.NoError(t, err)
	svc := &kubemodel.Service{Namespace: "default", Name: "marker"}
	put(t, ctx, cli, testKubePrefix+kubemodel.ServiceKey("default", "marker"), mustMarshal(t, svc))

	// The state the events assemble reaches the marker, with node n1's
	// pod all along: no pod change is delivered across the move.
	m := &model{}
	next := 0
	waitFor(t, ctx, "the marker", func() bool {
		consume(rec, m, &next)
		_, ok := m.kube[kubemodel.ServiceResource][kubemodel.ServiceKey("default", "marker")]
		return ok
	})
	require.Empty(t, m.problems)
	require.Len(t, m.kube[kubemodel.PodResource], 1)
	assert.True(t, proto.Equal(mine, m.kube[kubemodel.PodResource][kubemodel.PodKey("default", "mine")]))
	resyncs := 0
	for _, ev := range rec.Events()[1:] {
		switch e := ev.(type) {
		case *controller.DBResync:
			resyncs++
		case *controller.KubeStateChange:
			assert.NotEqual(t, kubemodel.PodResource, e.Resource, "no pod change across the move: %v", e)
		}
	}
	assert.Equal(t, 1, resyncs)
	st := w.Stats()
	assert.Equal(t, kubemodel.LayoutNodePods, st.Layout)
	assert.Equal(t, uint64(1), st.LayoutChanges)
}

// TestLayoutRefused: Run ends with an error wrapping ErrLayout when etcd
// holds a layout it does not read, at start or later, and when a pod is
// written in the flat layout while the layout key says per-node (a
// reflector of an older version writing beside the current one).
func TestLayoutRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		before  func(t *testing.T, ctx context.Context, cli *clientv3.Client)
		after   func(t *testing.T, ctx context.Context, cli *clientv3.Client)
		wantKey string
		wantMsg string
	}{
		{
			name:    "newer layout at start",
			before:  func(t *testing.T, ctx context.Context, cli *clientv3.Client) { putLayout(t, ctx, cli, 3) },
			wantKey: kubemodel.LayoutKey, wantMsg: `holds "3"; this watcher reads layouts 1 (no key) and 2: upgrade the agent`,
		},
		{
			name:    "newer layout later",
			after:   func(t *testing.T, ctx context.Context, cli *clientv3.Client) { putLayout(t, ctx, cli, 3) },
			wantKey: kubemodel.LayoutKey, wantMsg: `holds "3"`,
		},
		{
			name: "garbage",
			before: func(t *testing.T, ctx context.Context, cli *clientv3.Client) {
				put(t, ctx, cli, testKubePrefix+kubemodel.LayoutKey, []byte("two"))
			},
			wantKey: kubemodel.LayoutKey, wantMsg: `holds "two"`,
		},
		{
			name: "a flat pod written beside the per-node layout",
			before: func(t *testing.T, ctx context.Context, cli *clientv3.Client) {
				putLayout(t, ctx, cli, kubemodel.LayoutNodePods)
			},
			after: func(t *testing.T, ctx context.Context, cli *clientv3.Client) {
				putPod(t, ctx, cli, podOn("old", "n1"))
			},
			wantKey: kubemodel.PodKey("default", "old"), wantMsg: "was written in the flat key layout (1) while etcd's layout key says 2: a reflector of an older version",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			srv, cli := startEtcd(t)
			if tc.before != nil {
				tc.before(t, ctx, cli)
			}
			rec := &controllertest.EventRecorder{}
			cfg := baseConfig(srv)
			cfg.NodeName = "n1"
			w, err := NewWithClient(cli, rec, cfg)
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			if tc.after != nil {
				_, err := rec.WaitFor(ctx, 1)
				require.NoError(t, err)
				tc.after(t, ctx, cli)
			}
			err = <-done
			require.ErrorIs(t, err, ErrLayout)
			var le *LayoutError
			require.True(t, errors.As(err, &le))
			assert.Equal(t, tc.wantKey, le.Key)
			assert.Contains(t, err.Error(), tc.wantMsg)
		})
	}
}

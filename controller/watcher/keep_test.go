package watcher

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

func podOn(name, node string) *kubemodel.Pod {
	return &kubemodel.Pod{Namespace: "default", Name: name, NodeName: node}
}

// TestKeepNodePods: with Config.Keep = NodePods("n1") only n1's pods are
// delivered and mirrored; a pod that becomes n1's is delivered as added, one
// that stops being n1's as deleted; other resources are all delivered.
func TestKeepNodePods(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	mine, other := podOn("mine", "n1"), podOn("other", "n2")
	putPod(t, ctx, cli, mine)
	putPod(t, ctx, cli, other)
	svc := &kubemodel.Service{Namespace: "default", Name: "web"}
	put(t, ctx, cli, testKubePrefix+kubemodel.ServiceKey("default", "web"), mustMarshal(t, svc))

	rec := &controllertest.EventRecorder{}
	cfg := baseConfig(srv)
	cfg.Keep = NodePods("n1")
	cfg.MirrorPath = filepath.Join(t.TempDir(), "mirror.db")
	w, err := NewWithClient(cli, rec, cfg)
	require.NoError(t, err)
	r := start(t, w)

	evs, err := rec.WaitFor(ctx, 1)
	require.NoError(t, err)
	rs := evs[0].(*controller.DBResync)
	require.Len(t, rs.KubeState[kubemodel.PodResource], 1)
	assert.True(t, proto.Equal(mine, rs.KubeState[kubemodel.PodResource][kubemodel.PodKey("default", "mine")]))
	assert.Len(t, rs.KubeState[kubemodel.ServiceResource], 1)

	pending := podOn("pending", "") // not scheduled yet
	putPod(t, ctx, cli, pending)
	putPod(t, ctx, cli, podOn("other2", "n2"))
	scheduled := podOn("pending", "n1")
	putPod(t, ctx, cli, scheduled)           // becomes n1's: added
	putPod(t, ctx, cli, podOn("mine", "n3")) // stops being n1's: deleted
	_, err = cli.Delete(ctx, testKubePrefix+kubemodel.PodKey("default", "other"))
	require.NoError(t, err)
	putPod(t, ctx, cli, pod("default", "marker", "")) // no node: left out
	put(t, ctx, cli, testKubePrefix+kubemodel.ServiceKey("default", "marker"), mustMarshal(t, svc))

	evs, err = rec.WaitFor(ctx, 4)
	require.NoError(t, err)
	var got []string
	for _, ev := range evs[1:] {
		ch := ev.(*controller.KubeStateChange)
		got = append(got, ch.Key)
		switch ch.Key {
		case kubemodel.PodKey("default", "pending"):
			assert.Nil(t, ch.PrevValue)
			assert.True(t, proto.Equal(scheduled, ch.NewValue))
		case kubemodel.PodKey("default", "mine"):
			assert.True(t, proto.Equal(mine, ch.PrevValue))
			assert.Nil(t, ch.NewValue)
		}
	}
	assert.Equal(t, []string{kubemodel.PodKey("default", "pending"), kubemodel.PodKey("default", "mine"),
		kubemodel.ServiceKey("default", "marker")}, got)
	waitFor(t, ctx, "counters", func() bool { return w.Stats().Unkept == 5 })

	// The mirror holds what was delivered.
	r.stop(t)
	m, err := openMirror(cfg.MirrorPath)
	require.NoError(t, err)
	defer m.close()
	snap, ok, err := m.load()
	require.NoError(t, err)
	require.True(t, ok)
	var pods []string
	for k := range snap.kube {
		if _, err := kubemodel.ParsePodKey(k); err == nil {
			pods = append(pods, k)
		}
	}
	assert.Equal(t, []string{kubemodel.PodKey("default", "pending")}, pods)
}

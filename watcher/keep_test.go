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

// TestKeepNodePods: with Config.Keep = NodePods("n1"), or with
// Config.NodeName "n1" in the flat layout, only n1's pods are delivered
// and mirrored; a pod that becomes n1's is delivered as added, one that
// stops being n1's as deleted; other resources are all delivered.
func TestKeepNodePods(t *testing.T) {
	t.Run("Keep", func(t *testing.T) { testKeepNodePods(t, func(c *Config) { c.Keep = NodePods("n1") }) })
	t.Run("NodeName", func(t *testing.T) { testKeepNodePods(t, func(c *Config) { c.NodeName = "n1" }) })
}

func testKeepNodePods(t *testing.T, set func(*Config)) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	mine, other := podOn("mine", "n1"), podOn("other", "n2")
	putPod(t, ctx, cli, mine)
	putPod(t, ctx, cli, other)
	svc := &kubemodel.Service{Namespace: "default", Name: "web"}
	put(t, ctx, cli, testKubePrefix+kubemodel.ServiceKey("default", "web"), mustMarshal(t, svc))

	rec := &controllertest.EventRecorder{}
	cfg := baseConfig(srv)
	set(&cfg)
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

func TestNodePods(t *testing.T) {
	keep := NodePods("n1")
	full := &kubemodel.Pod{Namespace: "default", Name: "web", NodeName: "n1", Labels: map[string]string{"app": "web"},
		IpAddress: "10.1.1.2", Containers: []*kubemodel.Container{{Name: "c", Ports: []*kubemodel.ContainerPort{{ContainerPort: 80}}}}}
	other := proto.Clone(full).(*kubemodel.Pod)
	other.NodeName = "n2"
	twice := append(mustMarshal(t, full), mustMarshal(t, &kubemodel.Pod{NodeName: "n2"})...) // the last node_name wins
	tests := []struct {
		name     string
		resource string
		raw      []byte
		want     bool
	}{
		{"this node's pod", kubemodel.PodResource, mustMarshal(t, full), true},
		{"another node's pod", kubemodel.PodResource, mustMarshal(t, other), false},
		{"not scheduled", kubemodel.PodResource, mustMarshal(t, &kubemodel.Pod{Name: "p"}), false},
		{"empty value", kubemodel.PodResource, nil, false},
		{"node name given twice", kubemodel.PodResource, twice, false},
		{"not a message: kept, to be reported", kubemodel.PodResource, []byte{0xff, 0xff}, true},
		{"another resource", kubemodel.ServiceResource, mustMarshal(t, &kubemodel.Service{Name: "s"}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, keep(tt.resource, "k", tt.raw))
		})
	}
	raw := mustMarshal(t, full)
	assert.Zero(t, testing.AllocsPerRun(100, func() { keep(kubemodel.PodResource, "k", raw) }))
}

// FuzzNodePods: whenever a value decodes as a pod, NodePods (which reads
// only its node name) keeps it exactly when the decoded pod is on the node.
func FuzzNodePods(f *testing.F) {
	f.Add(mustMarshal(f, &kubemodel.Pod{Name: "p", NodeName: "n1", Labels: map[string]string{"a": "b"}}))
	f.Add(mustMarshal(f, &kubemodel.Pod{Name: "p", NodeName: "n2"}))
	f.Add([]byte{0x42, 0x02, 'n', '1', 0x42, 0x00})
	keep := NodePods("n1")
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := keep(kubemodel.PodResource, "k", raw)
		var p kubemodel.Pod
		if err := proto.Unmarshal(raw, &p); err != nil {
			return
		}
		if got != (p.GetNodeName() == "n1") {
			t.Fatalf("kept %v, decoded node name %q", got, p.GetNodeName())
		}
	})
}

package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd"
)

// TestOnlyThisNodesPods: the agent's watcher keeps the pods of its own
// node and leaves the others' out (Config.AllPods is false).
func TestOnlyThisNodesPods(t *testing.T) {
	ctx := context.Background()
	etcd, err := embedetcd.Start(ctx, embedetcd.Config{UnsafeNoFsync: true})
	require.NoError(t, err)
	defer etcd.Close()
	cli, err := etcd.Client()
	require.NoError(t, err)
	defer cli.Close()
	put(t, cli, kubemodel.NodeKey("node-1"), &kubemodel.Node{Name: "node-1"})
	put(t, cli, kubemodel.PodKey("default", "elsewhere"), &kubemodel.Pod{Namespace: "default", Name: "elsewhere", NodeName: "node-2"})
	n1 := startNode(t, cli, "node-1")
	require.Equal(t, uint64(1), n1.agent.Watcher.Stats().Unkept, "the pod of node-2 in the start-up snapshot")

	put(t, cli, kubemodel.PodKey("default", "here"), &kubemodel.Pod{Namespace: "default", Name: "here", NodeName: "node-1"})
	put(t, cli, kubemodel.PodKey("default", "there"), &kubemodel.Pod{Namespace: "default", Name: "there", NodeName: "node-2"})
	require.Eventually(t, func() bool {
		st := n1.agent.Watcher.Stats()
		return st.KubeChanges == 1 && st.Unkept == 2
	}, time.Minute, 10*time.Millisecond, "%+v", n1.agent.Watcher.Stats())
}

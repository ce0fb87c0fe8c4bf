package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/cniserver/cniplugin"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
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

// TestUnknownInterfaceTypeFailsTheADD (issue 27, item 5): a pod annotated
// with an interface type that does not exist is not given the default
// type: its ADD fails with "invalid network config" (CNI code 7) naming
// the annotation and the value, and nothing of it stays behind.
func TestUnknownInterfaceTypeFailsTheADD(t *testing.T) {
	cli := startEtcd(t, "node-1")
	put(t, cli, kubemodel.PodKey("default", "odd"), &kubemodel.Pod{Namespace: "default", Name: "odd", NodeName: "node-1",
		Annotations: map[string]string{podiface.TypeAnnotation: "carrier-pigeon"}})
	n := startNode(t, cli, "node-1")
	require.NoError(t, n.linux.AddNetns("/run/netns/odd"))
	_, err := cniplugin.Call(context.Background(), n.socket, "ADD", &skel.CmdArgs{
		ContainerID: "c-odd", Netns: "/run/netns/odd", IfName: "eth0",
		Args:      "K8S_POD_NAMESPACE=default;K8S_POD_NAME=odd",
		StdinData: []byte(`{"cniVersion":"1.1.0","name":"vswitchkit","type":"vswitchkit-cni"}`),
	})
	var cerr *types.Error
	require.ErrorAs(t, err, &cerr)
	assert.Equal(t, uint(types.ErrInvalidNetworkConfig), cerr.Code)
	assert.Contains(t, cerr.Error(), `vswitchkit.io/pod-interface-type="carrier-pigeon"`)
	assert.Empty(t, n.linux.Links("/run/netns/odd"), "nothing configured in the pod")
	assert.Empty(t, n.agent.PodConn.Pods())
	assert.Empty(t, n.agent.IPAM.Allocations())
}

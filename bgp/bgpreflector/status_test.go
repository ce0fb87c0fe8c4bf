package bgpreflector_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/bgpreflector"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
)

func putStatus(t *testing.T, cli *clientv3.Client, node string, received int) {
	t.Helper()
	st := &bgp.NodeStatus{Node: node, Source: "BGPClusterConfig/cc", Instances: []bgp.InstanceStatus{{Name: "main", LocalASN: 65001,
		Peers: []bgp.PeerStatus{{Name: "tor", PeerASN: 65000, State: bgp.SessionEstablished, Negotiated: []bgp.Family{bgp.IPv4Unicast},
			Received: map[bgp.Family]int{bgp.IPv4Unicast: received}, HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second,
			Conditions: []bgp.Condition{{Type: bgp.ConditionFamilyDisabled, Message: "ipv6-unicast: no address"}}}}}},
		Conditions: []bgp.Condition{{Type: bgp.ConditionInvalidObject, Object: "BGPAdvertisement/x", Message: "bad"}}}
	b, err := proto.Marshal(bgp.NodeStatusToModel(st))
	require.NoError(t, err)
	_, err = cli.Put(context.Background(), bgpmodel.StatusKey("", node), string(b))
	require.NoError(t, err)
}

// statusWriterHarness runs a StatusWriter over a real etcd and client-go's
// fake dynamic client, counting status updates.
type statusWriterHarness struct {
	cli     *clientv3.Client
	dyn     *dynamicfake.FakeDynamicClient
	w       *bgpreflector.StatusWriter
	leader  atomic.Bool
	updates atomic.Int64
}

func startStatusWriter(t *testing.T, cfg bgpreflector.StatusWriterConfig) *statusWriterHarness {
	t.Helper()
	srv, err := etcdtest.Start(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	h := &statusWriterHarness{}
	h.cli, err = srv.Client()
	require.NoError(t, err)
	t.Cleanup(func() { h.cli.Close() })
	h.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), bgpreflector.ListKindsV2())
	h.dyn.PrependReactor("update", "bgpnodestatuses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" {
			h.updates.Add(1)
		}
		return false, nil, nil
	})
	h.w, err = bgpreflector.NewStatusWriter(h.cli, h.dyn, h.leader.Load, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = h.w.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return h
}

func (h *statusWriterHarness) object(t *testing.T, node string) *unstructured.Unstructured {
	t.Helper()
	u, err := h.dyn.Resource(bgpreflector.GroupVersionResourceV2(bgpreflector.PluralNodeStatus)).Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return u
}

func receivedOf(u *unstructured.Unstructured) int64 {
	if u == nil {
		return -1
	}
	ins, _, _ := unstructured.NestedSlice(u.Object, "status", "bgpInstances")
	if len(ins) == 0 {
		return -1
	}
	peers, _, _ := unstructured.NestedSlice(ins[0].(map[string]any), "peers")
	rc, _, _ := unstructured.NestedSlice(peers[0].(map[string]any), "routeCount")
	n, _, _ := unstructured.NestedInt64(rc[0].(map[string]any), "received")
	return n
}

// TestStatusWriter: the leader writes each node's status into its
// BGPNodeStatus object (in Cilium's shape, with conditions), at most once
// per node per MinInterval, the last one winning; a replica that does not
// lead writes nothing; a deleted key deletes the object.
func TestStatusWriter(t *testing.T) {
	h := startStatusWriter(t, bgpreflector.StatusWriterConfig{MinInterval: 500 * time.Millisecond, MaxWritesPerSecond: -1})
	putStatus(t, h.cli, "node-1", 1)
	putStatus(t, h.cli, "node-2", 7)
	require.Eventually(t, func() bool { return h.w.Stats().Pending == 2 }, time.Minute, 10*time.Millisecond)
	assert.Nil(t, h.object(t, "node-1"), "not the leader: nothing written")

	h.leader.Store(true)
	require.Eventually(t, func() bool {
		return receivedOf(h.object(t, "node-1")) == 1 && receivedOf(h.object(t, "node-2")) == 7
	}, time.Minute, 10*time.Millisecond)
	status, _, _ := unstructured.NestedMap(h.object(t, "node-1").Object, "status")
	assert.Equal(t, map[string]any{
		"source": "BGPClusterConfig/cc",
		"bgpInstances": []any{map[string]any{"name": "main", "localASN": int64(65001), "peers": []any{map[string]any{
			"name": "tor", "peerASN": int64(65000), "peeringState": "Established",
			"timers":     map[string]any{"appliedHoldTimeSeconds": int64(9), "appliedKeepaliveSeconds": int64(3)},
			"routeCount": []any{map[string]any{"afi": "ipv4", "safi": "unicast", "advertised": int64(0), "received": int64(1), "accepted": int64(0)}},
			"conditions": []any{map[string]any{"type": "FamilyDisabled", "message": "ipv6-unicast: no address"}},
		}}}},
		"conditions": []any{map[string]any{"type": "InvalidObject", "object": "BGPAdvertisement/x", "message": "bad"}},
	}, status)

	// A burst of 40 changes of node-1 over about 2s: bounded writes, the
	// last status arrives.
	before := h.updates.Load()
	start := time.Now()
	for i := range 40 {
		putStatus(t, h.cli, "node-1", 100+i)
		time.Sleep(50 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return receivedOf(h.object(t, "node-1")) == 139 }, time.Minute, 10*time.Millisecond)
	elapsed := time.Since(start)
	writes := h.updates.Load() - before
	assert.LessOrEqual(t, writes, int64(elapsed/(500*time.Millisecond))+1, "at most one write per node per MinInterval (%d in %v)", writes, elapsed)
	assert.GreaterOrEqual(t, writes, int64(2), "but kept current")

	_, err := h.cli.Delete(context.Background(), bgpmodel.StatusKey("", "node-2"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.object(t, "node-2") == nil }, time.Minute, 10*time.Millisecond)
	assert.Zero(t, h.w.Stats().Errors)
}

// TestStatusWriterDisabled: switched off, the writer writes nothing.
func TestStatusWriterDisabled(t *testing.T) {
	h := startStatusWriter(t, bgpreflector.StatusWriterConfig{Disabled: true})
	h.leader.Store(true)
	putStatus(t, h.cli, "node-1", 1)
	// A second writer, enabled, over the same etcd and API: it writes; the
	// disabled one has not (its counters stay zero).
	on, err := bgpreflector.NewStatusWriter(h.cli, h.dyn, func() bool { return true }, bgpreflector.StatusWriterConfig{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- on.Run(ctx) }()
	require.Eventually(t, func() bool { return receivedOf(h.object(t, "node-1")) == 1 }, time.Minute, 10*time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	assert.Equal(t, bgpreflector.StatusWriterStats{}, h.w.Stats())
	assert.Equal(t, int64(1), h.updates.Load())
}

package ipam_test

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

// kubeState builds a KubeStateData from pods and nodes.
func kubeState(pods []*kubemodel.Pod, nodes ...*kubemodel.Node) controller.KubeStateData {
	ks := controller.NewKubeStateData()
	ks[kubemodel.PodResource] = controller.KeyValuePairs{}
	for _, p := range pods {
		ks[kubemodel.PodResource][kubemodel.PodKey(p.Namespace, p.Name)] = p
	}
	ks[kubemodel.NodeResource] = controller.KeyValuePairs{}
	for _, n := range nodes {
		ks[kubemodel.NodeResource][kubemodel.NodeKey(n.Name)] = n
	}
	return ks
}

func kpod(name, ip string) *kubemodel.Pod {
	return &kubemodel.Pod{Namespace: "default", Name: name, IpAddress: ip}
}

func resync(t *testing.T, i *ipam.IPAM, ks controller.KubeStateData) {
	t.Helper()
	require.NoError(t, i.Resync(controller.NewDBResync(), ks, 1, controllertest.NewTxn()))
}

func podIP(i *ipam.IPAM, name string) string {
	a, ok := i.PodAddr(pod(name))
	if !ok {
		return ""
	}
	return a.String()
}

func TestResyncRecoversFromKubeState(t *testing.T) {
	i, err := ipam.New(ipamtest.NewNodeID(5), ipam.Config{})
	require.NoError(t, err)
	hostNet := kpod("hostnet", "10.1.5.50")
	hostNet.HostNetwork = true
	dual := kpod("dual", "")
	dual.IpAddresses = []string{"fd00::1", "10.1.5.60"}
	ks := kubeState([]*kubemodel.Pod{
		kpod("a", "10.1.5.7"),
		kpod("b", "10.1.5.3"),
		kpod("other-node", "10.1.6.9"),
		kpod("gateway", "10.1.5.1"),
		kpod("broadcast", "10.1.5.255"),
		kpod("garbage", "not-an-ip"),
		kpod("pending", ""),
		hostNet,
		dual,
		{Name: "", Namespace: "", IpAddress: "10.1.5.9"}, // name taken from the key below
	})
	ks[kubemodel.PodResource][kubemodel.PodKey("kube-system", "from-key")] = &kubemodel.Pod{IpAddress: "10.1.5.8"}
	resync(t, i, ks)

	assert.Equal(t, "10.1.5.7", podIP(i, "a"))
	assert.Equal(t, "10.1.5.3", podIP(i, "b"))
	assert.Equal(t, "10.1.5.60", podIP(i, "dual"))
	for _, name := range []string{"other-node", "gateway", "broadcast", "garbage", "pending", "hostnet"} {
		assert.Empty(t, podIP(i, name), name)
	}
	a, ok := i.PodAddr(podID{Namespace: "kube-system", Name: "from-key"})
	require.True(t, ok)
	assert.Equal(t, "10.1.5.8", a.String())

	// Allocation continues after the highest recovered address (.60).
	ip, err := i.AllocatePodIP(pod("new"), "", "")
	require.NoError(t, err)
	assert.Equal(t, "10.1.5.61", ip.String())
	// Recovered pods are idempotent.
	ip, err = i.AllocatePodIP(pod("a"), "", "")
	require.NoError(t, err)
	assert.Equal(t, "10.1.5.7", ip.String())
}

func TestResyncPrecedence(t *testing.T) {
	term := kpod("term21", "10.1.5.21")
	term.Terminating = true
	ks := kubeState([]*kubemodel.Pod{
		kpod("live20", "10.1.5.20"),
		kpod("zz", "10.1.5.10"), kpod("aa", "10.1.5.10"), // two live pods, one IP
		term,
		kpod("moved", "10.1.5.31"), // stale: the record wins
		kpod("live40", "10.1.5.40"),
	})
	for range 8 { // map order must not matter
		store := newPrecedenceStore(t)
		i, err := ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: store})
		require.NoError(t, err)
		resync(t, i, ks)
		assert.Equal(t, "10.1.5.20", podIP(i, "rec"), "records take precedence over the Kubernetes state")
		assert.Empty(t, podIP(i, "live20"))
		assert.Equal(t, "10.1.5.40", podIP(i, "live40"))
		assert.Equal(t, "10.1.5.10", podIP(i, "aa"))
		assert.Empty(t, podIP(i, "zz"))
		assert.Equal(t, "10.1.5.21", podIP(i, "rec2"))
		assert.Empty(t, podIP(i, "term21"))
		assert.Equal(t, "10.1.5.22", podIP(i, "rec3"))
		assert.Empty(t, podIP(i, "rec3b"))
		assert.Empty(t, podIP(i, "outside"))
		assert.Equal(t, "10.1.5.30", podIP(i, "moved"))
		// The store now holds exactly the allocations.
		assert.Equal(t, i.Allocations(), store.Records())
	}
}

func newPrecedenceStore(t *testing.T) *ipamtest.MemStore {
	store := &ipamtest.MemStore{}
	ctx := t.Context()
	// Records: "rec" on .20 (conflicts with live "live20"), "rec2" on .21
	// (conflicts with terminating "term21"), "rec3" on .22 and "rec3b" on
	// .22, "moved" on .30 while Kubernetes still shows .31.
	for _, a := range []ipam.Allocation{
		{Pod: pod("rec"), Addr: netip.MustParseAddr("10.1.5.20")},
		{Pod: pod("rec2"), Addr: netip.MustParseAddr("10.1.5.21")},
		{Pod: pod("rec3b"), Addr: netip.MustParseAddr("10.1.5.22")},
		{Pod: pod("rec3"), Addr: netip.MustParseAddr("10.1.5.22")},
		{Pod: pod("outside"), Addr: netip.MustParseAddr("10.9.9.9")},
		{Pod: pod("moved"), Addr: netip.MustParseAddr("10.1.5.30")},
	} {
		require.NoError(t, store.PutAllocation(ctx, a))
	}
	return store
}

func TestCrashBetweenAllocationAndReflection(t *testing.T) {
	store := &ipamtest.MemStore{}
	ks := kubeState([]*kubemodel.Pod{kpod("old", "10.1.5.2")})

	before := must(ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: store}))
	resync(t, before, ks)
	ip, err := before.AllocatePodIP(pod("fresh"), "", "")
	require.NoError(t, err)
	require.Equal(t, "10.1.5.3", ip.String())
	// Crash: "fresh" never reached the Kubernetes state. Restart with the
	// same store and the same (stale) Kubernetes state.
	after := must(ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: store}))
	resync(t, after, ks)
	assert.Equal(t, "10.1.5.3", podIP(after, "fresh"))
	ip, err = after.AllocatePodIP(pod("another"), "", "")
	require.NoError(t, err)
	assert.Equal(t, "10.1.5.4", ip.String(), "never hands out 10.1.5.3 twice")
	assert.Equal(t, []ipam.Allocation{
		{Pod: pod("old"), Addr: netip.MustParseAddr("10.1.5.2")},
		{Pod: pod("fresh"), Addr: netip.MustParseAddr("10.1.5.3")},
		{Pod: pod("another"), Addr: netip.MustParseAddr("10.1.5.4")},
	}, store.Records())

	// A pod re-created with a new sandbox just before a crash: the
	// Kubernetes state still shows its old address.
	_, err = after.Update(controller.NewDeletePodEvent(pod("old"), "c1"), controllertest.NewTxn())
	require.NoError(t, err)
	_, err = after.Update(controller.NewAddPodEvent(pod("old"), "c2", "/proc/2/ns/net"), controllertest.NewTxn())
	require.NoError(t, err)
	require.Equal(t, "10.1.5.5", podIP(after, "old"))
	restarted := must(ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: store}))
	resync(t, restarted, ks) // still says old = 10.1.5.2
	assert.Equal(t, "10.1.5.5", podIP(restarted, "old"), "the persisted record wins over stale state")
	ip, err = restarted.AllocatePodIP(pod("next"), "", "")
	require.NoError(t, err)
	assert.Equal(t, "10.1.5.6", ip.String())
}

func TestRuntimeResyncKeepsInMemoryAllocations(t *testing.T) {
	i := newReady(t, 5, ipam.Config{})
	ip, err := i.AllocatePodIP(pod("x"), "", "")
	require.NoError(t, err)
	require.Equal(t, "10.1.5.2", ip.String())
	// A healing resync whose Kubernetes state does not show x yet.
	resync(t, i, kubeState([]*kubemodel.Pod{kpod("y", "10.1.5.9")}))
	assert.Equal(t, "10.1.5.2", podIP(i, "x"))
	assert.Equal(t, "10.1.5.9", podIP(i, "y"))
	// The cursor is kept across a resync of the same subnet.
	ip, err = i.AllocatePodIP(pod("z"), "", "")
	require.NoError(t, err)
	assert.Equal(t, "10.1.5.3", ip.String())
}

func TestStoreFaults(t *testing.T) {
	boom := errors.New("boom")
	store := &ipamtest.MemStore{}
	i := newReady(t, 5, ipam.Config{Store: store})

	store.PutHook = func(ipam.Allocation) error { return boom }
	_, err := i.AllocatePodIP(pod("a"), "", "")
	require.ErrorIs(t, err, boom)
	assert.Equal(t, "10.1.5.2", podIP(i, "a"), "reserved: the failed write may have been applied")
	store.PutHook = nil
	ip, err := i.AllocatePodIP(pod("a"), "", "")
	require.NoError(t, err)
	assert.Equal(t, "10.1.5.2", ip.String(), "the retry persists the reserved address")
	assert.Equal(t, []ipam.Allocation{{Pod: pod("a"), Addr: netip.MustParseAddr("10.1.5.2")}}, store.Records())

	store.DeleteHook = func(kubemodel.PodID) error { return boom }
	require.ErrorIs(t, i.ReleasePodIP(pod("a")), boom)
	assert.Equal(t, "10.1.5.2", podIP(i, "a"), "still allocated after a failed release")
	store.DeleteHook = nil
	require.NoError(t, i.ReleasePodIP(pod("a")))
	assert.Empty(t, store.Records())

	store.ListHook = func() error { return boom }
	err = i.Resync(controller.NewDBResync(), kubeState(nil), 2, controllertest.NewTxn())
	require.ErrorIs(t, err, boom)
	store.ListHook = nil

	// Resync's store writes fail: the in-memory state is still updated.
	store.PutHook = func(ipam.Allocation) error { return boom }
	err = i.Resync(controller.NewDBResync(), kubeState([]*kubemodel.Pod{kpod("k", "10.1.5.40")}), 2, controllertest.NewTxn())
	require.ErrorIs(t, err, boom)
	assert.Equal(t, "10.1.5.40", podIP(i, "k"))
}

func TestPodEvents(t *testing.T) {
	i := newReady(t, 5, ipam.Config{})
	add := controller.NewAddPodEvent(pod("a"), "c1", "/proc/1/ns/net")
	require.True(t, i.HandlesEvent(add))
	desc, err := i.Update(add, controllertest.NewTxn())
	require.NoError(t, err)
	assert.Equal(t, "allocated 10.1.5.2 for pod default/a", desc)
	assert.Equal(t, "10.1.5.2/24", i.GetPodIP(pod("a")).String())

	// Repeated AddPod: same address, and its Revert must not release it.
	again := controller.NewAddPodEvent(pod("a"), "c1", "/proc/1/ns/net")
	desc, err = i.Update(again, controllertest.NewTxn())
	require.NoError(t, err)
	assert.Equal(t, "pod default/a already has 10.1.5.2", desc)
	require.NoError(t, i.Revert(again))
	assert.Equal(t, "10.1.5.2", podIP(i, "a"))

	// A failed AddPod is reverted: the address is released.
	b := controller.NewAddPodEvent(pod("b"), "c2", "/proc/2/ns/net")
	_, err = i.Update(b, controllertest.NewTxn())
	require.NoError(t, err)
	require.NoError(t, i.Revert(b))
	assert.Empty(t, podIP(i, "b"))
	require.NoError(t, i.Revert(b), "second revert is a no-op")

	// External IPAM data through the event.
	c := controller.NewAddPodEvent(pod("c"), "c3", "/proc/3/ns/net")
	c.IPAMType, c.IPAMData = "static", "10.1.5.100"
	_, err = i.Update(c, controllertest.NewTxn())
	require.NoError(t, err)
	assert.Equal(t, "10.1.5.100", podIP(i, "c"))

	del := controller.NewDeletePodEvent(pod("a"), "c1")
	require.True(t, i.HandlesEvent(del))
	desc, err = i.Update(del, controllertest.NewTxn())
	require.NoError(t, err)
	assert.Equal(t, "released 10.1.5.2 of pod default/a", desc)
	desc, err = i.Update(del, controllertest.NewTxn())
	require.NoError(t, err)
	assert.Empty(t, desc)

	// Events IPAM does not handle.
	assert.False(t, i.HandlesEvent(&controller.KubeStateChange{Resource: kubemodel.PodResource, Key: kubemodel.PodKey("a", "b"), NewValue: kpod("b", "")}))
	assert.False(t, i.HandlesEvent(&controller.KubeStateChange{Resource: kubemodel.NodeResource, Key: kubemodel.NodeKey("n")}), "node changes only with external IPAM")
	assert.False(t, i.HandlesEvent(&controller.KubeStateChange{Resource: kubemodel.ServiceResource, Key: kubemodel.ServiceKey("a", "b")}))
	assert.False(t, i.HandlesEvent(&controller.HealingResync{Type: controller.Periodic}))
	assert.True(t, i.HandlesEvent(&controller.HealingResync{Type: controller.AfterError}))
	assert.True(t, i.HandlesEvent(controller.NewDBResync()))
	assert.True(t, i.HandlesEvent(&ipam.PodCIDRChange{}))
	assert.Equal(t, "ipam", i.String())
}

func TestPodDeletedFromKubeState(t *testing.T) {
	store := &ipamtest.MemStore{}
	i := must(ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: store}))
	ghost := kpod("ghost", "10.1.5.9")
	resync(t, i, kubeState([]*kubemodel.Pod{ghost, kpod("reborn", "10.1.5.10")}))
	require.Equal(t, "10.1.5.9", podIP(i, "ghost"))

	del := func(p *kubemodel.Pod) string {
		ev := &controller.KubeStateChange{Resource: kubemodel.PodResource, Key: kubemodel.PodKey(p.Namespace, p.Name), PrevValue: p}
		require.True(t, i.HandlesEvent(ev))
		desc, err := i.Update(ev, controllertest.NewTxn())
		require.NoError(t, err)
		return desc
	}
	// A pod torn down before its deletion was reflected: released now.
	assert.Equal(t, "released 10.1.5.9 of pod default/ghost deleted from Kubernetes", del(ghost))
	assert.Empty(t, podIP(i, "ghost"))
	assert.Len(t, store.Records(), 1)

	// "reborn" was re-created and got a new address; the late deletion of
	// the old object must not release it.
	require.NoError(t, i.ReleasePodIP(pod("reborn")))
	_, err := i.AllocatePodIP(pod("reborn"), "", "")
	require.NoError(t, err)
	require.Equal(t, "10.1.5.11", podIP(i, "reborn"))
	assert.Empty(t, del(kpod("reborn", "10.1.5.10")))
	assert.Equal(t, "10.1.5.11", podIP(i, "reborn"))

	// Unknown pods, pods without IP, malformed values: nothing happens.
	assert.Empty(t, del(kpod("unknown", "10.1.5.50")))
	assert.Empty(t, del(kpod("reborn", "")))
	desc, err := i.Update(&controller.KubeStateChange{Resource: kubemodel.PodResource, Key: "k8s/pod/x"}, controllertest.NewTxn())
	require.NoError(t, err)
	assert.Empty(t, desc)
}

func TestExternalIPAM(t *testing.T) {
	loop := &controllertest.EventRecorder{}
	cfg := ipam.Config{ExternalIPAM: true, NodeName: "worker-1", EventLoop: loop, PodSubnetCIDR: pfx("10.244.0.0/16")}
	i := must(ipam.New(ipamtest.NewNodeID(5), cfg))
	node := &kubemodel.Node{Name: "worker-1", PodCidrs: []string{"fd00::/64", "10.244.3.0/24"}}

	// No node object yet: ready (node ID known) but no pod subnet.
	resync(t, i, kubeState(nil))
	assert.Nil(t, i.PodSubnetThisNode())
	assert.Equal(t, "172.30.5.1", i.HostInterconnectIPInVPP().String())
	_, err := i.AllocatePodIP(pod("a"), "", "")
	require.ErrorIs(t, err, ipam.ErrNotReady)
	_, err = i.PodSubnetOtherNode(3)
	require.ErrorIs(t, err, ipam.ErrExternalIPAM)

	resync(t, i, kubeState([]*kubemodel.Pod{kpod("old", "10.244.3.7")}, node))
	assert.Equal(t, "10.244.3.0/24", i.PodSubnetThisNode().String())
	assert.Equal(t, "10.244.3.1", i.PodGatewayIP().String())
	assert.Equal(t, "10.244.3.7", podIP(i, "old"))
	ip, err := i.AllocatePodIP(pod("a"), "", "")
	require.NoError(t, err)
	assert.Equal(t, "10.244.3.8", ip.String())

	change := func(prev, next *kubemodel.Node) (string, error) {
		ev := &controller.KubeStateChange{Resource: kubemodel.NodeResource, Key: kubemodel.NodeKey("worker-1"), PrevValue: prev, NewValue: next}
		require.True(t, i.HandlesEvent(ev))
		return i.Update(ev, controllertest.NewTxn())
	}
	// Same CIDR (labels changed): no event.
	relabeled := &kubemodel.Node{Name: "worker-1", PodCidrs: node.PodCidrs, Labels: map[string]string{"a": "b"}}
	_, err = change(node, relabeled)
	require.NoError(t, err)
	assert.Equal(t, 0, loop.Len())

	// Other nodes are not handled.
	assert.False(t, i.HandlesEvent(&controller.KubeStateChange{Resource: kubemodel.NodeResource, Key: kubemodel.NodeKey("worker-2")}))

	// Bad CIDR: error, nothing changes.
	_, err = change(relabeled, &kubemodel.Node{Name: "worker-1", PodCidrs: []string{"10.1.0.0/24", "x"}})
	require.ErrorContains(t, err, "outside PodSubnetCIDR 10.244.0.0/16")
	assert.Equal(t, 0, loop.Len())

	// Real change: PodCIDRChange, the subnet switches, allocations outside are dropped.
	moved := &kubemodel.Node{Name: "worker-1", PodCidrs: []string{"10.244.4.0/24"}}
	desc, err := change(relabeled, moved)
	require.NoError(t, err)
	assert.Equal(t, "pod CIDR of this node changed to 10.244.4.0/24", desc)
	evs := loop.Events()
	require.Len(t, evs, 1)
	pc, ok := evs[0].(*ipam.PodCIDRChange)
	require.True(t, ok)
	assert.Equal(t, ipam.PodCIDRChange{PrevPodCIDR: pfx("10.244.3.0/24"), LocalPodCIDR: pfx("10.244.4.0/24")}, *pc)
	assert.Equal(t, controller.UpstreamResync, pc.Method())
	assert.False(t, pc.IsBlocking())
	assert.Equal(t, "Pod CIDR Change: 10.244.3.0/24 -> 10.244.4.0/24", pc.String())
	assert.Equal(t, "10.244.4.0/24", i.PodSubnetThisNode().String())
	assert.Empty(t, podIP(i, "a"))
	// Allocation waits for the resync that PodCIDRChange triggers.
	_, err = i.AllocatePodIP(pod("b"), "", "")
	require.ErrorIs(t, err, ipam.ErrNotReady)
	require.ErrorContains(t, err, "pod CIDR of node worker-1 changed to 10.244.4.0/24")
	resync(t, i, kubeState(nil, moved))
	ip, err = i.AllocatePodIP(pod("b"), "", "")
	require.NoError(t, err)
	assert.Equal(t, "10.244.4.2", ip.String())

	// Node deleted or CIDR removed: keep the current subnet, no event.
	_, err = change(moved, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, loop.Len())
	assert.Equal(t, "10.244.4.0/24", i.PodSubnetThisNode().String())

	// The follow-up resync (the PodCIDRChange) rebuilds from the state.
	resync(t, i, kubeState([]*kubemodel.Pod{kpod("b", "10.244.4.2")}, moved))
	assert.Equal(t, "10.244.4.2", podIP(i, "b"))

	// A resync whose state lacks the node object keeps the current subnet.
	resync(t, i, kubeState([]*kubemodel.Pod{kpod("b", "10.244.4.2")}))
	assert.Equal(t, "10.244.4.0/24", i.PodSubnetThisNode().String())
	assert.Equal(t, "10.244.4.2", podIP(i, "b"))

	// A push failure is reported.
	loop.PushErr = func(controller.Event) error { return controller.ErrQueueFull }
	_, err = change(moved, &kubemodel.Node{Name: "worker-1", PodCidrs: []string{"10.244.5.0/24"}})
	require.ErrorIs(t, err, controller.ErrQueueFull)
}

func TestConcurrentReaders(t *testing.T) {
	i := newReady(t, 5, ipam.Config{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if n := i.PodSubnetThisNode(); n != nil && n.String() != "10.1.5.0/24" {
					t.Errorf("pod subnet %s", n)
				}
				_ = i.GetPodIP(pod("p1"))
				_ = i.NatLoopbackIP()
				_ = i.PodGatewayIP()
				_ = i.Allocations()
			}
		})
	}
	for n := range 300 {
		_, err := i.AllocatePodIP(pod(fmt.Sprint("p", n%50)), "", "")
		require.NoError(t, err)
		if n%7 == 0 {
			require.NoError(t, i.ReleasePodIP(pod(fmt.Sprint("p", (n+3)%50))))
		}
		if n%50 == 0 {
			resync(t, i, kubeState([]*kubemodel.Pod{kpod("k", "10.1.5.200")}))
		}
	}
	close(stop)
	wg.Wait()
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

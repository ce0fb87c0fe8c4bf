package ipam_test

import (
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

// failPodOnce returns a FaultStore Put hook that injects f into the first
// write of pod p.
func failPodOnce(p podID, f ipamtest.Fault) func(int, ipam.Allocation) ipamtest.Fault {
	var mu sync.Mutex
	done := false
	return func(_ int, a ipam.Allocation) ipamtest.Fault {
		mu.Lock()
		defer mu.Unlock()
		if a.Pod != p || done {
			return ipamtest.NoFault
		}
		done = true
		return f
	}
}

// An ambiguous write (applied, error returned) must not let the address go
// to another pod: not at run time, not after a resync, not after a
// restart; releasing the failed pod deletes its record.
func TestAmbiguousPutKeepsAddressReserved(t *testing.T) {
	mem := &ipamtest.MemStore{}
	fs := &ipamtest.FaultStore{Store: mem, Put: failPodOnce(pod("a"), ipamtest.FailAfter)}
	i := newReady(t, 5, ipam.Config{Store: fs})

	_, err := i.AllocatePodIP(pod("a"), "", "")
	require.ErrorIs(t, err, ipamtest.ErrInjected)
	require.Equal(t, []ipam.Allocation{{Pod: pod("a"), Addr: netip.MustParseAddr("10.1.5.2")}}, mem.Records(),
		"the write was applied")

	ip, err := i.AllocatePodIP(pod("b"), "", "")
	require.NoError(t, err)
	assert.Equal(t, "10.1.5.3", ip.String(), "10.1.5.2 stays reserved for a")

	// Run-time resync, b reflected in Kubernetes: b keeps its address.
	ks := kubeState([]*kubemodel.Pod{kpod("b", "10.1.5.3")})
	resync(t, i, ks)
	assert.Equal(t, "10.1.5.3", podIP(i, "b"))

	// Restart over the same records: b keeps its address, a's record
	// still reserves .2 (kubelet will retry or delete a).
	i = must(ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: fs}))
	resync(t, i, ks)
	assert.Equal(t, "10.1.5.3", podIP(i, "b"))
	ip, err = i.AllocatePodIP(pod("c"), "", "")
	require.NoError(t, err)
	assert.Equal(t, "10.1.5.4", ip.String())

	// kubelet gives up on a: CNI DEL deletes its record.
	_, err = i.Update(controller.NewDeletePodEvent(pod("a"), "c1"), controllertest.NewTxn())
	require.NoError(t, err)
	assert.Equal(t, []ipam.Allocation{
		{Pod: pod("b"), Addr: netip.MustParseAddr("10.1.5.3")},
		{Pod: pod("c"), Addr: netip.MustParseAddr("10.1.5.4")},
	}, mem.Records())
}

// At run time (no restart) the failed pod's reservation is resolved by a
// retried allocation (same address, record written) or by its release
// (record deleted), whether or not the failed write was applied.
func TestFailedPutResolvedByRetryOrRelease(t *testing.T) {
	for _, f := range []ipamtest.Fault{ipamtest.FailBefore, ipamtest.FailAfter} {
		t.Run(f.String(), func(t *testing.T) {
			mem := &ipamtest.MemStore{}
			fs := &ipamtest.FaultStore{Store: mem, Put: func(_ int, a ipam.Allocation) ipamtest.Fault {
				if a.Pod.Name == "x" || a.Pod.Name == "y" {
					return f
				}
				return ipamtest.NoFault
			}}
			i := newReady(t, 5, ipam.Config{Store: fs})
			_, err := i.AllocatePodIP(pod("x"), "", "")
			require.ErrorIs(t, err, ipamtest.ErrInjected)
			_, err = i.AllocatePodIP(pod("y"), "", "")
			require.ErrorIs(t, err, ipamtest.ErrInjected)
			_, err = i.AllocatePodIP(pod("x"), "", "")
			require.ErrorIs(t, err, ipamtest.ErrInjected, "every retry writes again")
			fs.Put = nil

			// The retry of x persists the reserved address.
			ip, err := i.AllocatePodIP(pod("x"), "", "")
			require.NoError(t, err)
			assert.Equal(t, "10.1.5.2", ip.String())
			// y is released: its record (if any) is gone.
			require.NoError(t, i.ReleasePodIP(pod("y")))
			assert.Equal(t, []ipam.Allocation{{Pod: pod("x"), Addr: netip.MustParseAddr("10.1.5.2")}}, mem.Records())
			ip, err = i.AllocatePodIP(pod("z"), "", "")
			require.NoError(t, err)
			assert.Equal(t, "10.1.5.4", ip.String(), "next after last; .3 is free again")
		})
	}
}

// A failed release (the record may or may not be deleted) keeps the pod's
// address; a resync writes the record back if it was deleted, so a crash
// before the retried release cannot free the address of a running pod.
func TestAmbiguousDeleteKeepsAddress(t *testing.T) {
	mem := &ipamtest.MemStore{}
	fs := &ipamtest.FaultStore{Store: mem}
	i := newReady(t, 5, ipam.Config{Store: fs})
	_, err := i.AllocatePodIP(pod("a"), "", "")
	require.NoError(t, err)
	fs.Delete = func(int, podID) ipamtest.Fault { return ipamtest.FailAfter }
	require.ErrorIs(t, i.ReleasePodIP(pod("a")), ipamtest.ErrInjected)
	assert.Equal(t, "10.1.5.2", podIP(i, "a"))
	assert.Empty(t, mem.Records(), "the delete was applied")
	fs.Delete = nil

	resync(t, i, kubeState(nil))
	assert.Equal(t, []ipam.Allocation{{Pod: pod("a"), Addr: netip.MustParseAddr("10.1.5.2")}}, mem.Records())
	require.NoError(t, i.ReleasePodIP(pod("a")))
	assert.Empty(t, mem.Records())
}

// Precedence: an allocation this process holds is never moved by a
// resync, whatever the records say; among conflicting records the one the
// Kubernetes state confirms wins.
func TestResyncNeverMovesHeldAddress(t *testing.T) {
	t.Run("memory over records", func(t *testing.T) {
		mem := &ipamtest.MemStore{}
		i := newReady(t, 5, ipam.Config{Store: mem})
		ip, err := i.AllocatePodIP(pod("b"), "", "")
		require.NoError(t, err)
		// A stale record for the same address (written by an older agent,
		// or landed late) of a pod that sorts first.
		require.NoError(t, mem.PutAllocation(t.Context(), ipam.Allocation{Pod: pod("a"), Addr: netip.MustParseAddr(ip.String())}))
		resync(t, i, kubeState(nil))
		assert.Equal(t, ip.String(), podIP(i, "b"))
		assert.Empty(t, podIP(i, "a"))
		assert.Equal(t, i.Allocations(), mem.Records(), "the stale record is deleted")
	})
	t.Run("records confirmed by Kubernetes", func(t *testing.T) {
		for range 8 { // map order must not matter
			mem := &ipamtest.MemStore{}
			for _, a := range []ipam.Allocation{
				{Pod: pod("a"), Addr: netip.MustParseAddr("10.1.5.2")},
				{Pod: pod("b"), Addr: netip.MustParseAddr("10.1.5.2")},
				{Pod: pod("c"), Addr: netip.MustParseAddr("10.1.5.3")},
				{Pod: pod("d"), Addr: netip.MustParseAddr("10.1.5.3")},
			} {
				require.NoError(t, mem.PutAllocation(t.Context(), a))
			}
			i := must(ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: mem}))
			resync(t, i, kubeState([]*kubemodel.Pod{kpod("b", "10.1.5.2")}))
			assert.Equal(t, "10.1.5.2", podIP(i, "b"), "the record Kubernetes confirms")
			assert.Empty(t, podIP(i, "a"))
			assert.Equal(t, "10.1.5.3", podIP(i, "c"), "unconfirmed: the smaller name")
			assert.Empty(t, podIP(i, "d"))
			assert.Equal(t, i.Allocations(), mem.Records())
		}
	})
}

// External IPAM: a start-up snapshot without this node's pod CIDR must not
// destroy records, and no address is handed out before the records and
// the Kubernetes state of the subnet are known.
func TestExternalIPAMWaitsForPodCIDR(t *testing.T) {
	mem := &ipamtest.MemStore{}
	running := ipam.Allocation{Pod: pod("running"), Addr: netip.MustParseAddr("10.244.3.2")}
	require.NoError(t, mem.PutAllocation(t.Context(), running))
	gone := ipam.Allocation{Pod: pod("gone"), Addr: netip.MustParseAddr("10.244.3.9")}
	require.NoError(t, mem.PutAllocation(t.Context(), gone))
	loop := &controllertest.EventRecorder{}
	cfg := ipam.Config{ExternalIPAM: true, NodeName: "worker-1", EventLoop: loop, PodSubnetCIDR: pfx("10.244.0.0/16"), Store: mem}
	i := must(ipam.New(ipamtest.NewNodeID(5), cfg))
	kubeRunning := kpod("kube-only", "10.244.3.3") // reflected, no record

	resync(t, i, kubeState([]*kubemodel.Pod{kubeRunning}))
	assert.Equal(t, []ipam.Allocation{running, gone}, mem.Records(), "missing input destroys nothing")
	_, err := i.AllocatePodIP(pod("new"), "", "")
	require.ErrorIs(t, err, ipam.ErrNotReady)
	require.ErrorContains(t, err, "pod CIDR of node worker-1 is not known yet")
	// CNI DEL of a pod whose record is not loaded yet deletes the record.
	require.NoError(t, i.ReleasePodIP(pod("gone")))
	assert.Equal(t, []ipam.Allocation{running}, mem.Records())

	// The node object arrives: the subnet is known, but allocation waits
	// for the resync that the PodCIDRChange triggers.
	node := &kubemodel.Node{Name: "worker-1", PodCidrs: []string{"10.244.3.0/24"}}
	ev := &controller.KubeStateChange{Resource: kubemodel.NodeResource, Key: kubemodel.NodeKey("worker-1"), NewValue: node}
	_, err = i.Update(ev, controllertest.NewTxn())
	require.NoError(t, err)
	require.Equal(t, 1, loop.Len())
	assert.Equal(t, "10.244.3.0/24", i.PodSubnetThisNode().String())
	_, err = i.AllocatePodIP(pod("new"), "", "")
	require.ErrorIs(t, err, ipam.ErrNotReady)

	resync(t, i, kubeState([]*kubemodel.Pod{kubeRunning}, node))
	assert.Equal(t, "10.244.3.2", podIP(i, "running"))
	assert.Equal(t, "10.244.3.3", podIP(i, "kube-only"))
	ip, err := i.AllocatePodIP(pod("new"), "", "")
	require.NoError(t, err)
	assert.Equal(t, "10.244.3.4", ip.String())
}

// Allocations from another goroutine run concurrently with Resync (they
// are serialized with it, with or without a Store): go test -race must
// stay quiet.
func TestConcurrentAllocateDuringResync(t *testing.T) {
	loop := &controllertest.EventRecorder{}
	node := &kubemodel.Node{Name: "n1", PodCidrs: []string{"10.244.3.0/24"}}
	for _, tc := range []struct {
		name string
		cfg  ipam.Config
		ks   controller.KubeStateData
	}{
		{"node ID", ipam.Config{}, kubeState([]*kubemodel.Pod{kpod("k", "10.1.5.200")})},
		{"external", ipam.Config{ExternalIPAM: true, NodeName: "n1", EventLoop: loop, PodSubnetCIDR: pfx("10.244.0.0/16")},
			kubeState([]*kubemodel.Pod{kpod("k", "10.244.3.200")}, node)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := must(ipam.New(ipamtest.NewNodeID(5), tc.cfg))
			resync(t, i, tc.ks)
			var wg sync.WaitGroup
			stop := make(chan struct{})
			wg.Go(func() {
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					p := pod(fmt.Sprint("p", n%50))
					if _, err := i.AllocatePodAddr(p); err != nil {
						t.Error(err)
						return
					}
					if err := i.ReleasePodIP(p); err != nil {
						t.Error(err)
						return
					}
				}
			})
			for range 200 {
				resync(t, i, tc.ks)
			}
			close(stop)
			wg.Wait()
		})
	}
}

// Without a Store a crash between allocation and reflection into
// Kubernetes gives duplicates: this documents the limit stated in the
// package doc (use a Store).
func TestNoStoreCrashLimit(t *testing.T) {
	i := newReady(t, 5, ipam.Config{})
	before := map[netip.Addr]bool{}
	for n := range 5 {
		a, err := i.AllocatePodAddr(pod(fmt.Sprint("unreflected-", n)))
		require.NoError(t, err)
		before[a] = true
	}
	// Crash: drop i; the restarted agent sees none of the five pods.
	i = newReady(t, 5, ipam.Config{})
	dups := 0
	for n := range 5 {
		a, err := i.AllocatePodAddr(pod(fmt.Sprint("after-", n)))
		require.NoError(t, err)
		if before[a] {
			dups++
		}
	}
	assert.Equal(t, 5, dups)
}

package ipam_test

import (
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

// TestReadersDoNotWaitForTheStore: while an allocation waits for its
// Store write, the getters answer (a getter that waited would deadlock
// this test), and they already see the reserved address.
func TestReadersDoNotWaitForTheStore(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	store := &ipamtest.FaultStore{Store: &ipamtest.MemStore{}, Put: func(_ int, a ipam.Allocation) ipamtest.Fault {
		if a.Pod == pod("slow") {
			close(entered)
			<-release
		}
		return ipamtest.NoFault
	}}
	i := newReady(t, 5, ipam.Config{Store: store})
	done := make(chan error, 1)
	go func() {
		_, err := i.AllocatePodIP(pod("slow"), "", "")
		done <- err
	}()
	<-entered
	assert.Equal(t, "10.1.5.2/24", i.GetPodIP(pod("slow")).String())
	assert.Len(t, i.Allocations(), 1)
	assert.Equal(t, uint64(1), i.PoolUsage().Allocated)
	assert.Equal(t, "10.1.5.0/24", i.PodSubnetThisNode().String())
	assert.Equal(t, uint32(5), i.NodeID())
	close(release)
	require.NoError(t, <-done)
}

// TestOperationsRunOneAtATime: while an allocation waits for its Store
// write, another allocation (and a release) waits for it, with or without
// its own Store call pending; the getters do not.
func TestOperationsRunOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var mu sync.Mutex
		var calls []string
		store := &ipamtest.FaultStore{Store: &ipamtest.MemStore{}, Put: func(_ int, a ipam.Allocation) ipamtest.Fault {
			mu.Lock()
			calls = append(calls, "put "+a.Pod.Name)
			mu.Unlock()
			if a.Pod == pod("slow") {
				<-release
			}
			return ipamtest.NoFault
		}}
		i := newReady(t, 5, ipam.Config{Store: store})
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = i.AllocatePodIP(pod("slow"), "", "") })
		synctest.Wait() // slow waits for its write
		wg.Go(func() { _, _ = i.AllocatePodIP(pod("next"), "", "") })
		wg.Go(func() { _ = i.ReleasePodIP(pod("slow")) })
		synctest.Wait() // both wait for slow
		mu.Lock()
		assert.Equal(t, []string{"put slow"}, calls, "nothing else reached the Store")
		mu.Unlock()
		assert.Len(t, i.Allocations(), 1, "a getter answers meanwhile")
		close(release)
		wg.Wait()
		mu.Lock()
		assert.Equal(t, "put slow", calls[0])
		mu.Unlock()
	})
}

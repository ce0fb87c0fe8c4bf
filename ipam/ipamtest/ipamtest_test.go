package ipamtest_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

func TestMemStore(t *testing.T) {
	ctx := t.Context()
	var s ipamtest.MemStore
	a := ipam.Allocation{Pod: kubemodel.PodID{Namespace: "n", Name: "a"}, Addr: netip.MustParseAddr("10.0.0.3")}
	b := ipam.Allocation{Pod: kubemodel.PodID{Namespace: "n", Name: "b"}, Addr: netip.MustParseAddr("10.0.0.2")}
	require.NoError(t, s.PutAllocation(ctx, a))
	require.NoError(t, s.PutAllocation(ctx, b))
	got, err := s.ListAllocations(ctx)
	require.NoError(t, err)
	assert.Equal(t, []ipam.Allocation{b, a}, got)

	a2 := ipam.Allocation{Pod: a.Pod, Addr: netip.MustParseAddr("10.0.0.9")}
	require.NoError(t, s.PutAllocation(ctx, a2))
	require.NoError(t, s.DeleteAllocation(ctx, b.Pod))
	require.NoError(t, s.DeleteAllocation(ctx, b.Pod), "missing record is fine")
	assert.Equal(t, []ipam.Allocation{a2}, s.Records())
	puts, dels := s.Counts()
	assert.Equal(t, 3, puts)
	assert.Equal(t, 2, dels)

	boom := errors.New("boom")
	s.PutHook = func(ipam.Allocation) error { return boom }
	s.DeleteHook = func(kubemodel.PodID) error { return boom }
	s.ListHook = func() error { return boom }
	require.ErrorIs(t, s.PutAllocation(ctx, b), boom)
	require.ErrorIs(t, s.DeleteAllocation(ctx, a.Pod), boom)
	_, err = s.ListAllocations(ctx)
	require.ErrorIs(t, err, boom)
	assert.Equal(t, []ipam.Allocation{a2}, s.Records(), "failed calls change nothing")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	var fresh ipamtest.MemStore
	require.ErrorIs(t, fresh.PutAllocation(cancelled, a), context.Canceled)
	require.ErrorIs(t, fresh.DeleteAllocation(cancelled, a.Pod), context.Canceled)
	_, err = fresh.ListAllocations(cancelled)
	require.ErrorIs(t, err, context.Canceled)
}

func TestNodeID(t *testing.T) {
	var zero ipamtest.NodeID
	assert.Equal(t, uint32(0), zero.GetNodeID())
	n := ipamtest.NewNodeID(7)
	assert.Equal(t, uint32(7), n.GetNodeID())
	n.Set(9)
	assert.Equal(t, uint32(9), n.GetNodeID())
	assert.Equal(t, uint32(4), ipam.NodeIDFunc(func() uint32 { return 4 }).GetNodeID())
}

func TestFaultStore(t *testing.T) {
	ctx := t.Context()
	mem := &ipamtest.MemStore{}
	var seen []int
	fs := &ipamtest.FaultStore{Store: mem}
	a := ipam.Allocation{Pod: kubemodel.PodID{Namespace: "n", Name: "a"}, Addr: netip.MustParseAddr("10.0.0.3")}
	b := ipam.Allocation{Pod: kubemodel.PodID{Namespace: "n", Name: "b"}, Addr: netip.MustParseAddr("10.0.0.4")}

	fs.Put = func(n int, x ipam.Allocation) ipamtest.Fault {
		seen = append(seen, n)
		if x == a {
			return ipamtest.FailBefore
		}
		return ipamtest.FailAfter
	}
	require.ErrorIs(t, fs.PutAllocation(ctx, a), ipamtest.ErrInjected)
	assert.Empty(t, mem.Records(), "FailBefore: not applied")
	require.ErrorIs(t, fs.PutAllocation(ctx, b), ipamtest.ErrInjected)
	assert.Equal(t, []ipam.Allocation{b}, mem.Records(), "FailAfter: applied")
	fs.Put = nil
	require.NoError(t, fs.PutAllocation(ctx, a))
	assert.Equal(t, []int{1, 2}, seen)

	fs.Delete = func(n int, p kubemodel.PodID) ipamtest.Fault {
		if n == 1 {
			return ipamtest.FailBefore
		}
		return ipamtest.FailAfter
	}
	require.ErrorIs(t, fs.DeleteAllocation(ctx, a.Pod), ipamtest.ErrInjected)
	assert.Len(t, mem.Records(), 2)
	require.ErrorIs(t, fs.DeleteAllocation(ctx, a.Pod), ipamtest.ErrInjected)
	assert.Equal(t, []ipam.Allocation{b}, mem.Records())

	fs.List = func(n int) ipamtest.Fault { return ipamtest.Fault(n - 1) }
	got, err := fs.ListAllocations(ctx)
	require.NoError(t, err)
	assert.Equal(t, []ipam.Allocation{b}, got)
	_, err = fs.ListAllocations(ctx)
	require.ErrorIs(t, err, ipamtest.ErrInjected)
	_, err = fs.ListAllocations(ctx)
	require.ErrorIs(t, err, ipamtest.ErrInjected)
	assert.Equal(t, 6, fs.Injected())

	// Errors of the inner store pass through and are not counted.
	boom := errors.New("boom")
	mem.PutHook = func(ipam.Allocation) error { return boom }
	fs.Put = func(int, ipam.Allocation) ipamtest.Fault { return ipamtest.FailAfter }
	require.ErrorIs(t, fs.PutAllocation(ctx, a), boom)
	assert.Equal(t, 6, fs.Injected())
	assert.Equal(t, "FailAfter", ipamtest.FailAfter.String())
	assert.Equal(t, "Fault(9)", ipamtest.Fault(9).String())
}

func TestMemStoreConformance(t *testing.T) {
	ipamtest.TestStore(t, ipamtest.StoreHarness{
		Open:  func(*testing.T) ipam.Store { return &ipamtest.MemStore{} },
		Crash: func(_ *testing.T, s ipam.Store) ipam.Store { return s },
	})
}

// Package ipamtest provides working in-memory fakes for code that uses the
// ipam package, and a test for ipam.Store implementations:
//
//   - [MemStore], an in-memory ipam.Store with simple error hooks;
//   - [FaultStore], a wrapper around any ipam.Store that injects faults
//     per call: a call that fails before it reaches the store, or one that
//     is applied and still reports an error (the ambiguous outcome of an
//     etcd request that times out after the write);
//   - [NodeID], an ipam.NodeIDSource whose ID tests can change;
//   - [TestStore], the contract and crash test for an ipam.Store
//     implementation (ipam/etcdstore and ipam/boltstore run it).
//
// All fakes are safe for concurrent use.
//
// # Limitations
//
// MemStore is not durable: it models a store that survives an agent restart
// only as long as the test keeps the value. Contexts are honoured only in
// that a cancelled context makes every call fail with the context's error.
// MemStore's hooks fail a call before it changes anything; use FaultStore
// for failures after the change.
package ipamtest

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
)

// MemStore is an in-memory [ipam.Store]. The zero value is an empty store
// ready to use. The optional hook fields inject faults: when set, a hook is
// called first and a non-nil error it returns is returned without changing
// the store. Set hooks before the store is used concurrently.
//
// MemStore is safe for concurrent use.
type MemStore struct {
	// PutHook, DeleteHook and ListHook run before the respective method.
	PutHook    func(a ipam.Allocation) error
	DeleteHook func(pod kubemodel.PodID) error
	ListHook   func() error

	mu      sync.Mutex
	records map[kubemodel.PodID]ipam.Allocation
	puts    int
	deletes int
}

var _ ipam.Store = (*MemStore)(nil)

// PutAllocation stores a, replacing the pod's previous record.
func (s *MemStore) PutAllocation(ctx context.Context, a ipam.Allocation) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.PutHook != nil {
		if err := s.PutHook(a); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.records == nil {
		s.records = make(map[kubemodel.PodID]ipam.Allocation)
	}
	s.records[a.Pod] = a
	s.puts++
	return nil
}

// DeleteAllocation deletes the pod's record; a missing record is fine.
func (s *MemStore) DeleteAllocation(ctx context.Context, pod kubemodel.PodID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.DeleteHook != nil {
		if err := s.DeleteHook(pod); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, pod)
	s.deletes++
	return nil
}

// ListAllocations returns all records sorted by address.
func (s *MemStore) ListAllocations(ctx context.Context) ([]ipam.Allocation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.ListHook != nil {
		if err := s.ListHook(); err != nil {
			return nil, err
		}
	}
	return s.Records(), nil
}

// Records returns a copy of the records, sorted by address.
func (s *MemStore) Records() []ipam.Allocation {
	s.mu.Lock()
	out := slices.Collect(maps.Values(s.records))
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b ipam.Allocation) int { return a.Addr.Compare(b.Addr) })
	return out
}

// Counts returns how many Put and Delete calls succeeded.
func (s *MemStore) Counts() (puts, deletes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts, s.deletes
}

// NodeID is an [ipam.NodeIDSource] returning a settable ID. The zero value
// returns 0 ("not allocated yet").
//
// NodeID is safe for concurrent use.
type NodeID struct {
	id atomic.Uint32
}

var _ ipam.NodeIDSource = (*NodeID)(nil)

// NewNodeID returns a NodeID that returns id.
func NewNodeID(id uint32) *NodeID {
	n := &NodeID{}
	n.id.Store(id)
	return n
}

// GetNodeID returns the current ID.
func (n *NodeID) GetNodeID() uint32 { return n.id.Load() }

// Set changes the ID.
func (n *NodeID) Set(id uint32) { n.id.Store(id) }

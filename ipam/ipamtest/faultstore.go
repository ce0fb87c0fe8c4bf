package ipamtest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
)

// ErrInjected is the error a [FaultStore] returns for an injected fault.
var ErrInjected = errors.New("ipamtest: injected store fault")

// Fault is what a [FaultStore] does with one call.
type Fault int

const (
	// NoFault passes the call to the inner store.
	NoFault Fault = iota
	// FailBefore returns [ErrInjected] without calling the inner store:
	// the call had no effect (a request that never reached the server).
	FailBefore
	// FailAfter calls the inner store and then returns [ErrInjected]
	// whatever the inner store did: a write is applied but the caller
	// cannot know it (an etcd request that timed out after the server
	// applied it). For ListAllocations the records are read and dropped.
	FailAfter
)

// String returns the name of the fault.
func (f Fault) String() string {
	switch f {
	case NoFault:
		return "NoFault"
	case FailBefore:
		return "FailBefore"
	case FailAfter:
		return "FailAfter"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// FaultStore wraps an [ipam.Store] and injects faults per call. Each
// optional function field chooses the fault for one call of its method; n
// counts the calls of that method, starting at 1 (failed calls count too).
// A nil field means [NoFault] for every call. Set the fields before the
// store is used concurrently; they are called with no lock held and must
// be safe for concurrent use if the store is used concurrently.
//
// Example: the first write is applied but reported failed, as with an etcd
// request that times out after the server applied it:
//
//	fs := &ipamtest.FaultStore{Store: &ipamtest.MemStore{}, Put: func(n int, a ipam.Allocation) ipamtest.Fault {
//		if n == 1 {
//			return ipamtest.FailAfter
//		}
//		return ipamtest.NoFault
//	}}
//
// FaultStore is safe for concurrent use if the inner store is.
type FaultStore struct {
	// Store receives the calls that are not failed before; required.
	Store ipam.Store

	// Put chooses the fault of the n-th PutAllocation call.
	Put func(n int, a ipam.Allocation) Fault
	// Delete chooses the fault of the n-th DeleteAllocation call.
	Delete func(n int, pod kubemodel.PodID) Fault
	// List chooses the fault of the n-th ListAllocations call.
	List func(n int) Fault

	mu                   sync.Mutex
	puts, deletes, lists int // calls so far; guarded by mu
	injected             int // faults injected so far; guarded by mu
}

var _ ipam.Store = (*FaultStore)(nil)

// count increments *n and returns the new value.
func (s *FaultStore) count(n *int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	*n++
	return *n
}

func (s *FaultStore) inject(f Fault, what string) error {
	if f == NoFault {
		return nil
	}
	s.mu.Lock()
	s.injected++
	s.mu.Unlock()
	return fmt.Errorf("%w: %s (%s)", ErrInjected, what, f)
}

// PutAllocation calls the inner store's PutAllocation, with the fault
// chosen by Put.
func (s *FaultStore) PutAllocation(ctx context.Context, a ipam.Allocation) error {
	f := NoFault
	if n := s.count(&s.puts); s.Put != nil {
		f = s.Put(n, a)
	}
	if f == FailBefore {
		return s.inject(f, "put "+a.Pod.String())
	}
	if err := s.Store.PutAllocation(ctx, a); err != nil {
		return err
	}
	return s.inject(f, "put "+a.Pod.String())
}

// DeleteAllocation calls the inner store's DeleteAllocation, with the
// fault chosen by Delete.
func (s *FaultStore) DeleteAllocation(ctx context.Context, pod kubemodel.PodID) error {
	f := NoFault
	if n := s.count(&s.deletes); s.Delete != nil {
		f = s.Delete(n, pod)
	}
	if f == FailBefore {
		return s.inject(f, "delete "+pod.String())
	}
	if err := s.Store.DeleteAllocation(ctx, pod); err != nil {
		return err
	}
	return s.inject(f, "delete "+pod.String())
}

// ListAllocations calls the inner store's ListAllocations, with the fault
// chosen by List.
func (s *FaultStore) ListAllocations(ctx context.Context) ([]ipam.Allocation, error) {
	f := NoFault
	if n := s.count(&s.lists); s.List != nil {
		f = s.List(n)
	}
	if f == FailBefore {
		return nil, s.inject(f, "list")
	}
	out, err := s.Store.ListAllocations(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.inject(f, "list"); err != nil {
		return nil, err
	}
	return out, nil
}

// Injected returns how many faults were injected so far.
func (s *FaultStore) Injected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.injected
}

package ipam

import (
	"context"
	"net/netip"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// NodeIDSource provides this node's cluster-wide node ID. nodesync's
// NodeSync satisfies it; [NodeIDFunc] adapts a plain function.
//
// IPAM calls GetNodeID from Resync only (on the event loop goroutine). A
// return value of 0 means "not allocated yet": the Resync then fails with
// [ErrNotReady]. Implementations must be safe for concurrent use.
type NodeIDSource interface {
	GetNodeID() uint32
}

// NodeIDFunc adapts a function into a [NodeIDSource]. It is safe for
// concurrent use if the function is.
type NodeIDFunc func() uint32

// GetNodeID calls f.
func (f NodeIDFunc) GetNodeID() uint32 { return f() }

var _ NodeIDSource = NodeIDFunc(nil)

// Allocation is one pod IP allocation: a record of [Store] and an element of
// [IPAM.Allocations]. It is an immutable, comparable value.
type Allocation struct {
	Pod  kubemodel.PodID
	Addr netip.Addr
}

// Store persists pod IP allocations so that an address allocated just before
// a crash (not yet visible in the Kubernetes pod state) is not handed out
// again after the restart. The application chooses where the records live;
// we recommend one etcd key per pod under a per-node prefix (for example
// /vswitchkit/ipam/<node>/<namespace>/<name> → address) or a bbolt bucket in
// the agent's local state file. ipamtest.MemStore is an in-memory
// implementation.
//
// # Contract
//
// IPAM calls the methods with a context bounded by Config.StoreTimeout,
// never concurrently with each other for one IPAM, and only from
// AllocatePodIP, ReleasePodIP, Resync and Update. Put must be durable when
// it returns nil: IPAM hands out the address only after that. Put replaces
// an existing record of the pod; Delete of a missing record is not an
// error. An error from Put fails the allocation (nothing is handed out); an
// error from Delete fails the release (the address stays allocated, so a
// retried DeletePod retries the Delete); an error from List fails the
// Resync. List's result is owned by the caller.
type Store interface {
	PutAllocation(ctx context.Context, a Allocation) error
	DeleteAllocation(ctx context.Context, pod kubemodel.PodID) error
	ListAllocations(ctx context.Context) ([]Allocation, error)
}

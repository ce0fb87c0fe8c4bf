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
	// ContainerID is the container ID of the pod sandbox that holds the
	// address (controller.AddPod.ContainerID of the AddPod that allocated
	// it or last moved it to a re-created sandbox). Empty means unknown:
	// the address was allocated through the direct API (AllocatePodIP,
	// AllocatePodAddr) or by an AddPod without a container ID, recovered
	// from the Kubernetes state (which has no container IDs), or read
	// from a record written before IPAM recorded holders. See
	// [IPAM.Update] for what the holder decides.
	ContainerID string
}

// Store persists pod IP allocations so that an address allocated just before
// a crash (not yet visible in the Kubernetes pod state) is not handed out
// again after the restart. Two implementations ship with vswitchkit:
// ipam/etcdstore (records in etcd under /vswitchkit/ipam/<node>/, fenced
// so that two agents with the same node name cannot both write) and
// ipam/boltstore (a local bbolt file); the package documentation says
// which to use. ipamtest.MemStore is an in-memory implementation for
// tests, and ipamtest.TestStore checks an implementation.
//
// # Contract
//
// IPAM calls the methods with a context bounded by Config.StoreTimeout —
// from Resync and Update derived from the event's context
// (controller.ContextOf), so that the loop's shutdown deadline reaches
// them — never concurrently with each other for one IPAM, and only from
// AllocatePodIP, ReleasePodIP, Resync, Update and Revert. Arguments are values;
// List's result is owned by the caller.
//
//   - PutAllocation writes the pod's record — the address and the holder
//     (Allocation.ContainerID, possibly empty), both of which ListAllocations
//     must return as written — replacing an existing one. It must be
//     durable when it returns nil: IPAM hands out the address, or moves it
//     to a re-created sandbox of the pod, only after that.
//   - DeleteAllocation deletes the pod's record; a missing record is not
//     an error.
//   - ListAllocations returns every record. Records it cannot decode are
//     left alone (and best reported through the store's own logger).
//
// An error return means the outcome is unknown: the write may have been
// applied (an etcd request that timed out after the server applied it).
// IPAM keeps the address of a failed Put or Delete allocated to the pod
// and settles the record with a later call — a retried allocation writes
// it again, a release deletes it, a Resync writes or deletes it. For that
// to be sound, a write whose outcome was unknown must never be applied
// after a later write of the same store has returned: a store either
// applies writes synchronously (bbolt) or fences each write against the
// store's previous one (etcdstore compares and bumps a revision in every
// transaction). An error from List fails the Resync.
type Store interface {
	PutAllocation(ctx context.Context, a Allocation) error
	DeleteAllocation(ctx context.Context, pod kubemodel.PodID) error
	ListAllocations(ctx context.Context) ([]Allocation, error)
}

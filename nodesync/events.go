package nodesync

import (
	"fmt"

	"github.com/vswitchkit/vswitchkit/controller"
)

// NodeUpdate is an Update event that represents a change in the status of a
// node. NodeSync pushes it as a follow-up of the event that caused the
// change, so it is processed right after it.
//
// For other nodes, the event is triggered when:
//   - the node joins the cluster (PrevState is nil),
//   - the node leaves the cluster (NewState is nil),
//   - its ID, VPP IP addresses, management IP addresses or pod CIDRs change.
//
// For this node, the event is triggered only when its management IP
// addresses or its pod CIDRs change (the pod CIDRs are an addition to the
// original semantics, for external IPAM). Changes of this node's VPP IP
// addresses are published by this node itself with
// [NodeSync.PublishNodeIPs].
//
// A node is known (present in [NodeSync.GetAllNodes]) when its vswitch agent
// has claimed an ID or when Kubernetes has a node object for it, so
// Kubernetes-only changes (a node object created or deleted) trigger the
// event too. The states are copies owned by the event; handlers must not
// modify them. NodeUpdate is immutable after it is pushed and safe for
// concurrent use.
type NodeUpdate struct {
	NodeName  string
	PrevState *Node // nil if the node joined the cluster
	NewState  *Node // nil if the node left the cluster
}

var _ controller.UpdateEvent = (*NodeUpdate)(nil)

// GetName returns the name of the NodeUpdate event.
func (ev *NodeUpdate) GetName() string { return "Node Update" }

// String describes the NodeUpdate event.
func (ev *NodeUpdate) String() string {
	switch {
	case ev.PrevState == nil:
		return fmt.Sprintf("Node Update: %s joined: %s", ev.NodeName, ev.NewState)
	case ev.NewState == nil:
		return fmt.Sprintf("Node Update: %s left", ev.NodeName)
	}
	return fmt.Sprintf("Node Update: %s changed: %s -> %s", ev.NodeName, ev.PrevState, ev.NewState)
}

// Method is Update.
func (ev *NodeUpdate) Method() controller.EventMethodType { return controller.Update }

// TransactionType is BestEffort.
func (ev *NodeUpdate) TransactionType() controller.UpdateTransactionType {
	return controller.BestEffort
}

// Direction is Forward.
func (ev *NodeUpdate) Direction() controller.UpdateDirectionType { return controller.Forward }

// IsBlocking returns false.
func (ev *NodeUpdate) IsBlocking() bool { return false }

// Done is a no-op.
func (ev *NodeUpdate) Done(error) {}

// recordChange tells the event loop that Run's watch has queued record
// changes ([NodeSync] batch): the handler applies them, at most
// maxBatch per event, in revision order. At most one recordChange of a
// NodeSync is in the loop's queue at a time, however many changes arrive
// meanwhile (thousands of nodes joining at once, while the loop waits for
// its start-up resync), so the changes never fill the queue and a change
// that arrives while one is queued costs no event of its own.
type recordChange struct {
	owner *NodeSync
}

func (ev *recordChange) GetName() string { return "Vswitch Node Record Change" }
func (ev *recordChange) String() string {
	return "Vswitch Node Record Change: " + ev.owner.batchDescription()
}
func (ev *recordChange) Method() controller.EventMethodType { return controller.Update }
func (ev *recordChange) TransactionType() controller.UpdateTransactionType {
	return controller.BestEffort
}
func (ev *recordChange) Direction() controller.UpdateDirectionType { return controller.Forward }
func (ev *recordChange) IsBlocking() bool                          { return false }
func (ev *recordChange) Done(error)                                {}

// recordResync carries a complete snapshot of the vswitch node records,
// taken by Run after its watch broke, into the event loop.
type recordResync struct {
	owner *NodeSync
	list  ListResult
}

func (ev *recordResync) GetName() string { return "Vswitch Node Record Resync" }
func (ev *recordResync) String() string {
	return fmt.Sprintf("Vswitch Node Record Resync: %d records (revision %d)", len(ev.list.KVs), ev.list.Revision)
}
func (ev *recordResync) Method() controller.EventMethodType { return controller.Update }
func (ev *recordResync) TransactionType() controller.UpdateTransactionType {
	return controller.BestEffort
}
func (ev *recordResync) Direction() controller.UpdateDirectionType { return controller.Forward }
func (ev *recordResync) IsBlocking() bool                          { return false }
func (ev *recordResync) Done(error)                                {}

var (
	_ controller.UpdateEvent = (*recordChange)(nil)
	_ controller.UpdateEvent = (*recordResync)(nil)
)

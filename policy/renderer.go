package policy

import (
	"github.com/vswitchkit/vswitchkit/controller"
)

// RenderKind tells what a [RenderEvent] is about.
type RenderKind int

const (
	// Resync: Snapshot holds the effective policy of every pod of this
	// node; the renderer replaces everything it rendered before.
	Resync RenderKind = iota + 1
	// Changed: the effective policies of the pods in Changes changed.
	Changed
)

// String returns the name of the kind.
func (k RenderKind) String() string {
	switch k {
	case Resync:
		return "Resync"
	case Changed:
		return "Changed"
	}
	return "RenderKind(?)"
}

// PodChange is the effective policy of one pod before and after an event:
// Old is nil for a pod that appeared, New is nil for a pod that is gone.
type PodChange struct {
	Old, New *PodPolicy
}

// RenderEvent is one notification to a renderer. The policies it
// references are immutable and may be kept; the slices and the
// transactions are valid only during the call.
type RenderEvent struct {
	Kind RenderKind
	// Snapshot is set for Resync: every local pod's policy, sorted by pod.
	Snapshot []*PodPolicy
	// Changes is set for Changed, sorted by pod.
	Changes []PodChange
	// Txn is the transaction of the event being processed (Changed under
	// a controller loop); nil when the processor is driven directly and
	// during a revert. ResyncTxn is set for Resync under a loop.
	Txn       controller.UpdateOperations
	ResyncTxn controller.ResyncOperations
}

// Renderer turns effective pod policies into data-plane configuration.
// RenderPolicy is called on the event loop's goroutine, one call at a
// time, with every change in the order it happened; an error fails the
// event (and the loop heals with a resync, or the event is reverted).
type Renderer interface {
	RenderPolicy(ev RenderEvent) error
}

// RendererFunc adapts a function to a [Renderer].
type RendererFunc func(ev RenderEvent) error

// RenderPolicy calls f(ev).
func (f RendererFunc) RenderPolicy(ev RenderEvent) error { return f(ev) }

var _ Renderer = RendererFunc(nil)

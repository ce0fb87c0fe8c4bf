package controller

import (
	"context"
	"fmt"
)

// Southbound receives the transactions that the loop commits: one per
// processed event that produced one. The vppdriver reconciler is the
// reference implementation; controllertest.Southbound records what it gets.
//
// # Contract
//
// Commit is called on the loop goroutine, one call at a time, never
// concurrently with itself. The [Commit] and the maps it holds are owned by
// the loop and valid only during the call: an implementation that keeps
// them must copy the map (the messages themselves are immutable by
// convention and may be kept).
//
// The returned sequence number identifies the transaction in the
// southbound's own records and is stored in the event history. A returned
// error means the data plane may not match the desired state: the loop
// records it and schedules a healing resync (a full resync). Wrap the error
// in [NewFatalError] to stop the loop instead.
type Southbound interface {
	Commit(ctx context.Context, c *Commit) (seqNum uint64, err error)
}

// SouthboundFunc adapts a function into a [Southbound].
type SouthboundFunc func(ctx context.Context, c *Commit) (uint64, error)

var _ Southbound = SouthboundFunc(nil)

// Commit calls f.
func (f SouthboundFunc) Commit(ctx context.Context, c *Commit) (uint64, error) { return f(ctx, c) }

// CommitKind tells what a [Commit] carries.
type CommitKind uint8

const (
	// CommitUpdate carries changes: Values holds the changed keys, a nil
	// value deletes the key.
	CommitUpdate CommitKind = iota

	// CommitResync carries the complete desired state: every key not in
	// Values must be removed from the data plane (if the southbound owns it).
	CommitResync

	// CommitReapply asks the southbound to re-apply the last committed state
	// to the data plane (a downstream resync). Values is nil.
	CommitReapply
)

// String returns the name of the kind.
func (k CommitKind) String() string {
	switch k {
	case CommitUpdate:
		return "Update"
	case CommitResync:
		return "Resync"
	case CommitReapply:
		return "Reapply"
	}
	return fmt.Sprintf("CommitKind(%d)", int(k))
}

// Commit is one transaction handed to the [Southbound].
type Commit struct {
	Kind CommitKind

	// Event is the event that produced the transaction (read-only).
	Event Event

	// TransactionType of the event for CommitUpdate (BestEffort for resyncs).
	TransactionType UpdateTransactionType

	// Values: the changed keys (nil value = delete) for CommitUpdate; the
	// complete desired state for CommitResync; nil for CommitReapply.
	// Handler output and external configuration are already merged.
	Values KeyValuePairs
}

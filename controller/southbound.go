package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
// southbound's own records and is stored in the event history.
//
// # Keys
//
// Values holds every key of the handlers' desired state (merged with the
// external configuration), not only the southbound's. A southbound acts on
// the keys it owns and ignores the others: they belong to another
// southbound, or handlers keep them for their own bookkeeping. A key it does
// not own is never its error. A southbound that implements [KeyOwner] says
// which keys it owns; [MultiSouthbound] uses that to give each of several
// southbounds its part.
//
// # Errors
//
// A returned error means the data plane may not match the desired state:
//
//   - a [KeyError] (usually several, joined with errors.Join) rejects the
//     value of one key for good: the value is invalid, retrying or a resync
//     gives the same answer. The southbound applies every other key of the
//     commit. The loop records the rejected keys (see [Loop.Healthy] and
//     [Stats]) and does not heal;
//   - an error marked with [NewPermanentError] (for example a data plane
//     that lacks the API the southbound needs) is reported the same way and
//     not healed: the southbound recovers by itself when the condition ends.
//     Return it from every commit while the condition lasts: the loop
//     reports it until a resync or reapply commit returns without it;
//   - any other error is transient: the loop schedules a healing resync (a
//     full resync);
//   - wrap the error in [NewFatalError] to stop the loop instead.
type Southbound interface {
	Commit(ctx context.Context, c *Commit) (seqNum uint64, err error)
}

// KeyOwner is an optional interface of a [Southbound] that acts on part of
// the key space only. OwnsKey must be a pure function of the key (the same
// answer every time) and safe for concurrent use.
type KeyOwner interface {
	OwnsKey(key string) bool
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

// MultiSouthbound returns a [Southbound] that hands every commit to each of
// sbs in order. A southbound that implements [KeyOwner] gets only the keys
// it owns (Values filtered; an update commit without any of its keys is not
// passed to it), the others get every key. The returned sequence number
// counts the commits of the multiplexer itself. The errors of all
// southbounds are joined, so a [FatalError] of any one stops the loop and
// the result is permanent (see [IsPermanent]) only if every error is.
// Like any southbound, it is called on the loop goroutine only.
func MultiSouthbound(sbs ...Southbound) Southbound {
	return &multiSouthbound{sbs: slices.Clone(sbs)}
}

type multiSouthbound struct {
	sbs  []Southbound
	seq  uint64
	part KeyValuePairs // reused; owned by the loop goroutine
}

func (m *multiSouthbound) Commit(ctx context.Context, c *Commit) (uint64, error) {
	m.seq++
	var errs []error
	for i, sb := range m.sbs {
		sub := *c
		if owner, ok := sb.(KeyOwner); ok && c.Values != nil {
			if m.part == nil {
				m.part = make(KeyValuePairs)
			}
			clear(m.part)
			for k, v := range c.Values {
				if owner.OwnsKey(k) {
					m.part[k] = v
				}
			}
			if c.Kind == CommitUpdate && len(m.part) == 0 {
				continue
			}
			sub.Values = m.part
		}
		if _, err := sb.Commit(ctx, &sub); err != nil {
			if isFatal(err) {
				return m.seq, err
			}
			errs = append(errs, fmt.Errorf("southbound %d: %w", i, err))
		}
	}
	return m.seq, errors.Join(errs...)
}

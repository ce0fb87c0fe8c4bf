package controller

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// Event represents something that has happened and may cause some reaction.
//
// Events are pushed into an [EventLoop] and processed one at a time on the
// loop goroutine. An event must not be modified after it was pushed, except
// by the handlers processing it (for example to fill in results of a
// blocking event before Done is called).
type Event interface {
	// GetName returns a string identifier, unique among the event types, but
	// also somewhat descriptive for humans.
	GetName() string

	// String returns a description of the event.
	String() string

	// Method tells whether the event can be reacted to by an incremental
	// change (Update) or if a re-synchronization is needed.
	Method() EventMethodType

	// IsBlocking returns true if any producer of this event ever waits for
	// the event result (sent using the method Done()).
	IsBlocking() bool

	// Done marks the event as processed, with the processing error or nil.
	// The loop calls it exactly once per processed (or rejected) event.
	Done(error)
}

// UpdateEvent can be reacted to by an incremental change, as opposed to the
// full re-synchronization. Every event whose Method is [Update] must
// implement it.
type UpdateEvent interface {
	Event

	// TransactionType defines how to treat already executed changes of a
	// failed event processing - whether to keep them (and be as close to the
	// desired state as it was possible) or to revert them (a proper
	// transaction).
	TransactionType() UpdateTransactionType

	// Direction determines the direction in which the event flows through the
	// event handlers.
	Direction() UpdateDirectionType
}

// EventHandler declares the methods an event handler implements.
//
// # Contract
//
// All methods are called on the loop goroutine, one at a time: a handler is
// never called concurrently with itself or with any other handler of the same
// loop. Handlers must not block on the loop (for example by waiting on a
// blocking event they pushed). A handler pushes follow-up events with
// [PushFollowUp] on its txn (or the loop's PushEvent); they run right after
// the current event.
//
// The txn passed to Resync and Update is valid only during the call; do not
// keep it. Values put into it are owned by the loop from then on and must not
// be modified afterwards.
//
// A handler that does I/O or waits (for a store, for another component)
// uses [ContextOf](txn) and returns when it is cancelled: the loop cannot
// interrupt a handler, and cancels that context when it stops waiting for
// it (see [Loop.Run]). A handler that blocks without honouring it keeps the
// loop, and an application's Ctrl-C, waiting for as long as it blocks.
//
// Returned errors: a plain error is handled according to the event's
// transaction type (see [UpdateTransactionType]); an [AbortEventError]
// stops the event without commit and schedules a healing resync; a
// [FatalError] stops the loop. A permanent error (see [IsPermanent]) is
// handled like a plain one but never healed: return a [KeyError] for a key
// of the input that can never be used as it is (bad user input), or
// [NewPermanentError] for a condition that a resync cannot change; the loop
// reports them through [Loop.Healthy] and [Loop.RejectedKeys].
type EventHandler interface {
	// String identifies the handler in logs and in the event history.
	String() string

	// HandlesEvent tells whether the handler wants the event. Handlers that
	// return false are skipped for that event (also for resyncs).
	HandlesEvent(event Event) bool

	// Resync is called for events that require full re-synchronization
	// (FullResync, UpstreamResync). The handler puts its complete desired
	// state into txn. For the start-up resync resyncCount is 1; higher values
	// identify run-time resyncs.
	Resync(event Event, kubeStateData KubeStateData, resyncCount int, txn ResyncOperations) error

	// Update is called for events that can be reacted to by an incremental
	// change. changeDescription is a human-readable description of what was
	// changed (via txn or internally); it is recorded in the event history
	// and may be empty.
	Update(event Event, txn UpdateOperations) (changeDescription string, err error)

	// Revert is called to revert already executed internal changes (in the
	// handler itself, not in the data plane) for a RevertOnFailure event that
	// failed in a later handler or in the commit.
	Revert(event Event) error
}

// EventLoop is the main event loop: it accepts events for processing.
type EventLoop interface {
	// PushEvent adds the given event into the queue for processing. It never
	// blocks; it returns an error when the event cannot be queued.
	PushEvent(event Event) error
}

// EventMethodType tells how an event is reacted to.
type EventMethodType int

const (
	// FullResync event requires to be reacted to by a full re-synchronization
	// (handlers rebuild the desired state; the southbound re-applies all of it).
	FullResync EventMethodType = iota

	// DownstreamResync triggers re-synchronization between the southbound and
	// the data plane. The event is fully processed by the loop (it is not
	// passed to event handlers): the southbound re-applies the last committed
	// state.
	DownstreamResync

	// UpstreamResync triggers re-synchronization of the handlers' desired
	// state. It can be used whenever it is far easier to re-build the
	// configuration from scratch than to calculate an incremental change.
	UpstreamResync

	// Update event can be reacted to by an incremental change.
	Update
)

// String returns the name of the method.
func (m EventMethodType) String() string {
	switch m {
	case FullResync:
		return "FullResync"
	case DownstreamResync:
		return "DownstreamResync"
	case UpstreamResync:
		return "UpstreamResync"
	case Update:
		return "Update"
	}
	return fmt.Sprintf("EventMethodType(%d)", int(m))
}

// UpdateDirectionType is either Forward or Reverse.
type UpdateDirectionType int

const (
	// Forward event is processed by handlers in the exact same order as
	// passed to the loop - ensuring for every handler that its dependencies
	// have already reacted to the event.
	Forward UpdateDirectionType = iota

	// Reverse event is processed by handlers in the backward order, ensuring
	// for every handler that its dependencies are still in the pre-event state.
	Reverse
)

// String returns the name of the direction.
func (d UpdateDirectionType) String() string {
	switch d {
	case Forward:
		return "Forward"
	case Reverse:
		return "Reverse"
	}
	return fmt.Sprintf("UpdateDirectionType(%d)", int(d))
}

// UpdateTransactionType defines what happens when processing an update fails.
type UpdateTransactionType int

const (
	// BestEffort transaction continues even if a non-fatal, non-abort error
	// is returned (to get as close to the desired state as possible). The
	// transaction is committed and a healing resync is scheduled (unless
	// every error is permanent, see [IsPermanent]).
	BestEffort UpdateTransactionType = iota

	// RevertOnFailure tells the loop to stop event processing when any error
	// is returned, not to commit, and to revert already executed changes by
	// calling Revert on the handlers that already ran, in reverse order.
	RevertOnFailure

	// BestEffortIgnoreErrors is BestEffort without the healing resync for
	// handler errors: they are recorded and returned through Done, nothing
	// else happens. A transient commit error is still healed.
	BestEffortIgnoreErrors
)

// String returns the name of the transaction type.
func (t UpdateTransactionType) String() string {
	switch t {
	case BestEffort:
		return "BestEffort"
	case RevertOnFailure:
		return "RevertOnFailure"
	case BestEffortIgnoreErrors:
		return "BestEffortIgnoreErrors"
	}
	return fmt.Sprintf("UpdateTransactionType(%d)", int(t))
}

// KeyValuePairs is a set of key-value pairs.
type KeyValuePairs map[string]proto.Message

// KubeStateData contains Kubernetes state data organized as key-value pairs
// sorted by the resource type: resource name -> {(key, value)}.
type KubeStateData map[string]KeyValuePairs

// NewKubeStateData is a constructor for KubeStateData.
func NewKubeStateData() KubeStateData { return make(KubeStateData) }

// CopyWithoutValues returns a copy of the two-level map structure; the
// messages themselves are shared (they are immutable by convention).
func (k KubeStateData) CopyWithoutValues() KubeStateData {
	out := make(KubeStateData, len(k))
	for res, kvs := range k {
		c := make(KeyValuePairs, len(kvs))
		for key, v := range kvs {
			c[key] = v
		}
		out[res] = c
	}
	return out
}

// ResyncOperations lists operations needed to build a transaction for
// Resync-type events.
type ResyncOperations interface {
	// Put adds a request to the transaction to add or modify a value.
	// value cannot be nil.
	Put(key string, value proto.Message)

	// Get returns the value already prepared to be applied by this
	// transaction. Until the transaction is committed, provided values can
	// still be changed. Returns nil if the value is set to be deleted, or has
	// not been set at all.
	Get(key string) proto.Message
}

// UpdateOperations lists operations needed to build a transaction for
// Update-type events.
type UpdateOperations interface {
	ResyncOperations

	// Delete adds a request to the transaction to delete an existing value.
	Delete(key string)
}

// Transaction defines operations needed to build and commit a transaction.
type Transaction interface {
	UpdateOperations

	// Commit applies the requested transaction changes.
	Commit(ctx context.Context) (seqNum uint64, err error)
}

// ConfigRetriever allows reading configuration in order to adjust a config
// item by multiple event handlers.
type ConfigRetriever interface {
	// GetConfig returns the value for the given key in the loop's current
	// transaction. If the key is not part of the transaction, the value from
	// the internal configuration (the handlers' desired state as last
	// committed) is returned. External configuration is not included.
	GetConfig(key string) proto.Message
}

// PutAll is a helper function to prepare Put for multiple key-value pairs
// into a single transaction.
func PutAll(txn ResyncOperations, values KeyValuePairs) {
	for k, v := range values {
		txn.Put(k, v)
	}
}

// DeleteAll is a helper function to prepare Delete for multiple key-value
// pairs into a single transaction.
func DeleteAll(txn UpdateOperations, values KeyValuePairs) {
	for k := range values {
		txn.Delete(k)
	}
}

// ReplaceAll prepares the change from the values old to the values new in
// a single transaction: Delete for the keys of old that new lacks, Put for
// the keys of new that old lacks or holds another value under
// (proto.Equal). It returns the number of operations; values that stay as
// they are cost none.
func ReplaceAll(txn UpdateOperations, old, new KeyValuePairs) int {
	n := 0
	for k := range old {
		if _, keep := new[k]; !keep {
			txn.Delete(k)
			n++
		}
	}
	for k, v := range new {
		if ov, had := old[k]; !had || !proto.Equal(ov, v) {
			txn.Put(k, v)
			n++
		}
	}
	return n
}

// HandlerFuncs adapts plain functions into an [EventHandler]. Nil fields
// mean: Handles - every event is handled; Resync, Update, Revert - do nothing
// and succeed. The zero value is a valid handler named "handler" that does
// nothing.
type HandlerFuncs struct {
	Name       string
	Handles    func(event Event) bool
	ResyncFunc func(event Event, kubeState KubeStateData, resyncCount int, txn ResyncOperations) error
	UpdateFunc func(event Event, txn UpdateOperations) (string, error)
	RevertFunc func(event Event) error
}

var _ EventHandler = (*HandlerFuncs)(nil)

// String returns h.Name, or "handler" when it is empty.
func (h *HandlerFuncs) String() string {
	if h.Name == "" {
		return "handler"
	}
	return h.Name
}

// HandlesEvent calls h.Handles, or returns true if it is nil.
func (h *HandlerFuncs) HandlesEvent(event Event) bool {
	return h.Handles == nil || h.Handles(event)
}

// Resync calls h.ResyncFunc if it is set.
func (h *HandlerFuncs) Resync(event Event, kubeState KubeStateData, resyncCount int, txn ResyncOperations) error {
	if h.ResyncFunc == nil {
		return nil
	}
	return h.ResyncFunc(event, kubeState, resyncCount, txn)
}

// Update calls h.UpdateFunc if it is set.
func (h *HandlerFuncs) Update(event Event, txn UpdateOperations) (string, error) {
	if h.UpdateFunc == nil {
		return "", nil
	}
	return h.UpdateFunc(event, txn)
}

// Revert calls h.RevertFunc if it is set.
func (h *HandlerFuncs) Revert(event Event) error {
	if h.RevertFunc == nil {
		return nil
	}
	return h.RevertFunc(event)
}

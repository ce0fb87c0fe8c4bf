package controller

import (
	"context"

	"google.golang.org/protobuf/proto"
)

// txn is the transaction handed to handlers: key -> value, nil = delete.
// It is owned by the loop goroutine and reused between events.
type txn struct {
	values KeyValuePairs
	resync bool
	ctx    context.Context // of the event being processed
	loop   *Loop
}

// Context returns the context of the event being processed (see
// [ContextOf]).
func (t *txn) Context() context.Context { return t.ctx }

// ContextOf returns the context under which the loop processes the event
// that txn belongs to, for a handler's I/O (a store write, a lookup, a
// wait): it carries the values of Run's context and is cancelled when the
// loop stops waiting for the handler:
//
//   - for the Shutdown event, when its Config.ShutdownTimeout has passed
//     (it carries that deadline);
//   - for any other event, Config.ShutdownTimeout after Run's context
//     ended; the cancellation of Run's context alone does not cancel it,
//     so the event in progress finishes its I/O.
//
// The loop cannot interrupt a handler: a handler that blocks (on I/O, or
// waiting for another component) without honouring this context keeps Run
// from returning after a cancellation (a Ctrl-C) for as long as it blocks.
// For a transaction that carries no context (one built by a test or by
// another framework) ContextOf returns context.Background().
func ContextOf(txn ResyncOperations) context.Context {
	if c, ok := txn.(interface{ Context() context.Context }); ok {
		if ctx := c.Context(); ctx != nil {
			return ctx
		}
	}
	return context.Background()
}

// PushFollowUp pushes ev as a follow-up of the event being processed (see
// [PushFollowUp]).
func (t *txn) PushFollowUp(ev Event) error {
	if t.loop == nil || t.loop.cur != t {
		return ErrNotInHandler
	}
	return t.loop.pushFollowUp(ev)
}

// PushFollowUp pushes ev as a follow-up of the event whose handler received
// txn (in Resync or Update): ev runs right after that event and the
// follow-ups pushed before it, before any event queued from outside and
// before any timer. It never blocks. It returns:
//
//   - ErrBlockingFollowUp for a blocking event (waiting for it in the
//     handler would deadlock the loop);
//   - ErrQueueFull when Config.QueueSize follow-ups are waiting;
//   - ErrNotInHandler when txn is not the transaction of a handler call in
//     progress: a transaction kept after the handler returned, or one that
//     does not support follow-ups (built by another framework).
//
// controllertest.Txn records the follow-ups pushed with it, for testing a
// handler without a loop. Call PushFollowUp on the loop goroutine, from the
// handler itself. A handler that holds only an [EventLoop] may call its
// PushEvent instead (see [Loop.PushEvent]); Revert, which receives no
// transaction, has to.
func PushFollowUp(txn ResyncOperations, ev Event) error {
	if p, ok := txn.(interface{ PushFollowUp(Event) error }); ok {
		return p.PushFollowUp(ev)
	}
	return ErrNotInHandler
}

var _ UpdateOperations = (*txn)(nil)

func (t *txn) reset(resync bool) {
	clear(t.values)
	t.resync = resync
}

// Put adds or modifies a value. A nil value deletes the key in an update
// transaction and removes it from a resync transaction.
func (t *txn) Put(key string, value proto.Message) {
	if value == nil {
		t.Delete(key)
		return
	}
	t.values[key] = value
}

// Get returns the value prepared for key, nil if deleted or not set.
func (t *txn) Get(key string) proto.Message { return t.values[key] }

// Delete requests the deletion of key.
func (t *txn) Delete(key string) {
	if t.resync {
		delete(t.values, key)
		return
	}
	t.values[key] = nil
}

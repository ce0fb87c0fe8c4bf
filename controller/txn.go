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
}

// Context returns the context of the event being processed (see
// [ContextOf]).
func (t *txn) Context() context.Context { return t.ctx }

// ContextOf returns the context under which the loop processes the event
// that txn belongs to, for a handler's I/O (a store write, a lookup): the
// loop cancels it when it must stop waiting for the event, e.g. when the
// Shutdown event's Config.ShutdownTimeout has passed. For a transaction
// that carries no context (one built by a test or by another framework)
// it returns context.Background().
func ContextOf(txn ResyncOperations) context.Context {
	if c, ok := txn.(interface{ Context() context.Context }); ok {
		if ctx := c.Context(); ctx != nil {
			return ctx
		}
	}
	return context.Background()
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

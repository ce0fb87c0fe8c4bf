package controller

import "google.golang.org/protobuf/proto"

// txn is the transaction handed to handlers: key -> value, nil = delete.
// It is owned by the loop goroutine and reused between events.
type txn struct {
	values KeyValuePairs
	resync bool
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

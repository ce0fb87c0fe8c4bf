package controllertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/vswitchkit/vswitchkit/controller"
	"google.golang.org/protobuf/proto"
)

// Txn is an in-memory [controller.Transaction]. Values maps every touched
// key to its new value (nil = deleted). Commit only counts commits. It
// records the follow-up events a handler pushes with
// [controller.PushFollowUp] (see FollowUps). The zero value is ready to
// use.
type Txn struct {
	mu        sync.Mutex
	values    controller.KeyValuePairs
	commits   int
	followUps []controller.Event
}

var _ controller.Transaction = (*Txn)(nil)

// NewTxn returns an empty transaction.
func NewTxn() *Txn { return &Txn{} }

// Put records value for key. It panics on a nil value, like the real loop
// treats it as a programming error.
func (t *Txn) Put(key string, value proto.Message) {
	if value == nil {
		panic("controllertest: Put with nil value for key " + key)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.values == nil {
		t.values = make(controller.KeyValuePairs)
	}
	t.values[key] = value
}

// Delete records the deletion of key.
func (t *Txn) Delete(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.values == nil {
		t.values = make(controller.KeyValuePairs)
	}
	t.values[key] = nil
}

// Get returns the value recorded for key, nil if deleted or not set.
func (t *Txn) Get(key string) proto.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.values[key]
}

// Commit counts the commit and returns its number.
func (t *Txn) Commit(context.Context) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.commits++
	return uint64(t.commits), nil
}

// Values returns a copy of everything recorded: key -> value, nil = delete.
func (t *Txn) Values() controller.KeyValuePairs {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.values)
}

// Keys returns the recorded keys, sorted.
func (t *Txn) Keys() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.values))
	for k := range t.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// PushFollowUp records ev, as [controller.PushFollowUp] does with a loop's
// transaction: a blocking event is refused with
// controller.ErrBlockingFollowUp, and a nil event with an error.
func (t *Txn) PushFollowUp(ev controller.Event) error {
	if ev == nil {
		return errors.New("controllertest: nil event")
	}
	if ev.IsBlocking() {
		return fmt.Errorf("%w: %s", controller.ErrBlockingFollowUp, ev.GetName())
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.followUps = append(t.followUps, ev)
	return nil
}

// FollowUps returns the events pushed with PushFollowUp, in push order.
func (t *Txn) FollowUps() []controller.Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.followUps)
}

// Reset forgets everything recorded.
func (t *Txn) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.values = nil
	t.followUps = nil
}

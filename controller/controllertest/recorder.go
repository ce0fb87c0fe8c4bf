package controllertest

import (
	"context"
	"sync"

	"github.com/vswitchkit/vswitchkit/controller"
)

// EventRecorder is a [controller.EventLoop] that records pushed events. The
// zero value is ready to use.
type EventRecorder struct {
	// DoneErr, when AutoDone is set, is passed to Done of every pushed event.
	DoneErr error
	// AutoDone completes every pushed event immediately with DoneErr, so
	// producers that Wait on blocking events do not hang.
	AutoDone bool
	// PushErr, when non-nil, is returned by PushEvent and the event is not
	// recorded.
	PushErr func(ev controller.Event) error

	mu     sync.Mutex
	events []controller.Event
	notify chan struct{} // closed and replaced on every push
}

var _ controller.EventLoop = (*EventRecorder)(nil)

// PushEvent records ev.
func (r *EventRecorder) PushEvent(ev controller.Event) error {
	if r.PushErr != nil {
		if err := r.PushErr(ev); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	if r.notify != nil {
		close(r.notify)
		r.notify = nil
	}
	r.mu.Unlock()
	if r.AutoDone {
		ev.Done(r.DoneErr)
	}
	return nil
}

// Events returns a copy of the recorded events in push order.
func (r *EventRecorder) Events() []controller.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]controller.Event(nil), r.events...)
}

// Len returns the number of recorded events.
func (r *EventRecorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// WaitFor blocks until at least n events were recorded or ctx is done, and
// returns the first n (or all recorded so far, with ctx.Err()).
func (r *EventRecorder) WaitFor(ctx context.Context, n int) ([]controller.Event, error) {
	for {
		r.mu.Lock()
		if len(r.events) >= n {
			evs := append([]controller.Event(nil), r.events[:n]...)
			r.mu.Unlock()
			return evs, nil
		}
		if r.notify == nil {
			r.notify = make(chan struct{})
		}
		ch := r.notify
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return r.Events(), ctx.Err()
		}
	}
}

// Reset forgets the recorded events.
func (r *EventRecorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = nil
}

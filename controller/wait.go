package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/petermattis/goid"
)

// NotRunningGrace is how long WaitStartupResync and Sync wait for Run to be
// called before they return ErrNotRunning: an application that starts Run
// in a goroutine right before waiting is not refused, one that forgot Run
// learns it within seconds instead of hanging.
const NotRunningGrace = 5 * time.Second

// waitState is what the waiting methods select on. The channels are made
// by New and closed once each, by the Run goroutine.
type waitState struct {
	started     chan struct{} // Run was called
	ready       chan struct{} // the start-up DBResync was processed
	startupErr  error         // its error; written before ready is closed
	startupLate chan struct{} // StartupResyncDeadline passed without it
	stopped     chan struct{} // Run stopped; everything pending completed
}

func newWaitState() waitState {
	return waitState{
		started: make(chan struct{}), ready: make(chan struct{}),
		startupLate: make(chan struct{}), stopped: make(chan struct{}),
	}
}

// Ready returns a channel that is closed once the start-up DBResync has
// been processed: its handlers ran and its transaction was committed, or
// it failed (WaitStartupResync returns its error). From then on the loop
// processes every event. The channel is never closed if the loop stops
// before a DBResync arrives. It is safe for concurrent use.
func (l *Loop) Ready() <-chan struct{} { return l.waiters.ready }

// WaitStartupResync blocks until the start-up DBResync has been processed
// and returns its error: nil, or the joined handler and commit errors of
// that resync (the loop heals it as any other). It returns earlier with:
//
//   - ErrStartupResyncMissing once Config.StartupResyncDeadline passed
//     without a DBResync (as Healthy reports then; the loop keeps waiting
//     for it, and [Loop.Ready] closes when it comes);
//   - ErrNotRunning when Run has not been called within [NotRunningGrace];
//   - ErrStopped when the loop stopped before a DBResync was processed;
//   - ctx.Err() when ctx ends first.
//
// It is safe for concurrent use; calls after the start-up resync return
// its error at once. Do not call it from a handler: the loop would wait
// for itself (before the start-up resync only DBResync handlers run).
func (l *Loop) WaitStartupResync(ctx context.Context) error {
	w := &l.waiters
	notRunning, stopTimer := l.notRunningTimer()
	defer stopTimer()
	started := w.started
	for {
		select {
		case <-w.ready:
			return w.startupErr
		default:
		}
		select {
		case <-w.ready:
			return w.startupErr
		case <-w.startupLate:
			select {
			case <-w.ready:
				return w.startupErr
			default:
			}
			return ErrStartupResyncMissing
		case <-w.stopped:
			select {
			case <-w.ready:
				return w.startupErr
			default:
			}
			return ErrStopped
		case <-started:
			started, notRunning = nil, nil
		case <-notRunning:
			return ErrNotRunning
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Sync blocks until every event pushed before the call (from any
// goroutine) has been processed, together with the follow-ups they pushed,
// and returns nil; it says nothing about their results (see History, or
// the events' own Wait). Events pushed before the start-up DBResync wait
// for it (see the package documentation), so Sync does too. Sync is a
// barrier in the queue, not an event: no handler runs for it, it is not
// counted in Stats other than as Queued while it waits, and it is never
// refused for a full queue (Config.QueueSize). It returns earlier with:
//
//   - ErrNotRunning when Run has not been called within [NotRunningGrace];
//   - ErrStopped when the loop stopped (or stops) before the barrier is
//     reached;
//   - ctx.Err() when ctx ends first (the barrier is then passed without
//     effect).
//
// Called from a handler it returns an error wrapping ErrBlockingFollowUp
// at once: the loop would wait for itself. It is safe for concurrent use.
func (l *Loop) Sync(ctx context.Context) error {
	if l.inHandler.Load() && goid.Get() == l.loopG.Load() {
		return fmt.Errorf("%w: Sync called from a handler", ErrBlockingFollowUp)
	}
	b := &barrier{done: make(chan error, 1)}
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return ErrStopped
	}
	l.queue = append(l.queue, b)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}

	w := &l.waiters
	notRunning, stopTimer := l.notRunningTimer()
	defer stopTimer()
	started := w.started
	for {
		select {
		case err := <-b.done:
			return err
		case <-started:
			started, notRunning = nil, nil
		case <-notRunning:
			return ErrNotRunning
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// notRunningTimer returns a channel that fires NotRunningGrace from now if
// Run has not been called by then (nil if it has), and its stop function.
func (l *Loop) notRunningTimer() (<-chan time.Time, func()) {
	select {
	case <-l.waiters.started:
		return nil, func() {}
	default:
	}
	t := time.NewTimer(NotRunningGrace)
	return t.C, func() { t.Stop() }
}

// barrier is what Sync queues: the loop completes it when it reaches it in
// the queue (through the start-up gate, after every event pushed before it
// and their follow-ups), without processing it.
type barrier struct{ done chan error }

func (b *barrier) GetName() string         { return "Sync" }
func (b *barrier) String() string          { return "Sync barrier" }
func (b *barrier) Method() EventMethodType { return Update }
func (b *barrier) IsBlocking() bool        { return true }
func (b *barrier) Done(err error)          { b.done <- err }

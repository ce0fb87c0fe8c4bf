package controller_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
)

// TestCancelStopsAfterEventInProgress: events already taken from the queue
// with the event in progress (one batch) used to run their handlers and
// commit with the cancelled context. Now they complete with ErrStopped.
func TestCancelStopsAfterEventInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		release := make(chan struct{})
		slow := func(ev controller.Event) error {
			if ev.GetName() == "slow" {
				<-release
			}
			return nil
		}
		var l *controller.Loop
		var followUpErr error
		pusher := &controller.HandlerFuncs{Name: "pusher", UpdateFunc: func(ev controller.Event, _ controller.UpdateOperations) (string, error) {
			if ev.GetName() == "slow" {
				followUpErr = l.PushEvent(newUpdate("follow-up", controller.BestEffort, controller.Forward))
			}
			return "", nil
		}}
		sb := &controllertest.Southbound{}
		l = newLoop(t, []controller.EventHandler{handler("a", log, slow), pusher}, sb, controller.Config{})
		// All pushed before Run: the loop takes them as one batch.
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		require.NoError(t, l.PushEvent(newUpdate("slow", controller.BestEffort, controller.Forward)))
		queued := newUpdate("queued", controller.BestEffort, controller.Forward)
		require.NoError(t, l.PushEvent(queued))
		blocking := controller.NewExternalConfigChange("user", true)
		require.NoError(t, l.PushEvent(blocking))
		stop, runDone := run(t, l)
		synctest.Wait() // "slow" is in progress

		go func() { _ = stop() }()
		synctest.Wait()
		close(release)
		require.ErrorIs(t, <-runDone, context.Canceled)
		require.NoError(t, followUpErr)

		assert.Equal(t, []string{"a.Resync(Database Resync,1)", "a.Update(slow)", "a.Update(Shutdown)"}, log.take(),
			"nothing runs after the event in progress but Shutdown")
		assert.ErrorIs(t, queued.result(t), controller.ErrStopped)
		assert.ErrorIs(t, blocking.Wait(), controller.ErrStopped)
		var names []string
		for _, c := range sb.Commits() {
			names = append(names, c.EventName)
			if c.EventName == "Shutdown" {
				assert.NoError(t, c.CtxErr, "the Shutdown commit has a live context")
				assert.True(t, c.HasDeadline, "bounded by ShutdownTimeout")
			}
		}
		assert.Equal(t, []string{"Database Resync", "slow", "Shutdown"}, names)
		st := l.Stats()
		assert.EqualValues(t, 3, st.Processed)
		assert.Zero(t, st.Queued)
	})
}

// TestShutdownTimeoutBoundsTheEvent: ShutdownTimeout bounds the Shutdown
// event. Handlers cannot be interrupted, but once the time is up no further
// handler is called and nothing is committed.
func TestShutdownTimeoutBoundsTheEvent(t *testing.T) {
	for _, pushed := range []bool{false, true} {
		name := "after cancellation"
		if pushed {
			name = "pushed"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &callLog{}
				slow := func(ev controller.Event) error {
					if ev.GetName() == "Shutdown" {
						time.Sleep(20 * time.Second)
					}
					return nil
				}
				hs := []controller.EventHandler{handler("a", log, slow), handler("b", log, slow), handler("c", log, nil)}
				sb := &controllertest.Southbound{}
				l := newLoop(t, hs, sb, controller.Config{ShutdownTimeout: 30 * time.Second})
				stop, runDone := run(t, l)
				require.NoError(t, l.PushEvent(controller.NewDBResync()))
				synctest.Wait()
				log.take()
				start := time.Now()
				if pushed {
					sd := controller.NewShutdownEvent()
					require.NoError(t, l.PushEvent(sd))
					require.ErrorIs(t, sd.Wait(), context.DeadlineExceeded)
					require.NoError(t, <-runDone)
				} else {
					require.ErrorIs(t, stop(), context.Canceled)
				}
				assert.Equal(t, 40*time.Second, time.Since(start), "a and b ran to the end")
				assert.Equal(t, []string{"a.Update(Shutdown)", "b.Update(Shutdown)"}, log.take(), "c is not called after the deadline")
				rec := l.History().Last(1)[0]
				assert.Equal(t, "Shutdown", rec.Name)
				assert.ErrorIs(t, rec.Err, context.DeadlineExceeded)
				assert.ErrorContains(t, rec.Err, "c")
				assert.False(t, rec.Committed, "no commit after the deadline")
				assert.Len(t, sb.Commits(), 1)
			})
		})
	}
}

// TestShutdownCommitCarriesTheDeadline: the Shutdown commit gets a context
// that ends at ShutdownTimeout after the Shutdown event started, also for a
// pushed Shutdown.
func TestShutdownCommitCarriesTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		sb := &controllertest.Southbound{}
		l := newLoop(t, []controller.EventHandler{handler("a", log, nil)}, sb, controller.Config{ShutdownTimeout: 7 * time.Second})
		_, runDone := run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		synctest.Wait()
		start := time.Now()
		sd := controller.NewShutdownEvent()
		require.NoError(t, l.PushEvent(sd))
		require.NoError(t, sd.Wait())
		require.NoError(t, <-runDone)
		cs := sb.Commits()
		require.Len(t, cs, 2)
		assert.Equal(t, "Shutdown", cs[1].EventName)
		assert.True(t, cs[1].HasDeadline)
		assert.Equal(t, start.Add(7*time.Second), cs[1].Deadline)
		assert.NoError(t, cs[1].CtxErr)
	})
}

// TestHandlerContextOnCancel pins what ContextOf gives a handler when
// Run's context is cancelled while an ordinary event is in progress: the
// cancellation alone does not cancel it (the event in progress finishes),
// ShutdownTimeout later it is cancelled, so a handler that honours it
// lets Run return in bounded time. The event's commit gets Run's context,
// cancelled by then. The Shutdown event that follows gets a fresh context
// that ends ShutdownTimeout after it started.
func TestHandlerContextOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 10 * time.Second
		type key struct{}
		var cancelledAt, shutdownCtxAt time.Time
		var slowCtxErr, shutdownCtxErr error
		var shutdownDeadline time.Time
		blocked, gaveUp := make(chan struct{}), make(chan struct{})
		h := &controller.HandlerFuncs{Name: "io", UpdateFunc: func(ev controller.Event, txn controller.UpdateOperations) (string, error) {
			ctx := controller.ContextOf(txn)
			switch ev.GetName() {
			case "slow":
				close(blocked)
				<-ctx.Done() // I/O that honours the context
				cancelledAt = time.Now()
				slowCtxErr = ctx.Err()
				close(gaveUp)
				txn.Put("slow", str("done"))
				return "", nil
			case "Shutdown":
				shutdownDeadline, _ = ctx.Deadline()
				shutdownCtxErr = ctx.Err()
				<-ctx.Done()
				shutdownCtxAt = time.Now()
			}
			return "", nil
		}}
		sb := &controllertest.Southbound{}
		l := newLoop(t, []controller.EventHandler{h}, sb, controller.Config{ShutdownTimeout: timeout})
		ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "run"))
		defer cancel()
		runDone := make(chan error, 1)
		go func() { runDone <- l.Run(ctx) }()
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		require.NoError(t, l.PushEvent(newUpdate("slow", controller.BestEffort, controller.Forward)))
		<-blocked
		start := time.Now()
		cancel()
		synctest.Wait()
		select {
		case <-gaveUp:
			t.Fatal("the handler's context was cancelled with Run's")
		default:
		}

		err := <-runDone
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, timeout, cancelledAt.Sub(start), "cancelled ShutdownTimeout after Run's context")
		assert.ErrorIs(t, slowCtxErr, context.Canceled)

		// The Shutdown event started when "slow" ended, with its own bound.
		assert.NoError(t, shutdownCtxErr, "the Shutdown event's context is live")
		assert.Equal(t, start.Add(2*timeout), shutdownDeadline)
		assert.Equal(t, 2*timeout, shutdownCtxAt.Sub(start))

		var slow *controllertest.CommitRecord
		for i, c := range sb.Commits() {
			if c.EventName == "slow" {
				slow = &sb.Commits()[i]
			}
		}
		require.NotNil(t, slow, "the event in progress is committed")
		assert.ErrorIs(t, slow.CtxErr, context.Canceled, "its commit gets Run's context")
	})
}

// TestHandlerContextLive: while Run's context is live, the handlers'
// context is live and carries its values; it has no deadline.
func TestHandlerContextLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type key struct{}
		var errs []error
		var values []any
		var deadlines []bool
		h := &controller.HandlerFuncs{Name: "io",
			ResyncFunc: func(_ controller.Event, _ controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
				ctx := controller.ContextOf(txn)
				_, hasDeadline := ctx.Deadline()
				errs, values, deadlines = append(errs, ctx.Err()), append(values, ctx.Value(key{})), append(deadlines, hasDeadline)
				return nil
			},
		}
		l := newLoop(t, []controller.EventHandler{h}, &controllertest.Southbound{}, controller.Config{})
		ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "run"))
		defer cancel()
		runDone := make(chan error, 1)
		go func() { runDone <- l.Run(ctx) }()
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		time.Sleep(time.Hour)
		require.NoError(t, l.PushEvent(controller.NewExternalConfigResync("user", false)))
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-runDone, context.Canceled)
		assert.Equal(t, []error{nil, nil}, errs)
		assert.Equal(t, []any{"run", "run"}, values)
		assert.Equal(t, []bool{false, false}, deadlines)
	})
}

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

// waitResult is what a blocking call returned, and after how long.
type waitResult struct {
	err   error
	after time.Duration
}

// async runs f in a goroutine and returns a channel with its result and
// the time it took (synctest time).
func async(f func() error) <-chan waitResult {
	ch := make(chan waitResult, 1)
	start := time.Now()
	go func() {
		err := f()
		ch <- waitResult{err, time.Since(start)}
	}()
	return ch
}

// pending fails the test if ch already has a result.
func pending(t *testing.T, ch <-chan waitResult, what string) {
	t.Helper()
	synctest.Wait()
	select {
	case r := <-ch:
		t.Fatalf("%s returned early after %v: %v", what, r.after, r.err)
	default:
	}
}

func TestWaitStartupResync(t *testing.T) {
	cfg := controller.Config{StartupResyncDeadline: time.Minute, HealingDelay: time.Hour}
	for _, tc := range []struct {
		name string
		// scenario drives the loop; wait is the pending WaitStartupResync.
		scenario  func(t *testing.T, l *controller.Loop, startRun func())
		failStart bool // the start-up resync's handler fails
		wantErr   error
		wantAfter time.Duration
	}{
		{name: "returns once the start-up resync was processed", scenario: func(t *testing.T, l *controller.Loop, startRun func()) {
			startRun()
			time.Sleep(10 * time.Second)
			require.NoError(t, l.PushEvent(controller.NewDBResync()))
		}, wantAfter: 10 * time.Second},
		{name: "returns the start-up resync's error", failStart: true, scenario: func(t *testing.T, l *controller.Loop, startRun func()) {
			startRun()
			require.NoError(t, l.PushEvent(controller.NewDBResync()))
		}, wantErr: errBoom},
		{name: "Run started late, within the grace", scenario: func(t *testing.T, l *controller.Loop, startRun func()) {
			require.NoError(t, l.PushEvent(controller.NewDBResync()))
			time.Sleep(controller.NotRunningGrace - time.Second)
			startRun()
		}, wantAfter: controller.NotRunningGrace - time.Second},
		{name: "Run never called", scenario: func(*testing.T, *controller.Loop, func()) {},
			wantErr: controller.ErrNotRunning, wantAfter: controller.NotRunningGrace},
		{name: "no DBResync within the deadline", scenario: func(_ *testing.T, _ *controller.Loop, startRun func()) {
			startRun()
		}, wantErr: controller.ErrStartupResyncMissing, wantAfter: time.Minute},
		{name: "the loop stops first", scenario: func(t *testing.T, l *controller.Loop, startRun func()) {
			startRun()
			time.Sleep(time.Second)
			require.NoError(t, l.PushEvent(controller.NewShutdownEvent()))
		}, wantErr: controller.ErrStopped, wantAfter: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fail := func(ev controller.Event) error {
					if tc.failStart && ev.GetName() == "Database Resync" {
						return errBoom
					}
					return nil
				}
				l := newLoop(t, []controller.EventHandler{handler("a", &callLog{}, fail)}, &controllertest.Southbound{}, cfg)
				wait := async(func() error { return l.WaitStartupResync(context.Background()) })
				tc.scenario(t, l, func() { run(t, l) })
				r := <-wait
				if tc.wantErr == nil {
					require.NoError(t, r.err)
				} else {
					require.ErrorIs(t, r.err, tc.wantErr)
				}
				assert.Equal(t, tc.wantAfter, r.after)
			})
		})
	}
}

// TestWaitStartupResyncAfterTheDeadline: the loop keeps waiting for the
// start-up resync after the deadline; Ready closes when it comes, and a
// later WaitStartupResync returns its result at once.
func TestWaitStartupResyncAfterTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLoop(t, nil, &controllertest.Southbound{}, controller.Config{StartupResyncDeadline: time.Minute})
		run(t, l)
		require.ErrorIs(t, l.WaitStartupResync(context.Background()), controller.ErrStartupResyncMissing)
		select {
		case <-l.Ready():
			t.Fatal("ready without a start-up resync")
		default:
		}
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		<-l.Ready()
		require.NoError(t, l.WaitStartupResync(context.Background()))
		require.True(t, l.Stats().StartupResyncDone)
	})
}

// TestWaitStartupResyncContext: the wait ends with ctx.
func TestWaitStartupResyncContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLoop(t, nil, &controllertest.Southbound{}, controller.Config{StartupResyncDeadline: -1})
		run(t, l)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		start := time.Now()
		require.ErrorIs(t, l.WaitStartupResync(ctx), context.DeadlineExceeded)
		require.Equal(t, time.Hour, time.Since(start), "no deadline of the loop's own (StartupResyncDeadline off)")
	})
}

// TestCtrlCDuringBlockedStartupResync is the loop's side of a custom agent
// that forgot to run a component its start-up resync waits for (issue 27:
// Ctrl-C was ignored for about 95 s): a Resync handler that waits on
// ContextOf lets Run return ShutdownTimeout after the cancellation, and
// WaitStartupResync returns the resync's error.
func TestCtrlCDuringBlockedStartupResync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 5 * time.Second
		never := make(chan struct{}) // the component that was never run
		waiting := &controller.HandlerFuncs{Name: "needs-node-id",
			ResyncFunc: func(_ controller.Event, _ controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
				select {
				case <-never:
					return nil
				case <-controller.ContextOf(txn).Done():
					return controller.ContextOf(txn).Err()
				}
			},
		}
		l := newLoop(t, []controller.EventHandler{waiting}, &controllertest.Southbound{}, controller.Config{ShutdownTimeout: timeout})
		stop, runDone := run(t, l)
		wait := async(func() error { return l.WaitStartupResync(context.Background()) })
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		time.Sleep(time.Minute)
		pending(t, wait, "WaitStartupResync")

		start := time.Now()
		go func() { _ = stop() }() // Ctrl-C
		require.ErrorIs(t, <-runDone, context.Canceled)
		assert.Equal(t, timeout, time.Since(start), "Run returns ShutdownTimeout after Ctrl-C")
		r := <-wait
		require.ErrorIs(t, r.err, context.Canceled, "the start-up resync's error")
	})
}

func TestSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		var l *controller.Loop
		slow := &controller.HandlerFuncs{Name: "slow", UpdateFunc: func(ev controller.Event, txn controller.UpdateOperations) (string, error) {
			log.add("%s", ev.GetName())
			time.Sleep(time.Second)
			if ev.GetName() == "B" {
				return "", controller.PushFollowUp(txn, newUpdate("B.1", controller.BestEffort, controller.Forward))
			}
			return "", nil
		}}
		l = newLoop(t, []controller.EventHandler{slow}, &controllertest.Southbound{}, controller.Config{QueueSize: 3})
		// Before Run and before the start-up resync: Sync waits for both.
		require.NoError(t, l.PushEvent(newUpdate("A", controller.BestEffort, controller.Forward)))
		sync1 := async(func() error { return l.Sync(context.Background()) })
		pending(t, sync1, "Sync")
		run(t, l)
		pending(t, sync1, "Sync before the start-up resync")
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		r := <-sync1
		require.NoError(t, r.err)
		require.Equal(t, []string{"A"}, log.take())

		// Every event pushed before, and their follow-ups.
		processed := l.Stats().Processed
		require.NoError(t, l.PushEvent(newUpdate("B", controller.BestEffort, controller.Forward)))
		require.NoError(t, l.PushEvent(newUpdate("C", controller.BestEffort, controller.Forward)))
		require.NoError(t, l.PushEvent(newUpdate("D", controller.BestEffort, controller.Forward)))
		// The queue is full, Sync is not refused.
		require.ErrorIs(t, l.PushEvent(newUpdate("E", controller.BestEffort, controller.Forward)), controller.ErrQueueFull)
		start := time.Now()
		require.NoError(t, l.Sync(context.Background()))
		require.Equal(t, 4*time.Second, time.Since(start))
		require.Equal(t, []string{"B", "B.1", "C", "D"}, log.take())
		require.Equal(t, processed+4, l.Stats().Processed, "the barrier is not an event")
		require.Equal(t, "D", l.History().Last(1)[0].Name)

		// Nothing pending: at once.
		start = time.Now()
		require.NoError(t, l.Sync(context.Background()))
		require.Zero(t, time.Since(start))

		// ctx ends first.
		require.NoError(t, l.PushEvent(newUpdate("F", controller.BestEffort, controller.Forward)))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second/2)
		defer cancel()
		require.ErrorIs(t, l.Sync(ctx), context.DeadlineExceeded)
		require.NoError(t, l.Sync(context.Background()))
	})
}

func TestSyncRefused(t *testing.T) {
	t.Run("Run never called", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newLoop(t, nil, &controllertest.Southbound{}, controller.Config{})
			start := time.Now()
			require.ErrorIs(t, l.Sync(context.Background()), controller.ErrNotRunning)
			require.Equal(t, controller.NotRunningGrace, time.Since(start))
		})
	})
	t.Run("from a handler", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var l *controller.Loop
			var syncErr error
			h := &controller.HandlerFuncs{Name: "h", ResyncFunc: func(controller.Event, controller.KubeStateData, int, controller.ResyncOperations) error {
				syncErr = l.Sync(context.Background())
				return nil
			}}
			l = newLoop(t, []controller.EventHandler{h}, &controllertest.Southbound{}, controller.Config{})
			run(t, l)
			require.NoError(t, l.PushEvent(controller.NewDBResync()))
			require.NoError(t, l.WaitStartupResync(context.Background()))
			require.ErrorIs(t, syncErr, controller.ErrBlockingFollowUp)
		})
	})
	t.Run("the loop stops", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newLoop(t, nil, &controllertest.Southbound{}, controller.Config{})
			stop, _ := run(t, l)
			sync := async(func() error { return l.Sync(context.Background()) }) // held: no start-up resync
			pending(t, sync, "Sync")
			require.ErrorIs(t, stop(), context.Canceled)
			require.ErrorIs(t, (<-sync).err, controller.ErrStopped)
			require.ErrorIs(t, l.Sync(context.Background()), controller.ErrStopped)
		})
	})
}

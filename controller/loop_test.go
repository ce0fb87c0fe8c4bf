package controller_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

func TestNewValidatesConfig(t *testing.T) {
	_, err := controller.New(nil, nil, controller.Config{})
	require.ErrorContains(t, err, "nil southbound")
	_, err = controller.New([]controller.EventHandler{nil}, &controllertest.Southbound{}, controller.Config{})
	require.ErrorContains(t, err, "handler 0 is nil")
	_, err = controller.New(nil, &controllertest.Southbound{}, controller.Config{QueueSize: -1, HealingDelay: -time.Second})
	require.ErrorContains(t, err, "QueueSize -1 is negative")
	require.ErrorContains(t, err, "HealingDelay -1s is negative")
}

// TestConfigNegative: a negative value means "off" for the fields whose doc
// says so and is an error for every other field, all reported at once
// (CONTRIBUTING R7).
func TestConfigNegative(t *testing.T) {
	sb := &controllertest.Southbound{}
	for _, tc := range []struct {
		name    string
		cfg     controller.Config
		wantErr string // "" = valid
	}{
		{name: "zero", cfg: controller.Config{}},
		{name: "StartupResyncDeadline off", cfg: controller.Config{StartupResyncDeadline: -1}},
		{name: "MaxHealingAttempts off", cfg: controller.Config{MaxHealingAttempts: -1}},
		{name: "HistorySize off", cfg: controller.Config{HistorySize: -1}},
		{name: "QueueSize", cfg: controller.Config{QueueSize: -1}, wantErr: "QueueSize -1 is negative"},
		{name: "HealingDelay", cfg: controller.Config{HealingDelay: -1}, wantErr: "HealingDelay -1ns is negative"},
		{name: "MaxHealingDelay", cfg: controller.Config{MaxHealingDelay: -1}, wantErr: "MaxHealingDelay -1ns is negative"},
		{name: "PeriodicHealingInterval", cfg: controller.Config{PeriodicHealingInterval: -1}, wantErr: "PeriodicHealingInterval -1ns is negative"},
		{name: "CommitTimeout", cfg: controller.Config{CommitTimeout: -1}, wantErr: "CommitTimeout -1ns is negative"},
		{name: "ShutdownTimeout", cfg: controller.Config{ShutdownTimeout: -1}, wantErr: "ShutdownTimeout -1ns is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := controller.New(nil, sb, tc.cfg)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
	_, err := controller.New(nil, sb, controller.Config{QueueSize: -1, CommitTimeout: -1, ShutdownTimeout: -1})
	require.ErrorContains(t, err, "QueueSize")
	require.ErrorContains(t, err, "CommitTimeout")
	require.ErrorContains(t, err, "ShutdownTimeout", "every bad field at once")
}

// TestAlreadyRunningIsTheModuleValue: a second Run returns an error that
// errors.Is matches with the module's one ErrAlreadyRunning.
func TestAlreadyRunningIsTheModuleValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLoop(t, nil, &controllertest.Southbound{}, controller.Config{})
		stop, _ := run(t, l)
		synctest.Wait()
		err := l.Run(context.Background())
		require.ErrorIs(t, err, lifecycle.ErrAlreadyRunning)
		require.EqualError(t, err, "controller: Run called more than once")
		require.ErrorIs(t, stop(), context.Canceled)
	})
}

// TestLogsComponentOnce: every log line carries component=controller
// exactly once, and the loop's attributes are typed (CONTRIBUTING R9).
func TestLogsComponentOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		fail := func(ev controller.Event) error {
			if ev.GetName() == "bad" {
				return errBoom
			}
			return nil
		}
		l := newLoop(t, []controller.EventHandler{handler("a", &callLog{}, fail)}, &controllertest.Southbound{},
			controller.Config{Logger: logger, HealingDelay: time.Hour})
		stop, _ := run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		require.NoError(t, l.PushEvent(newUpdate("bad", controller.BestEffort, controller.Forward)))
		synctest.Wait()
		require.ErrorIs(t, stop(), context.Canceled)
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		require.GreaterOrEqual(t, len(lines), 5, "started, processed, failed, healing, stopped")
		for _, line := range lines {
			require.Equal(t, 1, strings.Count(line, `"component":"controller"`), line)
		}
		require.Contains(t, buf.String(), `"seq":2`)
	})
}

func TestStartupGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		sb := &controllertest.Southbound{}
		l := newLoop(t, []controller.EventHandler{handler("a", log, nil)}, sb, controller.Config{StartupResyncDeadline: time.Minute})

		early := newUpdate("early", controller.BestEffort, controller.Forward)
		require.NoError(t, l.PushEvent(early))
		require.NoError(t, l.PushEvent(&controller.KubeStateChange{Resource: "pod", Key: "k8s/pod/ns/p", NewValue: &kubemodel.Pod{Name: "p"}}))
		run(t, l)
		synctest.Wait()
		require.Empty(t, log.take(), "nothing may run before the start-up DBResync")
		require.Equal(t, 2, l.Stats().Queued)
		require.NoError(t, l.Healthy())

		time.Sleep(time.Minute)
		synctest.Wait()
		require.ErrorIs(t, l.Healthy(), controller.ErrStartupResyncMissing)
		require.True(t, l.Stats().StartupDeadlineHit)

		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		synctest.Wait()
		require.Equal(t, []string{
			"a.Resync(Database Resync,1)",
			"a.Update(early)",
			"a.Update(Kubernetes State Change)",
		}, log.take())
		require.NoError(t, l.Healthy())
		require.NoError(t, early.result(t))
		require.Equal(t, 0, l.Stats().Queued)
	})
}

// TestStartupResyncDoneAfterProcessing: StartupResyncDone (what an agent's
// readiness check reads) turns true once the start-up DBResync has been
// processed and committed, not while its handlers run.
func TestStartupResyncDoneAfterProcessing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		h := &controller.HandlerFuncs{Name: "slow", ResyncFunc: func(controller.Event, controller.KubeStateData, int, controller.ResyncOperations) error {
			<-release
			return nil
		}}
		sb := &controllertest.Southbound{}
		l := newLoop(t, []controller.EventHandler{h}, sb, controller.Config{})
		run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		synctest.Wait()
		assert.False(t, l.Stats().StartupResyncDone, "the start-up resync's handler still runs")
		close(release)
		synctest.Wait()
		require.True(t, l.Stats().StartupResyncDone)
		require.Equal(t, uint64(1), l.Stats().Commits)
	})
}

func TestResyncCountAndDirection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		hs := []controller.EventHandler{handler("a", log, nil), handler("b", log, nil), handler("c", log, nil)}
		// b ignores DeletePod.
		hs[1].(*controller.HandlerFuncs).Handles = func(ev controller.Event) bool { _, del := ev.(*controller.DeletePod); return !del }
		l := newLoop(t, hs, &controllertest.Southbound{}, controller.Config{})
		run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		require.NoError(t, l.PushEvent(newUpdate("fwd", controller.BestEffort, controller.Forward)))
		require.NoError(t, l.PushEvent(newUpdate("rev", controller.BestEffort, controller.Reverse)))
		require.NoError(t, l.PushEvent(controller.NewDeletePodEvent(kubemodel.PodID{Namespace: "ns", Name: "p"}, "c1")))
		require.NoError(t, l.PushEvent(controller.NewExternalConfigResync("file", false)))
		synctest.Wait()
		require.Equal(t, []string{
			"a.Resync(Database Resync,1)", "b.Resync(Database Resync,1)", "c.Resync(Database Resync,1)",
			"a.Update(fwd)", "b.Update(fwd)", "c.Update(fwd)",
			"c.Update(rev)", "b.Update(rev)", "a.Update(rev)",
			"c.Update(Delete Pod)", "a.Update(Delete Pod)",
			"a.Resync(External Config Resync,2)", "b.Resync(External Config Resync,2)", "c.Resync(External Config Resync,2)",
		}, log.take())
	})
}

var (
	errBoom  = errors.New("boom")
	errBoom2 = errors.New("boom2")
)

// TestErrorOutcomesEndToEnd checks the update rows of TestErrorOutcomes (the
// decision table) through a running loop: handler calls, commit, Done,
// healing, Run's result and the loop's record of the desired state.
func TestErrorOutcomesEndToEnd(t *testing.T) {
	type want struct {
		calls      []string // handler calls for the event under test (after the start-up resync)
		committed  bool     // an update commit carrying the event
		doneErr    []string // substrings of the Done error, none = nil
		healing    bool     // a healing resync ran afterwards
		runErr     error    // Run stops with an error wrapping this
		revertKeys bool     // commit reverted: the loop's state lacks the event's keys
	}
	fatalErr := controller.NewFatalError(errBoom)
	abortErr := controller.NewAbortEventError(errBoom)
	permErr := &controller.KeyError{Key: "k8s/x", Err: errBoom}
	permCommitErr := controller.NewPermanentError(errBoom2)
	tests := []struct {
		name      string
		tt        controller.UpdateTransactionType
		failB     error // error of handler b for the event
		commitErr error // error of the southbound for the event's commit
		want      want
	}{
		{
			name: "best effort: other handlers run, commit, heal", tt: controller.BestEffort, failB: errBoom,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "c.Update(ev)"}, committed: true, doneErr: []string{"b: boom"}, healing: true},
		},
		{
			name: "best effort ignore errors: commit, no healing", tt: controller.BestEffortIgnoreErrors, failB: errBoom,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "c.Update(ev)"}, committed: true, doneErr: []string{"b: boom"}},
		},
		{
			name: "revert on failure: stop, no commit, revert in reverse", tt: controller.RevertOnFailure, failB: errBoom,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "a.Revert(ev)"}, doneErr: []string{"b: boom"}},
		},
		{
			name: "abort best effort: stop, no commit, heal", tt: controller.BestEffort, failB: abortErr,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)"}, doneErr: []string{"b: boom"}, healing: true},
		},
		{
			name: "abort revert on failure: revert, heal", tt: controller.RevertOnFailure, failB: abortErr,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "a.Revert(ev)"}, doneErr: []string{"b: boom"}, healing: true},
		},
		{
			name: "fatal: stop the loop", tt: controller.BestEffort, failB: fatalErr,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)"}, doneErr: []string{"b: boom"}, runErr: errBoom},
		},
		{
			name: "commit error best effort: heal", tt: controller.BestEffort, commitErr: errBoom,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "c.Update(ev)"}, committed: true, doneErr: []string{"commit: boom"}, healing: true},
		},
		{
			name: "best effort: handler and commit errors are joined", tt: controller.BestEffort, failB: errBoom, commitErr: errBoom2,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "c.Update(ev)"}, committed: true, doneErr: []string{"b: boom", "commit: boom2"}, healing: true},
		},
		{
			name: "commit error revert on failure: revert all, heal", tt: controller.RevertOnFailure, commitErr: errBoom,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "c.Update(ev)", "c.Revert(ev)", "b.Revert(ev)", "a.Revert(ev)"},
				committed: true, doneErr: []string{"commit: boom"}, healing: true, revertKeys: true},
		},
		{
			name: "fatal commit error: stop the loop", tt: controller.BestEffort, commitErr: controller.NewFatalError(errBoom),
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "c.Update(ev)"}, committed: true, doneErr: []string{"boom"}, runErr: errBoom},
		},
		{
			name: "fatal revert on failure: stop the loop, no revert", tt: controller.RevertOnFailure, failB: fatalErr,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)"}, doneErr: []string{"b: boom"}, runErr: errBoom},
		},
		{
			name: "abort best effort ignore errors: stop, no commit, heal", tt: controller.BestEffortIgnoreErrors, failB: abortErr,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)"}, doneErr: []string{"b: boom"}, healing: true},
		},
		{
			name: "permanent best effort: commit, no healing", tt: controller.BestEffort, failB: permErr,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "c.Update(ev)"}, committed: true, doneErr: []string{"b: key k8s/x: boom"}},
		},
		{
			name: "permanent revert on failure: stop, revert, no healing", tt: controller.RevertOnFailure, failB: permErr,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "a.Revert(ev)"}, doneErr: []string{"b: key k8s/x: boom"}},
		},
		{
			name: "permanent commit error best effort: no healing", tt: controller.BestEffort, commitErr: permCommitErr,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "c.Update(ev)"}, committed: true, doneErr: []string{"commit: boom2"}},
		},
		{
			name: "permanent commit error revert on failure: revert all, heal", tt: controller.RevertOnFailure, commitErr: permCommitErr,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "c.Update(ev)", "c.Revert(ev)", "b.Revert(ev)", "a.Revert(ev)"},
				committed: true, doneErr: []string{"commit: boom2"}, healing: true, revertKeys: true},
		},
		{
			name: "permanent handler and transient commit error best effort: heal", tt: controller.BestEffort, failB: permErr, commitErr: errBoom2,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "c.Update(ev)"}, committed: true, doneErr: []string{"b: key k8s/x: boom", "commit: boom2"}, healing: true},
		},
		{
			name: "transient handler and permanent commit error best effort: heal", tt: controller.BestEffort, failB: errBoom, commitErr: permCommitErr,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "c.Update(ev)"}, committed: true, doneErr: []string{"b: boom", "commit: boom2"}, healing: true},
		},
		{
			name: "commit error best effort ignore errors: heal", tt: controller.BestEffortIgnoreErrors, failB: errBoom, commitErr: errBoom2,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "c.Update(ev)"}, committed: true, doneErr: []string{"b: boom", "commit: boom2"}, healing: true},
		},
		{
			name: "permanent commit error best effort ignore errors: no healing", tt: controller.BestEffortIgnoreErrors, failB: errBoom, commitErr: permCommitErr,
			want: want{calls: []string{"a.Update(ev)", "b.Update(ev)", "c.Update(ev)"}, committed: true, doneErr: []string{"b: boom", "commit: boom2"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &callLog{}
				failB := func(ev controller.Event) error {
					if ev.GetName() == "ev" {
						return tc.failB
					}
					return nil
				}
				sb := &controllertest.Southbound{Fail: func(_ int, c *controller.Commit) error {
					if c.Event.GetName() == "ev" {
						return tc.commitErr
					}
					return nil
				}}
				var l *controller.Loop
				probed := map[string]bool{}
				probe := &controller.HandlerFuncs{Name: "probe", UpdateFunc: func(ev controller.Event, _ controller.UpdateOperations) (string, error) {
					if ev.GetName() == "probe" {
						for _, k := range []string{"a/ev", "c/ev"} {
							probed[k] = l.GetConfig(k) != nil
						}
					}
					return "", nil
				}}
				hs := []controller.EventHandler{handler("a", log, nil), handler("b", log, failB), handler("c", log, nil), probe}
				l = newLoop(t, hs, sb, controller.Config{HealingDelay: time.Second})
				_, runDone := run(t, l)
				require.NoError(t, l.PushEvent(controller.NewDBResync()))
				synctest.Wait()
				log.take()

				healed := false
				ev := newUpdate("ev", tc.tt, controller.Forward)
				require.NoError(t, l.PushEvent(ev))
				synctest.Wait()
				var evCalls []string
				for _, c := range log.take() {
					if strings.HasSuffix(c, "(ev)") {
						evCalls = append(evCalls, c)
					} else if strings.Contains(c, "Healing") {
						healed = true
					}
				}
				require.Equal(t, tc.want.calls, evCalls)
				err := ev.result(t)
				if len(tc.want.doneErr) == 0 {
					require.NoError(t, err)
				}
				for _, want := range tc.want.doneErr {
					require.ErrorContains(t, err, want)
				}
				if tc.failB != nil {
					require.ErrorIs(t, err, errBoom)
				}
				if tc.commitErr != nil {
					require.ErrorIs(t, err, tc.commitErr)
				}

				committed := false
				for _, c := range sb.Commits() {
					if c.EventName == "ev" {
						committed = true
					}
				}
				require.Equal(t, tc.want.committed, committed, "commit of the event")

				if tc.want.runErr != nil {
					select {
					case err := <-runDone:
						require.ErrorIs(t, err, tc.want.runErr)
					default:
						t.Fatal("Run did not stop")
					}
					require.ErrorIs(t, l.PushEvent(newUpdate("late", controller.BestEffort, controller.Forward)), controller.ErrStopped)
					return
				}

				// The loop's record of the handlers' desired state (what
				// GetConfig returns outside the event's transaction) holds the
				// event's keys unless nothing was committed or the commit was
				// reverted. Checked before the healing resync replaces it.
				if !healed {
					probe := newUpdate("probe", controller.BestEffort, controller.Forward)
					require.NoError(t, l.PushEvent(probe))
					synctest.Wait()
					require.NoError(t, probe.result(t))
					want := tc.want.committed && !tc.want.revertKeys
					require.Equal(t, want, probed["a/ev"], "a/ev in the loop's state after the event")
					require.Equal(t, want, probed["c/ev"], "c/ev in the loop's state after the event")
					log.take()
				}

				time.Sleep(time.Second) // healing delay
				synctest.Wait()
				for _, c := range log.take() {
					if c == "a.Resync(Healing Resync,2)" {
						healed = true
					}
				}
				require.Equal(t, tc.want.healing, healed, "healing resync")
			})
		})
	}
}

// TestResyncErrorOutcomes is the end-to-end counterpart of the resync and
// reapply rows of the package's error table: an UpstreamResync
// (ExternalConfigResync) or a DownstreamResync (periodic HealingResync)
// whose handler or commit fails.
func TestResyncErrorOutcomes(t *testing.T) {
	const healingDelay = time.Second
	type want struct {
		committed bool          // the event's commit was handed to the southbound
		healAfter time.Duration // a healing resync ran this long after the event; -1: none
		fatal     bool          // Run stops with the error
	}
	for _, tc := range []struct {
		name      string
		reapply   bool  // a DownstreamResync instead of an UpstreamResync
		handler   error // the handler's Resync error for the event
		commitErr error
		want      want
	}{
		{name: "transient handler error: commit, heal", handler: errBoom, want: want{committed: true, healAfter: healingDelay}},
		{name: "permanent handler error: commit, no healing", handler: controller.NewPermanentError(errBoom), want: want{committed: true, healAfter: -1}},
		{name: "abort: no commit, heal at once", handler: controller.NewAbortEventError(errBoom), want: want{healAfter: 0}},
		{name: "fatal handler error: no commit, stop", handler: controller.NewFatalError(errBoom), want: want{fatal: true, healAfter: -1}},
		{name: "transient commit error: heal", commitErr: errBoom, want: want{committed: true, healAfter: healingDelay}},
		{name: "permanent commit error: no healing", commitErr: &controller.KeyError{Key: "k", Err: errBoom}, want: want{committed: true, healAfter: -1}},
		{name: "abort commit error: heal at once", commitErr: controller.NewAbortEventError(errBoom), want: want{committed: true, healAfter: 0}},
		{name: "fatal commit error: stop", commitErr: controller.NewFatalError(errBoom), want: want{committed: true, fatal: true, healAfter: -1}},
		{name: "reapply: transient commit error: heal", reapply: true, commitErr: errBoom, want: want{committed: true, healAfter: healingDelay}},
		{name: "reapply: permanent commit error: no healing", reapply: true, commitErr: controller.NewPermanentError(errBoom), want: want{committed: true, healAfter: -1}},
		{name: "reapply: fatal commit error: stop", reapply: true, commitErr: controller.NewFatalError(errBoom), want: want{committed: true, fatal: true, healAfter: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var ev controller.Event = controller.NewExternalConfigResync("user", false)
				if tc.reapply {
					ev = &controller.HealingResync{Type: controller.Periodic}
				}
				var healedAt []time.Time
				h := &controller.HandlerFuncs{Name: "a", ResyncFunc: func(e controller.Event, _ controller.KubeStateData, _ int, _ controller.ResyncOperations) error {
					switch {
					case e == ev:
						return tc.handler
					case e.GetName() == "Healing Resync":
						healedAt = append(healedAt, time.Now())
					}
					return nil
				}}
				committed := false
				sb := &controllertest.Southbound{Fail: func(_ int, c *controller.Commit) error {
					if c.Event == ev {
						committed = true
						return tc.commitErr
					}
					return nil
				}}
				l := newLoop(t, []controller.EventHandler{h}, sb, controller.Config{HealingDelay: healingDelay})
				_, runDone := run(t, l)
				require.NoError(t, l.PushEvent(controller.NewDBResync()))
				synctest.Wait()
				start := time.Now()
				require.NoError(t, l.PushEvent(ev))
				synctest.Wait()

				require.Equal(t, tc.want.committed, committed, "commit of the event")
				if tc.want.fatal {
					select {
					case err := <-runDone:
						require.ErrorIs(t, err, errBoom)
					default:
						t.Fatal("Run did not stop")
					}
					return
				}
				time.Sleep(time.Hour)
				synctest.Wait()
				if tc.want.healAfter < 0 {
					require.Empty(t, healedAt, "no healing resync")
					return
				}
				require.Len(t, healedAt, 1)
				require.Equal(t, tc.want.healAfter, healedAt[0].Sub(start))
			})
		})
	}
}

// TestHistoryMarksRevertedHandlers: the history marks exactly the handlers
// on which Revert was called.
func TestHistoryMarksRevertedHandlers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		names     []string // handler names; the second fails when failB
		failB     bool
		commitErr error
		want      []bool // Reverted per recorded handler outcome
	}{
		{name: "handler error: the handlers that ran before", names: []string{"a", "b", "c"}, failB: true, want: []bool{true, false}},
		{name: "commit error: every handler", names: []string{"a", "b", "c"}, commitErr: errBoom, want: []bool{true, true, true}},
		// Two handlers with the same name: only the one that ran is marked
		// (they used to be matched by name).
		{name: "same names: the handler, not its name", names: []string{"dup", "dup", "c"}, failB: true, want: []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &callLog{}
				hs := make([]controller.EventHandler, len(tc.names))
				for i, name := range tc.names {
					var fail func(controller.Event) error
					if i == 1 && tc.failB {
						fail = func(ev controller.Event) error {
							if ev.GetName() == "ev" {
								return errBoom
							}
							return nil
						}
					}
					hs[i] = handler(name, log, fail)
				}
				sb := &controllertest.Southbound{Fail: func(_ int, c *controller.Commit) error {
					if c.Event.GetName() == "ev" {
						return tc.commitErr
					}
					return nil
				}}
				l := newLoop(t, hs, sb, controller.Config{HealingDelay: time.Hour})
				run(t, l)
				require.NoError(t, l.PushEvent(controller.NewDBResync()))
				ev := newUpdate("ev", controller.RevertOnFailure, controller.Forward)
				require.NoError(t, l.PushEvent(ev))
				synctest.Wait()
				require.Error(t, ev.result(t))
				rec := l.History().Last(1)[0]
				require.Equal(t, "ev", rec.Name)
				var got []bool
				for _, o := range rec.Handlers {
					got = append(got, o.Reverted)
				}
				require.Equal(t, tc.want, got)
			})
		})
	}
}

func TestRevertOnCommitErrorRestoresInternalState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		sb := &controllertest.Southbound{Fail: func(_ int, c *controller.Commit) error {
			if c.Event.GetName() == "ev" {
				return errBoom
			}
			return nil
		}}
		var l *controller.Loop
		var seen []string
		probe := &controller.HandlerFuncs{Name: "probe", UpdateFunc: func(ev controller.Event, _ controller.UpdateOperations) (string, error) {
			if v := l.GetConfig("a/ev"); v != nil {
				seen = append(seen, ev.GetName()+":a/ev present")
			}
			return "", nil
		}}
		l = newLoop(t, []controller.EventHandler{handler("a", log, nil), probe}, sb, controller.Config{HealingDelay: time.Hour})
		run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		require.NoError(t, l.PushEvent(newUpdate("ev", controller.RevertOnFailure, controller.Forward)))
		require.NoError(t, l.PushEvent(newUpdate("next", controller.BestEffort, controller.Forward)))
		synctest.Wait()
		// During "ev" its own transaction holds a/ev; after the failed commit
		// the internal state no longer does.
		require.Equal(t, []string{"ev:a/ev present"}, seen)
	})
}

func TestResyncErrorHealsAndEscalates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		failing := true
		fail := func(ev controller.Event) error {
			if failing && ev.Method() == controller.FullResync {
				return errBoom
			}
			return nil
		}
		sb := &controllertest.Southbound{}
		l := newLoop(t, []controller.EventHandler{handler("a", log, fail)}, sb,
			controller.Config{HealingDelay: time.Second, MaxHealingDelay: 4 * time.Second, MaxHealingAttempts: 4})
		_, runDone := run(t, l)
		start := time.Now()
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		synctest.Wait()
		// The failed resync was still committed (best effort).
		require.Len(t, sb.Commits(), 1)
		require.Equal(t, controller.CommitResync, sb.Commits()[0].Kind)

		err := <-runDone
		require.ErrorIs(t, err, controller.ErrHealingFailed)
		require.ErrorIs(t, err, errBoom)
		// Backoff 1s, then 2s, 4s, 4s (capped), each ±50%, before the 4th
		// failed healing.
		require.GreaterOrEqual(t, time.Since(start), time.Second+10*time.Second/2)
		require.LessOrEqual(t, time.Since(start), time.Second+10*time.Second*3/2)
		st := l.Stats()
		require.EqualValues(t, 4, st.HealingFailed)
		require.EqualValues(t, 5, st.Resyncs)
		require.Len(t, log.take(), 5)
	})
}

// TestHealingNeverGivesUpByDefault: with the default configuration a
// resync that fails for an hour (what it reads unreachable, as an etcd
// starved by 5000 agents starting at once) keeps being healed with the
// capped backoff; Healthy reports ErrHealing with the count and the last
// error, Stats.HealingFailing the streak, and both clear when a healing
// resync succeeds. (It used to stop the loop after 5 attempts, ~31 s.)
func TestHealingNeverGivesUpByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failing atomic.Bool
		failing.Store(true)
		fail := func(ev controller.Event) error {
			if failing.Load() && ev.Method() == controller.FullResync {
				return errBoom
			}
			return nil
		}
		l := newLoop(t, []controller.EventHandler{handler("a", &callLog{}, fail)}, &controllertest.Southbound{}, controller.Config{})
		stop, done := run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		synctest.Wait()
		require.NoError(t, l.Healthy(), "a failed event is healed before it is reported")

		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("the loop stopped: %v", err)
		default:
		}
		st := l.Stats()
		// 1 s, 2 s, ... capped at 1 m, each ±50%: about 60 healings an hour.
		require.Greater(t, st.HealingFailed, uint64(30))
		require.Equal(t, int(st.HealingFailed), st.HealingFailing)
		err := l.Healthy()
		require.ErrorIs(t, err, controller.ErrHealing)
		require.ErrorIs(t, err, errBoom)
		require.NotErrorIs(t, err, controller.ErrDegraded)
		require.Contains(t, err.Error(), fmt.Sprintf("%d in a row since", st.HealingFailing))

		failing.Store(false)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		require.NoError(t, l.Healthy())
		require.Zero(t, l.Stats().HealingFailing)
		require.ErrorIs(t, stop(), context.Canceled)
	})
}

func TestHealingRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		attempts := 0
		fail := func(ev controller.Event) error {
			if ev.Method() == controller.FullResync {
				attempts++
				if attempts <= 3 {
					return errBoom
				}
			}
			return nil
		}
		l := newLoop(t, []controller.EventHandler{handler("a", log, fail)}, &controllertest.Southbound{},
			controller.Config{HealingDelay: time.Second, MaxHealingAttempts: 3})
		stop, _ := run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		time.Sleep(time.Hour)
		synctest.Wait()
		// start-up fails, healing 1 and 2 fail, healing 3 succeeds: 2 failures < 3.
		require.Equal(t, 4, attempts)
		require.EqualValues(t, 2, l.Stats().HealingFailed)
		require.ErrorIs(t, stop(), context.Canceled)
	})
}

func TestPeriodicHealingIsDownstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		sb := &controllertest.Southbound{}
		l := newLoop(t, []controller.EventHandler{handler("a", log, nil)}, sb, controller.Config{PeriodicHealingInterval: time.Minute})
		run(t, l)
		time.Sleep(90 * time.Second) // a tick before the start-up resync is skipped
		synctest.Wait()
		require.Zero(t, sb.Reapplies())
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		synctest.Wait()
		log.take()
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		require.Equal(t, 3, sb.Reapplies())
		require.Empty(t, log.take(), "no handler calls for a downstream resync")
		require.EqualValues(t, 3, l.Stats().DownstreamResyncs)
	})
}

// pushWays are the two ways a handler pushes a follow-up: explicitly with
// controller.PushFollowUp on its transaction, and through PushEvent (the
// loop recognises its own goroutine).
var pushWays = []struct {
	name string
	push func(l *controller.Loop, txn controller.ResyncOperations, ev controller.Event) error
}{
	{"PushFollowUp", func(_ *controller.Loop, txn controller.ResyncOperations, ev controller.Event) error {
		return controller.PushFollowUp(txn, ev)
	}},
	{"PushEvent", func(l *controller.Loop, _ controller.ResyncOperations, ev controller.Event) error {
		return l.PushEvent(ev)
	}},
}

func TestFollowUpsRunFirst(t *testing.T) {
	for _, way := range pushWays {
		t.Run(way.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &callLog{}
				var l *controller.Loop
				var pushErrs []error
				pusher := &controller.HandlerFuncs{Name: "pusher", UpdateFunc: func(ev controller.Event, txn controller.UpdateOperations) (string, error) {
					log.add("pusher.Update(%s)", ev.GetName())
					switch ev.GetName() {
					case "A":
						pushErrs = append(pushErrs, way.push(l, txn, newUpdate("F1", controller.BestEffort, controller.Forward)))
						pushErrs = append(pushErrs, way.push(l, txn, newUpdate("F2", controller.BestEffort, controller.Forward)))
						// A blocking follow-up would deadlock: refused.
						pushErrs = append(pushErrs, way.push(l, txn, controller.NewAddPodEvent(kubemodel.PodID{Namespace: "n", Name: "p"}, "c", "/ns")))
					case "F1":
						pushErrs = append(pushErrs, way.push(l, txn, newUpdate("F1.1", controller.BestEffort, controller.Forward)))
					}
					return "", nil
				}}
				l = newLoop(t, []controller.EventHandler{pusher}, &controllertest.Southbound{}, controller.Config{})
				require.NoError(t, l.PushEvent(controller.NewDBResync()))
				for _, name := range []string{"A", "B", "C"} {
					require.NoError(t, l.PushEvent(newUpdate(name, controller.BestEffort, controller.Forward)))
				}
				run(t, l)
				synctest.Wait()
				require.Equal(t, []string{
					"pusher.Update(A)", "pusher.Update(F1)", "pusher.Update(F2)", "pusher.Update(F1.1)",
					"pusher.Update(B)", "pusher.Update(C)",
				}, log.take())
				require.Len(t, pushErrs, 4)
				require.NoError(t, pushErrs[0])
				require.NoError(t, pushErrs[1])
				require.ErrorIs(t, pushErrs[2], controller.ErrBlockingFollowUp)
				require.NoError(t, pushErrs[3])
				require.EqualValues(t, 3, l.Stats().FollowUps)
				rec, ok := l.History().BySeq(3)
				require.True(t, ok)
				require.Equal(t, "F1", rec.Name)
				require.True(t, rec.FollowUp)
			})
		})
	}
}

// TestPushFollowUpFromResync: a Resync handler pushes follow-ups through
// its transaction too; they run before the events queued behind the
// resync.
func TestPushFollowUpFromResync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		h := &controller.HandlerFuncs{Name: "h",
			ResyncFunc: func(ev controller.Event, _ controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
				log.add("Resync(%s)", ev.GetName())
				return controller.PushFollowUp(txn, newUpdate("F", controller.BestEffort, controller.Forward))
			},
			UpdateFunc: func(ev controller.Event, _ controller.UpdateOperations) (string, error) {
				log.add("Update(%s)", ev.GetName())
				return "", nil
			},
		}
		l := newLoop(t, []controller.EventHandler{h}, &controllertest.Southbound{}, controller.Config{})
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		require.NoError(t, l.PushEvent(newUpdate("B", controller.BestEffort, controller.Forward)))
		run(t, l)
		synctest.Wait()
		require.Equal(t, []string{"Resync(Database Resync)", "Update(F)", "Update(B)"}, log.take())
	})
}

// otherTxn is a transaction of another framework: it carries no loop.
type otherTxn struct{ controllertest.Txn }

func (*otherTxn) PushFollowUp() {} // not the loop's signature

// TestPushFollowUpOutsideHandler: PushFollowUp refuses a transaction that
// does not belong to a handler call in progress: one kept after the
// handler returned, one of another framework, none.
func TestPushFollowUpOutsideHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var kept controller.UpdateOperations
		h := &controller.HandlerFuncs{Name: "h", UpdateFunc: func(_ controller.Event, txn controller.UpdateOperations) (string, error) {
			kept = txn
			txn.Put("k", str("v"))
			return "", nil
		}}
		var sbErr error
		sb := controller.SouthboundFunc(func(context.Context, *controller.Commit) (uint64, error) {
			if kept != nil {
				// During the commit the handlers are done with the transaction.
				sbErr = controller.PushFollowUp(kept, newUpdate("late", controller.BestEffort, controller.Forward))
			}
			return 0, nil
		})
		l := newLoop(t, []controller.EventHandler{h}, sb, controller.Config{})
		run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		ev := newUpdate("ev", controller.BestEffort, controller.Forward)
		require.NoError(t, l.PushEvent(ev))
		synctest.Wait()
		require.NoError(t, ev.result(t))
		require.ErrorIs(t, sbErr, controller.ErrNotInHandler)
		require.ErrorIs(t, controller.PushFollowUp(kept, newUpdate("later", controller.BestEffort, controller.Forward)), controller.ErrNotInHandler)
		require.ErrorIs(t, controller.PushFollowUp(&otherTxn{}, newUpdate("x", controller.BestEffort, controller.Forward)), controller.ErrNotInHandler)
		require.ErrorIs(t, controller.PushFollowUp(nil, newUpdate("x", controller.BestEffort, controller.Forward)), controller.ErrNotInHandler)
		require.Zero(t, l.Stats().FollowUps)
	})
}

func TestPushFromOtherGoroutineDuringHandlerIsNotFollowUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		var l *controller.Loop
		release := make(chan struct{})
		slow := &controller.HandlerFuncs{Name: "slow", UpdateFunc: func(ev controller.Event, _ controller.UpdateOperations) (string, error) {
			log.add("slow.Update(%s)", ev.GetName())
			if ev.GetName() == "A" {
				<-release
			}
			return "", nil
		}}
		l = newLoop(t, []controller.EventHandler{slow}, &controllertest.Southbound{}, controller.Config{})
		run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		require.NoError(t, l.PushEvent(newUpdate("A", controller.BestEffort, controller.Forward)))
		require.NoError(t, l.PushEvent(newUpdate("B", controller.BestEffort, controller.Forward)))
		synctest.Wait() // A is running
		// A blocking event pushed concurrently from outside is accepted and
		// queued behind B.
		outside := controller.NewAddPodEvent(kubemodel.PodID{Namespace: "n", Name: "p"}, "c", "/ns")
		require.NoError(t, l.PushEvent(outside))
		close(release)
		require.NoError(t, outside.Wait())
		require.Equal(t, []string{"slow.Update(A)", "slow.Update(B)", "slow.Update(Add Pod)"}, log.take())
	})
}

// TestFollowUpsAmongConcurrentPushers: while a handler runs and pushes
// follow-ups, other goroutines push at the same time. Only the handler's
// pushes are follow-ups (a blocking event from outside is accepted), and
// they run before every outside event.
func TestFollowUpsAmongConcurrentPushers(t *testing.T) {
	for _, way := range pushWays {
		t.Run(way.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var l *controller.Loop
				log := &callLog{}
				release := make(chan struct{})
				var followUpErrs []error
				h := &controller.HandlerFuncs{Name: "h", UpdateFunc: func(ev controller.Event, txn controller.UpdateOperations) (string, error) {
					log.add("%s", ev.GetName())
					if ev.GetName() == "A" {
						followUpErrs = append(followUpErrs, way.push(l, txn, newUpdate("F1", controller.BestEffort, controller.Forward)))
						<-release // the pushers run now
						followUpErrs = append(followUpErrs, way.push(l, txn, newUpdate("F2", controller.BestEffort, controller.Forward)))
					}
					return "", nil
				}}
				l = newLoop(t, []controller.EventHandler{h}, &controllertest.Southbound{}, controller.Config{})
				run(t, l)
				require.NoError(t, l.PushEvent(controller.NewDBResync()))
				require.NoError(t, l.PushEvent(newUpdate("A", controller.BestEffort, controller.Forward)))
				synctest.Wait() // A is running

				const pushers = 8
				pushed := make([]*controller.AddPod, pushers)
				pushErrs := make([]error, pushers)
				var wg sync.WaitGroup
				for i := range pushers {
					wg.Go(func() {
						pushed[i] = controller.NewAddPodEvent(kubemodel.PodID{Namespace: "n", Name: fmt.Sprint("p", i)}, "c", "/ns")
						pushErrs[i] = l.PushEvent(pushed[i])
					})
				}
				wg.Wait()
				close(release)
				for i := range pushers {
					require.NoError(t, pushErrs[i], "pusher %d", i)
					require.NoError(t, pushed[i].Wait(), "pusher %d", i)
				}
				require.Equal(t, []error{nil, nil}, followUpErrs)
				calls := log.take()
				require.Len(t, calls, 3+pushers)
				require.Equal(t, []string{"A", "F1", "F2"}, calls[:3])
				require.EqualValues(t, 2, l.Stats().FollowUps)
				for _, r := range l.History().Last(pushers) {
					require.Equal(t, "Add Pod", r.Name)
					require.False(t, r.FollowUp)
				}
			})
		})
	}
}

func TestQueueFullAndStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLoop(t, nil, &controllertest.Southbound{}, controller.Config{QueueSize: 2})
		require.NoError(t, l.PushEvent(newUpdate("1", controller.BestEffort, controller.Forward)))
		require.NoError(t, l.PushEvent(newUpdate("2", controller.BestEffort, controller.Forward)))
		require.ErrorIs(t, l.PushEvent(newUpdate("3", controller.BestEffort, controller.Forward)), controller.ErrQueueFull)
		require.EqualValues(t, 1, l.Stats().QueueFull)
		stop, _ := run(t, l)
		synctest.Wait()
		// Both wait behind the gate and still count against the queue.
		require.ErrorIs(t, l.PushEvent(newUpdate("3", controller.BestEffort, controller.Forward)), controller.ErrQueueFull)
		require.ErrorIs(t, stop(), context.Canceled)
		require.ErrorIs(t, l.PushEvent(newUpdate("4", controller.BestEffort, controller.Forward)), controller.ErrStopped)
		require.ErrorIs(t, l.Run(context.Background()), controller.ErrAlreadyRunning)
		require.ErrorContains(t, l.PushEvent(nil), "nil event")
	})
}

func TestShutdownOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		sb := &controllertest.Southbound{}
		release := make(chan struct{})
		owner := &controller.HandlerFuncs{Name: "owner",
			ResyncFunc: func(_ controller.Event, _ controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
				txn.Put("owned/x", str("x"))
				return nil
			},
			UpdateFunc: func(ev controller.Event, txn controller.UpdateOperations) (string, error) {
				log.add("owner.Update(%s)", ev.GetName())
				switch ev.GetName() {
				case "Shutdown":
					txn.Delete("owned/x")
					return "cleanup", nil
				case "slow":
					<-release
				}
				return "", nil
			},
		}
		l := newLoop(t, []controller.EventHandler{owner}, sb, controller.Config{})
		stop, runDone := run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		synctest.Wait()
		require.Equal(t, map[string]string{"owned/x": "x"}, values(sb.State()))

		require.NoError(t, l.PushEvent(newUpdate("slow", controller.BestEffort, controller.Forward)))
		synctest.Wait()
		queued := controller.NewExternalConfigChange("src", true)
		require.NoError(t, l.PushEvent(queued))
		go func() { _ = stop() }()
		synctest.Wait()
		close(release)
		require.ErrorIs(t, <-runDone, context.Canceled)
		require.ErrorIs(t, queued.Wait(), controller.ErrStopped)
		require.Equal(t, []string{"owner.Update(slow)", "owner.Update(Shutdown)"}, log.take())
		require.Empty(t, sb.State(), "the Shutdown transaction removed what the handler owned")
	})
}

func TestShutdownEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		l := newLoop(t, []controller.EventHandler{handler("a", log, nil)}, &controllertest.Southbound{}, controller.Config{})
		// Shutdown is not held by the start-up gate; what is queued behind it
		// is completed with ErrStopped.
		sd := controller.NewShutdownEvent()
		require.NoError(t, l.PushEvent(sd))
		after := controller.NewExternalConfigChange("src", true)
		require.NoError(t, l.PushEvent(after))
		_, runDone := run(t, l)
		require.NoError(t, sd.Wait())
		require.NoError(t, <-runDone)
		require.ErrorIs(t, after.Wait(), controller.ErrStopped)
		require.Equal(t, []string{"a.Update(Shutdown)"}, log.take())
	})
}

func TestExternalConfigMerge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sb := &controllertest.Southbound{}
		var l *controller.Loop
		var retrieved []string
		h := &controller.HandlerFuncs{Name: "h",
			ResyncFunc: func(_ controller.Event, _ controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
				txn.Put("k", str("handler"))
				txn.Put("own", str("handler"))
				return nil
			},
			UpdateFunc: func(ev controller.Event, txn controller.UpdateOperations) (string, error) {
				if v := l.GetConfig("own"); v != nil {
					retrieved = append(retrieved, values(controller.KeyValuePairs{"own": v})["own"])
				}
				if ev.GetName() == "change-own" {
					txn.Put("own", str("handler2"))
					retrieved = append(retrieved, values(controller.KeyValuePairs{"own": l.GetConfig("own")})["own"])
				}
				return "", nil
			},
		}
		l = newLoop(t, []controller.EventHandler{h}, sb, controller.Config{})
		run(t, l)
		db := controller.NewDBResync()
		db.ExternalConfig["k"] = str("remotedb")
		db.ExternalConfig["ext"] = str("remotedb")
		require.NoError(t, l.PushEvent(db))
		synctest.Wait()
		require.Equal(t, map[string]string{"k": "remotedb", "own": "handler", "ext": "remotedb"}, values(sb.State()))

		// Source "zz" sorts after "remotedb" and wins; "aa" sorts before and loses.
		zz := controller.NewExternalConfigChange("zz", true)
		zz.UpdatedKVs["k"] = str("zz")
		aa := controller.NewExternalConfigChange("aa", true)
		aa.UpdatedKVs["ext"] = str("aa")
		aa.UpdatedKVs["new"] = str("aa")
		require.NoError(t, l.PushEvent(zz))
		require.NoError(t, l.PushEvent(aa))
		require.NoError(t, zz.Wait())
		require.NoError(t, aa.Wait())
		require.Equal(t, map[string]string{"k": "zz", "own": "handler", "ext": "remotedb", "new": "aa"}, values(sb.State()))

		// Deleting the winning value falls back to the next source, then to the handlers.
		del := controller.NewExternalConfigChange("zz", true)
		del.UpdatedKVs["k"] = nil
		require.NoError(t, l.PushEvent(del))
		require.NoError(t, del.Wait())
		require.Equal(t, "remotedb", values(sb.State())["k"])
		rs := controller.NewExternalConfigResync(controller.RemoteDBSource, true)
		require.NoError(t, l.PushEvent(rs))
		require.NoError(t, rs.Wait())
		require.Equal(t, map[string]string{"k": "handler", "own": "handler", "ext": "aa", "new": "aa"}, values(sb.State()))

		// ConfigRetriever: the current transaction first, then the committed state.
		require.NoError(t, l.PushEvent(newUpdate("change-own", controller.BestEffort, controller.Forward)))
		synctest.Wait()
		require.Equal(t, []string{"handler", "handler", "handler", "handler", "handler2"}, retrieved)
	})
}

// TestAbortedExternalConfigChangeIsHealed: the change of an external
// source becomes part of the loop's state before the handlers run, so the
// healing resync after an abort applies it.
func TestAbortedExternalConfigChangeIsHealed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		aborts := 0
		h := &controller.HandlerFuncs{Name: "h", UpdateFunc: func(ev controller.Event, _ controller.UpdateOperations) (string, error) {
			if _, ok := ev.(*controller.ExternalConfigChange); ok && aborts == 0 {
				aborts++
				return "", controller.NewAbortEventError(errBoom)
			}
			return "", nil
		}}
		sb := &controllertest.Southbound{}
		l := newLoop(t, []controller.EventHandler{h}, sb, controller.Config{})
		run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		ch := controller.NewExternalConfigChange("user", true)
		ch.UpdatedKVs["vpp/x"] = str("1")
		require.NoError(t, l.PushEvent(ch))
		var abort *controller.AbortEventError
		require.ErrorAs(t, ch.Wait(), &abort)
		synctest.Wait()
		cs := sb.Commits()
		require.Len(t, cs, 2, "start-up resync and healing resync")
		require.Equal(t, "Healing Resync", cs[1].EventName)
		require.Equal(t, map[string]string{"vpp/x": "1"}, values(sb.State()))

		// Deleting the key through a change that is aborted is healed too.
		aborts = 0
		del := controller.NewExternalConfigChange("user", true)
		del.UpdatedKVs["vpp/x"] = nil
		require.NoError(t, l.PushEvent(del))
		require.ErrorAs(t, del.Wait(), &abort)
		synctest.Wait()
		require.Empty(t, sb.State())
	})
}

func TestKubeStateTracked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []int
		h := &controller.HandlerFuncs{Name: "h", ResyncFunc: func(_ controller.Event, ks controller.KubeStateData, _ int, _ controller.ResyncOperations) error {
			got = append(got, len(ks[kubemodel.PodResource]))
			return nil
		}}
		l := newLoop(t, []controller.EventHandler{h}, &controllertest.Southbound{}, controller.Config{})
		run(t, l)
		db := controller.NewDBResync()
		db.KubeState[kubemodel.PodResource] = controller.KeyValuePairs{kubemodel.PodKey("a", "p1"): &kubemodel.Pod{Name: "p1"}}
		require.NoError(t, l.PushEvent(db))
		require.NoError(t, l.PushEvent(&controller.KubeStateChange{Resource: kubemodel.PodResource, Key: kubemodel.PodKey("a", "p2"), NewValue: &kubemodel.Pod{Name: "p2"}}))
		require.NoError(t, l.PushEvent(&controller.KubeStateChange{Resource: kubemodel.PodResource, Key: kubemodel.PodKey("a", "p1"), PrevValue: &kubemodel.Pod{Name: "p1"}}))
		require.NoError(t, l.PushEvent(&controller.HealingResync{Type: controller.AfterError, Error: errBoom}))
		synctest.Wait()
		require.Equal(t, []int{1, 1}, got)
	})
}

func TestHistory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		fail := func(ev controller.Event) error {
			if ev.GetName() == "e4" {
				return errBoom
			}
			return nil
		}
		l := newLoop(t, []controller.EventHandler{handler("a", log, nil), handler("b", log, fail)}, &controllertest.Southbound{},
			controller.Config{HistorySize: 3, HealingDelay: time.Hour})
		run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		t0 := time.Now()
		for i := 1; i <= 4; i++ {
			time.Sleep(time.Second)
			require.NoError(t, l.PushEvent(newUpdate("e"+string(rune('0'+i)), controller.BestEffortIgnoreErrors, controller.Forward)))
			synctest.Wait()
		}
		h := l.History()
		require.Equal(t, 3, h.Len(), "bounded")
		_, ok := h.BySeq(2)
		require.False(t, ok, "evicted")
		r, ok := h.BySeq(5)
		require.True(t, ok)
		require.Equal(t, "e4", r.Name)
		require.Equal(t, "test event e4", r.Description)
		require.Equal(t, controller.Update, r.Method)
		require.ErrorIs(t, r.Err, errBoom)
		require.True(t, r.Committed)
		require.Len(t, r.Handlers, 2)
		require.Equal(t, "a", r.Handlers[0].Handler)
		require.Equal(t, "put a", r.Handlers[0].Change)
		require.NoError(t, r.Handlers[0].Err)
		require.ErrorIs(t, r.Handlers[1].Err, errBoom)

		names := func(rs []controller.Record) (out []string) {
			for _, r := range rs {
				out = append(out, r.Name)
			}
			return out
		}
		require.Equal(t, []string{"e2", "e3"}, names(h.First(2)))
		require.Equal(t, []string{"e3", "e4"}, names(h.Last(2)))
		require.Equal(t, []string{"e2", "e3", "e4"}, names(h.Last(10)))
		require.Equal(t, []string{"e3"}, names(h.Between(t0.Add(3*time.Second), t0.Add(4*time.Second))))
		require.Equal(t, []string{"e3", "e4"}, names(h.Between(t0.Add(3*time.Second), time.Time{})))

		// Copies: changing a result does not change the history.
		last := h.Last(1)
		last[0].Handlers[0].Handler = "changed"
		require.Equal(t, "a", h.Last(1)[0].Handlers[0].Handler)

		off := newLoop(t, nil, &controllertest.Southbound{}, controller.Config{HistorySize: -1})
		require.Zero(t, off.History().Cap())
	})
}

func TestUnknownMethodAndNonUpdateEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLoop(t, nil, &controllertest.Southbound{}, controller.Config{})
		run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		bad := &testEvent{name: "bad", method: controller.EventMethodType(42), done: make(chan error, 1)}
		require.NoError(t, l.PushEvent(bad))
		synctest.Wait()
		require.ErrorContains(t, bad.result(t), "unknown method")
	})
}

// warnCounter counts the log records at Warn and above by message.
type warnCounter struct {
	mu   sync.Mutex
	warn map[string]int
}

func (w *warnCounter) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *warnCounter) WithGroup(string) slog.Handler            { return w }
func (w *warnCounter) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.Level >= slog.LevelWarn {
		w.warn[r.Message]++
	}
	return nil
}

// TestHealingLogsOnce: a resync that keeps failing is reported at Warn
// when the failures start (the failed event and the healing scheduled),
// not at every healing attempt (CONTRIBUTING R10); the recovery at Info.
func TestHealingLogsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		attempts := 0
		fail := func(ev controller.Event) error {
			if ev.Method() == controller.FullResync {
				attempts++
				if attempts <= 4 {
					return errBoom
				}
			}
			return nil
		}
		logs := &warnCounter{warn: map[string]int{}}
		l := newLoop(t, []controller.EventHandler{handler("a", &callLog{}, fail)}, &controllertest.Southbound{},
			controller.Config{HealingDelay: time.Second, Logger: slog.New(logs)})
		stop, _ := run(t, l)
		require.NoError(t, l.PushEvent(controller.NewDBResync()))
		time.Sleep(time.Hour)
		synctest.Wait()
		require.Equal(t, 5, attempts, "the start-up and 3 healing resyncs failed, the 4th healed")
		logs.mu.Lock()
		assert.Equal(t, map[string]int{"event processing failed": 1, "healing resync scheduled": 1}, logs.warn)
		logs.mu.Unlock()
		require.ErrorIs(t, stop(), context.Canceled)
	})
}

// TestHealingRetriesSpread: loops whose resyncs fail at the same moment
// (a cluster's agents against an overloaded etcd) do not retry their
// healing resyncs in step: the waits after a failed healing are jittered.
func TestHealingRetriesSpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const loops = 20
		var mu sync.Mutex
		ends := map[time.Duration]bool{}
		start := time.Now()
		var dones []<-chan error
		for range loops {
			fail := func(ev controller.Event) error {
				if ev.Method() == controller.FullResync {
					return errBoom
				}
				return nil
			}
			l := newLoop(t, []controller.EventHandler{handler("a", &callLog{}, fail)}, &controllertest.Southbound{},
				controller.Config{HealingDelay: time.Second, MaxHealingAttempts: 3})
			_, done := run(t, l)
			dones = append(dones, done)
			require.NoError(t, l.PushEvent(controller.NewDBResync()))
		}
		var wg sync.WaitGroup
		for _, done := range dones {
			wg.Go(func() {
				assert.ErrorIs(t, <-done, controller.ErrHealingFailed)
				mu.Lock()
				ends[time.Since(start)] = true
				mu.Unlock()
			})
		}
		wg.Wait()
		// Without jitter all 20 would give up at 1+2+4 = 7 s exactly.
		assert.Greater(t, len(ends), loops/2, "the loops gave up at %d distinct times", len(ends))
	})
}

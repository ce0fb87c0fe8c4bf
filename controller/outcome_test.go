package controller

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestErrorOutcomes pins decide, the one place where the loop decides what
// an event's errors mean, row by row: one row per combination that the
// package documentation's error table describes. TestErrorOutcomesEndToEnd
// and TestResyncErrorOutcomes check the same rows through a running loop.
func TestErrorOutcomes(t *testing.T) {
	const (
		none = errNone
		perm = errPermanent
		tran = errTransient
		abrt = errAbort
		ftl  = errFatal
	)
	update := func(tt UpdateTransactionType, h, c errClass) facts {
		return facts{kind: kindUpdate, tt: tt, handlers: h, commit: c}
	}
	// The outcomes that recur.
	var (
		committed      = outcome{commit: true, keys: settleUpdate}
		committedHeal  = outcome{commit: true, keys: settleAdd, heal: healBackoff}
		committedNoFix = outcome{commit: true, keys: settleAdd} // transient error, not healed
		fatal          = outcome{fatal: true}
		fatalCommit    = outcome{fatal: true, commit: true}
		aborted        = outcome{keys: settleAdd, abort: true, heal: healNow}
		stopped        = outcome{keys: settleAdd}
		reverted       = outcome{keys: settleAdd, revert: true}
		undone         = outcome{commit: true, undo: true, revert: true, keys: settleAdd, heal: healBackoff}
	)
	for _, tc := range []struct {
		name string
		f    facts
		want outcome
	}{
		// BestEffort: an error does not stop the other handlers; commit;
		// heal a transient error.
		{"best effort: no error", update(BestEffort, none, none), committed},
		{"best effort: transient handler error heals", update(BestEffort, tran, none), committedHeal},
		{"best effort: permanent handler error is not healed", update(BestEffort, perm, none), committed},
		{"best effort: transient commit error heals", update(BestEffort, none, tran), committedHeal},
		{"best effort: permanent commit error is not healed", update(BestEffort, none, perm), committed},
		{"best effort: permanent handler and transient commit error heal", update(BestEffort, perm, tran), committedHeal},
		{"best effort: transient handler and permanent commit error heal", update(BestEffort, tran, perm), committedHeal},
		{"best effort: both permanent are not healed", update(BestEffort, perm, perm), committed},
		{"best effort: commit abort heals at once", update(BestEffort, none, abrt), outcome{commit: true, keys: settleAdd, heal: healNow}},
		{"best effort: abort stops, no commit, heals at once", update(BestEffort, abrt, none), aborted},
		{"best effort: fatal handler error stops the loop", update(BestEffort, ftl, none), fatal},
		{"best effort: fatal commit error stops the loop", update(BestEffort, tran, ftl), fatalCommit},

		// BestEffortIgnoreErrors: BestEffort without healing handler errors.
		{"ignore errors: transient handler error is not healed", update(BestEffortIgnoreErrors, tran, none), committedNoFix},
		{"ignore errors: permanent handler error", update(BestEffortIgnoreErrors, perm, none), committed},
		{"ignore errors: transient commit error heals", update(BestEffortIgnoreErrors, tran, tran), committedHeal},
		{"ignore errors: permanent commit error is not healed", update(BestEffortIgnoreErrors, tran, perm), committedNoFix},
		{"ignore errors: abort stops and heals at once", update(BestEffortIgnoreErrors, abrt, none), aborted},
		{"ignore errors: fatal", update(BestEffortIgnoreErrors, ftl, none), fatal},

		// RevertOnFailure: the first error stops; no commit; revert the
		// handlers that ran; a failed commit undoes, reverts and heals.
		{"revert on failure: no error", update(RevertOnFailure, none, none), committed},
		{"revert on failure: transient handler error reverts, no healing", update(RevertOnFailure, tran, none), reverted},
		{"revert on failure: permanent handler error reverts, no healing", update(RevertOnFailure, perm, none), reverted},
		{"revert on failure: abort reverts and heals at once", update(RevertOnFailure, abrt, none),
			outcome{keys: settleAdd, revert: true, abort: true, heal: healNow}},
		{"revert on failure: fatal handler error stops the loop, no revert", update(RevertOnFailure, ftl, none), fatal},
		{"revert on failure: transient commit error undoes, reverts, heals", update(RevertOnFailure, none, tran), undone},
		{"revert on failure: permanent commit error undoes, reverts, heals", update(RevertOnFailure, none, perm),
			outcome{commit: true, undo: true, revert: true, keys: settleUpdate, heal: healBackoff}},
		{"revert on failure: commit abort undoes, reverts, heals at once", update(RevertOnFailure, none, abrt),
			outcome{commit: true, undo: true, revert: true, keys: settleAdd, heal: healNow}},
		{"revert on failure: fatal commit error stops the loop", update(RevertOnFailure, none, ftl), fatalCommit},

		// The Shutdown event's deadline: no further handler, no commit.
		{"shutdown deadline: no commit", facts{kind: kindUpdate, deadline: true}, stopped},
		{"shutdown deadline after a transient error: no commit, no healing", facts{kind: kindUpdate, handlers: tran, deadline: true}, stopped},
		{"shutdown deadline of a revert-on-failure event reverts", facts{kind: kindUpdate, tt: RevertOnFailure, deadline: true}, reverted},

		// Resyncs are best effort; only an abort stops them. A resync
		// without a transient error resets the healing backoff.
		{"resync: no error", facts{kind: kindResync}, outcome{commit: true, keys: settleResync, resetBackoff: true}},
		{"resync: transient handler error heals", facts{kind: kindResync, handlers: tran},
			outcome{commit: true, keys: settleAdd, heal: healBackoff}},
		{"resync: permanent handler error is not healed", facts{kind: kindResync, handlers: perm},
			outcome{commit: true, keys: settleResync, resetBackoff: true}},
		{"resync: abort stops, no commit, heals at once", facts{kind: kindResync, handlers: abrt}, aborted},
		{"resync: fatal handler error", facts{kind: kindResync, handlers: ftl}, fatal},
		{"resync: transient commit error heals", facts{kind: kindResync, commit: tran},
			outcome{commit: true, keys: settleAdd, heal: healBackoff}},
		{"resync: permanent commit error is not healed", facts{kind: kindResync, handlers: perm, commit: perm},
			outcome{commit: true, keys: settleResync, resetBackoff: true}},
		{"resync: commit abort heals at once", facts{kind: kindResync, commit: abrt},
			outcome{commit: true, keys: settleAdd, heal: healNow}},
		{"resync: fatal commit error", facts{kind: kindResync, commit: ftl}, fatalCommit},

		// A healing resync that fails again counts towards
		// MaxHealingAttempts; one that fails only permanently succeeded.
		{"healing: no error resets the backoff", facts{kind: kindHealing}, outcome{commit: true, keys: settleResync, resetBackoff: true}},
		{"healing: transient error fails healing", facts{kind: kindHealing, handlers: tran},
			outcome{commit: true, keys: settleAdd, heal: healBackoff, healFailed: true}},
		{"healing: transient commit error fails healing", facts{kind: kindHealing, handlers: perm, commit: tran},
			outcome{commit: true, keys: settleAdd, heal: healBackoff, healFailed: true}},
		{"healing: permanent errors only count as success", facts{kind: kindHealing, handlers: perm, commit: perm},
			outcome{commit: true, keys: settleResync, resetBackoff: true}},
		{"healing: abort fails healing", facts{kind: kindHealing, handlers: abrt},
			outcome{keys: settleAdd, abort: true, heal: healNow, healFailed: true}},
		{"healing: fatal", facts{kind: kindHealing, commit: ftl}, fatalCommit},

		// A reapply (DownstreamResync) calls no handler.
		{"reapply: no error", facts{kind: kindReapply}, outcome{commit: true, keys: settleAdd}},
		{"reapply: transient commit error heals", facts{kind: kindReapply, commit: tran}, committedHeal},
		{"reapply: permanent commit error is not healed", facts{kind: kindReapply, commit: perm}, outcome{commit: true, keys: settleAdd}},
		{"reapply: commit abort heals at once", facts{kind: kindReapply, commit: abrt}, outcome{commit: true, keys: settleAdd, heal: healNow}},
		{"reapply: fatal commit error", facts{kind: kindReapply, commit: ftl}, fatalCommit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(tc.f)
			assert.Equal(t, tc.want, got)
			if tc.f.commit != errNone {
				// Before the commit, the same facts without its error decide
				// the same about committing.
				pre := tc.f
				pre.commit = errNone
				assert.True(t, decide(pre).commit, "committed only if decided before the commit")
			}
		})
	}
}

// TestClassify: the class of an error that decide works with; a
// FatalError wins over what it wraps, then an AbortEventError.
func TestClassify(t *testing.T) {
	keyErr := &KeyError{Key: "k", Err: errors.New("bad")}
	plain := errors.New("timeout")
	for _, tc := range []struct {
		name string
		err  error
		want errClass
	}{
		{"nil", nil, errNone},
		{"plain", plain, errTransient},
		{"key error", keyErr, errPermanent},
		{"wrapped permanent", fmt.Errorf("h: %w", NewPermanentError(plain)), errPermanent},
		{"permanent joined with transient", errors.Join(keyErr, plain), errTransient},
		{"abort", fmt.Errorf("h: %w", NewAbortEventError(plain)), errAbort},
		{"abort around a key error", NewAbortEventError(keyErr), errAbort},
		{"fatal", NewFatalError(plain), errFatal},
		{"fatal around an abort", NewFatalError(NewAbortEventError(keyErr)), errFatal},
		{"joined with a fatal", errors.Join(plain, NewFatalError(plain)), errFatal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, classify(tc.err))
		})
	}
}

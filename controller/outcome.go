package controller

// The outcome of an event is decided in one place, decide, from facts the
// loop gathers while it processes the event. The package documentation's
// error table is its specification, and TestErrorOutcomes pins it row by
// row. process (process.go) gathers the facts, asks decide, and carries the
// outcome out; nothing else in the loop decides what an error means.

// eventKind is how the loop processes an event.
type eventKind uint8

const (
	// kindUpdate: the handlers' Update in the event's direction, then a
	// CommitUpdate of the keys they changed.
	kindUpdate eventKind = iota
	// kindResync: a FullResync or UpstreamResync; the handlers' Resync, then
	// a CommitResync of the complete desired state.
	kindResync
	// kindHealing: a kindResync that heals an earlier error (a HealingResync
	// of type AfterError); its failure counts towards MaxHealingAttempts.
	kindHealing
	// kindReapply: a DownstreamResync; no handler, a CommitReapply.
	kindReapply
)

// errClass classifies an error for decide, in increasing severity: an
// event's handlers are summed up by their most severe error.
type errClass uint8

const (
	errNone      errClass = iota
	errPermanent          // IsPermanent: recorded, never healed
	errTransient          // anything else: healed
	errAbort              // an AbortEventError: the event stops, healing at once
	errFatal              // a FatalError: the loop stops
)

// classify returns err's class. A FatalError wins over everything it
// wraps, then an AbortEventError.
func classify(err error) errClass {
	switch {
	case err == nil:
		return errNone
	case isFatal(err):
		return errFatal
	case isAbort(err):
		return errAbort
	case IsPermanent(err):
		return errPermanent
	}
	return errTransient
}

// facts is what the loop knows about an event when it decides its outcome.
type facts struct {
	kind eventKind
	tt   UpdateTransactionType // kindUpdate only
	// handlers is the most severe error of the handlers called so far.
	handlers errClass
	// deadline: the Shutdown event's ShutdownTimeout passed before a
	// handler was called or before its changes were committed.
	deadline bool
	// commit is the class of the commit's error; errNone also while nothing
	// was committed.
	commit errClass
}

// healMode tells whether and when a healing resync is scheduled.
type healMode uint8

const (
	healNone    healMode = iota
	healBackoff          // after Config.HealingDelay, or the backoff of failed healings
	healNow              // right away (an abort), unless healing already failed
)

// outcome is what happens to an event, in the order the loop carries it
// out: commit, fatal, undo, revert, keys, abort, heal, resetBackoff.
type outcome struct {
	// commit: the handlers' transaction becomes the loop's record of their
	// desired state and is handed to the southbound (an update's only when
	// it changes something). False also means: call no further handler.
	commit bool
	// fatal: the loop stops (Run returns the error); nothing else happens.
	fatal bool
	// undo: restore the loop's record of the handlers' desired state from
	// before the event (the commit of a RevertOnFailure event failed).
	undo bool
	// revert: call Revert, in reverse order, on the handlers whose Update
	// succeeded.
	revert bool
	// keys: how the event's KeyErrors change the keys rejected for good.
	keys settleMode
	// abort: the event was aborted (counted in Stats.Aborts).
	abort bool
	// heal: schedule a healing resync.
	heal healMode
	// healFailed: this was a healing resync and it failed: the backoff
	// grows, and it counts towards Config.MaxHealingAttempts.
	healFailed bool
	// resetBackoff: a resync without a transient error; healing succeeded.
	resetBackoff bool
}

// decide returns the outcome of an event with the facts f. It is a pure
// function. Until the commit, f.commit is errNone and only out.commit is
// final: the loop asks again after the commit.
//
// The rules (the package documentation's error table):
//
//   - A FatalError, from a handler or the commit, stops the loop; nothing
//     else happens.
//   - An update stops at an AbortEventError, at any error of a
//     RevertOnFailure event, and at the Shutdown deadline: nothing is
//     committed; RevertOnFailure reverts the handlers that ran; an abort
//     heals at once; nothing else heals.
//   - A resync stops only at an abort (no commit, heal at once); every other
//     handler error is best effort.
//   - A committed event heals a transient error: a BestEffort update's
//     handler errors and any commit error (BestEffortIgnoreErrors: only the
//     commit's); a RevertOnFailure event whose commit failed undoes and
//     reverts and heals even a permanent commit error (the southbound may
//     have applied the other keys). A permanent error alone never heals.
//   - A healing resync that heals again has failed; a resync without a
//     transient error resets the healing backoff.
//   - Keys: an update that was committed settles the keys it carried, a
//     resync replaces them all, anything else only adds; with a transient
//     error in the event, only add (a rejection may hide behind it).
func decide(f facts) outcome {
	var o outcome
	if f.handlers == errFatal || f.commit == errFatal {
		o.fatal = true
		o.commit = f.handlers != errFatal
		return o
	}
	abort := f.handlers == errAbort || f.commit == errAbort
	transient := abort || f.handlers == errTransient || f.commit == errTransient
	o.abort = f.handlers == errAbort

	switch f.kind {
	case kindUpdate:
		stopped := f.handlers == errAbort || f.deadline ||
			f.tt == RevertOnFailure && f.handlers != errNone
		switch {
		case stopped:
			o.revert = f.tt == RevertOnFailure
			o.keys = settleAdd
			if f.handlers == errAbort {
				o.heal = healNow
			}
			return o
		case f.commit != errNone && f.tt == RevertOnFailure:
			o.undo, o.revert = true, true
			o.heal = healBackoff
		case f.commit == errTransient || f.commit == errAbort:
			o.heal = healBackoff
		case f.tt == BestEffort && f.handlers == errTransient:
			o.heal = healBackoff
		}
		o.commit = true
		o.keys = settleUpdate
	case kindResync, kindHealing:
		if f.handlers == errAbort {
			o.keys = settleAdd
			o.heal = healNow
			o.healFailed = f.kind == kindHealing
			return o
		}
		o.commit = true
		o.keys = settleResync
		if transient {
			o.heal = healBackoff
			o.healFailed = f.kind == kindHealing
		} else {
			o.resetBackoff = true
		}
	case kindReapply:
		o.commit = true
		o.keys = settleAdd
		if transient {
			o.heal = healBackoff
		}
	}
	if o.heal != healNone && abort {
		o.heal = healNow
	}
	if transient {
		o.keys = settleAdd
	}
	return o
}

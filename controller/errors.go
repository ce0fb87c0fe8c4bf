package controller

import (
	"errors"

	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

// Sentinel errors returned by the loop.
var (
	// ErrStopped is returned by PushEvent after the loop has stopped, and
	// passed to Done of events that were still queued when the loop stopped.
	// Events pushed before Run is called are queued and processed.
	ErrStopped = errors.New("controller: event loop stopped")

	// ErrQueueFull is returned by PushEvent when the bounded queue is full.
	ErrQueueFull = errors.New("controller: event queue full")

	// ErrBlockingFollowUp is returned by PushEvent when a handler, running on
	// the loop goroutine, pushes a blocking event: waiting for it would
	// deadlock the loop.
	ErrBlockingFollowUp = errors.New("controller: blocking event pushed from inside the event loop")

	// ErrNotInHandler is returned by PushFollowUp for a transaction that
	// does not belong to a handler call in progress.
	ErrNotInHandler = errors.New("controller: follow-up pushed outside a handler call")

	// ErrAlreadyRunning is wrapped by the error Run returns when the loop
	// is already running or has run before. It is the module's one
	// ErrAlreadyRunning value (every package's is the same), so errors.Is
	// matches it across packages.
	ErrAlreadyRunning = lifecycle.ErrAlreadyRunning

	// ErrNotRunning is returned by WaitStartupResync and Sync when Run has
	// not been called within NotRunningGrace: nothing would ever process
	// what they wait for.
	ErrNotRunning = errors.New("controller: event loop not running (Run not called)")

	// ErrStartupResyncMissing is reported by Healthy, and returned by
	// WaitStartupResync, when no start-up DBResync has been processed
	// within Config.StartupResyncDeadline.
	ErrStartupResyncMissing = errors.New("controller: no start-up DBResync within the deadline")

	// ErrHealingFailed is wrapped by the error Run returns when healing
	// resyncs failed Config.MaxHealingAttempts times in a row (only when
	// that is positive: by default the loop never gives up).
	ErrHealingFailed = errors.New("controller: healing resync failed repeatedly")

	// ErrHealing is wrapped by the error Healthy returns while healing
	// resyncs fail in a row (from the first failed one until one
	// succeeds); the error says how many since when and wraps the last
	// one. The loop keeps healing (Config.MaxHealingAttempts): what the
	// resync reads is unreachable or failing; restarting the agent does
	// not help and adds a full read to the load of what is failing.
	ErrHealing = errors.New("controller: healing resyncs failing")

	// ErrDegraded is wrapped by the error Healthy returns while the loop
	// runs but part of the desired state is not applied and no resync can
	// apply it: keys rejected for good ([KeyError], see Loop.RejectedKeys),
	// or a permanent error of the southbound or a handler ([PermanentError])
	// outstanding. Applications may treat it as degraded (report, alert),
	// not dead: restarting does not help, the rejected input must change.
	ErrDegraded = errors.New("controller: degraded")

	// ErrRegisterAfterRun is returned by Register once Run has started:
	// handlers are fixed while the loop runs.
	ErrRegisterAfterRun = errors.New("controller: handlers registered after Run started")

	// ErrNotConstructed is returned by Wait of a blocking event that was not
	// created with its constructor and so has nothing to wait on.
	ErrNotConstructed = errors.New("controller: event not created with its constructor")
)

// AbortEventError tells the loop to abort the processing of the event (and
// for Update/RevertOnFailure to revert the changes). The agent does not have
// to restart but a resync should be performed as soon as possible.
type AbortEventError struct {
	err error
}

// NewAbortEventError is the constructor for the AbortEventError.
func NewAbortEventError(origErr error) error {
	return &AbortEventError{err: origErr}
}

// Error delegates the call to the underlying error.
func (e *AbortEventError) Error() string {
	if e.err == nil {
		return "event aborted"
	}
	return e.err.Error()
}

// GetOriginalError returns the underlying error.
func (e *AbortEventError) GetOriginalError() error { return e.err }

// Unwrap returns the underlying error.
func (e *AbortEventError) Unwrap() error { return e.err }

// FatalError tells the loop to stop as soon as possible: Run returns it.
type FatalError struct {
	err error
}

// NewFatalError is the constructor for FatalError.
func NewFatalError(origErr error) error {
	return &FatalError{err: origErr}
}

// Error delegates the call to the underlying error.
func (e *FatalError) Error() string {
	if e.err == nil {
		return "fatal error"
	}
	return e.err.Error()
}

// GetOriginalError returns the underlying error.
func (e *FatalError) GetOriginalError() error { return e.err }

// Unwrap returns the underlying error.
func (e *FatalError) Unwrap() error { return e.err }

// KeyError is returned by a [Southbound] (usually several, joined with
// errors.Join) for a key whose value it rejects for good: the value is
// invalid, so neither a retry nor a resync can apply it. The southbound
// applies the other keys of the commit. The loop does not heal a commit
// whose errors are all KeyErrors or permanent errors (see
// [NewPermanentError]); it reports the keys through [Loop.Healthy],
// [Loop.RejectedKeys] and [Loop.Stats] until a later commit applies or
// removes them. A handler may return a KeyError too, for a key of its input
// (for example the key of a KubeStateChange whose value it cannot use): the
// loop tracks it the same way until an event carrying that key succeeds.
type KeyError struct {
	// Key is the rejected key.
	Key string
	// Err says why.
	Err error
}

// Error returns "key <key>: <reason>".
func (e *KeyError) Error() string { return "key " + e.Key + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *KeyError) Unwrap() error { return e.Err }

// PermanentError marks an error that neither a retry nor a healing resync
// can fix (for example a data plane that lacks an API). Create it with
// [NewPermanentError]; test for it with [IsPermanent].
type PermanentError struct {
	err error
}

// NewPermanentError marks origErr as permanent; nil stays nil.
func NewPermanentError(origErr error) error {
	if origErr == nil {
		return nil
	}
	return &PermanentError{err: origErr}
}

// Error delegates the call to the underlying error.
func (e *PermanentError) Error() string { return e.err.Error() }

// Unwrap returns the underlying error.
func (e *PermanentError) Unwrap() error { return e.err }

// IsPermanent reports whether a healing resync cannot fix err: err is a
// [KeyError] or a [PermanentError], or joins (errors.Join) only such errors.
// It is false for nil.
func IsPermanent(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case *KeyError, *PermanentError:
		return true
	case interface{ Unwrap() []error }:
		errs := e.Unwrap()
		if len(errs) == 0 {
			return false
		}
		for _, x := range errs {
			if x != nil && !IsPermanent(x) {
				return false
			}
		}
		return true
	case interface{ Unwrap() error }:
		return IsPermanent(e.Unwrap())
	}
	return false
}

// KeyErrors returns the [KeyError]s contained in err (through errors.Join
// and wrapping), in order.
func KeyErrors(err error) []*KeyError {
	var out []*KeyError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *KeyError:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

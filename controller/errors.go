package controller

import "errors"

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

	// ErrAlreadyRunning is returned by Run when the loop is already running
	// or has run before.
	ErrAlreadyRunning = errors.New("controller: Run called more than once")

	// ErrStartupResyncMissing is reported by Healthy when no start-up
	// DBResync has been processed within Config.StartupResyncDeadline.
	ErrStartupResyncMissing = errors.New("controller: no start-up DBResync within the deadline")

	// ErrHealingFailed is wrapped by the error Run returns when healing
	// resyncs failed Config.MaxHealingAttempts times in a row.
	ErrHealingFailed = errors.New("controller: healing resync failed repeatedly")

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

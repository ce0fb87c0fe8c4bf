package vppdriver

import (
	"fmt"
	"time"
)

// State is the reconciliation state of one key.
type State int

const (
	// StatePending: desired but waiting for a dependency (PendingOn) or
	// for VPP to be connected.
	StatePending State = iota
	// StateConfigured: VPP holds the desired value.
	StateConfigured
	// StateFailed: the last attempt failed (Err); retriable failures are
	// retried at NextRetry.
	StateFailed
)

// String returns the name of the state.
func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateConfigured:
		return "configured"
	case StateFailed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// KeyStatus is the status of one desired key. It is a value (a copy).
type KeyStatus struct {
	Key       string
	State     State
	PendingOn []string  // missing dependencies (StatePending)
	Err       error     // last failure (StateFailed)
	Attempts  int       // failed attempts since the last success or change
	NextRetry time.Time // zero if no retry is scheduled
}

// String formats the status for logs.
func (s KeyStatus) String() string {
	switch s.State {
	case StatePending:
		if len(s.PendingOn) == 0 {
			return s.Key + ": pending (not connected)"
		}
		return fmt.Sprintf("%s: pending on %v", s.Key, s.PendingOn)
	case StateFailed:
		return fmt.Sprintf("%s: failed after %d attempt(s): %v", s.Key, s.Attempts, s.Err)
	}
	return s.Key + ": " + s.State.String()
}

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
	Attempts  int       // failed attempts since the last success, change or reconnect
	NextRetry time.Time // zero if no retry is scheduled
	// FailingSince is zero unless the key keeps failing: when it had
	// failed Config.FailingAfter times in a row, or failed permanently
	// (see Driver.Degraded). It stays set until the key is configured,
	// deleted or given a new value; a reconnect, which retries the key
	// from scratch, does not end it. Invalid values are not failing keys
	// (they are the committer's errors, see Driver.Commit).
	FailingSince time.Time
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
		if s.Attempts == 0 {
			return fmt.Sprintf("%s: failed: %v", s.Key, s.Err)
		}
		return fmt.Sprintf("%s: failed after %d attempt(s): %v", s.Key, s.Attempts, s.Err)
	}
	return s.Key + ": " + s.State.String()
}

// Stats is a snapshot of the driver's state and counters, for an
// operator's metrics (e.g. exported as Prometheus gauges and counters by
// the application). It is a value (a copy).
//
// The key counts are gauges over the desired keys (the keys of the last
// commits that the driver owns): Keys == Configured + Pending + Failed.
// While VPP is not connected (or its state has not been read back since
// the last connect) no key is counted as Configured: those are Pending.
// The other fields are counters since [New].
type Stats struct {
	// Connected: a VPP connection is up and VPP's state was read back on
	// it (false while reconnecting, and with an incompatible VPP, which
	// cannot be read back; [Driver.Connected] only says whether a
	// connection is up).
	Connected bool

	Keys       int // desired keys, invalid ones included
	Configured int // keys whose desired value VPP holds
	Pending    int // keys waiting for a dependency or for VPP
	Failed     int // keys whose last attempt failed, Invalid ones included
	Invalid    int // keys whose committed value is invalid (rejected, not retried)

	Commits         uint64 // Commit calls
	InvalidRejected uint64 // values rejected as invalid (per key and commit)
	Passes          uint64 // reconciliation passes against a connected VPP
	Resyncs         uint64 // read-backs of VPP's state
	Connects        uint64 // connections made (the first and every reconnect)
	Requests        uint64 // binary-API requests sent to VPP (dumps and pings included)
	FailedAttempts  uint64 // failed attempts to apply or remove a key

	// Failing counts the keys that keep failing (see
	// KeyStatus.FailingSince; most are Failed, one whose retry after a
	// reconnect waits for a dependency is Pending), and FailingByKind the
	// same by kind: "interface", "vrf", "route", "neighbor", "nat44" (the
	// key's segment after "vpp/"; every NAT44 key is "nat44"), "acl" (ACLs
	// and the ACL lists of interfaces), "cnat". FailingByKind is nil when
	// none is.
	Failing       int
	FailingByKind map[string]int
}

package nodesync

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// runState is where Run is in its start-up. It only moves forward:
//
//	stateIdle → stateConnecting → [stateConfirming →] [stateAllocating →] stateListing → stateOnline
//
// with stateOffline reachable from any state before stateOnline when the
// fallback to local state starts (then Run goes on through the same
// states without changing the state, until it reaches stateOnline), and
// stateEnded from any state when Run returns.
type runState int

const (
	stateIdle       runState = iota // Run has not been called
	stateConnecting                 // Run waits for the DB connection
	stateConfirming                 // Run checks the ID from local state in the DB
	stateAllocating                 // Run allocates an ID in the DB
	stateListing                    // Run reads the node records
	stateOffline                    // ready: ID and records from local state, the DB has not confirmed the ID yet
	stateOnline                     // ready: ID confirmed or allocated by the DB; Run watches the records
	stateEnded                      // Run has returned
)

// describe says what Run does in state s, for errors.
func (s runState) describe() string {
	switch s {
	case stateIdle:
		return "Run has not been called"
	case stateConnecting:
		return "waiting for the database connection"
	case stateConfirming:
		return "confirming the node ID from local state"
	case stateAllocating:
		return "allocating the node ID"
	case stateListing:
		return "reading the node records"
	case stateOffline:
		return "running with the node ID from local state"
	case stateOnline:
		return "running"
	case stateEnded:
		return "Run has ended"
	}
	return fmt.Sprintf("state %d", int(s))
}

// ready reports whether the ID and the records for the start-up resync are
// there (they stay there after Run ended).
func (s runState) ready() bool { return s == stateOffline || s == stateOnline }

// startup is Run's start-up state. It is guarded by NodeSync.mu.
type startup struct {
	state   runState
	since   time.Time // when state was entered
	failing time.Time // first DB error in this state; zero if none
	lastErr error     // last DB error in this state
	// saved is the state from Config.LocalState that the fallback may
	// start with; nil when there is none, or once the DB has decided the
	// ID (then the fallback must not start).
	saved *SavedState
	local string     // what the local state offers, for errors
	snap  ListResult // the records for the start-up resync, set when ready
	err   error      // what Run returned, set in stateEnded
}

// enter moves Run to state s (while it is not ready: the states after a
// start from local state are not reported).
func (ns *NodeSync) enter(s runState) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.st.state.ready() {
		return
	}
	ns.st.state, ns.st.since = s, time.Now()
	ns.st.failing, ns.st.lastErr = time.Time{}, nil
}

// setDBError records a failed DB request of the current state.
func (ns *NodeSync) setDBError(err error) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.st.failing.IsZero() {
		ns.st.failing = time.Now()
	}
	ns.st.lastErr = err
}

// setLocal records what the local state offers: saved (nil if nothing
// usable) and a description for errors.
func (ns *NodeSync) setLocal(saved *SavedState, desc string) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	ns.st.saved, ns.st.local = saved, desc
}

// startOffline installs the ID and records from local state, unless the DB
// has decided the ID already (or there is nothing to start with).
func (ns *NodeSync) startOffline() {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	local := ns.st.saved
	if local == nil || ns.st.state.ready() || ns.st.state == stateEnded {
		return
	}
	status := ns.statusTextLocked()
	recs := local.Records
	recs.Revision = 0 // any snapshot read from the DB replaces it
	recs.KVs = slices.DeleteFunc(slices.Clone(recs.KVs), func(kv KV) bool { return !strings.HasPrefix(kv.Key, nodeKeyPrefix) })
	ns.nodeID.Store(local.NodeID)
	ns.st.snap = recs
	ns.st.state, ns.st.since = stateOffline, time.Now()
	close(ns.ready)
	ns.log.Warn("started with the node ID from local state; the database has not confirmed it yet",
		slog.Uint64("id", uint64(local.NodeID)), slog.Int("records", len(recs.KVs)), slog.String("database", status))
}

// installOnline installs the ID and records read from the DB and reports
// true, unless Run started from local state already: then it records that
// the DB has confirmed the ID and reports false.
func (ns *NodeSync) installOnline(id uint32, list ListResult, start time.Time) bool {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	offline := ns.st.state == stateOffline
	ns.st.state, ns.st.since, ns.st.saved = stateOnline, time.Now(), nil
	if offline {
		return false
	}
	ns.nodeID.Store(id)
	ns.st.snap = list
	close(ns.ready)
	ns.log.Info("node ID allocated", slog.Uint64("id", uint64(id)), slog.Duration("took", time.Since(start)))
	return true
}

// lost returns the error for an ID from local state that this node does
// not own (owner "" means unclaimed): errNotOwned if the ID has not been
// used yet (the fallback may not start with it from now on),
// ErrNodeReleased or ErrNodeIDLost otherwise.
func (ns *NodeSync) lost(id uint32, owner string) error {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.st.state != stateOffline {
		ns.st.saved = nil
		ns.log.Info("the node ID in local state is not this node's any more; allocating anew",
			slog.Uint64("id", uint64(id)), slog.String("owner", owner))
		return errNotOwned
	}
	if owner == "" {
		return fmt.Errorf("%w: ID %d from local state is not claimed any more", ErrNodeReleased, id)
	}
	return fmt.Errorf("%w: ID %d from local state is claimed by node %q", ErrNodeIDLost, id, owner)
}

// end records that Run returned err.
func (ns *NodeSync) end(err error) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	ns.st.state, ns.st.since, ns.st.err = stateEnded, time.Now(), err
	close(ns.done)
}

// statusTextLocked describes why the ID is not there yet, e.g. "database
// not connected since 12:03:04; no local state (Config.LocalState is
// nil)". ns.mu is held.
func (ns *NodeSync) statusTextLocked() string {
	st := ns.st
	if st.state == stateIdle {
		return st.state.describe()
	}
	const clock = "15:04:05"
	var b strings.Builder
	switch {
	case st.state == stateConnecting:
		fmt.Fprintf(&b, "database not connected since %s", st.since.Format(clock))
	case st.lastErr != nil:
		fmt.Fprintf(&b, "database requests failing since %s while %s (last error: %v)", st.failing.Format(clock), st.state.describe(), st.lastErr)
	default:
		fmt.Fprintf(&b, "%s since %s", st.state.describe(), st.since.Format(clock))
	}
	if st.local != "" {
		b.WriteString("; " + st.local)
	}
	return b.String()
}

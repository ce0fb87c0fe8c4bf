package vppdriver

import (
	"errors"
	"fmt"
	"reflect"
)

// CheckInvariants checks the driver's indexes and published statuses
// against its items (see the invariants at item and passLocked).
func (d *Driver) CheckInvariants() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(d.pubq) != 0 {
		bad("%d statuses not published", len(d.pubq))
	}
	desired := 0
	for k, it := range d.items {
		if it.key != k {
			bad("%s: item of key %s", k, it.key)
		}
		if it.want != nil && it.bad != nil {
			bad("%s: both a desired value and an invalid one", k)
		}
		if !it.desired() && it.have == nil {
			bad("%s: neither desired nor held: not forgotten", k)
		}
		if it.desired() {
			desired++
		}
		// The state goes with the facts.
		notDesired := it.state == stateUnclaimed || it.state == stateRemoving
		if notDesired == it.desired() {
			bad("%s: %v, desired %v", k, it.state, it.desired())
		}
		if it.state == stateUnclaimed && d.fullState {
			bad("%s: unclaimed after a resync commit", k)
		}
		if (it.state == stateInvalid) != (it.bad != nil) {
			bad("%s: %v, invalid value %v", k, it.state, it.bad)
		}
		inSync := it.want != nil && it.have != nil && it.have.equal(it.want)
		if it.state == stateConfigured && !inSync {
			bad("%s: configured, but VPP holds %v", k, it.have)
		}
		if inSync && it.state != stateConfigured && it.failed == nil {
			bad("%s: %v, but VPP holds the desired value and nothing failed", k, it.state)
		}
		if (it.state == stateParked) != (it.waitingOn != nil) {
			bad("%s: %v, waiting on %v", k, it.state, it.waitingOn)
		}
		if it.state == stateRetrying && it.retryIdx < 0 && !d.queued(it) {
			bad("%s: retrying, but no retry is scheduled", k)
		}
		if it.state == stateFailed && (it.failed == nil || it.retryIdx >= 0) {
			bad("%s: failed (%v), retry index %d", k, it.failed, it.retryIdx)
		}
		if it.retryIdx >= 0 && it.failed == nil {
			bad("%s: a retry without a failure", k)
		}
		if !it.failingSince.IsZero() && (it.want == nil || it.state == stateConfigured) {
			bad("%s: %v, failing since %v", k, it.state, it.failingSince)
		}
		if isHalf(it.have) && (it.kind != kindInterface || !it.created()) {
			bad("%s: half-made, sw_if_index %d", k, it.index)
		}
		if it.have != nil {
			for _, dep := range it.have.deps() {
				if _, ok := d.users[dep][it]; !ok {
					bad("%s: missing in users[%s]", k, dep)
				}
			}
		}
		for _, dep := range it.waitingOn {
			if _, ok := d.waiters[dep][it]; !ok {
				bad("%s: missing in waiters[%s]", k, dep)
			}
		}
		if it.retryIdx >= 0 && (it.retryIdx >= len(d.retries) || d.retries[it.retryIdx] != it) {
			bad("%s: retry index %d is wrong", k, it.retryIdx)
		}
		d.stMu.Lock()
		s, ok := d.statuses[k]
		d.stMu.Unlock()
		if ok != it.desired() {
			bad("%s: published status %v, desired %v", k, ok, it.desired())
		} else if ok && !reflect.DeepEqual(s, statusOf(it)) {
			bad("%s: published status %v, want %v", k, s, statusOf(it))
		}
	}
	for dep, us := range d.users {
		for it := range us {
			if d.items[it.key] != it || it.have == nil || !contains(it.have.deps(), dep) {
				bad("users[%s] holds %s, which does not depend on it", dep, it.key)
			}
		}
	}
	for dep, ws := range d.waiters {
		for it := range ws {
			if d.items[it.key] != it || !contains(it.waitingOn, dep) {
				bad("waiters[%s] holds %s, which does not wait for it", dep, it.key)
			}
		}
	}
	for i, it := range d.retries {
		if it.retryIdx != i || d.items[it.key] != it {
			bad("retries[%d] holds %s (index %d)", i, it.key, it.retryIdx)
		}
	}
	d.stMu.Lock()
	defer d.stMu.Unlock()
	if len(d.statuses) != desired {
		bad("%d statuses, %d desired keys", len(d.statuses), desired)
	}
	var c stateCounts
	for k, s := range d.statuses {
		c.add(s, 1)
		if _, ok := d.failing[k]; ok == s.FailingSince.IsZero() {
			bad("%s: failing since %v, in the failing set %v", k, s.FailingSince, ok)
		}
	}
	for k := range d.failing {
		if _, ok := d.statuses[k]; !ok {
			bad("%s: failing, but not desired", k)
		}
	}
	if c != d.counts {
		bad("state counts %+v, want %+v", d.counts, c)
	}
	return errors.Join(errs...)
}

// Idle reports whether the driver has nothing left to do until something
// from outside happens: it is connected and has read VPP back, no key is
// queued for a pass, no retry is scheduled and no resync is owed. Once it
// is idle it sends nothing that changes VPP until a commit, a reconnect
// or a failed health probe. It waits for a pass in progress.
func (d *Driver) Idle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cl != nil && d.readBack && len(d.dirty) == 0 && len(d.retries) == 0 && !d.needResync
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

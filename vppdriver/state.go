package vppdriver

import (
	"container/heap"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v5"
	"google.golang.org/protobuf/proto"
)

// keyState is where one key stands: what VPP holds of it against what is
// desired, and so what the driver does with it next. An item is in
// exactly one state; the facts each state goes with are checked by the
// model test (see Driver.CheckInvariants).
type keyState uint8

const (
	// stateUnclaimed: not desired and no commit has mentioned the key, but
	// VPP holds it (a readback found it before the first resync commit):
	// kept. A resync commit that leaves it out makes it stateRemoving; a
	// commit that wants it makes it desired.
	stateUnclaimed keyState = iota
	// stateRemoving: not desired (a commit deleted it, or a resync commit
	// left it out) and VPP holds it: the next pass removes it (a failed
	// removal is retried at nextRetry), then the item is forgotten.
	stateRemoving
	// stateInvalid: the committed value is invalid (bad): nothing of it
	// is applied (an object of an earlier value is removed) and it is not
	// retried. A new value or a delete ends it.
	stateInvalid
	// statePending: desired and not as desired; the next pass, or the
	// resync after a connect, looks at it.
	statePending
	// stateParked: desired, waiting for the dependencies in waitingOn to
	// be configured; the pass that configures them looks at it again.
	stateParked
	// stateConfigured: VPP holds the desired value (have equals want).
	stateConfigured
	// stateRetrying: desired; the last attempt failed retriably and is
	// tried again at nextRetry.
	stateRetrying
	// stateFailed: desired; the last attempt failed permanently: not
	// tried again until the value changes or VPP reconnects.
	stateFailed
)

var keyStateNames = [...]string{"unclaimed", "removing", "invalid", "pending", "parked", "configured", "retrying", "failed"}

func (s keyState) String() string {
	if int(s) < len(keyStateNames) {
		return keyStateNames[s]
	}
	return fmt.Sprintf("keyState(%d)", s)
}

// item is the driver's record of one key. Guarded by Driver.mu.
//
// Invariants (checked by the model test, see Driver.CheckInvariants):
//   - state is stateUnclaimed or stateRemoving iff the key is not desired
//     (want and bad nil), stateUnclaimed only until the first resync
//     commit, stateInvalid iff bad is set; want and bad are never both
//     set; the key has a status iff it is desired;
//   - stateConfigured implies have equals want; have equals want in
//     another desired state only after a failed attempt (failed set);
//   - stateParked iff waitingOn is set; stateRetrying implies a scheduled
//     retry (or the item queued, its retry due); stateFailed implies a
//     failure and no retry;
//   - the item is in Driver.items iff it is desired or VPP holds it;
//   - it is in Driver.users[k] for every dependency k of have, and in
//     Driver.waiters[k] for every k of waitingOn;
//   - retryIdx >= 0 iff a retry is scheduled (nextRetry set, in
//     Driver.retries);
//   - failingSince is set only while desired (not invalid) and not
//     configured; the key's status is in Driver.failing iff it is set.
type item struct {
	key   string
	kind  kind
	state keyState

	msg  proto.Message // the desired message as last committed; nil if none
	want value         // the desired value; nil if not desired or invalid
	bad  error         // the committed value is invalid (want is nil)
	have value         // what VPP holds as far as the driver knows; nil = absent (see halfVal)

	// index is VPP's index of the object (an interface's sw_if_index);
	// noIndex while VPP has none, and for the kinds VPP does not index.
	index uint32
	// tried: a pass of this driver (connected, after a readback) has
	// looked at the key: its record of what VPP holds (have) is the
	// driver's own from then on. A readback of what VPP does not report
	// takes that record, and before, the desired value (see recordOf).
	tried bool

	failed    error     // the last failed attempt (until one succeeds or the value changes)
	attempts  int       // failed attempts since (or since the last reconnect)
	nextRetry time.Time // zero if no retry is scheduled
	backoff   *backoff.ExponentialBackOff
	retryIdx  int // index in Driver.retries; -1 if none
	// failingSince: when the key began to keep failing (see
	// Config.FailingAfter); zero if it does not. A reconnect, which
	// retries it from scratch, does not end it; success, a new value or a
	// delete does.
	failingSince time.Time

	waitingOn []string // the missing dependencies it is parked on

	mark itemMarks
}

// itemMarks say whether an item is in a queue of the driver or a set of
// the current pass: it is iff the mark equals the driver's generation
// counter of it, so that emptying one is O(1) (the counter moves on).
type itemMarks struct {
	dirty uint64 // == Driver.dirtyGen: in Driver.dirty
	pub   uint64 // == Driver.pubGen: in Driver.pubq
	rm    uint64 // == Driver.gen: in the removal set of the pass's plan
	cand  uint64 // == Driver.gen: a create/update candidate of the plan
	put   uint64 // == Driver.gen: the plan creates or updates it
	late  uint64 // == Driver.gen: the plan removes it after the creates and updates
	del   uint64 // == Driver.gen: the plan sends its removal (early or late)
	with  uint64 // == Driver.gen: it goes with its interface, which the plan deletes (see planWith)
	gone  uint64 // == Driver.gen: the executor ran its removal
	// early >= the first generation of the current planLocked: its removal
	// must not wait for the updates of its users (an earlier plan of the
	// pass could not make them).
	early uint64
}

func (it *item) desired() bool { return it.want != nil || it.bad != nil }

// created tells whether VPP has the item's interface (index is valid).
func (it *item) created() bool { return it.index != noIndex }

// halfVal is what VPP holds of an interface whose creation (or in-place
// change) failed after VPP made it: the interface exists, its
// configuration may be anything between the old value and the new. It
// never equals a desired value and needs re-creation (needsRecreate):
// the next attempt deletes the interface and creates it again.
type halfVal struct{ value }

func (h *halfVal) equal(value) bool { return false }

// applied returns the value VPP holds (of a half-made interface: the value
// it was being made into); nil if none.
func applied(v value) value {
	if h, ok := v.(*halfVal); ok {
		return h.value
	}
	return v
}

// itemLocked returns the item of key, creating it.
func (d *Driver) itemLocked(key string) *item {
	it := d.items[key]
	if it == nil {
		it = &item{key: key, kind: kindOf(key), index: noIndex, retryIdx: -1}
		d.items[key] = it
	}
	return it
}

// forgetLocked drops an item that is neither desired nor held by VPP.
func (d *Driver) forgetLocked(it *item) {
	if it.desired() || it.have != nil {
		return
	}
	d.unscheduleLocked(it)
	d.unparkLocked(it)
	if d.items[it.key] == it {
		delete(d.items, it.key)
	}
	d.markPubLocked(it)
}

// markDirtyLocked queues the item for the next pass.
func (d *Driver) markDirtyLocked(it *item) {
	if it.mark.dirty != d.dirtyGen {
		it.mark.dirty = d.dirtyGen
		d.dirty = append(d.dirty, it)
	}
}

// queued tells whether the item is queued for the next pass.
func (d *Driver) queued(it *item) bool { return it.mark.dirty == d.dirtyGen }

// markPubLocked queues the item's status for the next publication.
func (d *Driver) markPubLocked(it *item) {
	if it.mark.pub != d.pubGen {
		it.mark.pub = d.pubGen
		d.pubq = append(d.pubq, it)
	}
}

// setWantLocked makes v (parsed from msg) the desired value.
func (d *Driver) setWantLocked(it *item, msg proto.Message, v value) {
	it.msg = msg
	if it.want != nil && (it.want == v || it.want.equal(v)) {
		return // the same value in another message
	}
	it.want, it.bad = v, nil
	d.wantChangedLocked(it, statePending)
}

// setBadLocked records that the committed value of the key is invalid:
// the key has no desired value VPP can hold (its object is removed).
func (d *Driver) setBadLocked(it *item, msg proto.Message, err error) {
	it.msg, it.want, it.bad = msg, nil, err
	d.wantChangedLocked(it, stateInvalid)
}

// clearWantLocked makes the key not desired (a commit deleted it).
func (d *Driver) clearWantLocked(it *item) {
	it.msg, it.want, it.bad = nil, nil, nil
	d.wantChangedLocked(it, stateRemoving)
	d.forgetLocked(it)
}

// wantChangedLocked puts an item whose desired value changed into state
// (the state of its new value before VPP is looked at): its failures and
// parking were about the old value.
func (d *Driver) wantChangedLocked(it *item, state keyState) {
	d.resetFailureLocked(it)
	it.failingSince = time.Time{} // it was the old value that kept failing
	d.unparkLocked(it)
	it.state = state
	d.syncLocked(it)
	d.markDirtyLocked(it)
	d.markPubLocked(it)
}

// unclaimedLocked returns the state of a key that VPP holds and no commit
// mentioned: kept (stateUnclaimed) until a resync commit has given the
// complete desired state, removed afterwards.
func (d *Driver) unclaimedLocked() keyState {
	if d.fullState {
		return stateRemoving
	}
	return stateUnclaimed
}

// setHaveLocked records what VPP holds for the item and keeps the users
// index (reverse dependencies of applied values) up to date.
func (d *Driver) setHaveLocked(it *item, v value) {
	old := it.have
	it.have = v
	if old == nil || v == nil || !slices.Equal(old.deps(), v.deps()) {
		if old != nil {
			for _, dep := range old.deps() {
				if us := d.users[dep]; us != nil {
					delete(us, it)
					if len(us) == 0 {
						delete(d.users, dep)
					}
				}
			}
		}
		if v != nil {
			for _, dep := range v.deps() {
				us := d.users[dep]
				if us == nil {
					us = map[*item]struct{}{}
					d.users[dep] = us
				}
				us[it] = struct{}{}
			}
		}
	}
	d.syncLocked(it)
	d.markPubLocked(it)
}

// syncLocked makes a desired item whose value VPP holds configured (it
// has no failure any more, and wakes the items parked on it), and a
// configured one whose value VPP no longer holds pending.
func (d *Driver) syncLocked(it *item) {
	inSync := it.want != nil && it.have != nil && (it.have == it.want || it.have.equal(it.want))
	switch {
	case inSync && it.state != stateConfigured:
		d.resetFailureLocked(it)
		it.failingSince = time.Time{}
		d.unparkLocked(it)
		it.state = stateConfigured
		for w := range d.waiters[it.key] {
			d.markDirtyLocked(w)
		}
	case !inSync && it.state == stateConfigured:
		it.state = statePending
	}
}

// parkLocked registers the item as waiting for the missing dependencies.
func (d *Driver) parkLocked(it *item, missing []string) {
	if slices.Equal(it.waitingOn, missing) {
		return
	}
	d.unparkLocked(it)
	for _, dep := range missing {
		ws := d.waiters[dep]
		if ws == nil {
			ws = map[*item]struct{}{}
			d.waiters[dep] = ws
		}
		ws[it] = struct{}{}
	}
	it.waitingOn = missing
	it.state = stateParked
	d.markPubLocked(it)
}

func (d *Driver) unparkLocked(it *item) {
	if it.waitingOn == nil {
		return
	}
	for _, dep := range it.waitingOn {
		if ws := d.waiters[dep]; ws != nil {
			delete(ws, it)
			if len(ws) == 0 {
				delete(d.waiters, dep)
			}
		}
	}
	it.waitingOn = nil
	if it.state == stateParked {
		it.state = statePending
	}
	d.markPubLocked(it)
}

// failLocked records a failed attempt; retriable failures are retried
// with exponential backoff (RetryInitial doubling up to RetryMax). A
// desired item is then stateRetrying or stateFailed; an item being
// removed stays stateRemoving (or stateInvalid), its removal retried.
func (d *Driver) failLocked(it *item, err error, now time.Time) {
	d.stats.failures.Add(1)
	it.attempts++
	it.failed = err
	retriable := IsRetriable(err)
	if retriable {
		if it.backoff == nil {
			it.backoff = &backoff.ExponentialBackOff{InitialInterval: d.cfg.RetryInitial, Multiplier: 2,
				MaxInterval: d.cfg.RetryMax} // RandomizationFactor 0: exact
			it.backoff.Reset()
		}
		it.nextRetry = now.Add(it.backoff.NextBackOff())
		d.scheduleLocked(it)
	} else {
		d.unscheduleLocked(it)
	}
	if it.want != nil {
		d.unparkLocked(it)
		it.state = stateFailed
		if retriable {
			it.state = stateRetrying
		}
		if it.failingSince.IsZero() && (!retriable || it.attempts >= d.cfg.FailingAfter) {
			it.failingSince = now
		}
	}
	if isIncompatible(err) && !slices.ContainsFunc(d.incompatible, func(e error) bool { return e.Error() == err.Error() }) {
		d.incompatible = append(d.incompatible, err)
	}
	d.markPubLocked(it)
	d.log.Debug("apply failed", slog.String("key", it.key), slog.Int("attempt", it.attempts), slog.Any("error", err))
}

// failIncompatibleLocked fails a desired item because the connected VPP
// lacks core messages (err): permanently, not counted as an attempt.
func (d *Driver) failIncompatibleLocked(it *item, err error) {
	d.unscheduleLocked(it)
	d.unparkLocked(it)
	it.failed, it.state = err, stateFailed
	if it.failingSince.IsZero() {
		it.failingSince = time.Now()
	}
	d.markPubLocked(it)
}

// resetFailureLocked forgets the item's failures: it is tried again from
// scratch.
func (d *Driver) resetFailureLocked(it *item) {
	if it.state == stateRetrying || it.state == stateFailed {
		it.state = statePending
	}
	if it.failed == nil && it.attempts == 0 && it.retryIdx < 0 && it.nextRetry.IsZero() {
		return
	}
	it.failed, it.attempts, it.backoff = nil, 0, nil
	d.unscheduleLocked(it)
	d.markPubLocked(it)
}

// retryHeap orders the items with a scheduled retry by time.
type retryHeap []*item

func (h retryHeap) Len() int           { return len(h) }
func (h retryHeap) Less(i, j int) bool { return h[i].nextRetry.Before(h[j].nextRetry) }
func (h retryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].retryIdx, h[j].retryIdx = i, j
}
func (h *retryHeap) Push(x any) {
	it := x.(*item)
	it.retryIdx = len(*h)
	*h = append(*h, it)
}
func (h *retryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.retryIdx = -1
	return it
}

func (d *Driver) scheduleLocked(it *item) {
	if it.retryIdx >= 0 {
		heap.Fix(&d.retries, it.retryIdx)
		return
	}
	heap.Push(&d.retries, it)
}

func (d *Driver) unscheduleLocked(it *item) {
	if it.retryIdx >= 0 {
		heap.Remove(&d.retries, it.retryIdx)
	}
	it.nextRetry = time.Time{}
}

// nextRetryLocked returns the time of the earliest scheduled retry (zero
// if none).
func (d *Driver) nextRetryLocked() time.Time {
	if len(d.retries) == 0 {
		return time.Time{}
	}
	return d.retries[0].nextRetry
}

// statusOf returns the status of a desired item. A key whose last attempt
// failed is reported failed (with the error) until an attempt succeeds or
// its value changes, even while it waits for a dependency.
func statusOf(it *item) KeyStatus {
	s := KeyStatus{Key: it.key, Attempts: it.attempts, NextRetry: it.nextRetry, FailingSince: it.failingSince}
	switch {
	case it.state == stateInvalid:
		s.State, s.Err = StateFailed, it.bad
	case it.failed != nil:
		s.State, s.Err = StateFailed, it.failed
	case it.state == stateConfigured:
		s.State = StateConfigured
	default:
		s.State, s.PendingOn = StatePending, slices.Clone(it.waitingOn)
	}
	return s
}

// publishLocked publishes the statuses of the queued items (the ones whose
// status may have changed since the last publication) and whether VPP's
// state has been read back on the current connection.
func (d *Driver) publishLocked() {
	d.stMu.Lock()
	var events []failingEvent
	for _, it := range d.pubq {
		cur := d.items[it.key]
		if cur != nil && cur != it {
			continue // a newer item of the key; queued itself
		}
		old, had := d.statuses[it.key]
		if had {
			d.counts.add(old, -1)
		}
		var s KeyStatus
		desired := cur != nil && cur.desired()
		if desired {
			s = statusOf(cur)
			d.statuses[it.key] = s
			d.counts.add(s, +1)
		} else {
			delete(d.statuses, it.key)
		}
		if e, ok := d.failingChangeLocked(it.key, old, s, desired); ok {
			events = append(events, e)
		}
	}
	clear(d.pubq)
	d.pubq = d.pubq[:0]
	d.pubGen++
	d.online = d.cl != nil && d.readBack
	d.stMu.Unlock()
	for _, e := range events {
		e.log(d.log)
	}
}

// stateCounts counts the published statuses by state, and the failing
// keys by kind. Guarded by stMu.
type stateCounts struct {
	pending, configured, failed, invalid int
	failing                              [numKinds]int
}

func (c *stateCounts) add(s KeyStatus, n int) {
	switch s.State {
	case StatePending:
		c.pending += n
	case StateConfigured:
		c.configured += n
	case StateFailed:
		c.failed += n
		if isInvalid(s.Err) {
			c.invalid += n
		}
	}
	if !s.FailingSince.IsZero() {
		c.failing[kindOf(s.Key)] += n
	}
}

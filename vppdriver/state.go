package vppdriver

import (
	"container/heap"
	"log/slog"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v5"
	"google.golang.org/protobuf/proto"
)

// item is the driver's record of one key. Guarded by Driver.mu.
//
// Invariants (checked by the model test):
//   - inSync == (!half && have != nil && want != nil && have equals want);
//   - want and bad are never both set; the key has a status iff one is;
//   - the item is in Driver.items iff it is desired or VPP holds it;
//   - it is in Driver.users[k] for every dependency k of have, and in
//     Driver.waiters[k] for every k of waitingOn;
//   - retryIdx >= 0 iff a retry is scheduled (nextRetry set, in
//     Driver.retries).
type item struct {
	key  string
	kind kind

	msg  proto.Message // the desired message as last committed; nil if none
	want value         // the desired value; nil if not desired or invalid
	bad  error         // the committed value is invalid (want is nil)
	have value         // what VPP holds as far as the driver knows; nil = absent

	created   bool // the VPP object exists (interfaces: swIfIndex is valid)
	half      bool // half-configured interface: delete and create again
	inSync    bool // have equals want
	swIfIndex uint32

	failed    error
	attempts  int
	nextRetry time.Time
	backoff   *backoff.ExponentialBackOff // while failing retriably
	retryIdx  int                         // index in Driver.retries; -1 if none

	waitingOn []string // the missing dependencies it is parked on
	dropped   bool     // a commit deleted the key (not only: no commit mentioned it)

	queued    bool   // in Driver.dirty
	pubQueued bool   // in Driver.pubq
	rmGen     uint64 // == Driver.gen: in the removal set of the pass
	candGen   uint64 // == Driver.gen: a create/update candidate of the pass
}

func (it *item) desired() bool { return it.want != nil || it.bad != nil }

// itemLocked returns the item of key, creating it.
func (d *Driver) itemLocked(key string) *item {
	it := d.items[key]
	if it == nil {
		it = &item{key: key, kind: kindOf(key), retryIdx: -1}
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
	if !it.queued {
		it.queued = true
		d.dirty = append(d.dirty, it)
	}
}

// markPubLocked queues the item's status for the next publication.
func (d *Driver) markPubLocked(it *item) {
	if !it.pubQueued {
		it.pubQueued = true
		d.pubq = append(d.pubq, it)
	}
}

// setWantLocked makes v (parsed from msg) the desired value.
func (d *Driver) setWantLocked(it *item, msg proto.Message, v value) {
	it.msg, it.dropped = msg, false
	if it.want != nil && (it.want == v || it.want.equal(v)) {
		return // the same value in another message
	}
	it.want, it.bad = v, nil
	d.wantChangedLocked(it)
}

// setBadLocked records that the committed value of the key is invalid:
// the key has no desired value VPP can hold (its object is removed).
func (d *Driver) setBadLocked(it *item, msg proto.Message, err error) {
	it.msg, it.want, it.bad, it.dropped = msg, nil, err, false
	d.wantChangedLocked(it)
}

// clearWantLocked makes the key not desired (a commit deleted it).
func (d *Driver) clearWantLocked(it *item) {
	it.msg, it.want, it.bad, it.dropped = nil, nil, nil, true
	d.wantChangedLocked(it)
	d.forgetLocked(it)
}

func (d *Driver) wantChangedLocked(it *item) {
	d.resetFailureLocked(it)
	d.unparkLocked(it)
	d.syncLocked(it)
	d.markDirtyLocked(it)
	d.markPubLocked(it)
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

// syncLocked recomputes inSync. An item that becomes in sync has no
// failure any more, and wakes the items parked on it.
func (d *Driver) syncLocked(it *item) {
	was := it.inSync
	it.inSync = !it.half && it.have != nil && it.want != nil && (it.have == it.want || it.have.equal(it.want))
	if it.inSync && !was {
		d.resetFailureLocked(it)
		d.unparkLocked(it)
		for w := range d.waiters[it.key] {
			d.markDirtyLocked(w)
		}
	}
}

// readyLocked tells whether dependency key is configured as desired.
func (d *Driver) readyLocked(key string) bool {
	it := d.items[key]
	return it != nil && it.inSync
}

// missingDepsLocked returns the dependencies of the desired value that are
// not configured (nil if none).
func (d *Driver) missingDepsLocked(it *item) []string {
	var out []string
	for _, dep := range it.want.deps() {
		if !d.readyLocked(dep) {
			out = append(out, dep)
		}
	}
	return out
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
	d.markPubLocked(it)
}

// failLocked records a failed attempt; retriable failures are retried
// with exponential backoff (RetryInitial doubling up to RetryMax).
func (d *Driver) failLocked(it *item, err error, now time.Time) {
	d.stats.failures.Add(1)
	it.attempts++
	it.failed = err
	if IsRetriable(err) {
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
	if isIncompatible(err) && !slices.ContainsFunc(d.incompatible, func(e error) bool { return e.Error() == err.Error() }) {
		d.incompatible = append(d.incompatible, err)
	}
	d.markPubLocked(it)
	d.log.Debug("apply failed", slog.String("key", it.key), slog.Int("attempt", it.attempts), slog.Any("error", err))
}

func (d *Driver) resetFailureLocked(it *item) {
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

// statusOf returns the status of a desired item.
func statusOf(it *item) KeyStatus {
	s := KeyStatus{Key: it.key, Attempts: it.attempts, NextRetry: it.nextRetry}
	switch {
	case it.bad != nil:
		s.State, s.Err = StateFailed, it.bad
	case it.failed != nil:
		s.State, s.Err = StateFailed, it.failed
	case it.inSync:
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
	defer d.stMu.Unlock()
	for _, it := range d.pubq {
		it.pubQueued = false
		cur := d.items[it.key]
		if cur != nil && cur != it {
			continue // a newer item of the key; queued itself
		}
		old, had := d.statuses[it.key]
		if had {
			d.counts.add(old, -1)
		}
		if cur == nil || !cur.desired() {
			delete(d.statuses, it.key)
			continue
		}
		s := statusOf(cur)
		d.statuses[it.key] = s
		d.counts.add(s, +1)
	}
	clear(d.pubq)
	d.pubq = d.pubq[:0]
	d.online = d.cl != nil && d.readBack
}

// stateCounts counts the published statuses by state. Guarded by stMu.
type stateCounts struct {
	pending, configured, failed, invalid int
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
}

package vppdriver

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"time"

	"go.fd.io/govpp/api"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
)

// runOps runs the stages of ops: stage n of every op still without error,
// pipelined together, then stage n+1. It returns only transport errors.
func (d *Driver) runOps(ctx context.Context, ops []*op) error {
	if err := d.lookupOps(ctx, ops); err != nil {
		d.connBroken(err)
		return err
	}
	var calls []call
	for stage := 0; ; stage++ {
		calls = calls[:0]
		active := false
		for _, o := range ops {
			if o.err != nil || stage >= len(o.stages) {
				continue
			}
			active = true
			calls = append(calls, o.stages[stage]()...)
		}
		if !active {
			return nil
		}
		if len(calls) == 0 {
			continue
		}
		for i := range calls {
			if calls[i].done == nil {
				calls[i].done = ignoreReply
			}
		}
		if err := d.cl.pipeline(ctx, calls); err != nil {
			d.connBroken(err)
			return err
		}
	}
}

func ignoreReply(api.Message, error) {}

// lookupOps resolves the VPP names of the interfaces that ops adopt (one
// filtered sw_interface_dump per name, pipelined). It returns only
// transport errors.
func (d *Driver) lookupOps(ctx context.Context, ops []*op) error {
	var reqs []api.Message
	var which []*op
	for _, o := range ops {
		if o.lookup != "" && o.err == nil {
			reqs = append(reqs, &interfaces.SwInterfaceDump{SwIfIndex: interface_types.InterfaceIndex(noIndex),
				NameFilterValid: true, NameFilter: o.lookup})
			which = append(which, o)
		}
	}
	if len(reqs) == 0 {
		return nil
	}
	res, err := d.cl.dumps(ctx, reqs)
	if err != nil {
		return err
	}
	for i, o := range which {
		for _, m := range res[i] {
			// The filter matches substrings: take the exact name.
			if r := m.(*interfaces.SwInterfaceDetails); r.InterfaceName == o.lookup {
				o.found, o.lookupSw = true, uint32(r.SwIfIndex)
			}
		}
	}
	return nil
}

// passLocked reconciles the keys that need work: the ones changed since the
// last pass (Driver.dirty: commits, readbacks, dependencies that became
// configured) and the ones whose retry is due. It deletes, in reverse
// dependency order, what VPP holds but must not (not desired, to be
// re-created, half-made: see halfVal) together with what is applied on top of it
// (Driver.users), then creates and updates in dependency order what is
// desired and not yet as desired, parking items whose dependencies are not
// configured (Driver.waiters) until they are. Its cost is proportional to
// the keys that changed and their dependents, not to the total state.
//
// Invariants:
//   - a key is deleted only after every key applied on top of it, and
//     applied only after every key it depends on is configured (kinds are
//     processed in dependency order: a dependency always has a lower kind);
//   - a desired item ends a pass configured, parked on its missing
//     dependencies, retrying (a retry scheduled), failed (until its value
//     changes or VPP reconnects), invalid, or queued in Driver.dirty; an
//     item being removed is gone, or waits for the retry of its removal
//     (see keyState);
//   - every item whose status may have changed is queued for publication.
//
// It returns transport errors, ErrNotConnected and ErrIncompatible.
func (d *Driver) passLocked(ctx context.Context) error {
	defer d.publishLocked()
	if d.cl == nil {
		return ErrNotConnected
	}
	d.stats.passes.Add(1)
	if d.compatErr != nil {
		for _, it := range d.takeDirtyLocked() {
			if it.want != nil {
				d.failIncompatibleLocked(it, d.compatErr)
			}
		}
		return d.compatErr
	}
	now := time.Now()
	for len(d.retries) > 0 && !d.retries[0].nextRetry.After(now) {
		d.markDirtyLocked(heap.Pop(&d.retries).(*item))
	}
	d.gen++
	gen := d.gen
	var cand [numKinds][]*item
	addCand := func(it *item) {
		if it.candMark != gen && it.want != nil {
			it.candMark = gen
			cand[it.kind] = append(cand[it.kind], it)
		}
	}

	// The removal set: what VPP holds but must not, and transitively what
	// is applied on top of it.
	work := d.takeDirtyLocked()
	var rm [numKinds][]*item
	queue := make([]*item, 0, 4)
	for _, it := range work {
		d.markPubLocked(it)
		addCand(it)
		// What VPP holds and no commit mentioned is kept until a resync
		// commit gave the whole desired state (stateUnclaimed).
		unwanted := it.state == stateRemoving || it.state == stateInvalid
		if it.have != nil && (unwanted || (it.want != nil && it.state != stateConfigured && needsRecreate(it.have, it.want))) {
			it.rmMark = gen
			queue = append(queue, it)
		}
	}
	for i := 0; i < len(queue); i++ {
		it := queue[i]
		rm[it.kind] = append(rm[it.kind], it)
		for u := range d.users[it.key] {
			if u.rmMark != gen && u.have != nil {
				u.rmMark = gen
				queue = append(queue, u)
			}
		}
	}
	var ops []*op
	for kd := numKinds - 1; kd >= 0; kd-- {
		ops = ops[:0]
		for _, it := range rm[kd] {
			d.markPubLocked(it)
			if it.want == nil && !it.nextRetry.IsZero() && it.nextRetry.After(now) {
				continue // a failed delete in backoff
			}
			ops = append(ops, d.deleteOp(it))
		}
		if len(ops) == 0 {
			continue
		}
		if err := d.runOps(ctx, ops); err != nil {
			return err
		}
		for _, o := range ops {
			it := o.it
			if o.err != nil {
				d.failLocked(it, o.err, now)
				continue
			}
			it.swIfIndex = noIndex
			d.setHaveLocked(it, nil)
			if it.want != nil {
				addCand(it)
			} else {
				d.resetFailureLocked(it)
				d.forgetLocked(it)
			}
		}
	}

	// Creates and updates in dependency order. Items that a configured
	// dependency wakes (Driver.dirty) have a higher kind and join the
	// candidates of this pass, or have the same kind (an interface
	// unnumbered to another) and run in another round of that kind.
	var later []*item
	for kd := kind(0); kd < numKinds; kd++ {
		seen := 0 // cand[kd][:seen] have been looked at
		var woke []*item
		for {
			for _, it := range d.takeDirtyLocked() {
				switch {
				case it.kind < kd:
					later = append(later, it) // the next pass (not expected: dependencies have lower kinds)
				case it.kind == kd && it.candMark == gen:
					d.markPubLocked(it)
					woke = append(woke, it) // parked on a dependency of its kind that this pass configured
				default:
					d.markPubLocked(it)
					addCand(it)
				}
			}
			batch := append(woke, cand[kd][seen:]...)
			seen, woke = len(cand[kd]), nil
			ops = ops[:0]
			for _, it := range batch {
				if it.want == nil || it.state == stateConfigured || isHalf(it.have) {
					continue
				}
				if it.failed != nil && (it.nextRetry.IsZero() || it.nextRetry.After(now)) {
					continue // permanent failure, or still in backoff
				}
				if missing := d.missingDepsLocked(it); len(missing) > 0 {
					d.parkLocked(it, missing)
					continue
				}
				d.unparkLocked(it)
				if it.have != nil && needsRecreate(it.have, it.want) {
					continue // its delete failed above
				}
				ops = append(ops, d.putOp(it))
			}
			if len(ops) == 0 {
				break // nothing ran: nothing new can wake
			}
			if err := d.runOps(ctx, ops); err != nil {
				return err
			}
			for _, o := range ops {
				it := o.it
				if o.err != nil {
					if it.kind == kindInterface && it.created() {
						// Half-made: deleted and created again on retry.
						d.setHaveLocked(it, &halfVal{cmp.Or(it.have, it.want)})
					}
					d.failLocked(it, o.err, now)
					continue
				}
				d.setHaveLocked(it, it.want) // in sync: wakes what waits for it
			}
		}
	}
	for _, it := range later {
		d.markDirtyLocked(it)
	}
	return nil
}

// takeDirtyLocked returns the queued items and empties the queue.
func (d *Driver) takeDirtyLocked() []*item {
	out := d.dirty
	d.dirty = nil
	d.dirtyGen++
	return out
}

func (d *Driver) deleteOp(it *item) *op {
	switch v := applied(it.have).(type) {
	case *ifaceVal:
		return d.ifaceDelete(it, v)
	case *vrfVal:
		return d.vrfDelete(it, v)
	case *routeVal:
		return d.routeDelete(it, v)
	case *neighborVal:
		return d.neighborDelete(it, v)
	}
	return d.natDelete(it)
}

func (d *Driver) putOp(it *item) *op {
	switch v := it.want.(type) {
	case *ifaceVal:
		if old, ok := it.have.(*ifaceVal); ok && it.created() {
			return d.ifaceUpdate(it, old, v)
		}
		return d.ifaceCreate(it, v)
	case *vrfVal:
		return d.vrfPut(it, v)
	case *routeVal:
		return d.routePut(it, v)
	case *neighborVal:
		return d.neighborPut(it, v)
	}
	return d.natPut(it)
}

// isHalf tells whether v is a half-made interface (see halfVal).
func isHalf(v value) bool {
	_, ok := v.(*halfVal)
	return ok
}

func isIncompatible(err error) bool { return errors.Is(err, ErrIncompatible) }

func isInvalid(err error) bool { return errors.Is(err, ErrInvalidValue) }

package vppdriver

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
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
// configured) and the ones whose retry is due. The planner decides what
// to remove, create, update and park, in order (planLocked); the executor
// sends it (executeLocked). Its cost is proportional to the keys that
// changed and their dependents, not to the total state.
//
// Invariants:
//   - a key is deleted only after every key applied on top of it, and
//     applied only after every key it depends on is configured (kinds are
//     processed in dependency order: a dependency always has a lower kind,
//     or is an interface of an earlier wave);
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
	d.dueLocked(now)
	return d.executeLocked(ctx, d.planLocked(d.takeDirtyLocked(), now), now)
}

// dueLocked queues the items whose retry is due at now.
func (d *Driver) dueLocked(now time.Time) {
	for len(d.retries) > 0 && !d.retries[0].nextRetry.After(now) {
		d.markDirtyLocked(heap.Pop(&d.retries).(*item))
	}
}

// executeLocked sends a plan to VPP and records the outcome of every step:
// removals kind by kind from the highest, then the parks, then the waves
// of creates and updates, then the late removals kind by kind from the
// highest (those whose users still hold them fail and are retried), each
// batch pipelined. The plan holds while every
// request succeeds; after a failure, each later step of a wave is decided
// again (see decide) from what VPP then holds: a step whose dependency
// failed is parked on it, one whose removal failed is left for its retry.
// It returns transport errors (the rest of the plan is not sent).
func (d *Driver) executeLocked(ctx context.Context, p *plan, now time.Time) error {
	for _, it := range p.looked {
		d.markPubLocked(it)
		it.tried = true
	}
	x := executor{ops: d.execOps, gen: p.gen}
	defer func() { d.execOps = zero(x.ops) }()
	for kd := numKinds - 1; kd >= 0; kd-- {
		if err := d.removeLocked(ctx, &x, p.removes[kd], now); err != nil {
			return err
		}
	}
	for _, s := range p.parks {
		d.parkLocked(s.it, s.missing)
	}
	for _, w := range p.waves {
		if err := d.putLocked(ctx, &x, w.steps, now); err != nil {
			return err
		}
	}
	for kd := numKinds - 1; kd >= 0; kd-- {
		if err := d.removeLocked(ctx, &x, d.stillUsedLocked(p.late[kd], p.gen, now), now); err != nil {
			return err
		}
	}
	// What the successes woke was planned in this pass already.
	for _, it := range d.takeDirtyLocked() {
		if it.mark.cand != p.gen {
			d.markDirtyLocked(it)
		}
	}
	for _, it := range p.later {
		d.markDirtyLocked(it)
	}
	return nil
}

// stillUsedLocked returns the late removals of items that VPP no longer
// holds anything on top of (but what goes with them in the plan gen);
// the others (an update that was to stop referring to them failed) fail,
// retriably: VPP would refuse to delete them, and the retry plans them
// again.
func (d *Driver) stillUsedLocked(items []*item, gen uint64, now time.Time) []*item {
	out := items[:0]
	for _, it := range items {
		if u := d.userLocked(it.key, gen); u != nil {
			d.failLocked(it, fmt.Errorf("still used by %s", u.key), now)
			continue
		}
		out = append(out, it)
	}
	clear(items[len(out):])
	return out
}

// userLocked returns an item whose applied value depends on key and does
// not go with it in the plan gen (the first in key order, so that errors
// are stable), or nil.
func (d *Driver) userLocked(key string, gen uint64) *item {
	var first *item
	for u := range d.users[key] {
		if u.mark.with == gen {
			continue // settled with key's removal
		}
		if first == nil || u.key < first.key {
			first = u
		}
	}
	return first
}

// executor is the state of the execution of a plan.
type executor struct {
	ops    []*op   // the batch in flight (an array kept from pass to pass)
	gen    uint64  // the plan's generation
	failed bool    // a request failed: the plan's predictions no longer hold
	with   []*item // removals that go with their interface, until it is removed
}

// removeLocked removes items (of one kind) from VPP, pipelined, and
// records the outcome: removed (forgotten if not desired), or failed. It
// returns transport errors.
func (d *Driver) removeLocked(ctx context.Context, x *executor, items []*item, now time.Time) error {
	x.ops = zero(x.ops)
	d.cnatBatch++
	for _, it := range items {
		if it.mark.with == x.gen {
			x.with = append(x.with, it)
			continue
		}
		x.ops = append(x.ops, d.deleteOp(it))
	}
	if len(x.ops) == 0 {
		return nil
	}
	if err := d.runOps(ctx, x.ops); err != nil {
		return err
	}
	for _, o := range x.ops {
		it := o.it
		it.mark.gone = x.gen
		if o.err != nil {
			x.failed = true
			d.failLocked(it, o.err, now)
			continue
		}
		d.removedLocked(it)
	}
	d.settleWithLocked(x, now)
	return nil
}

// removedLocked records that VPP no longer holds the item.
func (d *Driver) removedLocked(it *item) {
	it.index = noIndex
	d.setHaveLocked(it, nil)
	if it.want == nil {
		d.resetFailureLocked(it)
		d.forgetLocked(it)
	}
}

// settleWithLocked records the outcome of the removals that go with their
// interface (x.with) whose interface's removal ran: removed with it, or
// failed with it (VPP still holds the interface, and them).
func (d *Driver) settleWithLocked(x *executor, now time.Time) {
	kept := x.with[:0]
	for _, it := range x.with {
		dep := d.items[applied(it.have).(goesWither).goesWith()]
		switch {
		case dep == nil || dep.have == nil:
			d.removedLocked(it)
		case dep.mark.gone == x.gen:
			d.failLocked(it, fmt.Errorf("goes with %s, whose removal failed: %w", dep.key, cmp.Or(dep.failed, errors.New("unknown error"))), now)
		default:
			kept = append(kept, it)
		}
	}
	clear(x.with[len(kept):])
	x.with = kept
}

// putLocked sends the creates and updates of a wave, pipelined (after a
// failure in the pass, each decided again from what VPP now holds), and
// records the outcome: in sync (which wakes what waits for it), failed (an
// interface VPP made in part is half-made), or parked on a dependency
// that failed in this pass. It returns transport errors.
func (d *Driver) putLocked(ctx context.Context, x *executor, steps []step, now time.Time) error {
	x.ops = zero(x.ops)
	for _, s := range steps {
		act, missing := s.act, []string(nil)
		if x.failed {
			act, missing = decide(s.it, now, false, readiness{d: d})
		}
		switch act {
		case actCreate, actUpdate:
			d.unparkLocked(s.it)
			x.ops = append(x.ops, d.putOp(s.it))
		case actPark:
			d.parkLocked(s.it, missing)
		}
	}
	if len(x.ops) == 0 {
		return nil
	}
	if err := d.runOps(ctx, x.ops); err != nil {
		return err
	}
	for _, o := range x.ops {
		it := o.it
		if o.err != nil {
			x.failed = true
			if it.kind == kindInterface && it.created() {
				d.setHaveLocked(it, &halfVal{cmp.Or(it.have, it.want)})
			}
			d.failLocked(it, o.err, now)
			continue
		}
		d.setHaveLocked(it, it.want)
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
	case *aclVal:
		return d.aclDelete(it)
	case *aclIfaceVal:
		return d.aclIfaceDelete(it, v)
	case *cnatTrVal:
		return d.cnatTrDelete(it, v)
	case *cnatSnatVal:
		return d.cnatSnatDelete(it, v)
	case *cnatIfaceVal:
		return d.cnatIfaceDelete(it, v)
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
	case *aclVal:
		return d.aclPut(it, v)
	case *aclIfaceVal:
		return d.aclIfacePut(it, v)
	case *cnatTrVal:
		return d.cnatTrPut(it, v)
	case *cnatSnatVal:
		return d.cnatSnatPut(it, v)
	case *cnatIfaceVal:
		return d.cnatIfacePut(it, v)
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

package vppdriver

import (
	"context"
	"errors"
	"time"

	"go.fd.io/govpp/api"

	"github.com/vswitchkit/vswitchkit/vppdriver/model"
)

// runOps runs the stages of ops: stage n of every op still without error,
// pipelined together, then stage n+1. It returns only transport errors.
func (d *Driver) runOps(ctx context.Context, ops []*op) error {
	calls := make([]call, 0, len(ops))
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
		for i := range calls {
			if calls[i].done == nil {
				calls[i].done = func(api.Message, error) {}
			}
		}
		if err := d.cl.pipeline(ctx, calls); err != nil {
			d.signal(d.broken)
			return err
		}
	}
}

// passLocked reconciles the desired state against what the driver knows
// VPP holds: deletes in reverse dependency order, then creates and updates
// in dependency order, parking items whose dependencies are not
// configured. It returns transport errors and ErrIncompatible.
func (d *Driver) passLocked(ctx context.Context) error {
	defer d.publishLocked()
	if d.cl == nil {
		return ErrNotConnected
	}
	if d.compatErr != nil {
		for _, it := range d.items {
			if it.desired != nil && !it.inSync {
				it.failed, it.nextRetry = d.compatErr, time.Time{}
			}
		}
		return d.compatErr
	}
	now := time.Now()

	// Removal set: owned objects not desired, needing re-creation, or left
	// half-done; plus (transitively) whatever is applied on top of them.
	var byKind [numKinds][]*item
	remove := map[string]bool{}
	hasDependents := false // only tables, the NAT plugin and interfaces have dependents
	for k, it := range d.items {
		kd := kindOf(k)
		byKind[kd] = append(byKind[kd], it)
		if it.applied != nil && (it.desired == nil || it.dirty || (!it.inSync && needsRecreate(it.applied, it.desired))) {
			remove[k] = true
			hasDependents = hasDependents || kd == kindVrf || kd == kindNatGlobal || kd == kindInterface
		}
	}
	for changed := hasDependents; changed; {
		changed = false
		for k, it := range d.items {
			if it.applied == nil || remove[k] {
				continue
			}
			for _, dep := range dependencies(it.applied) {
				if remove[dep] {
					remove[k] = true
					changed = true
					break
				}
			}
		}
	}
	for kd := numKinds - 1; kd >= 0 && len(remove) > 0; kd-- {
		var ops []*op
		for _, it := range byKind[kd] {
			if !remove[it.key] {
				continue
			}
			if !it.nextRetry.IsZero() && it.nextRetry.After(now) && it.desired == nil {
				continue // a failed delete in backoff
			}
			ops = append(ops, d.deleteOp(it))
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
			it.setApplied(nil)
			it.created, it.dirty, it.swIfIndex = false, false, 0
			if it.desired == nil {
				delete(d.items, it.key)
			}
		}
	}

	// Creates and updates in dependency order.
	for kd := kind(0); kd < numKinds; kd++ {
		var ops []*op
		for _, it := range byKind[kd] {
			if it.desired == nil || it.dirty {
				continue
			}
			if it.inSync {
				continue
			}
			if it.failed != nil && (it.nextRetry.IsZero() || it.nextRetry.After(now)) {
				continue // permanent failure, or still in backoff
			}
			if len(d.missingDepsLocked(it)) > 0 {
				continue // parked until the dependency is configured
			}
			if it.applied != nil && needsRecreate(it.applied, it.desired) {
				continue // delete failed above
			}
			ops = append(ops, d.putOp(it))
		}
		if err := d.runOps(ctx, ops); err != nil {
			return err
		}
		for _, o := range ops {
			it := o.it
			if o.err != nil {
				if kindOf(it.key) == kindInterface && it.created {
					// Half-configured: delete and create again on retry.
					it.dirty = true
					if it.applied == nil {
						it.applied = it.desired
					}
					it.inSync = false
				}
				d.failLocked(it, o.err, now)
				continue
			}
			it.setApplied(it.desired)
			it.failed, it.attempts, it.nextRetry = nil, 0, time.Time{}
		}
	}
	return nil
}

func (d *Driver) failLocked(it *item, err error, now time.Time) {
	it.attempts++
	it.failed = err
	it.nextRetry = time.Time{}
	if IsRetriable(err) {
		it.nextRetry = now.Add(d.backoff(it.attempts))
	}
	d.cfg.Logger.Debug("vppdriver: apply failed", "key", it.key, "attempt", it.attempts, "err", err)
}

func (d *Driver) deleteOp(it *item) *op {
	if isNatModel(it.applied) {
		return d.natDelete(it)
	}
	switch v := it.applied.(type) {
	case *model.Interface:
		return d.ifaceDelete(it, v)
	case *model.VrfTable:
		return d.vrfDelete(it, v)
	case *model.Route:
		return d.routeDelete(it, v)
	}
	return &op{it: it, err: errors.New("unknown applied value")}
}

func (d *Driver) putOp(it *item) *op {
	if isNatModel(it.desired) {
		return d.natPut(it)
	}
	switch v := it.desired.(type) {
	case *model.Interface:
		if old, ok := it.applied.(*model.Interface); ok && it.created {
			return d.ifaceUpdate(it, old, v)
		}
		return d.ifaceCreate(it, v)
	case *model.VrfTable:
		return d.vrfPut(it, v)
	case *model.Route:
		return d.routePut(it, v)
	}
	return &op{it: it, err: errors.New("unknown desired value")}
}

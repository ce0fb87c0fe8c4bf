package vppdriver

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// action is what a pass does to one key.
type action uint8

const (
	actNone   action = iota // nothing: in sync, waiting for its retry, failed for good, or its removal failed
	actCreate               // create it (VPP holds nothing of it, or will not after its removal)
	actUpdate               // change what VPP holds in place
	actPark                 // wait for the dependencies that are missing
)

func (a action) String() string {
	return [...]string{"none", "create", "update", "park"}[a]
}

// step is one key's action in a plan.
type step struct {
	it      *item
	act     action
	missing []string // actPark: the dependencies it waits for
}

// wave is a batch of creates and updates of one kind that a pass sends
// together: every dependency of a wave is configured before it, or in an
// earlier wave.
type wave struct {
	kind  kind
	steps []step
}

// plan is what a pass does, in order: the removals, one batch per kind
// from the highest kind down (what is applied on top of an object goes
// before it), then the waves of creates and updates in dependency order
// (by kind; within a kind, an interface after the interface it borrows
// its addresses from), then the late removals, one batch per kind from
// the highest down: objects that go once the updates of the objects that
// referred to them have stopped referring to them (see planRemovals). The
// planner predicts that every request succeeds; the executor decides each
// step again when its wave comes (see decide), from what VPP then holds,
// and parks what a failure left without its dependencies.
type plan struct {
	gen     uint64
	removes [numKinds][]*item
	waves   []wave
	late    [numKinds][]*item // removed after the waves
	parks   []step            // parked for the whole pass: their missing dependencies are not planned
	later   []*item           // woken items of a lower kind: the next pass (not expected)
	looked  []*item           // every item the plan looked at: their statuses may change
	// waits are the removals that wait for updates of their users: the
	// user stops referring to the removed object by an in-place update
	// (say a pod's ACL list switched from an old ACL to a new one: the old
	// ACL goes after the switch, not the list before it).
	waits []waitEdge

	// Scratch, kept with the plan's slices from pass to pass (passes are
	// serialized): a one-key pass allocates nothing for its plan.
	cand        [numKinds][]*item // create/update candidates by kind
	queue       []*item           // the removal set, breadth first
	round, next []*item           // the candidates of a round of one kind, and of the next
	stack       []*item           // planLate's walk
}

// waitEdge says that the removal of gone waits for the in-place update of
// user, which VPP holds applied on top of it and whose desired value no
// longer refers to it.
type waitEdge struct{ gone, user *item }

// reset empties p for the pass gen, keeping its slices' arrays. A slice is
// always cleared before it is cut (zero), so that the arrays keep no item
// alive, at the cost of what was used.
func (p *plan) reset(gen uint64) {
	p.gen = gen
	for kd := range p.removes {
		p.removes[kd] = zero(p.removes[kd])
		p.late[kd] = zero(p.late[kd])
		p.cand[kd] = zero(p.cand[kd])
	}
	for i := range p.waves {
		p.waves[i].steps = zero(p.waves[i].steps)
	}
	p.waves = p.waves[:0]
	p.parks = zero(p.parks)
	p.later = zero(p.later)
	p.looked = zero(p.looked)
	p.queue = zero(p.queue)
	p.round = zero(p.round)
	p.next = zero(p.next)
	p.waits = zero(p.waits)
	p.stack = zero(p.stack)
}

// zero clears s and returns it empty, with its array.
func zero[T any](s []T) []T {
	clear(s)
	return s[:0]
}

// addWave appends an empty wave of kind kd (reusing an array of steps).
func (p *plan) addWave(kd kind) *wave {
	if len(p.waves) < cap(p.waves) {
		p.waves = p.waves[:len(p.waves)+1]
	} else {
		p.waves = append(p.waves, wave{})
	}
	w := &p.waves[len(p.waves)-1]
	w.kind, w.steps = kd, zero(w.steps)
	return w
}

// addCand makes it a create/update candidate of the plan (if it is
// desired and not one yet); it reports whether it became one.
func (p *plan) addCand(it *item) bool {
	if it.mark.cand == p.gen || it.want == nil {
		return false
	}
	it.mark.cand = p.gen
	p.cand[it.kind] = append(p.cand[it.kind], it)
	p.looked = append(p.looked, it)
	return true
}

// readiness tells whether a dependency is ready: for the planner (plan
// set), configured and not removed by the plan, or put by the plan in an
// earlier wave; for the executor, configured.
type readiness struct {
	d    *Driver
	plan *plan
}

func (r readiness) ok(key string) bool {
	dep := r.d.items[key]
	if dep == nil {
		return false
	}
	if p := r.plan; p != nil {
		return dep.mark.put == p.gen || (dep.state == stateConfigured && dep.mark.rm != p.gen)
	}
	return dep.state == stateConfigured
}

// String renders the plan, one step a line, the keys of one batch
// sorted; batches are separated by "--".
func (p *plan) String() string {
	var b strings.Builder
	batch := func(lines []string) {
		if len(lines) == 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteString("--\n")
		}
		slices.Sort(lines)
		b.WriteString(strings.Join(lines, "\n") + "\n")
	}
	for kd := numKinds - 1; kd >= 0; kd-- {
		var lines []string
		for _, it := range p.removes[kd] {
			lines = append(lines, "remove "+it.key+withNote(it, p.gen))
		}
		batch(lines)
	}
	for _, w := range p.waves {
		var lines []string
		for _, s := range w.steps {
			lines = append(lines, s.act.String()+" "+s.it.key)
		}
		batch(lines)
	}
	for kd := numKinds - 1; kd >= 0; kd-- {
		var lines []string
		for _, it := range p.late[kd] {
			lines = append(lines, "remove "+it.key+" (late)"+withNote(it, p.gen))
		}
		batch(lines)
	}
	var lines []string
	for _, s := range p.parks {
		lines = append(lines, fmt.Sprintf("park %s on %s", s.it.key, strings.Join(s.missing, " ")))
	}
	batch(lines)
	return b.String()
}

// withNote notes a removal that goes with its interface.
func withNote(it *item, gen uint64) string {
	if it.mark.with != gen {
		return ""
	}
	return " (with " + applied(it.have).(goesWither).goesWith() + ")"
}

// planLocked decides what a pass does about the work items (the keys
// that changed, that a dependency woke, whose retry is due) and their
// dependents: it removes what VPP holds but must not (not desired; to be
// re-created because a creation-time field changed; half-made), together
// with everything applied on top of it (Driver.users); it creates or
// updates what is desired and not as desired, once its dependencies are
// configured or planned before it, and the items parked on what it plans
// to configure (Driver.waiters) with them; it parks what waits for a
// dependency that the pass does not configure.
//
// A removal waits for the updates that stop referring to it: an object
// that goes (not desired) while VPP holds objects applied on top of it
// whose desired values no longer refer to it and are changed in place
// does not take them along (removed first, created again without it):
// they are updated first and it is removed after them, late in the pass.
// VPP refuses to delete an ACL that an interface's list still names, so a
// list switched from an old ACL to a new one is one request after the new
// ACL's creation and before the old one's deletion, and the interface is
// never without ACLs. It holds only when the plan makes every such
// update in the pass (a user that waits for a dependency, or for its
// retry, is not updated) and when nothing the removed object depends on
// must go before the updates (a dependency that is re-created): then the
// users are removed first, as for any other removal, and the plan is
// made again without that wait. The objects the late removal depends on
// that go too are removed late with it.
//
// It is pure: it sends nothing and changes no item, index or queue; its
// only writes are its scratch marks (item.mark.rm, .cand, .put, .late,
// .early of the pass generation it takes). Its cost is proportional to
// the work items and their dependents, not to the total state (and at
// most once more per removal whose wait fails, which is rare).
func (d *Driver) planLocked(work []*item, now time.Time) *plan {
	first := d.gen + 1
	p := &d.plan
	for {
		d.gen++
		p.reset(d.gen)
		d.planRemovals(p, work, now, first)
		for kd := kind(0); kd < numKinds; kd++ {
			d.planPuts(p, kd, now)
		}
		if d.planLate(p, first) {
			d.planWith(p)
			return p
		}
	}
}

// planRemovals plans the removal of what VPP holds of the work items but
// must not, and transitively of what is applied on top of it, except for
// what stops referring to it by an in-place update (a waitEdge; see
// planLocked); the desired ones, and the other work items, become
// create/update candidates.
func (d *Driver) planRemovals(p *plan, work []*item, now time.Time, first uint64) {
	for _, it := range work {
		if !p.addCand(it) {
			p.looked = append(p.looked, it)
		}
		if it.have != nil && needsRemoval(it) {
			it.mark.rm = p.gen
			p.queue = append(p.queue, it)
		}
	}
	for i := 0; i < len(p.queue); i++ {
		it := p.queue[i]
		p.looked = append(p.looked, it)
		// A failed removal in backoff waits (what is applied on top of it
		// goes all the same); a desired item is created again after its
		// removal.
		if it.want != nil || it.nextRetry.IsZero() || !it.nextRetry.After(now) {
			p.removes[it.kind] = append(p.removes[it.kind], it)
			it.mark.del = p.gen
			p.addCand(it)
		}
		for u := range d.users[it.key] {
			if u.mark.rm == p.gen || u.have == nil {
				continue
			}
			if it.want == nil && it.mark.early < first && updatesAway(u, it.key) {
				p.waits = append(p.waits, waitEdge{gone: it, user: u})
				p.addCand(u)
				continue
			}
			u.mark.rm = p.gen
			p.queue = append(p.queue, u)
		}
	}
}

// updatesAway tells whether the user u of the object key (VPP holds u
// applied on top of it) stops referring to it by an in-place update: u
// is desired, its desired value does not depend on key, and what VPP
// holds of u can be changed into it in place.
func updatesAway(u *item, key string) bool {
	return u.want != nil && u.state != stateConfigured && !isHalf(u.have) &&
		!slices.Contains(u.want.deps(), key) && !needsRecreate(u.have, u.want)
}

// planWith marks the removals of values that VPP drops with their
// interface (goesWither) whose interface the plan deletes (an adopted
// interface is released, not deleted): they send nothing, and the
// executor records them removed once the interface is (see
// Driver.settleWithLocked). VPP drops an interface's ACL lists when it
// deletes the interface; clearing them first would be a request for
// nothing.
func (d *Driver) planWith(p *plan) {
	for _, batch := range [][]*item{p.removes[kindACLIface], p.late[kindACLIface], p.removes[kindCnatIface], p.late[kindCnatIface]} {
		for _, it := range batch {
			if gw, ok := applied(it.have).(goesWither); ok && gw.goesWith() != "" {
				if dep := d.items[gw.goesWith()]; dep != nil && dep.mark.del == p.gen && deletesIface(dep) {
					it.mark.with = p.gen
				}
			}
		}
	}
}

// deletesIface tells whether the removal of the interface item it deletes
// the interface (an adopted one is released).
func deletesIface(it *item) bool {
	v, ok := applied(it.have).(*ifaceVal)
	return ok && v.typ != vppmodel.Interface_EXISTING
}

// planLate moves the removals that wait for updates (p.waits) to the late
// batches, with the objects they depend on that go too. It reports false
// if a wait cannot hold (a user the plan does not update, or a dependency
// that goes and is created again): that removal is marked early and the
// pass must be planned again.
func (d *Driver) planLate(p *plan, first uint64) bool {
	gen := p.gen
	for _, w := range p.waits {
		if w.user.mark.put != gen && w.user.mark.rm != gen {
			w.gone.mark.early = gen
			return false
		}
	}
	moved := false
	for _, w := range p.waits {
		if w.gone.mark.late == gen || w.gone.mark.rm != gen {
			continue
		}
		// The object and what it depends on that goes in this pass go
		// late; every one of them must be a removal only.
		p.stack = append(zero(p.stack), w.gone)
		for len(p.stack) > 0 {
			it := p.stack[len(p.stack)-1]
			p.stack = p.stack[:len(p.stack)-1]
			if it.mark.late == gen {
				continue
			}
			if it.want != nil { // re-created in the pass: it goes early
				w.gone.mark.early = gen
				return false
			}
			it.mark.late = gen
			moved = true
			for _, dep := range it.have.deps() {
				if di := d.items[dep]; di != nil && di.mark.rm == gen && di.have != nil {
					p.stack = append(p.stack, di)
				}
			}
		}
	}
	if !moved {
		return true
	}
	for kd := range p.removes {
		rs := p.removes[kd]
		kept := rs[:0]
		for _, it := range rs {
			if it.mark.late == gen {
				p.late[kd] = append(p.late[kd], it)
			} else {
				kept = append(kept, it)
			}
		}
		clear(rs[len(kept):])
		p.removes[kd] = kept
	}
	return true
}

// planPuts plans the creates and updates of the candidates of kind kd
// (the kinds below are planned): a dependency is ready if it is
// configured and stays (not removed), or if the plan puts it in an
// earlier wave. An interface unnumbered to another interface that the
// plan puts goes in a later round (wave) of the kind. What a put
// configures wakes the items parked on it: they join the candidates.
func (d *Driver) planPuts(p *plan, kd kind, now time.Time) {
	gen := p.gen
	ready := readiness{d: d, plan: p}
	round := append(zero(p.round), p.cand[kd]...)
	for len(round) > 0 {
		w := p.addWave(kd)
		next := zero(p.next) // what waits for a later round of kd
		for _, it := range round {
			act, missing := decide(it, now, it.mark.rm == gen, ready)
			switch {
			case act == actCreate || act == actUpdate:
				w.steps = append(w.steps, step{it: it, act: act})
			case act == actPark && slices.ContainsFunc(missing, func(k string) bool { return d.plannable(k, kd, gen) }):
				next = append(next, it) // its dependency may be put in this round
			case act == actPark:
				p.parks = append(p.parks, step{it: it, act: act, missing: missing})
			}
		}
		if len(w.steps) == 0 {
			// Nothing new is ready: what waits for this kind waits for good.
			p.waves = p.waves[:len(p.waves)-1]
			for _, it := range next {
				_, missing := decide(it, now, it.mark.rm == gen, ready)
				p.parks = append(p.parks, step{it: it, act: actPark, missing: missing})
			}
			p.round, p.next = round, next
			return
		}
		for _, s := range w.steps {
			s.it.mark.put = gen
		}
		for _, s := range w.steps {
			for wt := range d.waiters[s.it.key] {
				switch {
				case wt.kind < kd:
					p.later = append(p.later, wt)
				case p.addCand(wt) && wt.kind == kd:
					next = append(next, wt)
				}
			}
		}
		p.round, p.next = next, round // both arrays kept
		round = next
	}
}

// plannable tells whether the dependency key is a candidate of kind kd
// of the pass gen that the plan has not put yet: a later round of kd may.
func (d *Driver) plannable(key string, kd kind, gen uint64) bool {
	dep := d.items[key]
	return dep != nil && dep.kind == kd && dep.mark.cand == gen && dep.mark.put != gen
}

// needsRemoval tells whether VPP must no longer hold what it holds of it:
// it is not desired (removing, invalid), or it is and what VPP holds
// cannot be changed into it in place (a creation-time field changed, or it
// is half-made). What VPP holds and no commit mentioned is kept
// (stateUnclaimed).
func needsRemoval(it *item) bool {
	switch {
	case it.state == stateRemoving, it.state == stateInvalid:
		return true
	case it.want == nil, it.state == stateConfigured:
		return false
	}
	return needsRecreate(it.have, it.want)
}

// decide decides whether a desired item is created, updated, parked
// or left as it is, given which dependencies are ready: the planner asks
// with what the plan predicts (removing: the plan removes what VPP holds
// of it first), the executor again with what VPP holds when the item's
// wave comes.
func decide(it *item, now time.Time, removing bool, ready readiness) (action, []string) {
	switch {
	case it.want == nil:
		return actNone, nil
	case !removing && (it.state == stateConfigured || isHalf(it.have)):
		return actNone, nil // in sync; or half-made and its removal failed
	case it.failed != nil && (it.nextRetry.IsZero() || it.nextRetry.After(now)):
		return actNone, nil // failed for good, or still in backoff
	}
	var missing []string
	for _, dep := range it.want.deps() {
		if !ready.ok(dep) {
			missing = append(missing, dep)
		}
	}
	switch {
	case len(missing) > 0:
		return actPark, missing
	case removing || it.have == nil:
		return actCreate, nil
	case needsRecreate(it.have, it.want):
		return actNone, nil // its removal failed
	}
	return actUpdate, nil
}

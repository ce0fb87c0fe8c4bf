package svccnat

import (
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/render/internal/claims"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// Renderer renders the service processor's combined service views and the
// hostPorts of this node's pods onto VPP's cnat plugin as keyed
// vppdriver/vppmodel values, written into the controller transaction of
// the event being processed. It implements [svcprocessor.ServiceRendererAPI]
// (register it with the processor before the processor's handler is
// registered with the event loop) and [controller.EventHandler] for the
// pods' hostPorts (register it with the loop after the processor's
// handler).
//
// Render and the handler methods are not safe for concurrent use; the
// event loop calls them one at a time. Stats and Problems are safe for
// concurrent use.
type Renderer struct {
	nodes    NodeIPs
	snatSrc  SNATAddrs
	cfg      Config
	log      *slog.Logger
	excluded []netip.Prefix
	static   map[string]bool // interfaces rendered from Config (uplink, interconnects, the anchor)

	// Owned by the goroutine that calls Render and the handler methods.
	b         builder
	services  map[kubemodel.ServiceID]*rendered
	pods      map[kubemodel.PodID]*rendered
	claims    *claims.Table[frontend, *rendered, *translation] // the owners that want a frontend, ordered; the first has it
	conflicts map[frontend][]Problem                           // the FrontendTaken problems of a frontend's other owners
	front     map[string]bool                                  // the processor's frontend interfaces
	back      map[string]bool                                  // the processor's backend interfaces
	nodeIPs   []netip.Addr                                     // this node's addresses, sorted
	snat      [2]netip.Addr                                    // the source-NAT address of each family rendered (invalid: none)
	cur       Stats                                            // the gauges, kept incrementally
	snatWarn  [2]bool                                          // a family without a source-NAT address was logged
	// known are the problems before a resync, which the resync does not
	// log again; nil outside resyncs.
	known map[Problem]struct{}

	mu       sync.Mutex
	stats    Stats                // guarded by mu; published at the end of every call
	problems map[Problem]struct{} // guarded by mu
}

var (
	_ svcprocessor.ServiceRendererAPI = (*Renderer)(nil)
	_ controller.EventHandler         = (*Renderer)(nil)
)

// Stats is a snapshot of what the renderer has rendered, for an operator's
// metrics. It is a plain value.
type Stats struct {
	// Services is the number of services with at least one frontend to
	// translate; HostPortPods the number of pods with at least one
	// hostPort to translate (a frontend another has is counted: see
	// Conflicts and Problems).
	Services, HostPortPods int
	// Translations is the number of cnat translations the renderer wants
	// in VPP; Paths the number of backends in them.
	Translations, Paths int
	// Interfaces is the number of pod interfaces with cnat (not counting
	// the uplink, the interconnects and the anchor).
	Interfaces int
	// UnsupportedPorts is the number of service ports and hostPorts of a
	// protocol cnat does not translate here (SCTP), over the current
	// services and pods.
	UnsupportedPorts int
	// Conflicts is the number of frontends (protocol, address, port) that
	// more than one service or pod wants.
	Conflicts int
	// Problems is the number of current problems (see
	// [Renderer.Problems]).
	Problems int
	// SNAT4 and SNAT6 are the source-NAT addresses rendered; invalid for a
	// family without one (then a pod cannot reach a service of that
	// family backed by itself, pods' connections of that family leave the
	// cluster with their own address, and external clients of a node port
	// reach its backends on other nodes through this node only if those
	// route the client back through it).
	SNAT4, SNAT6 netip.Addr
	// Renders counts Render calls; Resyncs the Resync notifications among
	// them.
	Renders, Resyncs uint64
}

// New returns a renderer that takes this node's addresses from nodeIPs
// and its source-NAT addresses from snat (both required). It does no I/O
// and starts no goroutines. Invalid Config fields are reported together
// in one error.
func New(nodeIPs NodeIPs, snat SNATAddrs, cfg Config) (*Renderer, error) {
	var errs []error
	if nodeIPs == nil {
		errs = append(errs, errors.New("svccnat: NodeIPs source is nil"))
	}
	if snat == nil {
		errs = append(errs, errors.New("svccnat: SNATAddrs source is nil"))
	}
	errs = append(errs, cfg.validate())
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg.InterconnectInterfaces = slices.Clone(cfg.InterconnectInterfaces)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Renderer{
		nodes: nodeIPs, snatSrc: snat, cfg: cfg, excluded: cfg.excluded(),
		log:      cfg.Logger.With(slog.String("component", "svccnat")),
		static:   map[string]bool{AnchorInterface: true},
		services: map[kubemodel.ServiceID]*rendered{},
		pods:     map[kubemodel.PodID]*rendered{},
		claims:   newClaims(),
		front:    map[string]bool{},
		back:     map[string]bool{},
		problems: map[Problem]struct{}{},
	}
	r.conflicts = map[frontend][]Problem{}
	if cfg.Uplink != "" {
		r.static[cfg.Uplink] = true
	}
	for _, name := range cfg.InterconnectInterfaces {
		r.static[name] = true
	}
	return r, nil
}

// Stats returns a snapshot of the renderer's gauges and counters.
func (r *Renderer) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Problems returns the current problems of services and pods, sorted by
// service, pod, reason and detail.
func (r *Renderer) Problems() []Problem {
	r.mu.Lock()
	out := make([]Problem, 0, len(r.problems))
	for p := range r.problems {
		out = append(out, p)
	}
	r.mu.Unlock()
	slices.SortFunc(out, compareProblems)
	return out
}

// publish makes the gauges visible to Stats.
func (r *Renderer) publish() {
	r.mu.Lock()
	r.cur.Problems = len(r.problems)
	r.cur.Conflicts = r.claims.Conflicts()
	r.stats = r.cur
	r.mu.Unlock()
}

// writer is where one call writes (see claims.Writer).
type writer = claims.Writer

// Render turns one notification of the service processor into cnat
// configuration: it writes the keys that change into ev.Txn (or, on
// Resync, every key the renderer wants for the services, the SNAT entry
// and the interfaces into ev.ResyncTxn; the pods' hostPorts are written
// by the renderer's own handler in the same resync). The work is
// proportional to the services and interfaces the notification is about
// (node address changes: to the services and pods bound to this node's
// addresses). Render returns no errors: what cannot be rendered is logged
// and listed in [Renderer.Problems].
func (r *Renderer) Render(ev svcprocessor.RenderEvent) error {
	w := writer{Upd: ev.Txn, Res: ev.ResyncTxn}
	if ev.Kind != svcprocessor.Resync {
		r.known = nil
	}
	switch ev.Kind {
	case svcprocessor.Resync:
		r.resync(ev.Snapshot, w)
		r.cur.Resyncs++
	case svcprocessor.ServiceAdded, svcprocessor.ServiceUpdated:
		r.service(ev.NewService.ID, ev.NewService, w)
	case svcprocessor.ServiceDeleted:
		r.service(ev.OldService.ID, nil, w)
	case svcprocessor.NodeIPsChanged:
		r.nodeIPsChanged(w)
	case svcprocessor.FrontendsChanged:
		r.interfaces(r.front, ev.OldInterfaces, ev.NewInterfaces, w)
	case svcprocessor.BackendsChanged:
		r.interfaces(r.back, ev.OldInterfaces, ev.NewInterfaces, w)
	}
	r.cur.Renders++
	r.publish()
	return nil
}

// readNodeIPs re-reads this node's addresses and reports a change.
func (r *Renderer) readNodeIPs() bool {
	var ips []netip.Addr
	for _, a := range r.nodes.NodeIPs() {
		if a = a.Unmap(); a.IsValid() && !a.IsUnspecified() && a.Zone() == "" {
			ips = append(ips, a)
		}
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	ips = slices.Compact(ips)
	if slices.Equal(ips, r.nodeIPs) {
		return false
	}
	r.nodeIPs = ips
	r.b.setNodeIPs(ips)
	return true
}

// readSNAT returns the source-NAT address of each family: the first
// SNATAddrs gives of it.
func (r *Renderer) readSNAT() [2]netip.Addr {
	var out [2]netip.Addr
	for _, a := range r.snatSrc.SNATAddrs() {
		if a = a.Unmap(); a.IsValid() && !a.IsUnspecified() && a.Zone() == "" && !out[fam(a)].IsValid() {
			out[fam(a)] = a
		}
	}
	return out
}

// nodeIPsChanged re-renders what depends on this node's addresses.
func (r *Renderer) nodeIPsChanged(w writer) {
	changed := r.readNodeIPs()
	r.setSNAT(r.readSNAT(), w)
	if !changed {
		return
	}
	for id, s := range r.services {
		if s.nodeBound {
			r.service(id, s.svc, w)
		}
	}
	// A service whose external IPs or node ports have gone is re-rendered
	// when they go (nodeBound is then false).
	for id, p := range r.pods {
		r.pod(id, p.pod, w)
	}
}

// service re-renders one service (s nil: deleted).
func (r *Renderer) service(id kubemodel.ServiceID, s *svcprocessor.ContivService, w writer) {
	old := r.services[id]
	var cur *rendered
	if s != nil {
		cur = r.b.service(s, old)
		r.services[id] = cur
	} else {
		delete(r.services, id)
	}
	r.replaceOwner(old, cur, w)
}

// pod re-renders one pod's hostPorts (p nil: none any more).
func (r *Renderer) pod(id kubemodel.PodID, p *hostPod, w writer) {
	old := r.pods[id]
	var cur *rendered
	if p != nil {
		cur = r.b.pod(p, old)
		r.pods[id] = cur
	} else {
		delete(r.pods, id)
	}
	r.replaceOwner(old, cur, w)
}

// replaceOwner applies the change of one owner's rendering from old to
// cur (either may be nil; both are the same owner).
func (r *Renderer) replaceOwner(old, cur *rendered, w writer) {
	var before, after []Problem
	if old != nil {
		before = old.problems
	}
	if cur != nil {
		after = cur.problems
	}
	r.problemsOf(before, after)
	r.account(old, -1)
	r.account(cur, +1)
	var ot, nt []*translation
	if old != nil {
		ot = old.trs
	}
	if cur != nil {
		nt = cur.trs
	}
	claims.Diff(ot, nt, func(a, b *translation) int { return cmpFrontend(a.spec.fe, b.spec.fe) },
		func(t *translation) { r.release(old, t, w) },
		func(prev, t *translation) { r.claim(cur, prev, t, w) })
	if old != nil && cur != nil {
		r.rebind(old, cur)
	}
}

// rebind replaces old by cur in the claims of the frontends cur kept.
func (r *Renderer) rebind(old, cur *rendered) {
	for _, t := range cur.trs {
		r.claims.Rebind(t.spec.fe, old, cur)
	}
}

// claim records that s wants translation t (prev: its translation of the
// same frontend so far) and writes it if s has the frontend.
func (r *Renderer) claim(s *rendered, prev, t *translation, w writer) {
	old, cur, changed := r.claims.Want(t.spec.fe, s, prev, t)
	if prev == nil {
		if owners := r.claims.Owners(t.spec.fe); len(owners) > 1 {
			r.noteConflict(t.spec.fe, owners)
		}
	}
	if changed {
		r.swap(old, cur, w)
	}
}

// release records that s no longer wants translation t, handing the
// frontend to the next owner that wants it.
func (r *Renderer) release(s *rendered, t *translation, w writer) {
	if r.claims.Owners(t.spec.fe) == nil {
		return
	}
	old, cur, changed := r.claims.Drop(t.spec.fe, s, t)
	r.noteConflict(t.spec.fe, r.claims.Owners(t.spec.fe))
	if changed {
		r.swap(old, cur, w)
	}
}

// swap writes the change of a frontend's translation from old to cur
// (either may be nil) and counts it.
func (r *Renderer) swap(old, cur *translation, w writer) {
	switch {
	case old == nil:
		r.cur.Translations++
	case cur == nil:
		r.cur.Translations--
	}
	r.cur.Paths += pathsOf(cur) - pathsOf(old)
	r.replace(old, cur, w)
}

func pathsOf(t *translation) int {
	if t == nil {
		return 0
	}
	return len(t.spec.paths)
}

// newClaims returns an empty table of the owners that want each
// frontend, services before pods, each by namespace and name.
func newClaims() *claims.Table[frontend, *rendered, *translation] {
	return claims.New(func(a, b *rendered) int { return cmpOwner(a.owner, b.owner) }, (*rendered).find)
}

// replace writes the change of one frontend's translation from old to cur
// (either may be nil; both have the same key).
func (r *Renderer) replace(old, cur *translation, w writer) {
	switch {
	case cur == nil:
		w.Delete(old.key)
	case old == nil || old.msg != cur.msg:
		w.Put(cur.key, cur.msg)
	}
}

// account adds (sign +1) or removes (-1) an owner from the gauges that do
// not depend on claims.
func (r *Renderer) account(s *rendered, sign int) {
	if s == nil {
		return
	}
	r.cur.UnsupportedPorts += sign * s.unsupported
	if len(s.trs) > 0 {
		if s.owner.kind == ownerPod {
			r.cur.HostPortPods += sign
		} else {
			r.cur.Services += sign
		}
	}
}

// problemsOf replaces the problems before of an owner by cur, logging the
// new ones.
func (r *Renderer) problemsOf(before, cur []Problem) {
	if len(before) == 0 && len(cur) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range before {
		if !slices.Contains(cur, p) {
			delete(r.problems, p)
		}
	}
	for _, p := range cur {
		if _, ok := r.problems[p]; !ok {
			r.problems[p] = struct{}{}
			if _, known := r.known[p]; !known {
				r.log.Warn(p.Error(), slog.String("reason", p.Reason.String()))
			}
		}
	}
}

// noteConflict brings the FrontendTaken problems of a frontend in line
// with its owners.
func (r *Renderer) noteConflict(fe frontend, owners []*rendered) {
	var cur []Problem
	if len(owners) > 1 {
		detail := fe.String() + " (" + owners[0].owner.String() + "'s)"
		for _, o := range owners[1:] {
			cur = append(cur, o.owner.problem(FrontendTaken, detail))
		}
	}
	before := r.conflicts[fe]
	if len(cur) == 0 {
		delete(r.conflicts, fe)
	} else {
		r.conflicts[fe] = cur
	}
	r.problemsOf(before, cur)
}

// ifaceValue returns the cnat configuration of a frontend or backend
// interface (a pod's): the feature, the POD table, and the INCLUDE tables
// for the source NAT of its traffic leaving the cluster. Nil: none.
func (r *Renderer) ifaceValue(name string) *vppmodel.CnatInterface {
	if r.static[name] || (!r.back[name] && !r.front[name]) {
		return nil
	}
	v := &vppmodel.CnatInterface{Interface: name, Feature: true}
	if r.snatOn() {
		v.SnatPod = true
		v.SnatV4, v.SnatV6 = !r.cfg.DisableSNAT, !r.cfg.DisableSNAT
	}
	return v
}

func (r *Renderer) snatOn() bool { return r.snat[0].IsValid() || r.snat[1].IsValid() }

// interfaces applies a change of the frontend or backend set (set) from
// old to cur (both sorted) to the interfaces that changed.
func (r *Renderer) interfaces(set map[string]bool, old, cur []string, w writer) {
	apply := func(name string, member bool) {
		before := r.ifaceValue(name)
		if member {
			set[name] = true
		} else {
			delete(set, name)
		}
		after := r.ifaceValue(name)
		switch {
		case after != nil:
			if before == nil {
				r.cur.Interfaces++
				w.Put(vppmodel.CnatInterfaceKey(name), after)
			}
		case before != nil:
			r.cur.Interfaces--
			w.Delete(vppmodel.CnatInterfaceKey(name))
		}
	}
	i, j := 0, 0
	for i < len(old) || j < len(cur) {
		switch {
		case j == len(cur) || (i < len(old) && old[i] < cur[j]):
			apply(old[i], false)
			i++
		case i == len(old) || old[i] > cur[j]:
			apply(cur[j], true)
			j++
		default:
			i++
			j++
		}
	}
}

// setSNAT renders the source-NAT addresses snat: the SNAT entry and, when
// source NAT appears or goes, the static interfaces and every pod
// interface (their tables need the entry).
func (r *Renderer) setSNAT(snat [2]netip.Addr, w writer) {
	if snat == r.snat {
		return
	}
	wasOn := r.snatOn()
	r.snat = snat
	r.cur.SNAT4, r.cur.SNAT6 = snat[0], snat[1]
	r.noteSNAT()
	if r.snatOn() {
		w.Put(vppmodel.CnatSnatKey, r.snatValue())
	} else {
		w.Delete(vppmodel.CnatSnatKey)
	}
	if wasOn == r.snatOn() {
		return
	}
	r.putStatic(w, !r.snatOn())
	for name := range r.back {
		if v := r.ifaceValue(name); v != nil {
			w.Put(vppmodel.CnatInterfaceKey(name), v)
		}
	}
	for name := range r.front {
		if v := r.ifaceValue(name); v != nil && !r.back[name] {
			w.Put(vppmodel.CnatInterfaceKey(name), v)
		}
	}
}

// noteSNAT logs a family that has no source-NAT address, once, and its
// arrival.
func (r *Renderer) noteSNAT() {
	for f := range r.snat {
		missing := !r.snat[f].IsValid()
		switch {
		case missing && !r.snatWarn[f]:
			r.log.Warn("no source-NAT address of this family: a pod cannot reach a service of it backed by itself, and its pod traffic leaves the cluster unchanged",
				slog.String("family", familyName(f == 1)))
		case !missing && r.snatWarn[f]:
			r.log.Info("source-NAT address known", slog.String("family", familyName(f == 1)), slog.Any("address", r.snat[f]))
		}
		r.snatWarn[f] = missing
	}
}

func (r *Renderer) snatValue() *vppmodel.CnatSnat {
	// No client: an exclusive FIB entry on the node's address would drop
	// what comes to it untranslated (VXLAN from the other nodes); with
	// cnat's feature on every interface the replies are found by their
	// sessions.
	v := &vppmodel.CnatSnat{Policy: vppmodel.CnatSnat_K8S, NoClient: true}
	if r.snat[0].IsValid() {
		v.Ip4 = r.snat[0].String()
	}
	if r.snat[1].IsValid() {
		v.Ip6 = r.snat[1].String()
	}
	for _, p := range r.excluded {
		v.ExcludedPrefixes = append(v.ExcludedPrefixes, p.String())
	}
	return v
}

// putStatic writes the configuration of the uplink, the interconnects and
// the anchor; with del, the keys that no longer exist are deleted (an
// update that turns source NAT off).
func (r *Renderer) putStatic(w writer, del bool) {
	if up := r.cfg.Uplink; up != "" {
		w.Put(vppmodel.CnatInterfaceKey(up), &vppmodel.CnatInterface{Interface: up, Feature: true})
	}
	for _, name := range r.cfg.InterconnectInterfaces {
		w.Put(vppmodel.CnatInterfaceKey(name), &vppmodel.CnatInterface{Interface: name, Feature: true, SnatHost: r.snatOn()})
	}
	if r.snatOn() {
		w.Put(vppmodel.InterfaceKey(AnchorInterface), &vppmodel.Interface{Name: AnchorInterface, Type: vppmodel.Interface_LOOPBACK})
		w.Put(vppmodel.CnatInterfaceKey(AnchorInterface), &vppmodel.CnatInterface{Interface: AnchorInterface, SnatV4: true})
	} else if del {
		w.Delete(vppmodel.CnatInterfaceKey(AnchorInterface))
		w.Delete(vppmodel.InterfaceKey(AnchorInterface))
	}
}

// resync replaces the renderer's record of the services with snap and
// writes everything it wants but the pods' hostPorts (the handler's
// Resync, which follows in the same event, writes them).
func (r *Renderer) resync(snap *svcprocessor.Snapshot, w writer) {
	r.readNodeIPs()
	r.snat = r.readSNAT()
	r.cur.SNAT4, r.cur.SNAT6 = r.snat[0], r.snat[1]
	r.noteSNAT()
	prev := r.services
	pods := r.pods
	r.services = make(map[kubemodel.ServiceID]*rendered, len(snap.Services))
	r.pods = map[kubemodel.PodID]*rendered{}
	r.claims = newClaims()
	r.conflicts = map[frontend][]Problem{}
	r.known = r.takeProblems() // not logged again (until the handler's Resync is done)
	resyncs, renders := r.cur.Resyncs, r.cur.Renders
	r.cur = Stats{Resyncs: resyncs, Renders: renders, SNAT4: r.snat[0], SNAT6: r.snat[1]}
	for _, s := range snap.Services { // sorted by ID: the first claimant wins
		cur := r.b.service(s, prev[s.ID])
		r.services[s.ID] = cur
		r.replaceOwner(nil, cur, w)
	}
	// The pods keep their hostPorts until the handler's Resync rebuilds
	// them; they come after every service.
	for _, id := range sortedPodIDs(pods) {
		cur := r.b.pod(pods[id].pod, pods[id])
		r.pods[id] = cur
		r.replaceOwner(nil, cur, writer{})
	}

	if r.snatOn() {
		w.Put(vppmodel.CnatSnatKey, r.snatValue())
	}
	r.putStatic(w, false)
	clear(r.front)
	clear(r.back)
	for _, name := range snap.Frontends {
		r.front[name] = true
	}
	for _, name := range snap.Backends {
		r.back[name] = true
	}
	put := func(name string) {
		if v := r.ifaceValue(name); v != nil {
			w.Put(vppmodel.CnatInterfaceKey(name), v)
			r.cur.Interfaces++
		}
	}
	for _, name := range snap.Backends {
		put(name)
	}
	for _, name := range snap.Frontends {
		if !r.back[name] {
			put(name)
		}
	}
}

// takeProblems empties the problem set and returns what it held.
func (r *Renderer) takeProblems() map[Problem]struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	before := r.problems
	r.problems = map[Problem]struct{}{}
	return before
}

func sortedPodIDs(m map[kubemodel.PodID]*rendered) []kubemodel.PodID {
	out := make([]kubemodel.PodID, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b kubemodel.PodID) int { return cmpOwner(podOwner(a), podOwner(b)) })
	return out
}

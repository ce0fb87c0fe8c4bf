package svcnat

import (
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/render/internal/claims"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// Renderer renders the service processor's combined service views onto
// VPP's NAT44-ED plugin as keyed vppdriver/vppmodel values, written into the
// controller transaction of the event being processed. It implements
// [svcprocessor.ServiceRendererAPI]; register it with the processor before
// the processor's handler is registered with the event loop.
//
// Render is not safe for concurrent use; it is called by the service
// processor, which serializes its renderers (on the event loop). Stats is
// safe for concurrent use.
type Renderer struct {
	nodes    NodeIPs
	loopback NATLoopback
	cfg      Config
	log      *slog.Logger
	static   map[string]bool // interfaces rendered from Config (uplink, interconnects)

	// Owned by the goroutine that calls Render.
	b        builder
	services map[kubemodel.ServiceID]*rendered
	claims   *claims.Table[frontend, *rendered, *mapping] // services that want a frontend, by ID; the first has it
	front    map[string]bool                              // the processor's frontend interfaces
	back     map[string]bool                              // the processor's backend interfaces
	nodeIPs  []netip.Addr                                 // this node's IPv4 addresses, sorted
	cur      Stats                                        // the gauges, kept incrementally
	// loopbackProblem is the NAT loopback problem logged last ("" none),
	// so that it is logged once, not at every resync.
	loopbackProblem string

	mu    sync.Mutex
	stats Stats // guarded by mu; published at the end of Render
}

var _ svcprocessor.ServiceRendererAPI = (*Renderer)(nil)

// Stats is a snapshot of what the renderer has rendered, for an operator's
// metrics. It is a plain value.
type Stats struct {
	// Services is the number of services with at least one mapping.
	Services int
	// Mappings is the number of NAT44 mappings (static and load-balanced)
	// the renderer wants in VPP; Backends the number of backends in them.
	Mappings, Backends int
	// Interfaces is the number of frontend and backend interfaces with
	// NAT44 features (not counting the uplink and interconnects).
	Interfaces int
	// UnsupportedPorts is the number of service ports of a protocol that
	// NAT44-ED cannot translate (SCTP), over the current services. They
	// are not rendered (neither dropped silently nor turned into UDP): a
	// warning is logged when a service's number of them changes to a
	// non-zero one (once, not at every change or resync).
	UnsupportedPorts int
	// IPv6Frontends is the number of IPv6 service addresses (cluster,
	// external and node addresses times ports) not rendered: NAT44
	// translates IPv4 only.
	IPv6Frontends int
	// Conflicts is the number of frontends (protocol, address and port)
	// that more than one service wants; the service first by
	// namespace/name gets the mapping, a warning is logged when another
	// service joins the conflict (not again at a resync).
	Conflicts int
	// TwiceNATPool tells whether the twice-NAT pool of the NAT loopback
	// address is rendered: false while that address is not known yet or
	// not IPv4 (a warning is logged), when a pod cannot reach a service
	// backed by itself.
	TwiceNATPool bool
	// Renders counts Render calls; Resyncs the Resync notifications among
	// them.
	Renders, Resyncs uint64
}

// New returns a renderer that takes this node's addresses from nodeIPs
// and the NAT loopback address from loopback (both required). It does no
// I/O and starts no goroutines. Invalid Config fields are reported
// together in one error.
func New(nodeIPs NodeIPs, loopback NATLoopback, cfg Config) (*Renderer, error) {
	var errs []error
	if nodeIPs == nil {
		errs = append(errs, errors.New("svcnat: NodeIPs source is nil"))
	}
	if loopback == nil {
		errs = append(errs, errors.New("svcnat: NATLoopback source is nil"))
	}
	errs = append(errs, cfg.validate())
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg.InterconnectInterfaces = slices.Clone(cfg.InterconnectInterfaces)
	if cfg.LocalBackendWeight == 0 {
		cfg.LocalBackendWeight = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Renderer{
		nodes:    nodeIPs,
		loopback: loopback,
		cfg:      cfg,
		log:      cfg.Logger.With(slog.String("component", "svcnat")),
		static:   map[string]bool{},
		b:        builder{localWeight: cfg.LocalBackendWeight},
		services: map[kubemodel.ServiceID]*rendered{},
		claims:   newClaims(),
		front:    map[string]bool{},
		back:     map[string]bool{},
	}
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

// writer is where one call writes (see claims.Writer).
type writer = claims.Writer

// Render turns one notification of the service processor into NAT44
// configuration: it writes the keys that change into ev.Txn (or, on
// Resync, every key the renderer wants into ev.ResyncTxn). The work is
// proportional to the services and interfaces the notification is about
// (node address changes: to the NodePort services), a Resync to the whole
// state. Render returns no errors: what cannot be rendered is logged and
// counted in [Stats].
func (r *Renderer) Render(ev svcprocessor.RenderEvent) error {
	w := writer{Upd: ev.Txn, Res: ev.ResyncTxn}
	switch ev.Kind {
	case svcprocessor.Resync:
		r.resync(ev.Snapshot, w)
		r.cur.Resyncs++
	case svcprocessor.ServiceAdded, svcprocessor.ServiceUpdated:
		r.service(ev.NewService.ID, ev.NewService, w)
	case svcprocessor.ServiceDeleted:
		r.service(ev.OldService.ID, nil, w)
	case svcprocessor.NodeIPsChanged:
		if r.readNodeIPs() {
			for s := range ev.Services.NodePortServices() {
				r.service(s.ID, s, w)
			}
			// Services that had node ports on addresses now gone but no
			// node port any more are not in the view's list; they were
			// re-rendered when they lost their node ports.
		}
	case svcprocessor.FrontendsChanged:
		r.interfaces(r.front, ev.OldInterfaces, ev.NewInterfaces, w)
	case svcprocessor.BackendsChanged:
		r.interfaces(r.back, ev.OldInterfaces, ev.NewInterfaces, w)
	}
	r.cur.Renders++
	r.cur.Conflicts = r.claims.Conflicts()
	r.mu.Lock()
	r.stats = r.cur
	r.mu.Unlock()
	return nil
}

// readNodeIPs re-reads this node's IPv4 addresses and reports a change.
func (r *Renderer) readNodeIPs() bool {
	var ips []netip.Addr
	for _, a := range r.nodes.NodeIPs() {
		if a = a.Unmap(); a.Is4() {
			ips = append(ips, a)
		}
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	ips = slices.Compact(ips)
	if slices.Equal(ips, r.nodeIPs) {
		return false
	}
	r.nodeIPs = ips
	return true
}

// service re-renders one service (s nil: deleted).
func (r *Renderer) service(id kubemodel.ServiceID, s *svcprocessor.ContivService, w writer) {
	old := r.services[id]
	var cur *rendered
	if s != nil {
		cur = r.b.build(s, r.nodeIPs, old)
		r.noteUnsupported(old, cur)
	}
	r.account(old, -1)
	r.account(cur, +1)
	if cur == nil {
		delete(r.services, id)
	} else {
		r.services[id] = cur
	}
	// Walk both sorted mapping lists.
	var om, nm []*mapping
	if old != nil {
		om = old.mappings
	}
	if cur != nil {
		nm = cur.mappings
	}
	claims.Diff(om, nm, func(a, b *mapping) int { return cmpFrontend(a.spec.fe, b.spec.fe) },
		func(m *mapping) { r.release(old, m, w) },
		func(prev, m *mapping) { r.claim(cur, prev, m, w) })
	if old != nil && cur != nil {
		r.rebind(old, cur)
	}
}

// noteUnsupported logs the ports of cur that cannot be rendered, when they
// are new: cur has some and old (the service's previous rendering, nil if
// none) had another number.
func (r *Renderer) noteUnsupported(old, cur *rendered) {
	if cur.unsupported > 0 && (old == nil || old.unsupported != cur.unsupported) {
		r.log.Warn("service ports of a protocol NAT44-ED cannot translate are not rendered",
			slog.String("service", cur.id.String()), slog.Int("ports", cur.unsupported))
	}
}

// rebind replaces old by cur in the claims of the frontends cur kept.
func (r *Renderer) rebind(old, cur *rendered) {
	for _, m := range cur.mappings {
		r.claims.Rebind(m.spec.fe, old, cur)
	}
}

// claim records that service s wants mapping m (prev: its mapping of the
// same frontend so far) and writes it if s has the frontend.
func (r *Renderer) claim(s *rendered, prev, m *mapping, w writer) {
	old, cur, changed := r.claims.Want(m.spec.fe, s, prev, m)
	if owners := r.claims.Owners(m.spec.fe); prev == nil && len(owners) > 1 {
		r.warnConflict(m.spec.fe, s, owners[0])
	}
	if changed {
		r.swap(old, cur, w)
	}
}

// release records that service s no longer wants mapping m, handing the
// frontend to the next service that wants it.
func (r *Renderer) release(s *rendered, m *mapping, w writer) {
	if old, cur, changed := r.claims.Drop(m.spec.fe, s, m); changed {
		r.swap(old, cur, w)
	}
}

// warnConflict logs that service s wants a frontend owner has.
func (r *Renderer) warnConflict(fe frontend, s, owner *rendered) {
	r.log.Warn("services want the same NAT44 frontend; the first by namespace/name gets it",
		slog.String("frontend", fe.addr.String()), slog.String("protocol", fe.proto.String()),
		slog.String("service", s.id.String()), slog.String("owner", owner.id.String()))
}

// swap writes the change of a frontend's mapping from old to cur (either
// may be nil) and counts it.
func (r *Renderer) swap(old, cur *mapping, w writer) {
	switch {
	case old == nil:
		r.cur.Mappings++
	case cur == nil:
		r.cur.Mappings--
	}
	r.cur.Backends += backendsOf(cur) - backendsOf(old)
	r.replace(old, cur, w)
}

// newClaims returns an empty table of the services that want each
// frontend, ordered by service ID.
func newClaims() *claims.Table[frontend, *rendered, *mapping] {
	return claims.New(func(a, b *rendered) int { return kubemodel.ServiceID.Compare(a.id, b.id) }, (*rendered).find)
}

func backendsOf(m *mapping) int {
	if m == nil {
		return 0
	}
	return len(m.spec.backends)
}

// replace writes the change of one frontend's mapping from old to cur
// (either may be nil).
func (r *Renderer) replace(old, cur *mapping, w writer) {
	switch {
	case cur == nil:
		w.Delete(old.key)
	case old == nil:
		w.Put(cur.key, cur.msg)
	case old == cur:
	default:
		if old.key != cur.key {
			w.Delete(old.key) // static <-> load-balanced
		}
		if old.key != cur.key || old.msg != cur.msg {
			w.Put(cur.key, cur.msg)
		}
	}
}

// account adds (sign +1) or removes (-1) a service from the gauges that do
// not depend on claims.
func (r *Renderer) account(s *rendered, sign int) {
	if s == nil {
		return
	}
	r.cur.UnsupportedPorts += sign * s.unsupported
	r.cur.IPv6Frontends += sign * s.ipv6
	if len(s.mappings) > 0 {
		r.cur.Services += sign
	}
}

// ifaceValue returns the NAT44 features of a frontend or backend
// interface: outside for frontends (clients: their traffic to services is
// translated by the out2in path, which load-balances), inside and outside
// for backends (the replies of a backend are translated back by the in2out
// path; a backend is a client too). Nil: no features.
func (r *Renderer) ifaceValue(name string) *vppmodel.Nat44Interface {
	switch {
	case r.static[name]:
		return nil // rendered from Config
	case r.back[name]:
		return &vppmodel.Nat44Interface{Interface: name, Inside: true, Outside: true}
	case r.front[name]:
		return &vppmodel.Nat44Interface{Interface: name, Outside: true}
	}
	return nil
}

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
			}
			if before == nil || !proto.Equal(before, after) {
				w.Put(vppmodel.Nat44InterfaceKey(name), after)
			}
		case before != nil:
			r.cur.Interfaces--
			w.Delete(vppmodel.Nat44InterfaceKey(name))
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

// resync replaces the renderer's record with snap and writes everything it
// wants.
func (r *Renderer) resync(snap *svcprocessor.Snapshot, w writer) {
	r.readNodeIPs()
	prev, prevClaims := r.services, r.claims
	r.services = make(map[kubemodel.ServiceID]*rendered, len(snap.Services))
	r.claims = newClaims()
	resyncs := r.cur.Resyncs
	renders := r.cur.Renders
	r.cur = Stats{Resyncs: resyncs, Renders: renders}
	for _, s := range snap.Services { // sorted by ID: the first claimant wins
		cur := r.b.build(s, r.nodeIPs, prev[s.ID])
		r.noteUnsupported(prev[s.ID], cur)
		r.services[s.ID] = cur
		r.account(cur, +1)
		for _, m := range cur.mappings {
			old, now, changed := r.claims.Want(m.spec.fe, cur, nil, m)
			if owners := r.claims.Owners(m.spec.fe); len(owners) == 2 && len(prevClaims.Owners(m.spec.fe)) < 2 { // a new conflict
				r.warnConflict(m.spec.fe, cur, owners[0])
			}
			if changed {
				r.swap(old, now, w)
			}
		}
	}

	// The plugin, its pools and the interfaces of the configuration.
	w.Put(vppmodel.Nat44GlobalKey, &vppmodel.Nat44Global{Sessions: r.cfg.MaxSessions, Forwarding: true})
	problem := ""
	if a := r.loopback.NatLoopbackAddr().Unmap(); a.IsValid() {
		if a.Is4() {
			w.Put(vppmodel.Nat44AddressPoolKey(a, a, true),
				&vppmodel.Nat44AddressPool{FirstIp: a.String(), Vrf: ^uint32(0), TwiceNat: true})
		} else {
			problem = "the NAT loopback address is not IPv4: no twice-NAT pool"
			if problem != r.loopbackProblem {
				r.log.Warn(problem, slog.Any("address", a))
			}
		}
	} else {
		problem = "the NAT loopback address is not known yet: no twice-NAT pool (a pod cannot reach a service backed by itself)"
		if problem != r.loopbackProblem {
			r.log.Warn(problem)
		}
	}
	if problem == "" && r.loopbackProblem != "" {
		r.log.Info("the NAT loopback address is known: twice-NAT pool rendered")
	}
	r.loopbackProblem = problem
	r.cur.TwiceNATPool = problem == ""
	if up := r.cfg.Uplink; up != "" {
		w.Put(vppmodel.Nat44InterfaceKey(up), &vppmodel.Nat44Interface{Interface: up, OutputFeature: true})
		if !r.cfg.DisableSNAT {
			w.Put(vppmodel.Nat44InterfaceAddressPoolKey(up, false), &vppmodel.Nat44AddressPool{Interface: up})
		}
	}
	for _, name := range r.cfg.InterconnectInterfaces {
		w.Put(vppmodel.Nat44InterfaceKey(name), &vppmodel.Nat44Interface{Interface: name, Inside: true, Outside: true})
	}
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
			w.Put(vppmodel.Nat44InterfaceKey(name), v)
			r.cur.Interfaces++
		}
	}
	for _, name := range snap.Backends {
		put(name)
	}
	for _, name := range snap.Frontends {
		if !r.back[name] { // a backend too: done
			put(name)
		}
	}
}

package gobgp

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

// MinConnectRetryTime is the shortest ConnectRetryTime GoBGP honours: it
// never retries a connection more often. ConfigurePeers rejects shorter
// ones instead of letting GoBGP raise them silently.
const MinConnectRetryTime = 2 * time.Second

// selectionDeferralTime is how long a restarting speaker (restart flag set)
// waits for the End-of-RIB of its graceful-restart peers before it sends
// its routes. The manager is a leaf that never uses received routes, so it
// does not wait for them: GoBGP's minimum.
const selectionDeferralTime = 1

// Config configures a [Manager]. The zero value is valid.
type Config struct {
	// Services lists the services whose addresses virtual routers with a
	// ServiceSelector advertise; the manager reads them in place if it
	// implements bgp.ServiceRanger. Default nil: no service is advertised.
	Services bgp.ServiceLister
	// ListenAddresses are the addresses a server listens on when the node
	// annotates a local port for its ASN. Default: all addresses (0.0.0.0
	// and ::).
	ListenAddresses []netip.Addr
	// LearnedRoutes is signalled whenever the routes learned from peers
	// (those their import prefix lists accept, see [Manager.LearnedRoutes])
	// change. Default: the zero Signaler, which drops the signals.
	LearnedRoutes bgp.Signaler
	// Logger receives the manager's logs and, at Warn level and above,
	// GoBGP's own. Default: discard.
	Logger *slog.Logger
}

// Manager is a [bgp.BGPRouterManager] backed by in-process GoBGP servers.
//
// Manager is safe for concurrent use. See the package documentation for its
// lifecycle.
type Manager struct {
	cfg Config
	log *slog.Logger
	run lifecycle.Once

	// mu serializes ConfigurePeers and Run's shutdown and guards the fields
	// below.
	mu      sync.Mutex
	state   runState
	routers map[uint32]*router // by local ASN

	wg sync.WaitGroup // one per GoBGP Serve goroutine

	// learnMu guards learned: the routes each running router learned, by
	// local ASN; written by GoBGP's watch goroutines.
	learnMu sync.Mutex
	learned map[uint32]*learnedTable
}

type runState int

const (
	stateNew runState = iota
	stateRunning
	stateStopped
)

var (
	_ bgp.BGPRouterManager = (*Manager)(nil)
	_ bgp.SpecApplier      = (*Manager)(nil)
	_ bgp.PeerLister       = (*Manager)(nil)
)

// New returns a manager. It validates cfg, does no I/O and starts no
// goroutine.
func New(cfg Config) (*Manager, error) {
	var errs []error
	for i, a := range cfg.ListenAddresses {
		if !a.IsValid() || a.Zone() != "" {
			errs = append(errs, fmt.Errorf("gobgp: Config.ListenAddresses[%d]: %v is not a valid address without zone", i, a))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg.ListenAddresses = slices.Clone(cfg.ListenAddresses)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, log: log.With(slog.String("component", "bgp-gobgp")), routers: make(map[uint32]*router),
		learned: make(map[uint32]*learnedTable)}, nil
}

// Run makes the manager usable and blocks until ctx is cancelled. It then
// stops every GoBGP server without withdrawing the routes: sessions with
// graceful restart negotiated are closed without a NOTIFICATION, so those
// peers keep the routes for the restart time until the restarted agent
// re-advertises them (RFC 4724); other peers get a Cease and flush them.
// Run returns ctx.Err() once every goroutine it started has exited. A
// second call returns an error wrapping [ErrAlreadyRunning].
func (m *Manager) Run(ctx context.Context) error {
	if err := m.run.Start("gobgp"); err != nil {
		return err
	}
	m.mu.Lock()
	m.state = stateRunning
	m.mu.Unlock()
	m.log.Info("started")

	<-ctx.Done()

	m.mu.Lock()
	m.state = stateStopped
	m.stopAllLocked(true)
	m.mu.Unlock()
	m.wg.Wait()
	m.log.Info("stopped")
	return ctx.Err()
}

// ConfigurePeers applies policy (see [bgp.BGPRouterManager]). It applies
// [bgp.PeeringPolicy.WithDefaults] itself and returns the validation error
// of a flawed policy without changing anything: [bgp.PeeringPolicy.Validate],
// [bgp.PeeringPolicy.ValidateState] and the limits of GoBGP
// ([MinConnectRetryTime]). It then translates the policy into the internal
// model ([bgp.SpecFromPolicy]) and applies that exactly as
// [Manager.ApplySpec] does. Problems of a single virtual router or
// neighbor (no router ID, a listening port in use, no node address for any
// family of a neighbor) are returned joined, after everything else has
// been applied.
//
// Each address family is advertised with the node's address of that family
// as the next hop (state.IPv4, state.IPv6). A family the node has no usable
// address for is not offered to the neighbors (reported in
// [bgp.PeerStatus].Disabled), and its routes are not advertised.
//
// A nil policy withdraws everything at once: every server is stopped and
// every peer gets a Cease (a Hard Reset when it negotiated RFC 8538), so
// that even graceful-restart peers flush the routes. It returns
// [ErrNotRunning] outside [Manager.Run].
//
// ctx is checked between steps; a cancelled call may leave a partially
// applied state, which the next call completes.
func (m *Manager) ConfigurePeers(ctx context.Context, policy *bgp.PeeringPolicy, state *bgp.ControlPlaneState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateRunning {
		return ErrNotRunning
	}
	if policy == nil {
		m.stopAllLocked(false)
		return nil
	}
	policy = policy.WithDefaults()
	if err := errors.Join(policy.Validate(), policy.ValidateState(state), validateLimits(policy)); err != nil {
		return fmt.Errorf("policy %q: %w", policy.Name, err)
	}
	return m.applyLocked(ctx, bgp.SpecFromPolicy(policy, state), state)
}

// ApplySpec applies the node's desired state in the internal model (see
// [bgp.SpecApplier]): one GoBGP server per instance, its peers with their
// sessions, the routes each peer is sent (per family, the routes its
// adverts yield, aggregated, with their communities and local
// preference: see [bgp.AdvertCache.PeerRoutes]) and the routes accepted
// from it (import prefix lists). A spec that fails [bgp.NodeSpec.Validate]
// or GoBGP's limits ([MinConnectRetryTime]) is an error and changes
// nothing; problems of a single instance or peer are returned joined after
// the rest has been applied, as with ConfigurePeers. A nil spec withdraws
// everything, as ConfigurePeers(ctx, nil, nil) does.
//
// Every peer is sent exactly its own routes with its own attributes: the
// routes of all peers are advertised once into GoBGP, and a per-peer
// export policy (a neighbor set and, per attribute set, a prefix set whose
// statement adds the communities and sets the local preference) lets
// through only the peer's. Local preference reaches internal peers only.
// Routes received from a peer are kept in its Adj-RIB-In; those its
// import prefix lists accept enter the speaker's RIB and are reported by
// [Manager.LearnedRoutes], never re-advertised (an export policy keeps the
// speaker a leaf).
func (m *Manager) ApplySpec(ctx context.Context, spec *bgp.NodeSpec, state *bgp.ControlPlaneState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateRunning {
		return ErrNotRunning
	}
	if spec == nil {
		m.stopAllLocked(false)
		return nil
	}
	if err := errors.Join(spec.Validate(), validateSpecLimits(spec)); err != nil {
		return fmt.Errorf("%s: %w", spec.Source, err)
	}
	return m.applyLocked(ctx, spec, state)
}

// applyLocked applies a valid spec: the one code path of both APIs.
func (m *Manager) applyLocked(ctx context.Context, spec *bgp.NodeSpec, state *bgp.ControlPlaneState) error {
	podCIDRs, err := state.PodCIDRs()
	if err != nil {
		return err
	}
	var services iter.Seq[*bgp.Service]
	if m.cfg.Services != nil && spec.HasServiceAdverts() {
		if r, ok := m.cfg.Services.(bgp.ServiceRanger); ok {
			services = r.RangeServices
		} else {
			list := m.cfg.Services.ListServices()
			services = func(yield func(*bgp.Service) bool) {
				for i := range list {
					if !yield(&list[i]) {
						return
					}
				}
			}
		}
	}
	cache := bgp.NewAdvertCache(podCIDRs, services)

	desired := make(map[uint32]bool, len(spec.Instances))
	for _, in := range spec.Instances {
		desired[in.LocalASN] = true
	}
	for asn, r := range m.routers {
		if !desired[asn] {
			m.stopLocked(r, false)
		}
	}

	nh := nextHopsOf(state)
	var errs []error
	for i := range spec.Instances {
		in := &spec.Instances[i]
		if err := ctx.Err(); err != nil {
			return err
		}
		want, err := desiredRouter(in, state, nh, cache)
		if err != nil {
			errs = append(errs, fmt.Errorf("virtual router %d: %w", in.LocalASN, err))
			continue
		}
		if err := m.applyRouter(ctx, want); err != nil {
			errs = append(errs, fmt.Errorf("virtual router %d: %w", in.LocalASN, err))
		}
		for _, addr := range slices.SortedFunc(maps.Keys(want.unusable), netip.Addr.Compare) {
			errs = append(errs, fmt.Errorf("virtual router %d: neighbor %s: %w", in.LocalASN, addr, want.unusable[addr]))
		}
	}
	return errors.Join(errs...)
}

// validateSpecLimits checks what GoBGP cannot do although a spec allows it.
func validateSpecLimits(s *bgp.NodeSpec) error {
	var errs []error
	for i, in := range s.Instances {
		for j, p := range in.Peers {
			if p.ConnectRetryTime < MinConnectRetryTime {
				errs = append(errs, &bgp.FieldError{
					Field:  fmt.Sprintf("instances[%d].peers[%d].connectRetryTime", i, j),
					Value:  p.ConnectRetryTime,
					Reason: fmt.Sprintf("must be at least %s: GoBGP does not retry connections more often", MinConnectRetryTime),
				})
			}
		}
	}
	return errors.Join(errs...)
}

// validateLimits checks what GoBGP cannot do although the policy allows it.
func validateLimits(p *bgp.PeeringPolicy) error {
	var errs []error
	for i, vr := range p.VirtualRouters {
		for j, n := range vr.Neighbors {
			if n.ConnectRetryTime < MinConnectRetryTime {
				errs = append(errs, &bgp.FieldError{
					Field:  fmt.Sprintf("virtualRouters[%d].neighbors[%d].connectRetryTime", i, j),
					Value:  n.ConnectRetryTime,
					Reason: fmt.Sprintf("must be at least %s: GoBGP does not retry connections more often", MinConnectRetryTime),
				})
			}
		}
	}
	return errors.Join(errs...)
}

// nextHops are the node's next-hop addresses per family; an invalid address
// means the family cannot be advertised, for the reason given.
type nextHops struct {
	v4, v6             netip.Addr
	v4Reason, v6Reason string
}

func nextHopsOf(state *bgp.ControlPlaneState) nextHops {
	var nh nextHops
	var ip4, ip6 []byte
	if state != nil {
		ip4, ip6 = state.IPv4, state.IPv6
	}
	if a, ok := netip.AddrFromSlice(ip4); ok && a.Unmap().Is4() && !a.IsUnspecified() {
		nh.v4 = a.Unmap()
	} else {
		nh.v4Reason = "the node has no IPv4 address for the next hop of IPv4 routes"
	}
	a, ok := netip.AddrFromSlice(ip6)
	switch {
	case !ok || len(ip6) != 16 || a.Is4In6() || a.IsUnspecified():
		nh.v6Reason = "the node has no IPv6 address for the next hop of IPv6 routes"
	case a.IsLinkLocalUnicast():
		nh.v6Reason = fmt.Sprintf("the node's IPv6 address %s is link-local, not usable as the next hop of IPv6 routes", a)
	default:
		nh.v6 = a
	}
	return nh
}

// hopOf returns the next hop of prefix p's family.
func (nh nextHops) hopOf(p netip.Prefix) netip.Addr {
	if p.Addr().Is4() {
		return nh.v4
	}
	return nh.v6
}

func (nh nextHops) of(fam bgp.Family) (netip.Addr, string) {
	if fam == bgp.IPv6Unicast {
		return nh.v6, nh.v6Reason
	}
	return nh.v4, nh.v4Reason
}

// routerSpec is the desired state of one virtual router.
type routerSpec struct {
	asn        uint32
	routerID   netip.Addr
	listenPort int32 // -1: do not listen
	// neighbors are the neighbors to configure, with the families that can
	// be offered; unusable are those with none (not configured).
	neighbors map[netip.Addr]neighborSpec
	unusable  map[netip.Addr]error
	paths     []pathEntry // every peer's routes with their next hops, sorted
	// export: per configured neighbor, the routes it is sent by
	// attributes (of the families offered to it, with a next hop);
	// imports: per configured neighbor, the prefix lists of the families
	// offered.
	export  map[netip.Addr][]bgp.RouteGroup
	imports map[netip.Addr][]bgp.PrefixMatch
}

// neighborSpec is a neighbor as configured: Families holds only the offered
// families; disabled maps the others to the reason.
type neighborSpec struct {
	bgp.Neighbor
	disabled map[bgp.Family]string
}

func desiredRouter(in *bgp.Instance, state *bgp.ControlPlaneState, nh nextHops, cache *bgp.AdvertCache) (routerSpec, error) {
	rid := in.RouterID
	if !rid.IsValid() {
		var err error
		if rid, err = state.RouterID(in.LocalASN); err != nil {
			return routerSpec{}, err
		}
	}
	spec := routerSpec{
		asn:        in.LocalASN,
		routerID:   rid,
		listenPort: -1,
		neighbors:  make(map[netip.Addr]neighborSpec, len(in.Peers)),
		export:     make(map[netip.Addr][]bgp.RouteGroup, len(in.Peers)),
		imports:    make(map[netip.Addr][]bgp.PrefixMatch),
	}
	if in.LocalPort != 0 {
		spec.listenPort = int32(in.LocalPort)
	}
	for i := range in.Peers {
		p := &in.Peers[i]
		n := p.Neighbor
		n.PeerAddress = n.PeerAddress.Unmap()
		ns := neighborSpec{Neighbor: n}
		ns.Families = nil
		offered := map[bgp.Family]bool{}
		for _, f := range n.Families {
			if _, reason := nh.of(f); reason != "" {
				if ns.disabled == nil {
					ns.disabled = make(map[bgp.Family]string)
				}
				ns.disabled[f] = reason
				continue
			}
			ns.Families = append(ns.Families, f)
			offered[f] = true
		}
		spec.neighbors[n.PeerAddress] = ns
		if len(ns.Families) == 0 {
			if spec.unusable == nil {
				spec.unusable = make(map[netip.Addr]error)
			}
			spec.unusable[n.PeerAddress] = fmt.Errorf("no address family can be offered: %s", joinReasons(ns.disabled))
			continue
		}
		groups, err := cache.PeerGroups(p)
		if err != nil {
			return routerSpec{}, err
		}
		// Only the families offered (each has a next hop).
		for gi := range groups {
			g := &groups[gi]
			if !offered[bgp.IPv4Unicast] || !offered[bgp.IPv6Unicast] {
				g.Prefixes = slices.DeleteFunc(slices.Clone(g.Prefixes), func(p netip.Prefix) bool {
					return !offered[bgp.IPv4Unicast] && p.Addr().Is4() || !offered[bgp.IPv6Unicast] && p.Addr().Is6()
				})
			}
		}
		groups = slices.DeleteFunc(groups, func(g bgp.RouteGroup) bool { return len(g.Prefixes) == 0 })
		spec.export[n.PeerAddress] = groups
		for _, pf := range p.PeerFamilies {
			if offered[pf.Family] {
				spec.imports[n.PeerAddress] = append(spec.imports[n.PeerAddress], pf.Import...)
			}
		}
	}
	var all [][]netip.Prefix
	for _, groups := range spec.export {
		for _, g := range groups {
			all = append(all, g.Prefixes)
		}
	}
	spec.paths = unionPaths(all, nh)
	return spec, nil
}

// unionPaths merges sorted prefix lists into one sorted list of paths
// without duplicates, each with the node's next hop of its family.
func unionPaths(lists [][]netip.Prefix, nh nextHops) []pathEntry {
	total := 0
	for _, l := range lists {
		total += len(l)
	}
	out := make([]pathEntry, 0, total)
	if len(lists) == 1 {
		for _, p := range lists[0] {
			out = append(out, pathEntry{p, nh.hopOf(p)})
		}
		return out
	}
	pos := make([]int, len(lists))
	for {
		var min netip.Prefix
		found := false
		for i, l := range lists {
			if pos[i] < len(l) && (!found || comparePrefixes(l[pos[i]], min) < 0) {
				min, found = l[pos[i]], true
			}
		}
		if !found {
			return out
		}
		for i, l := range lists {
			if pos[i] < len(l) && l[pos[i]] == min {
				pos[i]++
			}
		}
		out = append(out, pathEntry{min, nh.hopOf(min)})
	}
}

func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

func joinReasons(m map[bgp.Family]string) string {
	var out string
	for _, f := range slices.Sorted(maps.Keys(m)) {
		if out != "" {
			out += "; "
		}
		out += string(f) + ": " + m[f]
	}
	return out
}

// router is a running GoBGP server and what has been applied to it.
type router struct {
	asn        uint32
	routerID   netip.Addr
	listenPort int32
	srv        *server.BgpServer
	logLevel   *slog.LevelVar // GoBGP's log level
	// restarting is set while the server is new: neighbors added in the
	// ConfigurePeers call that started it advertise the restart flag.
	restarting bool
	// neighbors are the neighbors configured in GoBGP; status holds every
	// neighbor of the applied policy (for Peers), configured or not.
	neighbors map[netip.Addr]neighborSpec
	status    map[netip.Addr]neighborSpec
	paths     *pathTable
	policy    *policyTable
	// stopWatch ends the watch of the best paths (learned routes).
	stopWatch context.CancelFunc
}

func (m *Manager) applyRouter(ctx context.Context, want routerSpec) error {
	r := m.routers[want.asn]
	if r != nil && (r.routerID != want.routerID || r.listenPort != want.listenPort) {
		m.log.Info("restarting virtual router", slog.Uint64("asn", uint64(want.asn)),
			slog.Any("routerID", want.routerID), slog.Int("listenPort", int(want.listenPort)))
		m.stopLocked(r, false)
		r = nil
	}
	if r == nil {
		var err error
		if r, err = m.startLocked(ctx, want); err != nil {
			return err
		}
	}
	defer func() { r.restarting = false }()
	r.status = want.neighbors
	configured := make(map[netip.Addr]neighborSpec, len(want.neighbors))
	for addr, n := range want.neighbors {
		if _, bad := want.unusable[addr]; !bad {
			configured[addr] = n
		}
	}
	// Neighbors that go or change first; then the routes and the policies;
	// new neighbors last, so that they find their export policy in place.
	if err := m.removeNeighbors(ctx, r, configured); err != nil {
		return err
	}
	if err := r.policy.reconcile(ctx, r.paths, want.paths, want.export, want.imports, m.establishedOf(ctx, r)); err != nil {
		return err
	}
	return m.addNeighbors(ctx, r, configured)
}

// establishedOf returns a function that reports whether r's neighbor addr
// is Established (soft resets are sent only to those).
func (m *Manager) establishedOf(ctx context.Context, r *router) func() map[netip.Addr]bool {
	return func() map[netip.Addr]bool {
		out := map[netip.Addr]bool{}
		_ = r.srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
			if a, err := netip.ParseAddr(p.GetConf().GetNeighborAddress()); err == nil &&
				p.GetState().GetSessionState() == api.PeerState_SESSION_STATE_ESTABLISHED {
				out[a] = true
			}
		})
		return out
	}
}

func (m *Manager) startLocked(ctx context.Context, spec routerSpec) (*router, error) {
	lvl := new(slog.LevelVar)
	lvl.Set(slog.LevelWarn)
	glog := m.log.With(slog.Uint64("asn", uint64(spec.asn)), slog.String("subsystem", "gobgp"))
	srv := server.NewBgpServer(server.LoggerOption(slog.New(levelHandler{glog.Handler(), lvl}), lvl))
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		srv.Serve()
	}()
	g := &api.Global{Asn: spec.asn, RouterId: spec.routerID.String(), ListenPort: spec.listenPort}
	if spec.listenPort > 0 {
		for _, a := range m.cfg.ListenAddresses {
			g.ListenAddresses = append(g.ListenAddresses, a.String())
		}
	}
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: g}); err != nil {
		srv.Stop()
		return nil, fmt.Errorf("start GoBGP (router ID %s, listen port %d): %w", spec.routerID, spec.listenPort, err)
	}
	r := &router{
		asn: spec.asn, routerID: spec.routerID, listenPort: spec.listenPort,
		srv: srv, logLevel: lvl, restarting: true,
		neighbors: make(map[netip.Addr]neighborSpec),
		paths:     newPathTable(srv),
		policy:    newPolicyTable(srv),
	}
	// Until the first reconcile: nothing is exported, and only locally
	// originated paths are imported (no transit, nothing learned).
	if err := r.policy.init(ctx); err != nil {
		srv.Stop()
		return nil, err
	}
	if err := m.watchLearned(r); err != nil {
		srv.Stop()
		return nil, err
	}
	m.routers[spec.asn] = r
	m.log.Info("virtual router started", slog.Uint64("asn", uint64(spec.asn)), slog.Any("routerID", spec.routerID))
	return r, nil
}

func (m *Manager) stopAllLocked(graceful bool) {
	for _, r := range m.routers {
		m.stopLocked(r, graceful)
	}
}

// stopLocked stops r's server: its listeners are closed, its FSM goroutines
// end and the Serve goroutine returns. graceful=false sends every peer a
// Cease (converted by GoBGP into a Hard Reset for peers that negotiated RFC
// 8538), which withdraws the routes. graceful=true closes the sessions that
// negotiated graceful restart without a NOTIFICATION, so that those peers
// keep the routes for the restart time; the others get a Cease.
func (m *Manager) stopLocked(r *router, graceful bool) {
	m.forgetLearned(r)
	if graceful {
		if err := r.srv.StopBgp(context.Background(), &api.StopBgpRequest{AllowGracefulRestart: true}); err != nil {
			m.log.Warn("graceful stop of GoBGP failed", slog.Uint64("asn", uint64(r.asn)), slog.Any("error", err))
		}
		// Stop also ends GoBGP's BFD goroutine; its second StopBgp fails
		// with "not running", which is expected: keep it out of the logs.
		r.logLevel.Set(slog.LevelError + 4)
	}
	r.srv.Stop()
	delete(m.routers, r.asn)
	m.log.Info("virtual router stopped", slog.Uint64("asn", uint64(r.asn)), slog.Bool("graceful", graceful))
}

// removeNeighbors deletes the configured neighbors that are not wanted or
// whose session configuration changed.
func (m *Manager) removeNeighbors(ctx context.Context, r *router, want map[netip.Addr]neighborSpec) error {
	var errs []error
	for _, addr := range slices.SortedFunc(maps.Keys(r.neighbors), netip.Addr.Compare) {
		cur := r.neighbors[addr]
		if n, ok := want[addr]; ok && n.Equal(cur.Neighbor) {
			continue
		}
		if err := r.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
			errs = append(errs, fmt.Errorf("delete neighbor %s: %w", addr, err))
			continue
		}
		delete(r.neighbors, addr)
		m.log.Debug("neighbor removed", slog.Uint64("asn", uint64(r.asn)), slog.Any("peer", addr))
	}
	return errors.Join(errs...)
}

// addNeighbors adds the wanted neighbors that are not configured.
func (m *Manager) addNeighbors(ctx context.Context, r *router, want map[netip.Addr]neighborSpec) error {
	var errs []error
	for _, addr := range slices.SortedFunc(maps.Keys(want), netip.Addr.Compare) {
		if _, ok := r.neighbors[addr]; ok {
			continue
		}
		n := want[addr]
		if err := r.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: peerToAPI(r.asn, n.Neighbor, r.restarting)}); err != nil {
			errs = append(errs, fmt.Errorf("add neighbor %s: %w", addr, err))
			continue
		}
		r.neighbors[addr] = n
		m.log.Debug("neighbor added", slog.Uint64("asn", uint64(r.asn)), slog.Any("peer", addr))
	}
	return errors.Join(errs...)
}

// peerToAPI converts a neighbor; n.Families are the families to offer.
// restarting sets the restart (R) flag of the graceful-restart capability
// (and, as GoBGP does for a restarting speaker, the forwarding-state flag of
// every family: the data plane keeps forwarding while the agent restarts).
func peerToAPI(localASN uint32, n bgp.Neighbor, restarting bool) *api.Peer {
	p := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: n.PeerAddress.String(),
			PeerAsn:         n.PeerASN,
			LocalAsn:        localASN,
			AuthPassword:    n.Password,
		},
		Transport: &api.Transport{
			RemotePort:  uint32(n.PeerPort),
			PassiveMode: n.Passive,
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			ConnectRetry:      uint64(n.ConnectRetryTime.Seconds()),
			HoldTime:          uint64(n.HoldTime.Seconds()),
			KeepaliveInterval: uint64(n.KeepaliveTime.Seconds()),
		}},
	}
	if n.LocalAddress.IsValid() {
		p.Transport.LocalAddress = n.LocalAddress.Unmap().String()
	}
	if n.EBGPMultihopTTL > 1 && n.PeerASN != localASN {
		p.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(n.EBGPMultihopTTL)}
	}
	gr := n.GracefulRestart
	if gr.Enabled {
		p.GracefulRestart = &api.GracefulRestart{
			Enabled:             true,
			RestartTime:         uint32(gr.RestartTime.Seconds()),
			NotificationEnabled: true, // RFC 8538: the N flag
			LocalRestarting:     restarting,
			DeferralTime:        selectionDeferralTime,
		}
	}
	for _, f := range n.Families {
		afi := api.Family_AFI_IP
		if f == bgp.IPv6Unicast {
			afi = api.Family_AFI_IP6
		}
		as := &api.AfiSafi{Config: &api.AfiSafiConfig{
			Family:  &api.Family{Afi: afi, Safi: api.Family_SAFI_UNICAST},
			Enabled: true,
		}}
		if gr.Enabled {
			as.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
		}
		p.AfiSafis = append(p.AfiSafis, as)
	}
	return p
}

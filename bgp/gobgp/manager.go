package gobgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/vswitchkit/vswitchkit/bgp"
)

// Config configures a [Manager]. The zero value is valid.
type Config struct {
	// Services lists the services whose VIPs virtual routers with a
	// ServiceSelector advertise. Default nil: no service is advertised.
	Services bgp.ServiceLister
	// ListenAddresses are the addresses a server listens on when the node
	// annotates a local port for its ASN. Default: all addresses (0.0.0.0
	// and ::).
	ListenAddresses []netip.Addr
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

	// mu serializes ConfigurePeers and Run's shutdown and guards the fields
	// below.
	mu      sync.Mutex
	state   runState
	routers map[uint32]*router // by local ASN

	wg sync.WaitGroup // one per GoBGP Serve goroutine
}

type runState int

const (
	stateNew runState = iota
	stateRunning
	stateStopped
)

var _ bgp.BGPRouterManager = (*Manager)(nil)

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
	return &Manager{cfg: cfg, log: log.With(slog.String("component", "bgp-gobgp")), routers: make(map[uint32]*router)}, nil
}

// Run makes the manager usable and blocks until ctx is cancelled. It then
// stops every GoBGP server (disconnecting all peers, which withdraws the
// routes) and returns ctx.Err() once every goroutine it started has exited.
// A second call returns [ErrAlreadyRunning].
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.state != stateNew {
		m.mu.Unlock()
		return ErrAlreadyRunning
	}
	m.state = stateRunning
	m.mu.Unlock()
	m.log.Info("started")

	<-ctx.Done()

	m.mu.Lock()
	m.state = stateStopped
	m.stopAllLocked()
	m.mu.Unlock()
	m.wg.Wait()
	m.log.Info("stopped")
	return ctx.Err()
}

// ConfigurePeers applies policy (see [bgp.BGPRouterManager]). It applies
// [bgp.PeeringPolicy.WithDefaults] itself and returns the validation error
// of a flawed policy without changing anything. Problems of a single virtual
// router (no router ID, a listening port in use) are returned joined, after
// the other virtual routers have been applied. A nil policy stops all
// servers. It returns [ErrNotRunning] outside [Manager.Run].
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
		m.stopAllLocked()
		return nil
	}
	policy = policy.WithDefaults()
	if err := policy.Validate(); err != nil {
		return fmt.Errorf("policy %q: %w", policy.Name, err)
	}
	podCIDRs, err := state.PodCIDRs()
	if err != nil {
		return err
	}
	var services []bgp.Service
	if m.cfg.Services != nil {
		services = m.cfg.Services.ListServices()
	}

	desired := make(map[uint32]bool, len(policy.VirtualRouters))
	for _, vr := range policy.VirtualRouters {
		desired[vr.LocalASN] = true
	}
	for asn, r := range m.routers {
		if !desired[asn] {
			m.stopLocked(r)
		}
	}

	var errs []error
	for _, vr := range policy.VirtualRouters {
		if err := ctx.Err(); err != nil {
			return err
		}
		want, err := m.desiredRouter(vr, state, podCIDRs, services)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := m.applyRouter(ctx, want); err != nil {
			errs = append(errs, fmt.Errorf("virtual router %d: %w", vr.LocalASN, err))
		}
	}
	return errors.Join(errs...)
}

// routerSpec is the desired state of one virtual router.
type routerSpec struct {
	asn        uint32
	routerID   netip.Addr
	listenPort int32 // -1: do not listen
	neighbors  map[netip.Addr]bgp.Neighbor
	paths      map[netip.Prefix]netip.Addr // prefix -> next hop
}

func (m *Manager) desiredRouter(vr bgp.VirtualRouter, state *bgp.ControlPlaneState, podCIDRs []netip.Prefix, services []bgp.Service) (routerSpec, error) {
	rid, err := state.RouterID(vr.LocalASN)
	if err != nil {
		return routerSpec{}, err
	}
	spec := routerSpec{
		asn:        vr.LocalASN,
		routerID:   rid,
		listenPort: -1,
		neighbors:  make(map[netip.Addr]bgp.Neighbor, len(vr.Neighbors)),
		paths:      make(map[netip.Prefix]netip.Addr),
	}
	if a, ok := state.Annotations[vr.LocalASN]; ok && a.LocalPort != 0 {
		spec.listenPort = int32(a.LocalPort)
	}
	for _, n := range vr.Neighbors {
		n.PeerAddress = n.PeerAddress.Unmap()
		spec.neighbors[n.PeerAddress] = n
	}
	nh4, nh6 := netip.IPv4Unspecified(), netip.IPv6Unspecified()
	if a, ok := netip.AddrFromSlice(state.IPv6); ok && a.Is6() && !a.Is4In6() && !a.IsUnspecified() {
		nh6 = a
	}
	add := func(p netip.Prefix) {
		if p.Addr().Is4() {
			spec.paths[p] = nh4
		} else {
			spec.paths[p] = nh6
		}
	}
	if vr.ExportPodCIDR {
		for _, p := range podCIDRs {
			add(p)
		}
	}
	if vr.ServiceSelector != nil {
		for _, svc := range services {
			ok, err := vr.ServiceSelector.Matches(svc.Labels)
			if err != nil {
				return routerSpec{}, fmt.Errorf("virtual router %d: service selector: %w", vr.LocalASN, err)
			}
			if !ok {
				continue
			}
			for _, vip := range svc.VIPs {
				if !vip.IsValid() {
					continue
				}
				vip = vip.Unmap()
				add(netip.PrefixFrom(vip, vip.BitLen()))
			}
		}
	}
	return spec, nil
}

// router is a running GoBGP server and what has been applied to it.
type router struct {
	spec routerSpec // applied state; neighbors and paths as applied so far
	srv  *server.BgpServer
	// added keeps the GoBGP path of every advertised prefix, to withdraw it.
	added map[netip.Prefix]*apiutil.Path
}

func (m *Manager) applyRouter(ctx context.Context, want routerSpec) error {
	r := m.routers[want.asn]
	if r != nil && (r.spec.routerID != want.routerID || r.spec.listenPort != want.listenPort) {
		m.log.Info("restarting virtual router", slog.Uint64("asn", uint64(want.asn)),
			slog.Any("routerID", want.routerID), slog.Int("listenPort", int(want.listenPort)))
		m.stopLocked(r)
		r = nil
	}
	if r == nil {
		var err error
		if r, err = m.startLocked(ctx, want); err != nil {
			return err
		}
	}
	if err := m.reconcileNeighbors(ctx, r, want.neighbors); err != nil {
		return err
	}
	return m.reconcilePaths(r, want.paths)
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
	// Keep learned routes in the Adj-RIB-In only: no import, hence no
	// transit. Locally originated paths pass the import policy too, so only
	// paths from peers (internal or external) are rejected.
	if err := setLeafPolicy(ctx, srv); err != nil {
		srv.Stop()
		return nil, err
	}
	r := &router{
		spec: routerSpec{asn: spec.asn, routerID: spec.routerID, listenPort: spec.listenPort,
			neighbors: make(map[netip.Addr]bgp.Neighbor), paths: make(map[netip.Prefix]netip.Addr)},
		srv:   srv,
		added: make(map[netip.Prefix]*apiutil.Path),
	}
	m.routers[spec.asn] = r
	m.log.Info("virtual router started", slog.Uint64("asn", uint64(spec.asn)), slog.Any("routerID", spec.routerID))
	return r, nil
}

func (m *Manager) stopAllLocked() {
	for _, r := range m.routers {
		m.stopLocked(r)
	}
}

// stopLocked stops r's server: GoBGP sends CEASE to every peer, closes the
// listeners and waits for its FSM goroutines; the Serve goroutine returns.
func (m *Manager) stopLocked(r *router) {
	r.srv.Stop()
	delete(m.routers, r.spec.asn)
	m.log.Info("virtual router stopped", slog.Uint64("asn", uint64(r.spec.asn)))
}

func (m *Manager) reconcileNeighbors(ctx context.Context, r *router, want map[netip.Addr]bgp.Neighbor) error {
	var errs []error
	for _, addr := range slices.SortedFunc(maps.Keys(r.spec.neighbors), netip.Addr.Compare) {
		cur := r.spec.neighbors[addr]
		if n, ok := want[addr]; ok && n.Equal(cur) {
			continue
		}
		if err := r.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
			errs = append(errs, fmt.Errorf("delete neighbor %s: %w", addr, err))
			continue
		}
		delete(r.spec.neighbors, addr)
		m.log.Debug("neighbor removed", slog.Uint64("asn", uint64(r.spec.asn)), slog.Any("peer", addr))
	}
	for _, addr := range slices.SortedFunc(maps.Keys(want), netip.Addr.Compare) {
		if _, ok := r.spec.neighbors[addr]; ok {
			continue
		}
		n := want[addr]
		if err := r.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: peerToAPI(r.spec.asn, n)}); err != nil {
			errs = append(errs, fmt.Errorf("add neighbor %s: %w", addr, err))
			continue
		}
		r.spec.neighbors[addr] = n
		m.log.Debug("neighbor added", slog.Uint64("asn", uint64(r.spec.asn)), slog.Any("peer", addr))
	}
	return errors.Join(errs...)
}

func peerToAPI(localASN uint32, n bgp.Neighbor) *api.Peer {
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
		p.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: uint32(gr.RestartTime.Seconds())}
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

func (m *Manager) reconcilePaths(r *router, want map[netip.Prefix]netip.Addr) error {
	var del []*apiutil.Path
	var delPrefixes []netip.Prefix
	for p, nh := range r.spec.paths {
		if wnh, ok := want[p]; ok && wnh == nh {
			continue
		}
		if _, ok := want[p]; ok {
			continue // next hop changed: AddPath below replaces the path
		}
		del = append(del, r.added[p])
		delPrefixes = append(delPrefixes, p)
	}
	if len(del) > 0 {
		if err := r.srv.DeletePath(apiutil.DeletePathRequest{Paths: del}); err != nil {
			return fmt.Errorf("withdraw %d paths: %w", len(del), err)
		}
		for _, p := range delPrefixes {
			delete(r.spec.paths, p)
			delete(r.added, p)
		}
		m.log.Debug("paths withdrawn", slog.Uint64("asn", uint64(r.spec.asn)), slog.Int("count", len(del)))
	}

	var add []*apiutil.Path
	var addPrefixes []netip.Prefix
	for p, nh := range want {
		if cur, ok := r.spec.paths[p]; ok && cur == nh {
			continue
		}
		path, err := newPath(p, nh)
		if err != nil {
			return err
		}
		add = append(add, path)
		addPrefixes = append(addPrefixes, p)
	}
	if len(add) == 0 {
		return nil
	}
	resps, err := r.srv.AddPath(apiutil.AddPathRequest{Paths: add})
	for i, p := range addPrefixes {
		if i < len(resps) && resps[i].Error != nil {
			continue
		}
		if err != nil && len(resps) == 0 {
			break
		}
		r.spec.paths[p] = want[p]
		r.added[p] = add[i]
	}
	if err != nil {
		return fmt.Errorf("advertise %d paths: %w", len(add), err)
	}
	m.log.Debug("paths advertised", slog.Uint64("asn", uint64(r.spec.asn)), slog.Int("count", len(add)))
	return nil
}

func newPath(p netip.Prefix, nh netip.Addr) (*apiutil.Path, error) {
	nlri, err := gobgppkt.NewIPAddrPrefix(p)
	if err != nil {
		return nil, fmt.Errorf("path %s: %w", p, err)
	}
	family := gobgppkt.RF_IPv4_UC
	if p.Addr().Is6() {
		family = gobgppkt.RF_IPv6_UC
	}
	origin := gobgppkt.NewPathAttributeOrigin(gobgppkt.BGP_ORIGIN_ATTR_TYPE_IGP)
	var nhAttr gobgppkt.PathAttributeInterface
	if family == gobgppkt.RF_IPv4_UC {
		nhAttr, err = gobgppkt.NewPathAttributeNextHop(nh)
	} else {
		nhAttr, err = gobgppkt.NewPathAttributeMpReachNLRI(family, []gobgppkt.PathNLRI{{NLRI: nlri}}, nh)
	}
	if err != nil {
		return nil, fmt.Errorf("path %s: next hop %s: %w", p, nh, err)
	}
	return &apiutil.Path{Family: family, Nlri: nlri, Attrs: []gobgppkt.PathAttributeInterface{origin, nhAttr}}, nil
}

// leafPolicy is the name of the import policy that rejects learned routes.
const leafPolicy = "vswitchkit-leaf"

func setLeafPolicy(ctx context.Context, srv *server.BgpServer) error {
	reject := func(name string, rt api.Conditions_RouteType) *api.Statement {
		return &api.Statement{
			Name:       name,
			Conditions: &api.Conditions{RouteType: rt},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
		}
	}
	if err := srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: leafPolicy, Statements: []*api.Statement{
		reject(leafPolicy+"-external", api.Conditions_ROUTE_TYPE_EXTERNAL),
		reject(leafPolicy+"-internal", api.Conditions_ROUTE_TYPE_INTERNAL),
	}}}); err != nil {
		return fmt.Errorf("add import policy: %w", err)
	}
	if err := srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name:          "global",
		Direction:     api.PolicyDirection_POLICY_DIRECTION_IMPORT,
		Policies:      []*api.Policy{{Name: leafPolicy}},
		DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
	}}); err != nil {
		return fmt.Errorf("assign import policy: %w", err)
	}
	return nil
}

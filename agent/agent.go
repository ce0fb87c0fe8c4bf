package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.fd.io/govpp/adapter"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/bgpstatus"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp"
	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/boltstore"
	"github.com/vswitchkit/vswitchkit/ipam/etcdstore"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/etcddb"
	"github.com/vswitchkit/vswitchkit/policy"
	"github.com/vswitchkit/vswitchkit/render/aclpolicy"
	"github.com/vswitchkit/vswitchkit/render/bgproutes"
	"github.com/vswitchkit/vswitchkit/render/bgpsource"
	"github.com/vswitchkit/vswitchkit/render/nodeaddr"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
	"github.com/vswitchkit/vswitchkit/render/podconn"
	"github.com/vswitchkit/vswitchkit/render/svccnat"
	"github.com/vswitchkit/vswitchkit/render/svcnat"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/watcher"
)

// Deps are the parts of the outside world an agent uses.
type Deps struct {
	// Etcd is the cluster-wide etcd; the caller owns and closes it.
	// Required.
	Etcd *clientv3.Client
	// VPP makes one adapter per connection attempt: GoVPP's socketclient
	// for a real VPP, or a vppsim VPP's NewAdapter. Required.
	VPP func() adapter.VppAPI
	// Linux does the pod side of pod interfaces: linuxpod.New() on a real
	// host, cniservertest.NewFakeLinux() where pods are simulated.
	// Required.
	Linux cniserver.Linux
	// Logger receives every component's logs, with node=<NodeName>; each
	// component adds its own component=<name> (the agent's own lines say
	// component=agent), so Logger must carry no component attribute.
	// Default: discard.
	Logger *slog.Logger
}

// Agent is one node's running vswitchkit agent. Its fields are the
// components, exposed for observation; they are set by Open and must not
// be replaced. Agent is safe for concurrent use as far as its components
// are.
type Agent struct {
	cfg Config
	log *slog.Logger // the components' logger: node=<name>, no component
	own *slog.Logger // the agent's own logs: component=agent

	Driver   *vppdriver.Driver
	Loop     *controller.Loop
	Watcher  *watcher.Watcher
	NodeSync *nodesync.NodeSync
	IPAM     *ipam.IPAM
	// IPAM6 is the IPv6 IPAM of a dual-stack cluster (Config.IPFamily
	// "dual"), else nil.
	IPAM6 *ipam.IPAM
	// NodeIPs are this node's addresses (NodePorts are exposed on them).
	NodeIPs  *nodeaddr.NodeIPSet
	NodeConn *nodeconn.Handler
	PodConn  *podconn.Handler
	Services *svcprocessor.ServiceProcessor
	// NAT is the NAT44-ED service renderer; nil when Config.Services is
	// not "nat44".
	NAT *svcnat.Renderer
	// Cnat is the cnat service renderer (also the handler of the pods'
	// hostPorts); nil when Config.Services is not "cnat".
	Cnat *svccnat.Renderer
	// Policy computes the pods' NetworkPolicies and ACLs renders them onto
	// VPP's ACL plugin; both nil when Config.Policy.Disabled.
	Policy *policy.Processor
	ACLs   *aclpolicy.Renderer
	CNI    *cniserver.Server
	// BGP is nil when BGP is disabled.
	BGP *BGP

	db      *etcddb.DB
	runners []runner       // started by Run
	closers []func() error // local files, closed by Run's end or Close
	stopped chan struct{}  // closed when Run begins to stop
	run     lifecycle.Once
}

// runner is a component's Run with the stage in which Run stops it.
type runner struct {
	name  string
	stage stopStage
	run   func(context.Context) error
}

// stopStage orders the shutdown: Run stops the components stage by stage,
// in this order, each after the previous one has returned.
type stopStage int

const (
	// The pod server first: it stops accepting requests and finishes those
	// in progress while the loop still answers their events.
	stopPods stopStage = iota
	// The producers of events and BGP's control loop: nothing new reaches
	// the loop; the BGP controller withdraws (or leaves routes for
	// graceful restart) while its manager still runs.
	stopProducers
	// The BGP speakers: sessions end (Cease, or silently for graceful
	// restart).
	stopSpeakers
	// The loop: it finishes the event in progress and processes the
	// Shutdown event (the reference handlers remove nothing on it).
	stopLoop
	// The IPAM store in etcd, which the loop's handlers write to.
	stopStores
	// The VPP driver last: it applies what the loop committed, then
	// disconnects and leaves VPP configured, so pods keep working until
	// the next agent resyncs.
	stopDriver
	numStopStages
)

// BGP is the agent's BGP control plane.
type BGP struct {
	Source     *bgpsource.Source
	Manager    *gobgp.Manager
	Controller *bgp.Controller
	// Routes installs the routes learned from peers (import prefix lists)
	// into VPP.
	Routes *bgproutes.Handler
	// Status publishes the node's BGP status under
	// bgpmodel.StatusKey("", node) in etcd.
	Status *bgpstatus.Publisher
}

// Open builds an agent and opens its local state files (the IPAM and CNI
// stores in Config.StateDir, created if missing). It starts nothing; call
// Run. Close releases the files of an agent that is never run.
func Open(cfg Config, deps Deps) (a *Agent, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("agent: config: %w", err)
	}
	cfg, _ = cfg.withDefaults()
	switch {
	case deps.Etcd == nil:
		return nil, errors.New("agent: no etcd client")
	case deps.VPP == nil:
		return nil, errors.New("agent: no VPP adapter")
	case deps.Linux == nil:
		return nil, errors.New("agent: no Linux implementation for the pod server")
	}
	log := discard(deps.Logger).With(slog.String("node", cfg.NodeName))
	// The cleanup closes what was opened before a failure: it must not use
	// a, which a "return nil, err" has set to nil by the time it runs.
	built := &Agent{cfg: cfg, log: log, own: log.With(slog.String("component", "agent")), stopped: make(chan struct{})}
	a = built
	defer func() {
		if err != nil {
			built.Close()
		}
	}()
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: state directory: %w", err)
	}

	a.Driver, err = vppdriver.New(deps.VPP, vppdriver.Config{Logger: log})
	if err != nil {
		return nil, err
	}
	a.Loop, err = controller.New(nil, a.Driver, controller.Config{
		Logger: log, HealingDelay: cfg.HealingDelay, MaxHealingDelay: cfg.MaxHealingDelay,
	})
	if err != nil {
		return nil, err
	}
	a.add("vppdriver", stopDriver, a.Driver.Run)
	a.add("controller", stopLoop, a.Loop.Run)

	// Node IDs, with local state for starts without etcd.
	a.db, err = etcddb.NewFromClient(deps.Etcd, etcddb.Config{Logger: log})
	if err != nil {
		return nil, err
	}
	a.NodeSync, err = nodesync.New(cfg.NodeName, a.db, a.Loop, nodesync.Config{
		Logger:             log,
		LocalState:         nodesync.NewStateFile(cfg.statePath("nodesync.json")),
		LocalFallbackDelay: cfg.LocalFallbackDelay,
		// The node's VPP address goes with the claim of its ID: one write
		// of the node's record per join, one watch event on every other
		// node (a.NodeConn is built below, before Run calls this).
		InitialNodeIPs: func(id uint32) (nodesync.IPsWithNetworks, error) { return a.NodeConn.NodeIPs(id) },
	})
	if err != nil {
		return nil, err
	}
	a.add("nodesync", stopProducers, a.NodeSync.Run)

	// Pod IPs with a durable store; a second IPAM with its own store for
	// the IPv6 addresses of a dual-stack cluster.
	store, err := a.openIPAMStore(deps.Etcd, false)
	if err != nil {
		return nil, err
	}
	ipamCfg := cfg.IPAM
	ipamCfg.Store, ipamCfg.EventLoop, ipamCfg.Logger = store, a.Loop, log
	a.IPAM, err = ipam.New(a.NodeSync, ipamCfg)
	if err != nil {
		return nil, err
	}
	ipams := []*ipam.IPAM{a.IPAM}
	if cfg.IPFamily == DualStack {
		store6, err := a.openIPAMStore(deps.Etcd, true)
		if err != nil {
			return nil, err
		}
		ipam6Cfg := cfg.IPAM6
		ipam6Cfg.Store, ipam6Cfg.EventLoop, ipam6Cfg.Logger = store6, a.Loop, log
		if a.IPAM6, err = ipam.New(a.NodeSync, ipam6Cfg); err != nil {
			return nil, err
		}
		ipams = append(ipams, a.IPAM6)
	}

	// Node and pod connectivity. podconn rebuilds pods from the pod
	// server's durable attachments, and the pod server asks podconn for a
	// pod's interface type (its annotation): they are joined through a.
	// With cnat services, cnat's feature on the tunnels instead of NAT44's.
	nodeCfg := nodeconn.Config{
		Uplink: cfg.Uplink, HostInterconnect: cfg.HostInterconnect,
		NAT44: cfg.Services != ServicesCnat, Cnat: cfg.Services == ServicesCnat,
		PodCIDRsFromKubernetes: cfg.IPAM.ExternalIPAM, Logger: log,
	}
	podCfg := podconn.Config{
		InterfaceType: cfg.PodInterfaceType,
		Attachments:   podconn.AttachmentsFunc(func() ([]podiface.Attachment, error) { return a.CNI.PodAttachments() }),
		Logger:        log,
	}
	if a.IPAM6 != nil {
		nodeCfg.DualStack, podCfg.DualStack = a.IPAM6, a.IPAM6
	}
	if a.NodeConn, err = nodeconn.New(a.NodeSync, a.NodeSync, a.IPAM, nodeCfg); err != nil {
		return nil, err
	}
	if a.PodConn, err = podconn.New(a.IPAM, podCfg); err != nil {
		return nil, err
	}

	// Services: NodePorts on this node's addresses, rendered onto NAT44-ED
	// or cnat.
	a.NodeIPs = nodeaddr.NewNodeIPSet(a.NodeSync, nodeaddr.NodeIPSetConfig{OnlyNode: cfg.NodeName})
	a.Services, err = svcprocessor.New(svcprocessor.SubnetsFromIPNet(a.IPAM), a.NodeIPs, a.PodConn,
		svcprocessor.Config{Logger: log, NodeName: cfg.NodeName})
	if err != nil {
		return nil, err
	}
	if cfg.Services == ServicesNAT44 {
		natCfg := svcnat.Config{Uplink: a.uplinkName(), InterconnectInterfaces: a.interconnects(), Logger: log}
		if a.NAT, err = svcnat.New(a.NodeIPs, a.IPAM, natCfg); err != nil {
			return nil, err
		}
		if err := a.Services.RegisterRenderer(a.NAT); err != nil {
			return nil, err
		}
	}
	if cfg.Services == ServicesCnat {
		if err := a.newCnat(ipams); err != nil {
			return nil, err
		}
	}

	// Dependency order: node IDs, pod IPs, node addresses, the mesh, pods,
	// services (and their renderers), BGP.
	// NodeIPs after nodeconn: nodeconn publishes this node's VPP addresses
	// (nodesync does not report a node's own VPP addresses as a
	// NodeUpdate), and NodeIPs reads them in the same resync.
	handlers := []controller.EventHandler{a.NodeSync, a.IPAM}
	if a.IPAM6 != nil {
		handlers = append(handlers, a.IPAM6)
	}
	handlers = append(handlers, a.NodeConn, a.NodeIPs, a.PodConn, a.Services.Handler())
	if a.Cnat != nil {
		// The renderer is the pods' handler too (their hostPorts).
		handlers = append(handlers, a.Cnat)
	}
	if !cfg.Policy.Disabled {
		if err := a.newPolicy(); err != nil {
			return nil, err
		}
		// After podconn (the ACL lists name the pods' interfaces) and IPAM
		// (a new pod's address); the renderer after the processor.
		handlers = append(handlers, a.Policy.Handler(), a.ACLs)
	}
	if !cfg.BGP.Disabled {
		if a.BGP, err = a.newBGP(deps.Etcd); err != nil {
			return nil, err
		}
		handlers = append(handlers, a.BGP.Source, a.BGP.Routes)
		a.add("bgp-gobgp", stopSpeakers, a.BGP.Manager.Run)
		a.add("bgp-controller", stopProducers, a.BGP.Controller.Run)
		a.add("bgp-routes", stopProducers, a.BGP.Routes.Run)
		a.add("bgp-status", stopProducers, a.BGP.Status.Run)
	}
	if err := a.Loop.Register(handlers...); err != nil {
		return nil, err
	}

	// The Kubernetes state (of the pods, this node's: in the per-node
	// layout etcd sends no other) and this node's external configuration.
	var node string
	if !cfg.AllPods {
		node = cfg.NodeName
	}
	a.Watcher, err = watcher.NewWithClient(deps.Etcd, a.Loop, watcher.Config{
		NodeName:             node,
		KubeStatePrefix:      cfg.KubeStatePrefix,
		ExternalConfigPrefix: cfg.ExternalConfigPrefix,
		Resources:            bgpmodel.Resources(),
		MirrorPath:           cfg.statePath("mirror.db"),
		MirrorFallbackDelay:  cfg.LocalFallbackDelay,
		Logger:               log,
	})
	if err != nil {
		return nil, err
	}
	a.add("watcher", stopProducers, a.Watcher.Run)

	// The pod server.
	cniStore, err := cniserver.OpenBoltStore(cfg.statePath("cni.db"))
	if err != nil {
		return nil, fmt.Errorf("agent: CNI attachment store: %w", err)
	}
	a.closers = append(a.closers, cniStore.Close)
	a.CNI, err = cniserver.New(a.Loop, deps.Linux, cniStore, cniserver.Config{
		SocketPath:    cfg.CNISocket,
		InterfaceType: cfg.PodInterfaceType,
		InterfaceTypeFor: func(_ context.Context, pod kubemodel.PodID) (podiface.Type, error) {
			t, err := a.PodConn.InterfaceTypeOf(pod)
			if err != nil {
				// The pod's annotation names no type: its configuration
				// is wrong (CNI "invalid network config").
				return "", fmt.Errorf("%w: %w", cniserver.ErrInvalidConfig, err)
			}
			return t, nil
		},
		Ready:  func(context.Context) error { return a.Ready() },
		Logger: log,
	})
	if err != nil {
		return nil, err
	}
	a.add("cniserver", stopPods, a.CNI.Run)
	return a, nil
}

// openIPAMStore opens the IPAM store, or with ipv6 the store of a
// dual-stack cluster's IPv6 IPAM (ipam6.db, or /vswitchkit/ipam6/ in etcd).
func (a *Agent) openIPAMStore(cli *clientv3.Client, ipv6 bool) (ipam.Store, error) {
	name, file, prefix := "ipam-etcdstore", "ipam.db", etcdstore.DefaultPrefix
	if ipv6 {
		name, file, prefix = "ipam6-etcdstore", "ipam6.db", IPAM6EtcdPrefix
	}
	if a.cfg.IPAMStore == StoreEtcd {
		// The lease file is in the state directory, which this agent
		// holds locked: an agent restarted after a crash takes over the
		// store's lease at once.
		s, err := etcdstore.New(cli, a.cfg.NodeName, etcdstore.Config{Prefix: prefix, Logger: a.log,
			LeaseFile: a.cfg.statePath(strings.TrimSuffix(file, ".db") + "-etcd.lease")})
		if err != nil {
			return nil, err
		}
		a.add(name, stopStores, s.Run)
		return s, nil
	}
	s, err := boltstore.Open(a.cfg.statePath(file), boltstore.Config{Logger: a.log})
	if err != nil {
		return nil, fmt.Errorf("agent: IPAM store: %w", err)
	}
	a.closers = append(a.closers, s.Close)
	return s, nil
}

// newPolicy builds the NetworkPolicy processor and its ACL renderer. The
// addresses always allowed to reach this node's pods are the node's own
// (its Kubernetes and VPP addresses, the host's end of the host
// interconnect) and the NAT loopback address, from which a pod reaching
// itself through a service arrives.
func (a *Agent) newPolicy() error {
	var err error
	a.Policy, err = policy.New(policy.Config{
		NodeName: a.cfg.NodeName,
		PodAddrs: policy.PodAddrsFrom(a.podAddrLookups()...),
		Logger:   a.log,
	})
	if err != nil {
		return err
	}
	// NAT44 translates a service address after the pod's input ACL: the
	// service CIDR is checked after translation. cnat translates before
	// it: no prefix is deferred.
	var services []netip.Prefix
	if p := a.IPAM.ServiceNetworkPrefix(); p.IsValid() && a.cfg.Services != ServicesCnat {
		services = append(services, p)
	}
	a.ACLs, err = aclpolicy.New(a.PodConn, aclpolicy.Config{
		HostPrefixes: aclpolicy.HostPrefixesOf(func() []netip.Addr {
			ips := append([]netip.Addr(nil), a.NodeIPs.NodeIPs()...)
			for _, i := range a.ipams() {
				ips = append(ips, i.HostInterconnectAddrInLinux(), i.NatLoopbackAddr())
			}
			return ips
		}),
		ServicePrefixes: services,
		ExitInterfaces:  a.NodeConn.ExitInterfaces,
		Logger:          a.log,
	})
	if err != nil {
		return err
	}
	return a.Policy.RegisterRenderer(a.ACLs)
}

func (a *Agent) newBGP(etcd *clientv3.Client) (*BGP, error) {
	sig := bgp.NewSignaler()
	src, err := bgpsource.New(a.cfg.NodeName, sig, bgpsource.Config{
		PodSubnets: a.podSubnets(),
		Nodes:      a.NodeSync,
		IPv4:       a.cfg.BGP.IPv4,
		IPv6:       a.cfg.BGP.IPv6,
		Logger:     a.log,
	})
	if err != nil {
		return nil, err
	}
	if err := a.Services.RegisterRenderer(src); err != nil {
		return nil, err
	}
	learned := bgp.NewSignaler()
	mgr, err := gobgp.New(gobgp.Config{Services: src, ListenAddresses: a.cfg.BGP.ListenAddresses, LearnedRoutes: learned, Logger: a.log})
	if err != nil {
		return nil, err
	}
	ctrl, err := bgp.NewController(mgr, src, src, bgp.ControllerConfig{Signaler: sig, Logger: a.log})
	if err != nil {
		return nil, err
	}
	// Learned routes never shadow the cluster's own ranges.
	var reserved []netip.Prefix
	for _, i := range a.ipams() {
		for _, p := range []netip.Prefix{i.PodSubnetAllNodesPrefix(), i.HostInterconnectSubnetAllNodesPrefix(), i.ServiceNetworkPrefix()} {
			if p.IsValid() {
				reserved = append(reserved, p)
			}
		}
	}
	routes, err := bgproutes.New(mgr, learned, a.Loop, bgproutes.Config{Uplink: a.uplinkName(), Reserved: reserved, Logger: a.log})
	if err != nil {
		return nil, err
	}
	status, err := bgpstatus.New(a.cfg.NodeName, ctrl, bgpstatus.EtcdWriter(etcd), bgpstatus.Config{Interval: a.cfg.BGP.StatusInterval, Logger: a.log})
	if err != nil {
		return nil, err
	}
	return &BGP{Source: src, Manager: mgr, Controller: ctrl, Routes: routes, Status: status}, nil
}

// newCnat builds the cnat service renderer as the agent wires it: node
// ports on this node's addresses; pod traffic leaving the cluster
// source-NATed to the uplink's address of its family (the NAT loopbacks
// where there is no uplink), the cluster's ranges of every family
// excluded; cnat's feature on the uplink and the host interconnect.
func (a *Agent) newCnat(ipams []*ipam.IPAM) error {
	uplink := a.uplinkName()
	var ranges []svccnat.ClusterRanges
	for _, i := range ipams {
		ranges = append(ranges, i)
	}
	snat := svccnat.SNATAddrsFunc(func() []netip.Addr {
		var out []netip.Addr
		if uplink != "" {
			for _, i := range ipams {
				if p, err := i.NodeAddr(i.NodeID()); err == nil {
					out = append(out, p.Addr())
				}
			}
		}
		for _, i := range ipams {
			out = append(out, i.NatLoopbackAddr())
		}
		return out
	})
	cfg := svccnat.Config{NodeName: a.cfg.NodeName, Uplink: uplink, InterconnectInterfaces: a.interconnects(),
		ExcludedPrefixes: svccnat.ExcludedPrefixes(ranges...), Logger: a.log}
	var err error
	if a.Cnat, err = svccnat.New(a.NodeIPs, snat, cfg); err != nil {
		return err
	}
	return a.Services.RegisterRenderer(a.Cnat)
}

// ipams returns the IPAM and, in a dual-stack cluster, the IPv6 one.
func (a *Agent) ipams() []*ipam.IPAM {
	if a.IPAM6 != nil {
		return []*ipam.IPAM{a.IPAM, a.IPAM6}
	}
	return []*ipam.IPAM{a.IPAM}
}

// podAddrLookups returns the IPAMs' lookups of a pod's address.
func (a *Agent) podAddrLookups() []func(kubemodel.PodID) (netip.Addr, bool) {
	var out []func(kubemodel.PodID) (netip.Addr, bool)
	for _, i := range a.ipams() {
		out = append(out, i.PodAddr)
	}
	return out
}

// podSubnets returns the IPAMs as BGP's sources of pod subnets.
func (a *Agent) podSubnets() []bgpsource.PodSubnets {
	var out []bgpsource.PodSubnets
	for _, i := range a.ipams() {
		out = append(out, i)
	}
	return out
}

// interconnects returns the logical name of the host interconnect, if the
// agent configures one.
func (a *Agent) interconnects() []string {
	if a.cfg.HostInterconnect.AfPacketHostIf == "" && a.cfg.HostInterconnect.TapHostIfName == "" {
		return nil
	}
	return []string{cmp.Or(a.cfg.HostInterconnect.Name, nodeconn.DefaultHostInterconnectName)}
}

// uplinkName is the logical name of the uplink interface, if the agent
// configures one.
func (a *Agent) uplinkName() string {
	if a.cfg.Uplink.AfPacketHostIf == "" && a.cfg.Uplink.VPPName == "" {
		return ""
	}
	return cmp.Or(a.cfg.Uplink.Name, nodeconn.DefaultUplinkName)
}

// Config returns the agent's configuration with defaults filled in.
func (a *Agent) Config() Config { return a.cfg }

// Ready reports nil once the agent can serve pods: the start-up resync
// has been processed (controller.Loop.Ready), IPAM has this node's ID (its
// resync succeeded) and VPP is connected; else an error that says which is
// missing. It does not block; WaitReady waits for it.
func (a *Agent) Ready() error {
	select {
	case <-a.Loop.Ready():
	default:
		return errors.New("agent: no start-up resync yet")
	}
	if a.IPAM.NodeID() == 0 {
		return errors.New("agent: no node ID yet: the start-up resync of IPAM has not succeeded")
	}
	if !a.Driver.Connected() {
		return errors.New("agent: VPP not connected")
	}
	return nil
}

// readyPoll is how often WaitReady checks the conditions of Ready that
// follow the start-up resync (a node ID after a failed resync is healed, a
// VPP connection), which have no channel.
const readyPoll = 10 * time.Millisecond

// WaitReady blocks until Ready returns nil and returns nil. It waits for
// the loop's start-up resync with controller.Loop.WaitStartupResync, then
// for the node ID and the VPP connection. It returns earlier with:
//
//   - an error wrapping controller.ErrNotRunning when Run has not been
//     called within controller.NotRunningGrace (a few seconds), instead of
//     waiting for ever;
//   - an error wrapping controller.ErrStopped when the agent stops before
//     it is ready (Run returns the cause);
//   - ctx.Err() when ctx ends first.
//
// It is safe for concurrent use.
func (a *Agent) WaitReady(ctx context.Context) error {
	err := a.Loop.WaitStartupResync(ctx)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, controller.ErrNotRunning):
		return fmt.Errorf("agent: not ready: Run was not called: %w", err)
	case errors.Is(err, controller.ErrStopped):
		return fmt.Errorf("agent: stopped before it was ready: %w", err)
	}
	// The start-up resync was processed (a failed one is healed), or it is
	// late (ErrStartupResyncMissing: the loop still waits for it).
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		if a.Ready() == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.stopped:
			return fmt.Errorf("agent: stopped before it was ready: %w", controller.ErrStopped)
		case <-tick.C:
		}
	}
}

// AddHandler registers the caller's own event handlers with the agent's
// loop, after the agent's handlers (in this order): in every event they
// see the state that nodesync, IPAM, the connectivity handlers, the
// service processor and BGP already took from it, and what they put into
// the event's transaction is committed to VPP with the rest. Call it
// between Open and Run; after Run it returns controller.ErrRegisterAfterRun.
func (a *Agent) AddHandler(h ...controller.EventHandler) error {
	return a.Loop.Register(h...)
}

// AddServiceRenderer adds a renderer of the service processor's views,
// beside the built-in one (or alone, with Config.Services "none"). It gets
// a Resync with every service, then one event per change, on the loop's
// goroutine (see svcprocessor.ServiceRendererAPI). Call it between Open
// and Run.
func (a *Agent) AddServiceRenderer(r svcprocessor.ServiceRendererAPI) error {
	if a.run.Started() {
		return errors.New("agent: AddServiceRenderer after Run")
	}
	return a.Services.RegisterRenderer(r)
}

// AddRunner adds a long-running part of the caller's (e.g. what a handler
// of theirs feeds) that Run starts with the agent's components and stops
// with the event producers, before the loop: run must return once its
// context ends. A run that returns otherwise stops the agent, with its
// error. Call it between Open and Run.
func (a *Agent) AddRunner(name string, run func(context.Context) error) error {
	if name == "" || run == nil {
		return errors.New("agent: AddRunner needs a name and a function")
	}
	if a.run.Started() {
		return errors.New("agent: AddRunner after Run")
	}
	a.add(name, stopProducers, run)
	return nil
}

func (a *Agent) add(name string, stage stopStage, run func(context.Context) error) {
	a.runners = append(a.runners, runner{name: name, stage: stage, run: run})
}

// Run runs every component until ctx ends or one of them fails, then
// stops them in order, closes the local state files and returns: ctx.Err()
// when ctx ended it, else the first component's error. Run is single-use:
// a second call returns an error matching ErrAlreadyRunning.
//
// The order of the shutdown: the pod server stops accepting requests and
// finishes those in progress (their events still run); the watcher, node
// sync and the BGP controller stop; then the BGP speakers; then the loop,
// which finishes the event in progress; then the IPAM store in etcd;
// the VPP driver last, which disconnects without removing anything: VPP
// stays configured and pods keep working while no agent runs, and the
// next agent takes over what is there. Each stage gets Config.StopTimeout
// to return before the next one is stopped anyway (a pod request that
// waits for an event the loop cannot process yet, say before the start-up
// resync, then gets its answer from the stopping loop); Run still waits
// for every component.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.run.Start("agent"); err != nil {
		return err
	}
	defer a.Close()
	var (
		errMu    sync.Mutex
		firstErr error
		failed   = make(chan struct{})
		failOnce sync.Once
	)
	fail := func(name string, err error) {
		errMu.Lock()
		if firstErr == nil {
			if strings.HasPrefix(err.Error(), name+": ") {
				firstErr = fmt.Errorf("agent: %w", err) // named already
			} else {
				firstErr = fmt.Errorf("agent: %s: %w", name, err)
			}
		}
		errMu.Unlock()
		failOnce.Do(func() { close(failed) })
	}
	var (
		cancels [numStopStages]context.CancelFunc
		dones   [numStopStages][]chan struct{}
	)
	base := context.WithoutCancel(ctx)
	for st := range cancels {
		var sctx context.Context
		sctx, cancels[st] = context.WithCancel(base)
		for _, r := range a.runners {
			if r.stage != stopStage(st) {
				continue
			}
			done := make(chan struct{})
			dones[st] = append(dones[st], done)
			go func() {
				defer close(done)
				err := r.run(sctx)
				if sctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
					return // stopped as asked
				}
				if err == nil {
					err = errors.New("stopped")
				}
				fail(r.name, err)
			}()
		}
	}
	a.own.Info("agent started")
	select {
	case <-ctx.Done():
	case <-failed:
	}
	close(a.stopped)
	a.own.Info("agent stopping", slog.Any("cause", context.Cause(ctx)))
	for st := range cancels {
		cancels[st]()
		deadline := time.NewTimer(a.cfg.StopTimeout)
	stage:
		for _, done := range dones[st] {
			select {
			case <-done:
			case <-deadline.C:
				a.own.Warn("a component did not stop in time; stopping the next ones",
					slog.Int("stage", st), slog.Duration("stopTimeout", a.cfg.StopTimeout))
				break stage
			}
		}
		deadline.Stop()
	}
	for _, ds := range dones {
		for _, done := range ds {
			<-done
		}
	}
	errMu.Lock()
	err := firstErr
	errMu.Unlock()
	if err == nil {
		err = ctx.Err() // stopped as asked (CONTRIBUTING R4)
	}
	a.own.Info("agent stopped", slog.Any("error", err))
	return err
}

// Stopping returns a channel that is closed when Run begins to stop (its
// context ended or a component failed).
func (a *Agent) Stopping() <-chan struct{} { return a.stopped }

// Close closes the local state files. Run calls it when it returns; call it
// for an agent that was opened but never run. It is safe to call twice.
func (a *Agent) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	a.closers = nil
	return errors.Join(errs...)
}

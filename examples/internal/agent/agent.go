package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.fd.io/govpp/adapter"
	"golang.org/x/sync/errgroup"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpglue"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/cniserver"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/watcher"
	"github.com/vswitchkit/vswitchkit/glue"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/boltstore"
	"github.com/vswitchkit/vswitchkit/ipam/etcdstore"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/etcddb"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/nodeconn"
	"github.com/vswitchkit/vswitchkit/vppdriver/podconn"
	"github.com/vswitchkit/vswitchkit/vppdriver/svcnat"
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
	// Logger receives every component's logs. Default: discard.
	Logger *slog.Logger
}

// Agent is one node's running vswitchkit agent. Its fields are the
// components, exposed for observation; they are set by Open and must not
// be replaced. Agent is safe for concurrent use as far as its components
// are.
type Agent struct {
	cfg Config
	log *slog.Logger

	Driver   *vppdriver.Driver
	Loop     *controller.Loop
	Watcher  *watcher.Watcher
	NodeSync *nodesync.NodeSync
	IPAM     *ipam.IPAM
	// NodeIPs are this node's addresses (NodePorts are exposed on them).
	NodeIPs  *glue.NodeIPSet
	NodeConn *nodeconn.Handler
	PodConn  *podconn.Handler
	Services *svcprocessor.ServiceProcessor
	NAT      *svcnat.Renderer
	CNI      *cniserver.Server
	// BGP is nil when BGP is disabled.
	BGP *BGP

	db      *etcddb.DB
	runners []func(context.Context) error // started by Run
	closers []func() error                // local files, closed by Run's end or Close
}

// BGP is the agent's BGP control plane.
type BGP struct {
	Source     *bgpglue.Source
	Manager    *gobgp.Manager
	Controller *bgp.Controller
}

// Open builds an agent and opens its local state files (the IPAM and CNI
// stores in Config.StateDir, created if missing). It starts nothing; call
// Run. Close releases the files of an agent that is never run.
func Open(cfg Config, deps Deps) (a *Agent, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	switch {
	case deps.Etcd == nil:
		return nil, errors.New("agent: no etcd client")
	case deps.VPP == nil:
		return nil, errors.New("agent: no VPP adapter")
	case deps.Linux == nil:
		return nil, errors.New("agent: no Linux implementation for the pod server")
	}
	log := discard(deps.Logger).With(slog.String("node", cfg.NodeName))
	a = &Agent{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			a.Close()
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
	a.runners = append(a.runners, a.Driver.Run, a.Loop.Run)

	// Node IDs, with local state for starts without etcd.
	a.db, err = etcddb.NewFromClient(deps.Etcd, etcddb.Config{Logger: log})
	if err != nil {
		return nil, err
	}
	a.NodeSync, err = nodesync.New(cfg.NodeName, a.db, a.Loop, nodesync.Config{
		Logger:             log,
		LocalState:         nodesync.NewStateFile(cfg.statePath("nodesync.json")),
		LocalFallbackDelay: cfg.LocalFallbackDelay,
	})
	if err != nil {
		return nil, err
	}
	a.runners = append(a.runners, a.NodeSync.Run)

	// Pod IPs with a durable store.
	store, err := a.openIPAMStore(deps.Etcd)
	if err != nil {
		return nil, err
	}
	ipamCfg := cfg.IPAM
	ipamCfg.Store, ipamCfg.EventLoop, ipamCfg.Logger = store, a.Loop, log
	if ipamCfg.ExternalIPAM && ipamCfg.NodeName == "" {
		ipamCfg.NodeName = cfg.NodeName
	}
	a.IPAM, err = ipam.New(a.NodeSync, ipamCfg)
	if err != nil {
		return nil, err
	}

	// Node and pod connectivity. podconn rebuilds pods from the pod
	// server's durable attachments, and the pod server asks podconn for a
	// pod's interface type (its annotation): they are joined through a.
	a.NodeConn, err = nodeconn.New(a.NodeSync, a.NodeSync, a.IPAM, nodeconn.Config{
		Uplink: cfg.Uplink, HostInterconnect: cfg.HostInterconnect,
		NAT44: true, PodCIDRsFromKubernetes: cfg.IPAM.ExternalIPAM, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	a.PodConn, err = podconn.New(a.IPAM, podconn.Config{
		InterfaceType: cfg.PodInterfaceType,
		Attachments:   podconn.AttachmentsFunc(func() ([]controller.PodAttachment, error) { return a.CNI.PodAttachments() }),
		Logger:        log,
	})
	if err != nil {
		return nil, err
	}

	// Services: NodePorts on this node's addresses, rendered onto NAT44-ED.
	a.NodeIPs = glue.NewNodeIPSet(a.NodeSync, glue.NodeIPSetConfig{OnlyNode: cfg.NodeName})
	a.Services, err = svcprocessor.New(svcprocessor.SubnetsFromIPNet(a.IPAM), a.NodeIPs, a.PodConn,
		svcprocessor.Config{Logger: log, NodeName: cfg.NodeName})
	if err != nil {
		return nil, err
	}
	natCfg := svcnat.Config{Uplink: a.uplinkName(), Logger: log}
	if cfg.HostInterconnect.AfPacketHostIf != "" || cfg.HostInterconnect.TapHostIfName != "" {
		natCfg.InterconnectInterfaces = []string{cmp.Or(cfg.HostInterconnect.Name, nodeconn.DefaultHostInterconnectName)}
	}
	if a.NAT, err = svcnat.New(a.NodeIPs, a.IPAM, natCfg); err != nil {
		return nil, err
	}
	if err := a.Services.RegisterRenderer(a.NAT); err != nil {
		return nil, err
	}

	// Dependency order: node IDs, pod IPs, node addresses, the mesh, pods,
	// services (and their renderers), BGP.
	handlers := []controller.EventHandler{a.NodeSync, a.IPAM, a.NodeIPs, a.NodeConn, a.PodConn, a.Services.Handler()}
	if !cfg.BGP.Disabled {
		if a.BGP, err = a.newBGP(); err != nil {
			return nil, err
		}
		handlers = append(handlers, a.BGP.Source)
		a.runners = append(a.runners, a.BGP.Manager.Run, a.BGP.Controller.Run)
	}
	if err := a.Loop.Register(handlers...); err != nil {
		return nil, err
	}

	// The Kubernetes state (of the pods, this node's) and this node's
	// external configuration.
	var keep func(string, string, []byte) bool
	if !cfg.AllPods {
		keep = watcher.NodePods(cfg.NodeName)
	}
	a.Watcher, err = watcher.NewWithClient(deps.Etcd, a.Loop, watcher.Config{
		Keep:                 keep,
		KubeStatePrefix:      cfg.KubeStatePrefix,
		ExternalConfigPrefix: cfg.ExternalConfigPrefix,
		Resources:            []kubemodel.Resource{bgpmodel.PolicyResource()},
		MirrorPath:           cfg.statePath("mirror.db"),
		MirrorFallbackDelay:  cfg.LocalFallbackDelay,
		Logger:               log,
	})
	if err != nil {
		return nil, err
	}
	a.runners = append(a.runners, a.Watcher.Run)

	// The pod server.
	cniStore, err := cniserver.OpenBoltStore(cfg.statePath("cni.db"))
	if err != nil {
		return nil, fmt.Errorf("agent: CNI attachment store: %w", err)
	}
	a.closers = append(a.closers, cniStore.Close)
	a.CNI, err = cniserver.New(a.Loop, deps.Linux, cniStore, cniserver.Config{
		SocketPath:    cfg.CNISocket,
		InterfaceType: cfg.PodInterfaceType,
		InterfaceTypeFor: func(_ context.Context, pod kubemodel.PodID) (controller.PodInterfaceType, error) {
			return a.PodConn.InterfaceTypeOf(pod), nil
		},
		Ready:  func(context.Context) error { return a.Ready() },
		Logger: log,
	})
	if err != nil {
		return nil, err
	}
	a.runners = append(a.runners, a.CNI.Run)
	return a, nil
}

func (a *Agent) openIPAMStore(cli *clientv3.Client) (ipam.Store, error) {
	if a.cfg.IPAMStore == StoreEtcd {
		s, err := etcdstore.New(cli, a.cfg.NodeName, etcdstore.Config{Logger: a.log})
		if err != nil {
			return nil, err
		}
		a.runners = append(a.runners, s.Run)
		return s, nil
	}
	s, err := boltstore.Open(a.cfg.statePath("ipam.db"), boltstore.Config{Logger: a.log})
	if err != nil {
		return nil, fmt.Errorf("agent: IPAM store: %w", err)
	}
	a.closers = append(a.closers, s.Close)
	return s, nil
}

func (a *Agent) newBGP() (*BGP, error) {
	sig := bgp.NewSignaler()
	src, err := bgpglue.New(a.cfg.NodeName, sig, bgpglue.Config{
		PodSubnets: []bgpglue.PodSubnets{a.IPAM},
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
	mgr, err := gobgp.New(gobgp.Config{Services: src, ListenAddresses: a.cfg.BGP.ListenAddresses, Logger: a.log})
	if err != nil {
		return nil, err
	}
	ctrl, err := bgp.NewController(mgr, src, src, bgp.ControllerConfig{Signaler: sig, Logger: a.log})
	if err != nil {
		return nil, err
	}
	return &BGP{Source: src, Manager: mgr, Controller: ctrl}, nil
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
// is done and VPP is connected.
func (a *Agent) Ready() error {
	if !a.Loop.Stats().StartupResyncDone {
		return errors.New("no start-up resync yet")
	}
	if !a.Driver.Connected() {
		return errors.New("VPP not connected")
	}
	return nil
}

// Run runs every component until ctx ends or one of them fails, then
// stops them all, closes the local state files and returns: nil after
// ctx ended, else the first error. Run is called once.
func (a *Agent) Run(ctx context.Context) error {
	defer a.Close()
	g, gctx := errgroup.WithContext(ctx)
	for _, run := range a.runners {
		g.Go(func() error {
			err := run(gctx)
			if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
				return nil
			}
			if err == nil {
				err = errors.New("stopped")
			}
			return err
		})
	}
	a.log.Info("agent started")
	err := g.Wait()
	a.log.Info("agent stopped", slog.Any("error", err))
	return err
}

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

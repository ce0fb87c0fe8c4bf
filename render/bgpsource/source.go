package bgpsource

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
)

// PodSubnets reports one of this node's pod subnets. *ipam.IPAM satisfies
// it; a dual-stack agent passes one per IP family (see Config.PodSubnets).
//
// PodSubnetThisNodePrefix is called from [Source.Node], on the goroutine of
// the bgp.Controller, concurrently with the event loop: it must be safe for
// concurrent use and must not block. The invalid prefix means "not known
// (yet)".
type PodSubnets interface {
	PodSubnetThisNodePrefix() netip.Prefix
}

// PodSubnetsFunc adapts a function into [PodSubnets].
type PodSubnetsFunc func() netip.Prefix

var _ PodSubnets = PodSubnetsFunc(nil)

// PodSubnetThisNodePrefix calls f.
func (f PodSubnetsFunc) PodSubnetThisNodePrefix() netip.Prefix { return f() }

// NodeLister lists the cluster's nodes as node sync knows them.
// *nodesync.NodeSync satisfies it. It is called on the event loop
// goroutine, in Resync; the result is not modified.
type NodeLister interface {
	GetAllNodes() nodesync.Nodes
}

// NodeListerFunc adapts a function into [NodeLister].
type NodeListerFunc func() nodesync.Nodes

var _ NodeLister = NodeListerFunc(nil)

// GetAllNodes calls f.
func (f NodeListerFunc) GetAllNodes() nodesync.Nodes { return f() }

// Config configures a [Source]. The zero value is valid: pod CIDRs and
// addresses then come from the Kubernetes node object alone.
type Config struct {
	// PodSubnets are the sources of this node's pod CIDRs, usually the IPAM
	// (one per IP family in a dual-stack cluster). The valid ones replace
	// the Kubernetes node's spec.podCIDRs in the state given to the
	// controller. Default none: spec.podCIDRs.
	PodSubnets []PodSubnets
	// Nodes is node sync: this node's VPP-side addresses (the first IPv4
	// and the first IPv6 one it published) become the node's addresses for
	// BGP, that is the router ID (IPv4) and the next hops. They are re-read
	// at every resync and at every nodesync.NodeUpdate of this node.
	// Default nil: the Kubernetes node's InternalIP, else ExternalIP
	// addresses.
	Nodes NodeLister
	// IPv4 and IPv6, when valid, are this node's addresses for BGP; they
	// win over Nodes and the Kubernetes node. Default: unset.
	IPv4, IPv6 netip.Addr
	// Logger receives the source's logs (ignored policies, at Warn).
	// Default: discard.
	Logger *slog.Logger
}

// Source feeds a bgp.Controller from a running agent. It is at once:
//
//   - a [controller.EventHandler] that follows, through resyncs and
//     updates, this node's Kubernetes node object (labels, annotations), the
//     peering policies (bgpmodel), the Kubernetes services, and the
//     nodesync.NodeUpdate events of this node; register it after IPAM, node
//     sync and the service processor's handler;
//   - a [svcprocessor.ServiceRendererAPI] that learns from the service
//     processor which services have a ready backend on this node;
//     register it with the processor (RegisterRenderer);
//   - the [bgp.NodeSource], [bgp.PolicySource], [bgp.ObjectSource] (the
//     v2 objects) and [bgp.ServiceLister] of the controller and the
//     manager.
//
// Every change that matters to BGP signals the Signaler given to [New]:
// bursts roll up into one reconcile of the controller.
//
// Source is safe for concurrent use: the event loop calls the handler and
// renderer methods while the controller and the manager read the sources.
type Source struct {
	nodeName string
	sig      bgp.Signaler
	cfg      Config
	log      *slog.Logger
	base     *bgp.EventSource // node object and policies

	mu        sync.Mutex                   // guards the fields below
	vppIPv4   netip.Addr                   // from node sync; invalid if none
	vppIPv6   netip.Addr                   // from node sync; invalid if none
	services  map[kubemodel.ServiceID]int  // index into list
	list      []bgp.Service                // services, HasLocalBackend kept current
	localSvcs map[kubemodel.ServiceID]bool // services with a ready local backend
}

var (
	_ controller.EventHandler         = (*Source)(nil)
	_ svcprocessor.ServiceRendererAPI = (*Source)(nil)
	_ bgp.NodeSource                  = (*Source)(nil)
	_ bgp.PolicySource                = (*Source)(nil)
	_ bgp.ObjectSource                = (*Source)(nil)
	_ bgp.ServiceLister               = (*Source)(nil)
	_ bgp.ServiceRanger               = (*Source)(nil)
)

// New returns a source for the node named nodeName that signals sig on
// changes (use the Signaler of the bgp.Controller). It does no I/O and
// starts no goroutine.
func New(nodeName string, sig bgp.Signaler, cfg Config) (*Source, error) {
	var errs []error
	if sig.Sig == nil {
		errs = append(errs, errors.New("bgpsource: New: the Signaler has no channel (use bgp.NewSignaler)"))
	}
	for i, p := range cfg.PodSubnets {
		if p == nil {
			errs = append(errs, fmt.Errorf("bgpsource: Config.PodSubnets[%d] is nil", i))
		}
	}
	if cfg.IPv4.IsValid() && !cfg.IPv4.Unmap().Is4() {
		errs = append(errs, fmt.Errorf("bgpsource: Config.IPv4 %s is not an IPv4 address", cfg.IPv4))
	}
	if cfg.IPv6.IsValid() && (!cfg.IPv6.Is6() || cfg.IPv6.Is4In6()) {
		errs = append(errs, fmt.Errorf("bgpsource: Config.IPv6 %s is not an IPv6 address", cfg.IPv6))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base, err := bgp.NewEventSource(nodeName, sig, log)
	if err != nil {
		errs = append(errs, fmt.Errorf("bgpsource: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg.PodSubnets = slices.Clone(cfg.PodSubnets)
	cfg.IPv4 = cfg.IPv4.Unmap()
	return &Source{
		nodeName: nodeName, sig: sig, cfg: cfg, log: log.With(slog.String("component", "bgpsource")), base: base,
		services:  make(map[kubemodel.ServiceID]int),
		localSvcs: make(map[kubemodel.ServiceID]bool),
	}, nil
}

// String names the handler: "bgpsource", as its package and its log
// component.
func (s *Source) String() string { return "bgpsource" }

// HandlesEvent selects every resync (including IPAM's PodCIDRChange, an
// UpstreamResync), KubeStateChange of nodes, peering policies and services,
// and nodesync.NodeUpdate of this node.
func (s *Source) HandlesEvent(ev controller.Event) bool {
	switch ev := ev.(type) {
	case *controller.KubeStateChange:
		return ev.Resource == kubemodel.ServiceResource || s.base.HandlesEvent(ev)
	case *nodesync.NodeUpdate:
		return ev.NodeName == s.nodeName
	}
	m := ev.Method()
	return m == controller.FullResync || m == controller.UpstreamResync
}

// Resync rebuilds everything from kubeStateData: the node object, the
// policies and the services; it re-reads this node's addresses from node
// sync. The pod subnets are read when the controller asks ([Source.Node]),
// so a resync after a pod CIDR change (IPAM's PodCIDRChange) reaches the
// peers. It puts nothing into txn.
func (s *Source) Resync(ev controller.Event, kubeStateData controller.KubeStateData, resyncCount int, txn controller.ResyncOperations) error {
	if err := s.base.Resync(ev, kubeStateData, resyncCount, txn); err != nil {
		return err
	}
	v4, v6 := s.nodeSyncAddrs()
	s.mu.Lock()
	s.vppIPv4, s.vppIPv6 = v4, v6
	n := len(kubeStateData[kubemodel.ServiceResource])
	s.services = make(map[kubemodel.ServiceID]int, n)
	s.list = make([]bgp.Service, 0, n)
	for key, v := range kubeStateData[kubemodel.ServiceResource] {
		s.setServiceLocked(key, v)
	}
	s.mu.Unlock()
	s.sig.Event(nil)
	return nil
}

// Update applies one change: of the node object or a policy (see
// bgp.EventSource), of a service, or a NodeUpdate of this node (addresses).
func (s *Source) Update(ev controller.Event, txn controller.UpdateOperations) (string, error) {
	switch ev := ev.(type) {
	case *nodesync.NodeUpdate:
		if ev.NodeName != s.nodeName {
			return "", nil
		}
		v4, v6 := addrsOf(ev.NewState)
		s.mu.Lock()
		changed := v4 != s.vppIPv4 || v6 != s.vppIPv6
		s.vppIPv4, s.vppIPv6 = v4, v6
		s.mu.Unlock()
		if !changed {
			return "", nil
		}
		s.sig.Event(ev)
		return fmt.Sprintf("bgp: node addresses %v %v", v4, v6), nil
	case *controller.KubeStateChange:
		if ev.Resource != kubemodel.ServiceResource {
			return s.base.Update(ev, txn)
		}
		s.mu.Lock()
		changed := s.setServiceLocked(ev.Key, ev.NewValue)
		s.mu.Unlock()
		if !changed {
			return "", nil
		}
		s.sig.Event(ev)
		return "bgp: service " + ev.Key, nil
	}
	return "", nil
}

// Revert does nothing: the source keeps no state a transaction could undo.
func (s *Source) Revert(controller.Event) error { return nil }

// setServiceLocked converts and stores the service stored under key (nil
// value: deleted) and reports whether what BGP sees changed.
func (s *Source) setServiceLocked(key string, v any) bool {
	id, err := kubemodel.ParseServiceKey(key)
	if err != nil {
		s.log.Warn("ignoring service with a malformed key", slog.String("key", key), slog.Any("error", err))
		return false
	}
	m, _ := v.(*kubemodel.Service)
	i, ok := s.services[id]
	if m == nil {
		if !ok {
			return false
		}
		// Swap-remove, keeping the index right.
		last := len(s.list) - 1
		if i != last {
			s.list[i] = s.list[last]
			s.services[kubemodel.ServiceID{Namespace: s.list[i].Namespace, Name: s.list[i].Name}] = i
		}
		s.list[last] = bgp.Service{}
		s.list = s.list[:last]
		delete(s.services, id)
		return true
	}
	svc := bgp.ServiceFromModel(m)
	svc.Namespace, svc.Name = id.Namespace, id.Name
	svc.HasLocalBackend = s.localSvcs[id]
	if ok {
		if serviceEqual(s.list[i], svc) {
			return false // e.g. only annotations or ports changed
		}
		s.list[i] = svc
	} else {
		s.services[id] = len(s.list)
		s.list = append(s.list, svc)
	}
	return true
}

func serviceEqual(a, b bgp.Service) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name && maps.Equal(a.Labels, b.Labels) &&
		slices.Equal(a.ClusterIPs, b.ClusterIPs) && slices.Equal(a.ExternalIPs, b.ExternalIPs) &&
		slices.Equal(a.LoadBalancerIPs, b.LoadBalancerIPs) && a.LoadBalancerClass == b.LoadBalancerClass &&
		a.ExternalTrafficPolicyLocal == b.ExternalTrafficPolicyLocal &&
		a.InternalTrafficPolicyLocal == b.InternalTrafficPolicyLocal && a.HasLocalBackend == b.HasLocalBackend
}

// Render keeps, for every service, whether it has a ready backend on this
// node (for externalTrafficPolicy and internalTrafficPolicy Local).
func (s *Source) Render(ev svcprocessor.RenderEvent) error {
	changed := false
	s.mu.Lock()
	switch ev.Kind {
	case svcprocessor.ServiceAdded, svcprocessor.ServiceUpdated:
		changed = s.setLocalLocked(ev.NewService.ID, hasReadyLocalBackend(ev.NewService))
	case svcprocessor.ServiceDeleted:
		changed = s.setLocalLocked(ev.OldService.ID, false)
	case svcprocessor.Resync:
		seen := make(map[kubemodel.ServiceID]bool, len(ev.Snapshot.Services))
		for _, cs := range ev.Snapshot.Services {
			seen[cs.ID] = true
			changed = s.setLocalLocked(cs.ID, hasReadyLocalBackend(cs)) || changed
		}
		for id := range s.localSvcs {
			if !seen[id] {
				changed = s.setLocalLocked(id, false) || changed
			}
		}
	}
	s.mu.Unlock()
	if changed {
		s.sig.Event(ev.Kind)
	}
	return nil
}

func (s *Source) setLocalLocked(id kubemodel.ServiceID, local bool) bool {
	if s.localSvcs[id] == local {
		return false
	}
	if local {
		s.localSvcs[id] = true
	} else {
		delete(s.localSvcs, id)
	}
	if i, ok := s.services[id]; ok {
		s.list[i].HasLocalBackend = local
	}
	return true
}

func hasReadyLocalBackend(cs *svcprocessor.ContivService) bool {
	for _, p := range cs.Ports {
		for _, b := range p.Backends {
			if b.Local && b.Ready && !b.Terminating {
				return true
			}
		}
	}
	return false
}

// ListServices returns the services, in no particular order (bgp sorts
// what it advertises). The slice is the caller's; the maps and slices in
// its services are shared and read-only.
func (s *Source) ListServices() []bgp.Service {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

// RangeServices calls yield with every service, in no particular order,
// until yield returns false (bgp.ServiceRanger): the manager reads them in
// place, without the copy ListServices makes. The source's lock is held
// meanwhile, so the event loop's updates of the source wait for it.
func (s *Source) RangeServices(yield func(*bgp.Service) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.list {
		if !yield(&s.list[i]) {
			return
		}
	}
}

// Policies returns copies of the valid peering policies (see
// bgp.EventSource.Policies).
func (s *Source) Policies() []*bgp.PeeringPolicy { return s.base.Policies() }

// InvalidPolicies returns the conversion error of every policy left out,
// by key.
func (s *Source) InvalidPolicies() map[string]error { return s.base.InvalidPolicies() }

// Objects returns the v2 BGP objects (see bgp.EventSource.Objects).
func (s *Source) Objects() *bgp.Objects { return s.base.Objects() }

// Node returns this node as the controller should see it: a copy of the
// Kubernetes node object (labels for policy selection, annotations), whose
// pod CIDRs are those of Config.PodSubnets when any is known, and whose
// addresses start with this node's BGP addresses as InternalIP (Config.IPv4
// and IPv6, else node sync's). It returns nil until the node object is
// known.
func (s *Source) Node() *kubemodel.Node {
	n := s.base.Node()
	if n == nil {
		return nil
	}
	var cidrs []string
	for _, p := range s.cfg.PodSubnets {
		if pfx := p.PodSubnetThisNodePrefix(); pfx.IsValid() {
			cidrs = append(cidrs, pfx.Masked().String())
		}
	}
	if len(cidrs) > 0 {
		n.PodCidrs = cidrs
	}
	s.mu.Lock()
	v4, v6 := s.vppIPv4, s.vppIPv6
	s.mu.Unlock()
	if s.cfg.IPv4.IsValid() {
		v4 = s.cfg.IPv4
	}
	if s.cfg.IPv6.IsValid() {
		v6 = s.cfg.IPv6
	}
	var first []*kubemodel.NodeAddress
	for _, a := range []netip.Addr{v4, v6} {
		if a.IsValid() {
			first = append(first, &kubemodel.NodeAddress{Type: kubemodel.NodeAddress_INTERNAL_IP, Address: a.String()})
		}
	}
	n.Addresses = append(first, n.Addresses...)
	return n
}

// nodeSyncAddrs reads this node's VPP-side addresses from node sync.
func (s *Source) nodeSyncAddrs() (v4, v6 netip.Addr) {
	if s.cfg.Nodes == nil {
		return netip.Addr{}, netip.Addr{}
	}
	return addrsOf(s.cfg.Nodes.GetAllNodes()[s.nodeName])
}

// addrsOf returns the first IPv4 and the first IPv6 VPP-side address of n.
func addrsOf(n *nodesync.Node) (v4, v6 netip.Addr) {
	if n == nil {
		return
	}
	for _, a := range n.VppIPAddresses {
		switch addr := a.Address; {
		case addr.Unmap().Is4() && !v4.IsValid():
			v4 = addr.Unmap()
		case addr.Is6() && !addr.Is4In6() && !v6.IsValid():
			v6 = addr
		}
	}
	return v4, v6
}

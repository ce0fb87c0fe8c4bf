package svcprocessor

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// TrafficPolicy is the external or internal traffic policy of a service.
type TrafficPolicy = kubemodel.Service_TrafficPolicy

// Traffic policies.
const (
	// ClusterTrafficPolicy spreads traffic over all backends of the cluster.
	ClusterTrafficPolicy = kubemodel.Service_CLUSTER
	// LocalTrafficPolicy sends traffic only to backends on the node that
	// received it (Local backends).
	LocalTrafficPolicy = kubemodel.Service_LOCAL
)

// DefaultSessionAffinityTimeout is the ClientIP session affinity timeout in
// seconds that Kubernetes uses when none is given (3 hours).
const DefaultSessionAffinityTimeout = 10800

// ContivService is the combined view of one Kubernetes service and its
// endpoints, as delivered to renderers. Its name follows the documented API.
//
// A ContivService is immutable once the processor has published it: safe for
// concurrent use by readers, and never modified afterwards (a change produces
// a new value). Its zero value describes a service with no addresses and no
// ports.
type ContivService struct {
	// ID is namespace/name of the service.
	ID kubemodel.ServiceID
	// Type is the Kubernetes service type (ClusterIP, NodePort, LoadBalancer).
	Type kubemodel.Service_Type
	// ClusterIPs are the service's cluster IPs (IPv4 and/or IPv6), sorted.
	// Empty for a headless service.
	ClusterIPs []netip.Addr
	// ExternalIPs are spec.externalIPs, spec.loadBalancerIP and the
	// load-balancer ingress IPs, sorted and de-duplicated.
	ExternalIPs []netip.Addr
	// Ports are the service ports, sorted by name (then protocol). Each
	// carries its backends.
	Ports []ServicePort
	// ExternalTrafficPolicy is Local when external traffic (NodePort,
	// external and load-balancer IPs) must go to local backends only.
	ExternalTrafficPolicy TrafficPolicy
	// InternalTrafficPolicy is Local when cluster-IP traffic must go to
	// local backends only.
	InternalTrafficPolicy TrafficPolicy
	// SessionAffinityTimeout is the ClientIP session affinity timeout in
	// seconds; 0 means no session affinity.
	SessionAffinityTimeout uint32
	// Annotations are the service's annotations, for renderers that take
	// options of their own from them (render/svccnat's load-balancing
	// annotation). Read-only: the map is shared with the processor's copy
	// of the service. Nil when the service has none.
	Annotations map[string]string
}

// ServicePort is one port of a service with the backends matched to it by
// port name and protocol. Immutable once published, like [ContivService].
type ServicePort struct {
	// Name is the port name; empty for the single unnamed port.
	Name string
	// Protocol is TCP, UDP or SCTP.
	Protocol kubemodel.Protocol
	// Port is the service (cluster IP) port.
	Port uint16
	// NodePort is the node port; 0 if none.
	NodePort uint16
	// Backends are the ready backends, sorted by IP and port.
	Backends []ServiceBackend
	// NotReadyBackends are the not-ready backends (including terminating
	// ones), sorted by IP and port, for renderers that want them.
	NotReadyBackends []ServiceBackend
}

// ServiceBackend is one backend of a service port. It is a comparable value.
type ServiceBackend struct {
	// IP and Port are where the backend listens.
	IP   netip.Addr
	Port uint16
	// Pod is the pod behind the address (from the endpoint's target
	// reference); zero if unknown.
	Pod kubemodel.PodID
	// Local is true for backends on this node: IP in this node's pod subnet,
	// or the endpoint's node name is this node.
	Local bool
	// HostNetwork is true for backends outside the cluster pod subnet
	// (pods in the host network namespace, or other hosts).
	HostNetwork bool
	// Ready is true for addresses from the ready list.
	Ready bool
	// Terminating is true for addresses whose pod is being deleted.
	Terminating bool
}

// HasNodePort reports whether any port of s has a node port.
func (s *ContivService) HasNodePort() bool {
	if s == nil {
		return false
	}
	for i := range s.Ports {
		if s.Ports[i].NodePort != 0 {
			return true
		}
	}
	return false
}

// Port returns the port with the given name (the first one if the name is
// used with several protocols).
func (s *ContivService) Port(name string) (ServicePort, bool) {
	if s == nil {
		return ServicePort{}, false
	}
	for _, p := range s.Ports {
		if p.Name == name {
			return p, true
		}
	}
	return ServicePort{}, false
}

// Equal reports whether s and o describe the same service. Nil equals nil only.
func (s *ContivService) Equal(o *ContivService) bool {
	if s == nil || o == nil {
		return s == o
	}
	if s == o {
		return true
	}
	if s.ID != o.ID || s.Type != o.Type || s.ExternalTrafficPolicy != o.ExternalTrafficPolicy ||
		s.InternalTrafficPolicy != o.InternalTrafficPolicy || s.SessionAffinityTimeout != o.SessionAffinityTimeout ||
		!slices.Equal(s.ClusterIPs, o.ClusterIPs) || !slices.Equal(s.ExternalIPs, o.ExternalIPs) ||
		len(s.Ports) != len(o.Ports) || !maps.Equal(s.Annotations, o.Annotations) {
		return false
	}
	for i := range s.Ports {
		a, b := &s.Ports[i], &o.Ports[i]
		if a.Name != b.Name || a.Protocol != b.Protocol || a.Port != b.Port || a.NodePort != b.NodePort ||
			!slices.Equal(a.Backends, b.Backends) || !slices.Equal(a.NotReadyBackends, b.NotReadyBackends) {
			return false
		}
	}
	return true
}

// LocalEndpoint represents a node-local endpoint: a pod of this node that is
// connected (has a VPP interface) and/or is a backend of some services.
// It is a value; safe for concurrent use. The zero value is a pod that is
// neither connected nor a backend.
type LocalEndpoint struct {
	ifName   string
	sandbox  string // container ID of the AddPod that connected it; "" unknown
	svcCount int
}

// IfName returns the VPP interface of the pod; empty if the pod is not (yet)
// connected.
func (e LocalEndpoint) IfName() string { return e.ifName }

// ServiceCount returns the number of services the pod is a backend of.
func (e LocalEndpoint) ServiceCount() int { return e.svcCount }

// env is what service computation needs from outside, captured once per
// processor operation.
type env struct {
	thisNode netip.Prefix
	allNodes netip.Prefix
	nodeName string
	log      *slog.Logger
}

// skips collects the malformed parts of one service, without duplicates.
type skips struct {
	id   kubemodel.ServiceID
	list []SkippedError
}

func (s *skips) add(r SkipReason, field, value string) {
	sk := SkippedError{Service: s.id, Reason: r, Field: field, Value: value}
	if !slices.Contains(s.list, sk) {
		s.list = append(s.list, sk)
	}
}

// Service is used to combine data from the service model with the
// endpoints. It is the processor's cache entry for one namespace/name.
//
// Service is not safe for concurrent use; a Service created by the processor
// is owned by it (guarded by its lock). The zero value, or a Service from
// [NewService] with a nil processor, computes with no known subnets.
type Service struct {
	sp            *ServiceProcessor
	id            kubemodel.ServiceID
	meta          *kubemodel.Service
	eps           *kubemodel.Endpoints
	contiv        *ContivService
	localBackends []kubemodel.PodID
}

// NewService is a constructor for Service. sp supplies the pod subnets and
// the node name used to classify backends; it may be nil. A Service made
// this way is the caller's, not part of sp's state.
func NewService(sp *ServiceProcessor) *Service { return &Service{sp: sp} }

// SetMetadata initializes or changes metadata for the service (nil removes
// it) and refreshes the combined view (see [Service.Refresh]).
func (s *Service) SetMetadata(svc *kubemodel.Service) {
	s.meta = svc
	if svc != nil && s.id == (kubemodel.ServiceID{}) {
		s.id = svc.ID()
	}
	s.Refresh()
}

// SetEndpoints initializes or changes endpoints for the service (nil removes
// them) and refreshes the combined view.
func (s *Service) SetEndpoints(eps *kubemodel.Endpoints) {
	s.eps = eps
	if eps != nil && s.id == (kubemodel.ServiceID{}) {
		s.id = eps.ID()
	}
	s.Refresh()
}

// Refresh combines metadata with endpoints to get the ContivService
// representation and the list of local backends.
// It reads the pod subnets from the processor's [PodSubnets] source at the
// time of the call (with a nil processor no backend is local or host-network).
// Malformed parts are skipped, each logged at Warn through the processor's
// logger. (The processor's own services report a skipped part once, when
// it appears: see [ServiceProcessor.Skipped].)
func (s *Service) Refresh() {
	if s.sp == nil {
		s.refresh(nil)
		return
	}
	e := s.sp.currentEnv()
	for _, sk := range s.refresh(&e) {
		logSkipped(e.log, sk)
	}
}

// refresh recomputes the view and returns the malformed parts it skipped
// (sorted; nil when none).
func (s *Service) refresh(e *env) []SkippedError {
	var skipped []SkippedError
	s.contiv, s.localBackends, skipped = buildContiv(s.id, s.meta, s.eps, e)
	return skipped
}

// GetContivService returns the service data represented as ContivService.
// Returns nil if there are not enough available data (no metadata, or an
// ExternalName service). The result is immutable.
func (s *Service) GetContivService() *ContivService { return s.contiv }

// GetLocalBackends returns the IDs of all local pod backends (ready or not,
// not host-network) of this service, sorted. Returns an empty slice if there
// are not enough available data. The result is read-only.
func (s *Service) GetLocalBackends() []kubemodel.PodID { return s.localBackends }

func parseIPs(dst []netip.Addr, src []string, what string, sk *skips) []netip.Addr {
	for _, str := range src {
		if str == "" || strings.EqualFold(str, "None") {
			continue
		}
		a, err := netip.ParseAddr(str)
		if err != nil {
			sk.add(InvalidIP, what, str)
			continue
		}
		dst = append(dst, a.Unmap())
	}
	return dst
}

func sortUniqueAddrs(a []netip.Addr) []netip.Addr {
	if len(a) < 2 {
		return a
	}
	slices.SortFunc(a, netip.Addr.Compare)
	return slices.Compact(a)
}

func validPort(p int32) bool { return p > 0 && p <= 65535 }

// contivBlock co-allocates a service view with room for the usual few
// cluster IPs and ports: one allocation instead of three.
type contivBlock struct {
	svc   ContivService
	ips   [2]netip.Addr
	ports [2]ServicePort
}

// buildContiv computes the combined view, the local backends and the
// malformed parts it skipped (sorted; nil when none). It is pure.
func buildContiv(id kubemodel.ServiceID, meta *kubemodel.Service, eps *kubemodel.Endpoints, e *env) (*ContivService, []kubemodel.PodID, []SkippedError) {
	if meta == nil || meta.GetType() == kubemodel.Service_EXTERNAL_NAME {
		return nil, nil, nil
	}
	sk := &skips{id: id}
	c, local := buildView(id, meta, eps, e, sk)
	if len(sk.list) > 1 {
		slices.SortFunc(sk.list, compareSkipped)
	}
	return c, local, sk.list
}

// buildView does the work of buildContiv, collecting skipped parts in sk.
func buildView(id kubemodel.ServiceID, meta *kubemodel.Service, eps *kubemodel.Endpoints, e *env, sk *skips) (*ContivService, []kubemodel.PodID) {
	blk := &contivBlock{svc: ContivService{
		ID:                    id,
		Type:                  meta.GetType(),
		ExternalTrafficPolicy: meta.GetExternalTrafficPolicy(),
		InternalTrafficPolicy: meta.GetInternalTrafficPolicy(),
	}}
	if a := meta.GetAnnotations(); len(a) > 0 {
		blk.svc.Annotations = a
	}
	c := &blk.svc
	if meta.GetSessionAffinity() == kubemodel.Service_CLIENT_IP {
		c.SessionAffinityTimeout = DefaultSessionAffinityTimeout
		if t := meta.GetSessionAffinityTimeout(); t > 0 {
			c.SessionAffinityTimeout = uint32(t)
		}
	}
	if n := len(meta.GetClusterIps()); n > 0 {
		buf := blk.ips[:0:len(blk.ips)]
		if n > len(blk.ips) {
			buf = make([]netip.Addr, 0, n)
		}
		c.ClusterIPs = sortUniqueAddrs(parseIPs(buf, meta.GetClusterIps(), "clusterIPs", sk))
		if len(c.ClusterIPs) == 0 {
			c.ClusterIPs = nil
		} else {
			c.ClusterIPs = c.ClusterIPs[:len(c.ClusterIPs):len(c.ClusterIPs)]
		}
	}
	if n := len(meta.GetExternalIps()) + len(meta.GetLbIngressIps()); n > 0 || meta.GetLoadBalancerIp() != "" {
		ext := make([]netip.Addr, 0, n+1)
		ext = parseIPs(ext, meta.GetExternalIps(), "externalIPs", sk)
		if lb := meta.GetLoadBalancerIp(); lb != "" {
			ext = parseIPs(ext, []string{lb}, "loadBalancerIP", sk)
		}
		ext = parseIPs(ext, meta.GetLbIngressIps(), "loadBalancer ingress", sk)
		if len(ext) > 0 {
			c.ExternalIPs = sortUniqueAddrs(ext)
		}
	}

	nports := 0
	for _, p := range meta.GetPorts() {
		if validPort(p.GetPort()) {
			nports++
		} else {
			sk.add(InvalidPort, portField(p.GetName(), "port"), strconv.Itoa(int(p.GetPort())))
		}
	}
	if eps != nil {
		for _, sub := range eps.GetSubsets() {
			for _, ep := range sub.GetPorts() {
				if !validPort(ep.GetPort()) {
					sk.add(InvalidEndpointPort, fmt.Sprintf("endpoints.ports[%q]", ep.GetName()), strconv.Itoa(int(ep.GetPort())))
				}
			}
		}
	}
	if nports == 0 {
		return c, nil
	}
	if nports <= len(blk.ports) {
		c.Ports = blk.ports[:0:nports]
	} else {
		c.Ports = make([]ServicePort, 0, nports)
	}
	for _, p := range meta.GetPorts() {
		if !validPort(p.GetPort()) {
			continue // skipped above
		}
		np := p.GetNodePort()
		if np != 0 && !validPort(np) {
			sk.add(InvalidNodePort, portField(p.GetName(), "nodePort"), strconv.Itoa(int(np)))
			np = 0
		}
		c.Ports = append(c.Ports, ServicePort{Name: p.GetName(), Protocol: p.GetProtocol(), Port: uint16(p.GetPort()), NodePort: uint16(np)})
	}
	if len(c.Ports) > 1 {
		slices.SortStableFunc(c.Ports, func(a, b ServicePort) int {
			return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Protocol, b.Protocol))
		})
	}
	if eps == nil {
		return c, nil
	}

	// Count first so that all backends share one backing array.
	total := 0
	for i := range c.Ports {
		for _, sub := range eps.GetSubsets() {
			if epPort := matchPort(sub, &c.Ports[i]); epPort != 0 {
				total += len(sub.GetAddresses()) + len(sub.GetNotReadyAddresses())
			}
		}
	}
	if total == 0 {
		return c, nil
	}
	backing := make([]ServiceBackend, 0, total)
	var local []kubemodel.PodID
	for i := range c.Ports {
		p := &c.Ports[i]
		start := len(backing)
		for _, sub := range eps.GetSubsets() {
			if epPort := matchPort(sub, p); epPort != 0 {
				for _, a := range sub.GetAddresses() {
					backing = appendBackend(backing, a, epPort, true, id, e, sk)
				}
			}
		}
		backing = sortSegment(backing, start)
		mid := len(backing)
		for _, sub := range eps.GetSubsets() {
			if epPort := matchPort(sub, p); epPort != 0 {
				for _, a := range sub.GetNotReadyAddresses() {
					backing = appendBackend(backing, a, epPort, false, id, e, sk)
				}
			}
		}
		backing = sortSegment(backing, mid)
		end := len(backing)
		if mid > start {
			p.Backends = backing[start:mid:mid]
		}
		if end > mid {
			p.NotReadyBackends = backing[mid:end:end]
		}
		for _, b := range backing[start:end] {
			if b.Local && !b.HostNetwork && b.Pod.Name != "" {
				local = append(local, b.Pod)
			}
		}
	}
	if len(local) > 1 {
		slices.SortFunc(local, comparePodID)
		local = slices.Compact(local)
	}
	return c, local
}

func comparePodID(a, b kubemodel.PodID) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

// matchPort returns the endpoint port number of sub that matches the
// service port by name and protocol, or 0.
func matchPort(sub *kubemodel.EndpointSubset, p *ServicePort) uint16 {
	for _, ep := range sub.GetPorts() {
		if ep.GetName() == p.Name && ep.GetProtocol() == p.Protocol && validPort(ep.GetPort()) {
			return uint16(ep.GetPort())
		}
	}
	return 0
}

func appendBackend(dst []ServiceBackend, a *kubemodel.EndpointAddress, port uint16, ready bool, id kubemodel.ServiceID, e *env, sk *skips) []ServiceBackend {
	ip, err := netip.ParseAddr(a.GetIp())
	if err != nil {
		field := "endpoints.addresses"
		if !ready {
			field = "endpoints.notReadyAddresses"
		}
		sk.add(InvalidEndpointIP, field, a.GetIp())
		return dst
	}
	ip = ip.Unmap()
	b := ServiceBackend{IP: ip, Port: port, Ready: ready, Terminating: a.GetTerminating()}
	if ref := a.GetTargetRef(); ref != nil && ref.GetName() != "" && (ref.GetKind() == "" || ref.GetKind() == "Pod") {
		ns := ref.GetNamespace()
		if ns == "" {
			ns = id.Namespace
		}
		b.Pod = kubemodel.PodID{Namespace: ns, Name: ref.GetName()}
	}
	if e != nil {
		inThis := e.thisNode.IsValid() && e.thisNode.Contains(ip)
		b.Local = inThis || (e.nodeName != "" && a.GetNodeName() == e.nodeName)
		b.HostNetwork = !inThis && e.allNodes.IsValid() && e.allNodes.Addr().BitLen() == ip.BitLen() && !e.allNodes.Contains(ip)
	}
	return append(dst, b)
}

func compareBackend(a, b ServiceBackend) int {
	if c := a.IP.Compare(b.IP); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Port, b.Port); c != 0 {
		return c
	}
	if c := comparePodID(a.Pod, b.Pod); c != 0 {
		return c
	}
	return cmp.Compare(flags(a), flags(b))
}

func flags(b ServiceBackend) int {
	f := 0
	if b.Local {
		f |= 1
	}
	if b.HostNetwork {
		f |= 2
	}
	if b.Ready {
		f |= 4
	}
	if b.Terminating {
		f |= 8
	}
	return f
}

// sortSegment sorts and de-duplicates s[start:] in place and returns s
// shortened accordingly.
func sortSegment(s []ServiceBackend, start int) []ServiceBackend {
	seg := s[start:]
	if len(seg) < 2 {
		return s
	}
	if !slices.IsSortedFunc(seg, compareBackend) {
		slices.SortFunc(seg, compareBackend)
	}
	seg = slices.Compact(seg)
	return s[:start+len(seg)]
}

// portField names a field of the service port called name.
func portField(name, field string) string {
	return fmt.Sprintf("ports[%q].%s", name, field)
}

package bgp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// BGPRouterManager provides a declarative API for defining BGP peers.
//
// # Contract
//
// ConfigurePeers evaluates the provided peering policy and the
// implementation configures itself to apply this policy.
//
// A [ControlPlaneState] is provided which captures the agent's runtime state
// at the time of the invocation. It and the policy must remain read-only;
// the implementation must not keep references into them after returning.
//
// ConfigurePeers should block until it can ensure a subsequent call to
// ConfigurePeers can occur without conflict.
//
// ConfigurePeers is not called concurrently: invocations are serialized,
// each one after the previous has returned.
//
// An error is returned only when the implementation can determine a critical
// flaw with the peering policy (or the node's state it depends on), not when
// network connectivity is an issue: unreachable peers are retried by the
// implementation in the background.
//
// Providing a nil policy to ConfigurePeers withdraws all routes and
// disconnects from the peers; state may then be nil too.
type BGPRouterManager interface {
	ConfigurePeers(ctx context.Context, policy *PeeringPolicy, state *ControlPlaneState) error
}

// SpecApplier is an optional interface of a [BGPRouterManager]: a manager
// that applies the internal model, a [NodeSpec], directly. The controller
// needs it for v2 configuration (cluster configs); v1 policies keep going
// through ConfigurePeers, which a SpecApplier implements by translating
// the policy ([SpecFromPolicy]) and applying the result the same way.
//
// ApplySpec has the contract of ConfigurePeers: calls are serialized with
// each other and with ConfigurePeers; spec and state are read-only and not
// kept; a nil spec withdraws everything; an error reports a critical flaw
// of the spec (or of the node's state it needs), not a connectivity
// problem.
type SpecApplier interface {
	ApplySpec(ctx context.Context, spec *NodeSpec, state *ControlPlaneState) error
}

// PeerLister is an optional interface of a [BGPRouterManager]: the status
// of its sessions, for [Controller.NodeStatus]. Peers may be called at any
// time, concurrently with ConfigurePeers.
type PeerLister interface {
	Peers(ctx context.Context) ([]PeerStatus, error)
}

// ConfigurePeersFunc adapts a function into a [BGPRouterManager].
type ConfigurePeersFunc func(ctx context.Context, policy *PeeringPolicy, state *ControlPlaneState) error

var _ BGPRouterManager = ConfigurePeersFunc(nil)

// ConfigurePeers calls f.
func (f ConfigurePeersFunc) ConfigurePeers(ctx context.Context, policy *PeeringPolicy, state *ControlPlaneState) error {
	return f(ctx, policy, state)
}

// ControlPlaneState captures a subset of the agent's runtime state.
//
// This state carries information interesting to various BGP sub-systems and
// provides a contract for information a sub-system will be provided about
// the agent's runtime state.
//
// ControlPlaneState is a point-in-time snapshot and is immutable: it is safe
// for concurrent use as long as nobody modifies it, and nobody may.
type ControlPlaneState struct {
	// The node at time of construction.
	Node *kubemodel.Node
	// Parsed virtual-router annotations (see [AnnotationPrefix]) of the node
	// this control plane is running on.
	Annotations AnnotationMap
	// The current IPv4 address of the agent, reachable externally; nil if
	// none. It is the default router ID.
	IPv4 net.IP
	// The current IPv6 address of the agent, reachable externally; nil if
	// none. It is the next hop of advertised IPv6 routes.
	IPv6 net.IP
}

// PodCIDRs returns the node's pod CIDRs, masked. It returns an error naming
// the first unparsable one.
func (s *ControlPlaneState) PodCIDRs() ([]netip.Prefix, error) {
	if s == nil || s.Node == nil {
		return nil, nil
	}
	out := make([]netip.Prefix, 0, len(s.Node.GetPodCidrs()))
	for _, c := range s.Node.GetPodCidrs() {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("node %s: pod CIDR %q: %w", s.Node.GetName(), c, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// RouterID returns the router ID of the virtual router with the given local
// ASN: the annotated one, else the node's IPv4 address. It fails if neither
// exists.
func (s *ControlPlaneState) RouterID(asn uint32) (netip.Addr, error) {
	if s != nil {
		if a, ok := s.Annotations[asn]; ok && a.RouterID.IsValid() {
			return a.RouterID, nil
		}
		if a, ok := netip.AddrFromSlice(s.IPv4); ok && a.Unmap().Is4() && !a.IsUnspecified() {
			return a.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("virtual router %d: no router ID: neither a router-id annotation nor an IPv4 address of the node", asn)
}

// Service is a service whose addresses a virtual router may advertise (see
// [VirtualRouter.ServicePrefixes]). It is a plain value; the zero value is a
// service without addresses.
type Service struct {
	Namespace string
	Name      string
	// Labels are the service's labels, matched by
	// [VirtualRouter.ServiceSelector] together with [ServiceNamespaceLabel]
	// and [ServiceNameLabel].
	Labels map[string]string
	// ClusterIPs are spec.clusterIPs; none for a headless service.
	ClusterIPs []netip.Addr
	// ExternalIPs are spec.externalIPs.
	ExternalIPs []netip.Addr
	// LoadBalancerIPs are the ingress IPs of a LoadBalancer service
	// (status.loadBalancer.ingress[].ip).
	LoadBalancerIPs []netip.Addr
	// LoadBalancerClass is spec.loadBalancerClass; empty if unset.
	LoadBalancerClass string
	// ExternalTrafficPolicyLocal is set for externalTrafficPolicy: Local:
	// external and load-balancer IPs are advertised only by nodes with a
	// local backend.
	ExternalTrafficPolicyLocal bool
	// InternalTrafficPolicyLocal is set for internalTrafficPolicy: Local:
	// cluster IPs are advertised only by nodes with a local backend.
	InternalTrafficPolicyLocal bool
	// HasLocalBackend is set when at least one ready backend of the service
	// runs on this node.
	HasLocalBackend bool
}

// Synthetic labels of every service, matched by service selectors in
// addition to the service's own labels (they win over service labels of the
// same key), as in Cilium.
const (
	ServiceNamespaceLabel = "io.kubernetes.service.namespace"
	ServiceNameLabel      = "io.kubernetes.service.name"
)

// ServiceLister lists the services whose addresses may be advertised.
// Managers call it from ConfigurePeers; it must be safe for concurrent use
// and must not call back into the manager. The returned slice is owned by
// the caller; the maps and slices inside its services are read-only (they
// may be shared with the lister).
type ServiceLister interface {
	ListServices() []Service
}

// ServiceRanger is an optional interface of a [ServiceLister]: a manager
// that finds it reads the services in place with RangeServices instead of
// copying them with ListServices at every reconcile (with thousands of
// services the copy is most of the garbage a reconcile makes).
// RangeServices calls yield with every service, in no particular order,
// until yield returns false. The *Service and everything in it are
// read-only and valid only during the call to yield; yield must not call
// back into the lister or the manager.
type ServiceRanger interface {
	RangeServices(yield func(*Service) bool)
}

// ServiceListerFunc adapts a function into a [ServiceLister].
type ServiceListerFunc func() []Service

var _ ServiceLister = ServiceListerFunc(nil)

// ListServices calls f.
func (f ServiceListerFunc) ListServices() []Service { return f() }

// ServiceFromModel converts a Kubernetes service model into a [Service]:
// labels, cluster IPs (none for "None"), external IPs, the ingress IPs of a
// LoadBalancer service, its load-balancer class and traffic policies.
// Unparsable addresses are skipped. The model knows nothing about
// backends: HasLocalBackend is false, so services with a Local traffic
// policy are not advertised until the caller sets it (package
// render/bgpsource does, from the service processor).
func ServiceFromModel(s *kubemodel.Service) Service {
	out := Service{
		Namespace:                  s.GetNamespace(),
		Name:                       s.GetName(),
		Labels:                     s.GetLabels(),
		ClusterIPs:                 parseAddrs(s.GetClusterIps()),
		ExternalIPs:                parseAddrs(s.GetExternalIps()),
		LoadBalancerClass:          s.GetLoadBalancerClass(),
		ExternalTrafficPolicyLocal: s.GetExternalTrafficPolicy() == kubemodel.Service_LOCAL,
		InternalTrafficPolicyLocal: s.GetInternalTrafficPolicy() == kubemodel.Service_LOCAL,
	}
	if s.GetType() == kubemodel.Service_LOAD_BALANCER {
		out.LoadBalancerIPs = parseAddrs(s.GetLbIngressIps())
	}
	return out
}

func parseAddrs(ss []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// SessionState is the state of a BGP session (RFC 4271 section 8).
type SessionState string

// Session states.
const (
	SessionUnknown     SessionState = "Unknown"
	SessionIdle        SessionState = "Idle"
	SessionConnect     SessionState = "Connect"
	SessionActive      SessionState = "Active"
	SessionOpenSent    SessionState = "OpenSent"
	SessionOpenConfirm SessionState = "OpenConfirm"
	SessionEstablished SessionState = "Established"
	// SessionNotConfigured is the state of a peer of the configuration
	// that a condition keeps out of the speaker (see [Condition]).
	SessionNotConfigured SessionState = "NotConfigured"
)

// PeerStatus is the status of one neighbor of one virtual router.
type PeerStatus struct {
	LocalASN    uint32
	PeerAddress netip.Addr
	PeerASN     uint32
	// Name is the peer's name in the configuration (v2 peers' names, v1
	// neighbors' addresses); set by [Controller.NodeStatus], empty in what
	// a manager returns.
	Name  string
	State SessionState
	// Uptime is how long the session has been Established; 0 otherwise.
	Uptime time.Duration
	// Since is when the session became Established; zero otherwise.
	Since time.Time
	// HoldTime and KeepaliveTime are the timers negotiated with the peer
	// (applied); zero until the session is Established.
	HoldTime, KeepaliveTime time.Duration
	// Negotiated are the address families both sides enabled in their OPEN
	// messages; empty until the session is Established.
	Negotiated []Family
	// Disabled maps each address family of the policy that is not offered
	// to the neighbor to the reason, for example that the node has no
	// address of that family to use as the next hop.
	Disabled map[Family]string
	// Received counts the routes received per negotiated family.
	Received map[Family]int
	// Accepted counts the received routes that the import prefix lists
	// accept and that are in use (the best path of their prefix), per
	// negotiated family (none by default: nothing is imported).
	Accepted map[Family]int
	// Advertised counts the routes sent per negotiated family (routes of a
	// family the peer did not negotiate are not sent and not counted).
	Advertised map[Family]int
	// Conditions are the peer's problems; set by [Controller.NodeStatus].
	Conditions []Condition
}

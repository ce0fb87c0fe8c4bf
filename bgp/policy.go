package bgp

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// PeeringPolicy is a BGP peering policy: which nodes it applies to and the
// virtual routers those nodes run. It replaces Cilium's
// CiliumBGPPeeringPolicy custom resource.
//
// A PeeringPolicy is a plain value: it is not safe for concurrent use while
// being modified; treat policies handed to a [BGPRouterManager] or returned by
// a [PolicySource] as read-only and use [PeeringPolicy.Clone] to change one.
type PeeringPolicy struct {
	// Name identifies the policy (in errors and logs).
	Name string
	// NodeSelector selects the nodes the policy applies to, with Kubernetes
	// label-selector semantics. Nil selects every node.
	NodeSelector *LabelSelector
	// VirtualRouters are the BGP speakers to run on a selected node; their
	// LocalASN must be unique within the policy.
	VirtualRouters []VirtualRouter
}

// VirtualRouter is one BGP speaker instance, identified by its local ASN.
type VirtualRouter struct {
	// LocalASN is the autonomous system number of the speaker (1..4294967295).
	LocalASN uint32
	// ExportPodCIDR advertises the node's pod CIDR(s) to every neighbor.
	ExportPodCIDR bool
	// ServiceSelector selects the services whose addresses are advertised,
	// with Kubernetes label-selector semantics over the service labels plus
	// [ServiceNamespaceLabel] and [ServiceNameLabel]. Nil advertises no
	// service; an empty selector selects every service.
	ServiceSelector *LabelSelector
	// ServiceAdvertisements are the kinds of addresses of the selected
	// services to advertise, as host routes (/32, /128). Default
	// [LoadBalancerIPAddresses] only. See [VirtualRouter.ServicePrefixes]
	// for the rules (traffic policies, load-balancer classes).
	ServiceAdvertisements []ServiceAddressType
	// LoadBalancerClasses are the spec.loadBalancerClass values of the
	// LoadBalancer services whose ingress IPs this router advertises;
	// services without a class are always eligible. Default
	// [DefaultLoadBalancerClass] only. Each must be a Kubernetes qualified
	// name, like the field it matches.
	LoadBalancerClasses []string
	// Neighbors are the BGP peers of this router; PeerAddress must be
	// unique within the router.
	Neighbors []Neighbor
}

// ServiceAddressType is a kind of service address that a virtual router may
// advertise (Cilium's BGPServiceAddressType).
type ServiceAddressType string

// The service address types.
const (
	// LoadBalancerIPAddresses are the ingress IPs of LoadBalancer services
	// (status.loadBalancer.ingress[].ip) whose load-balancer class is
	// unset or listed in [VirtualRouter.LoadBalancerClasses].
	LoadBalancerIPAddresses ServiceAddressType = "LoadBalancerIP"
	// ClusterIPAddresses are the cluster IPs (spec.clusterIPs).
	ClusterIPAddresses ServiceAddressType = "ClusterIP"
	// ExternalIPAddresses are the external IPs (spec.externalIPs).
	ExternalIPAddresses ServiceAddressType = "ExternalIP"
)

// DefaultLoadBalancerClass is the load-balancer class of services whose
// ingress IPs a virtual router advertises by default, besides services
// without a class.
const DefaultLoadBalancerClass = "vswitchkit.io/bgp"

// Neighbor is a BGP peer of a [VirtualRouter]. Zero durations and ports mean
// the defaults applied by [PeeringPolicy.WithDefaults].
type Neighbor struct {
	// PeerAddress is the IPv4 or IPv6 address of the peer. Required.
	PeerAddress netip.Addr
	// PeerPort is the TCP port of the peer. Default 179.
	PeerPort uint16
	// PeerASN is the autonomous system number of the peer. Required.
	PeerASN uint32
	// LocalAddress is the source address of the session; the zero value
	// lets the kernel choose it.
	LocalAddress netip.Addr
	// Passive makes this speaker wait for the peer to connect.
	Passive bool
	// EBGPMultihopTTL is the IP TTL of eBGP packets (1..255). Default 1
	// (directly connected peer); ignored for iBGP.
	EBGPMultihopTTL uint8
	// ConnectRetryTime is the ConnectRetry timer of RFC 4271. Default 120s.
	ConnectRetryTime time.Duration
	// HoldTime is the proposed hold time: 3s..65535s. Default 90s, or
	// three times a given KeepaliveTime (at least 90s). A hold time of 0
	// (RFC 4271's "no keepalives") is not supported.
	HoldTime time.Duration
	// KeepaliveTime is the keepalive interval: at least 1s and at most the
	// hold time. Default 30s, or a third of a given HoldTime.
	KeepaliveTime time.Duration
	// GracefulRestart configures RFC 4724 graceful restart.
	GracefulRestart GracefulRestart
	// Password enables TCP-MD5 authentication (RFC 2385) with this key;
	// at most 80 bytes. Empty disables it.
	Password string
	// Families are the address families negotiated with the peer. Default
	// IPv4 and IPv6 unicast.
	Families []Family
}

// GracefulRestart configures graceful restart of a neighbor.
type GracefulRestart struct {
	// Enabled turns graceful restart on.
	Enabled bool
	// RestartTime is the advertised restart time: 1s..4095s. Default 120s
	// when Enabled.
	RestartTime time.Duration
}

// Family is a BGP address family (AFI/SAFI). Only unicast families are
// supported.
type Family string

// The supported address families.
const (
	IPv4Unicast Family = "ipv4-unicast"
	IPv6Unicast Family = "ipv6-unicast"
)

// Timer defaults and limits (RFC 4271 section 10 suggested values and the
// field widths of the OPEN message).
const (
	DefaultPeerPort         = 179
	DefaultConnectRetryTime = 120 * time.Second
	DefaultHoldTime         = 90 * time.Second
	DefaultKeepaliveTime    = 30 * time.Second
	DefaultRestartTime      = 120 * time.Second
	DefaultEBGPMultihopTTL  = 1
	MinHoldTime             = 3 * time.Second
	MaxHoldTime             = 65535 * time.Second
	MaxRestartTime          = 4095 * time.Second
	MaxPasswordLength       = 80
)

// SelectorOperator is the operator of a [LabelSelectorRequirement].
type SelectorOperator string

// Label selector operators, with Kubernetes semantics.
const (
	SelectorOpIn           SelectorOperator = "In"
	SelectorOpNotIn        SelectorOperator = "NotIn"
	SelectorOpExists       SelectorOperator = "Exists"
	SelectorOpDoesNotExist SelectorOperator = "DoesNotExist"
)

// LabelSelector is a Kubernetes label selector: all MatchLabels and all
// MatchExpressions must match (AND). The empty selector matches everything.
type LabelSelector struct {
	MatchLabels      map[string]string
	MatchExpressions []LabelSelectorRequirement
}

// LabelSelectorRequirement is one expression of a [LabelSelector]. In and
// NotIn need at least one value; Exists and DoesNotExist take none.
type LabelSelectorRequirement struct {
	Key      string
	Operator SelectorOperator
	Values   []string
}

// Matches reports whether the selector matches the given labels. A nil
// selector matches nothing; an invalid selector is an error.
func (s *LabelSelector) Matches(set map[string]string) (bool, error) {
	if s == nil {
		return false, nil
	}
	sel, err := s.selector()
	if err != nil {
		return false, err
	}
	return sel.Matches(labels.Set(set)), nil
}

// selector converts s into an apimachinery selector, which also validates
// label keys and values.
func (s *LabelSelector) selector() (labels.Selector, error) {
	sel := labels.NewSelector()
	keys := slices.Sorted(maps.Keys(s.MatchLabels))
	for _, k := range keys {
		r, err := labels.NewRequirement(k, selection.Equals, []string{s.MatchLabels[k]})
		if err != nil {
			return nil, fmt.Errorf("matchLabels[%s]: %w", k, err)
		}
		sel = sel.Add(*r)
	}
	for i, e := range s.MatchExpressions {
		var op selection.Operator
		switch e.Operator {
		case SelectorOpIn:
			op = selection.In
		case SelectorOpNotIn:
			op = selection.NotIn
		case SelectorOpExists:
			op = selection.Exists
		case SelectorOpDoesNotExist:
			op = selection.DoesNotExist
		default:
			return nil, fmt.Errorf("matchExpressions[%d].operator: unknown operator %q", i, e.Operator)
		}
		r, err := labels.NewRequirement(e.Key, op, e.Values)
		if err != nil {
			return nil, fmt.Errorf("matchExpressions[%d]: %w", i, err)
		}
		sel = sel.Add(*r)
	}
	return sel, nil
}

// Clone returns a deep copy of s (nil for nil).
func (s *LabelSelector) Clone() *LabelSelector {
	if s == nil {
		return nil
	}
	c := &LabelSelector{MatchLabels: maps.Clone(s.MatchLabels)}
	if s.MatchExpressions != nil {
		c.MatchExpressions = make([]LabelSelectorRequirement, len(s.MatchExpressions))
		for i, e := range s.MatchExpressions {
			e.Values = slices.Clone(e.Values)
			c.MatchExpressions[i] = e
		}
	}
	return c
}

// Clone returns a deep copy of p (nil for nil).
func (p *PeeringPolicy) Clone() *PeeringPolicy {
	if p == nil {
		return nil
	}
	c := &PeeringPolicy{Name: p.Name, NodeSelector: p.NodeSelector.Clone()}
	if p.VirtualRouters != nil {
		c.VirtualRouters = make([]VirtualRouter, len(p.VirtualRouters))
		for i, vr := range p.VirtualRouters {
			c.VirtualRouters[i] = vr.Clone()
		}
	}
	return c
}

// Clone returns a deep copy of vr.
func (vr VirtualRouter) Clone() VirtualRouter {
	vr.ServiceSelector = vr.ServiceSelector.Clone()
	vr.ServiceAdvertisements = slices.Clone(vr.ServiceAdvertisements)
	vr.LoadBalancerClasses = slices.Clone(vr.LoadBalancerClasses)
	if vr.Neighbors != nil {
		ns := make([]Neighbor, len(vr.Neighbors))
		for i, n := range vr.Neighbors {
			n.Families = slices.Clone(n.Families)
			ns[i] = n
		}
		vr.Neighbors = ns
	}
	return vr
}

// Equal reports whether n and o configure the same session.
func (n Neighbor) Equal(o Neighbor) bool {
	return n.PeerAddress == o.PeerAddress && n.PeerPort == o.PeerPort && n.PeerASN == o.PeerASN &&
		n.LocalAddress == o.LocalAddress && n.Passive == o.Passive && n.EBGPMultihopTTL == o.EBGPMultihopTTL &&
		n.ConnectRetryTime == o.ConnectRetryTime && n.HoldTime == o.HoldTime && n.KeepaliveTime == o.KeepaliveTime &&
		n.GracefulRestart == o.GracefulRestart && n.Password == o.Password && slices.Equal(n.Families, o.Families)
}

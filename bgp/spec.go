package bgp

import (
	"fmt"
	"iter"
	"maps"
	"net/netip"
	"slices"
	"strconv"
)

// NodeSpec is the desired BGP state of one node: the internal model that
// both configuration APIs translate into — v1's [PeeringPolicy]
// ([SpecFromPolicy]) and v2's cluster config, peer configs,
// advertisements and node override ([Resolve]) — and that a [SpecApplier]
// applies. Everything in it is resolved for the node: router IDs, ports,
// local addresses, passwords, and per peer and family the advertisements
// and import prefix lists.
//
// A NodeSpec is a plain value: not safe for concurrent use while being
// modified; treat specs handed to a manager as read-only ([NodeSpec.Clone]
// to change one).
type NodeSpec struct {
	// Source names the object the spec was made from, as
	// "<Kind>/<name>" (e.g. "BGPPeeringPolicy/rack1",
	// "BGPClusterConfig/rack1"); for logs and status.
	Source string
	// Instances are the BGP speakers of the node; their Name and LocalASN
	// are unique within the spec.
	Instances []Instance
}

// Instance is one BGP speaker of a node (Cilium's BGP instance, v1's
// virtual router).
type Instance struct {
	// Name identifies the instance in status; v1 instances are named
	// "asn-<LocalASN>".
	Name string
	// LocalASN is the instance's autonomous system number.
	LocalASN uint32
	// RouterID is the BGP identifier; invalid: the node's IPv4 address
	// (ControlPlaneState.RouterID's fallback).
	RouterID netip.Addr
	// LocalPort is the TCP port the instance listens on; 0: it does not
	// listen (it only connects out).
	LocalPort uint16
	// Peers are the instance's neighbors; their Name and PeerAddress are
	// unique within the instance.
	Peers []Peer
}

// Peer is one neighbor of an [Instance]: its session (the embedded
// [Neighbor], with defaults applied) and, per address family, what it is
// sent and what is accepted from it.
type Peer struct {
	// Name identifies the peer in status; v1 peers are named by their
	// address.
	Name string
	// Neighbor is the session. Its Families are the families of
	// PeerFamilies, in the same order.
	Neighbor
	// PeerFamilies are the address families negotiated with the peer, each
	// with its advertisements and import prefix list.
	PeerFamilies []PeerFamily
}

// PeerFamily is what one address family of a session carries.
type PeerFamily struct {
	Family Family
	// Adverts select the routes of this family sent to the peer (routes of
	// the other family that an advert yields are not sent on this one).
	// Several adverts that yield the same route merge their attributes
	// ([Attributes.Merge]).
	Adverts []Advert
	// Import lists the routes accepted from the peer into the node's
	// forwarding table (any entry matching accepts a route); empty accepts
	// nothing, the default.
	Import []PrefixMatch
}

// AdvertType is the kind of routes an [Advert] yields.
type AdvertType string

// Advertisement types (Cilium's advertisementType).
const (
	// PodCIDRAdvert yields the node's pod CIDRs.
	PodCIDRAdvert AdvertType = "PodCIDR"
	// ServiceAdvert yields host routes of the selected services' addresses
	// (see [VirtualRouter.ServicePrefixes] for the rules).
	ServiceAdvert AdvertType = "Service"
)

// Advert is one advertisement: a kind of routes, how to aggregate them, and
// the attributes they carry.
type Advert struct {
	Type AdvertType
	// ServiceSelector selects the services of a ServiceAdvert, with
	// Kubernetes label-selector semantics over the service labels plus
	// [ServiceNamespaceLabel] and [ServiceNameLabel]; nil selects none, an
	// empty selector every service.
	ServiceSelector *LabelSelector
	// ServiceAddresses are the kinds of addresses of a ServiceAdvert.
	// Default [LoadBalancerIPAddresses].
	ServiceAddresses []ServiceAddressType
	// LoadBalancerClasses filter the LoadBalancer services of a
	// ServiceAdvert (see [VirtualRouter.LoadBalancerClasses]). Default
	// [DefaultLoadBalancerClass].
	LoadBalancerClasses []string
	// AggregationLengthIPv4 and AggregationLengthIPv6, when not zero,
	// shorten every route of the family that is longer to this length
	// (RFC 4632 aggregation): the peer gets the aggregate, not the members.
	// Routes of services with externalTrafficPolicy Local are never
	// aggregated (their presence on a node says it has a local backend).
	AggregationLengthIPv4, AggregationLengthIPv6 uint8
	// Attributes are set on every route of the advert.
	Attributes Attributes
}

// Clone returns a deep copy of s (nil for nil).
func (s *NodeSpec) Clone() *NodeSpec {
	if s == nil {
		return nil
	}
	c := &NodeSpec{Source: s.Source, Instances: slices.Clone(s.Instances)}
	for i := range c.Instances {
		c.Instances[i].Peers = slices.Clone(c.Instances[i].Peers)
		for j := range c.Instances[i].Peers {
			p := &c.Instances[i].Peers[j]
			p.Families = slices.Clone(p.Families)
			p.PeerFamilies = slices.Clone(p.PeerFamilies)
			for k := range p.PeerFamilies {
				f := &p.PeerFamilies[k]
				f.Import = slices.Clone(f.Import)
				f.Adverts = slices.Clone(f.Adverts)
				for l := range f.Adverts {
					f.Adverts[l] = f.Adverts[l].Clone()
				}
			}
		}
	}
	return c
}

// Clone returns a deep copy of a.
func (a Advert) Clone() Advert {
	a.ServiceSelector = a.ServiceSelector.Clone()
	a.ServiceAddresses = slices.Clone(a.ServiceAddresses)
	a.LoadBalancerClasses = slices.Clone(a.LoadBalancerClasses)
	a.Attributes = a.Attributes.Clone()
	return a
}

// GracefulRestart reports whether any peer enables graceful restart.
func (s *NodeSpec) GracefulRestart() bool {
	if s == nil {
		return false
	}
	for _, in := range s.Instances {
		for _, p := range in.Peers {
			if p.GracefulRestart.Enabled {
				return true
			}
		}
	}
	return false
}

// V1InstanceName is the name of the instance a v1 virtual router becomes.
func V1InstanceName(localASN uint32) string { return "asn-" + strconv.FormatUint(uint64(localASN), 10) }

// SpecFromPolicy translates a v1 peering policy into the internal model, as
// applied to the node described by state: every virtual router becomes an
// instance named [V1InstanceName] whose router ID and local port come from
// the node's annotation for its ASN; every neighbor becomes a peer named by
// its address whose every family carries the router's pod CIDR export and
// service advertisement, without attributes, aggregation or import (v1
// has none of them). The policy's defaults are applied first
// ([PeeringPolicy.WithDefaults]); it is not validated (see
// [PeeringPolicy.Validate]). A nil policy is a nil spec.
func SpecFromPolicy(policy *PeeringPolicy, state *ControlPlaneState) *NodeSpec {
	if policy == nil {
		return nil
	}
	p := policy.WithDefaults()
	spec := &NodeSpec{Source: "BGPPeeringPolicy/" + p.Name}
	var annotations AnnotationMap
	if state != nil {
		annotations = state.Annotations
	}
	for _, vr := range p.VirtualRouters {
		in := Instance{
			Name:      V1InstanceName(vr.LocalASN),
			LocalASN:  vr.LocalASN,
			RouterID:  annotations[vr.LocalASN].RouterID,
			LocalPort: annotations[vr.LocalASN].LocalPort,
		}
		var adverts []Advert
		if vr.ExportPodCIDR {
			adverts = append(adverts, Advert{Type: PodCIDRAdvert})
		}
		if vr.ServiceSelector != nil {
			adverts = append(adverts, Advert{
				Type:                ServiceAdvert,
				ServiceSelector:     vr.ServiceSelector.Clone(),
				ServiceAddresses:    slices.Clone(vr.ServiceAdvertisements),
				LoadBalancerClasses: slices.Clone(vr.LoadBalancerClasses),
			})
		}
		for _, n := range vr.Neighbors {
			peer := Peer{Name: n.PeerAddress.String(), Neighbor: n}
			peer.Families = slices.Clone(n.Families)
			for _, f := range n.Families {
				pf := PeerFamily{Family: f}
				for _, a := range adverts {
					pf.Adverts = append(pf.Adverts, a.Clone())
				}
				peer.PeerFamilies = append(peer.PeerFamilies, pf)
			}
			in.Peers = append(in.Peers, peer)
		}
		spec.Instances = append(spec.Instances, in)
	}
	return spec
}

// Route is a unicast route advertised to or received from a peer.
type Route struct {
	Prefix  netip.Prefix
	NextHop netip.Addr
	// ASPath is the AS path, first AS first.
	ASPath []uint32
	// Attributes are the route's communities and local preference.
	Attributes Attributes
}

// PeerRoutes are the routes a peer is sent: prefix → attributes.
type PeerRoutes map[netip.Prefix]Attributes

// Equal reports whether r and o hold the same routes with the same
// attributes.
func (r PeerRoutes) Equal(o PeerRoutes) bool {
	return maps.EqualFunc(r, o, Attributes.Equal)
}

// AdvertCache computes what adverts yield, once per distinct advert: peers
// that share a peer configuration (or the neighbors of one v1 virtual
// router) share the work. It is for one computation (one reconcile); the
// zero value is not usable, use [NewAdvertCache].
//
// AdvertCache is not safe for concurrent use.
type AdvertCache struct {
	podCIDRs []netip.Prefix
	services iter.Seq[*Service]
	memo     map[string]advertResult
}

type advertResult struct {
	routes map[netip.Prefix]struct{} // both families
	err    error
}

// NewAdvertCache returns a cache over the node's pod CIDRs and the services
// (ranged once per distinct service advert; nil: none).
func NewAdvertCache(podCIDRs []netip.Prefix, services iter.Seq[*Service]) *AdvertCache {
	return &AdvertCache{podCIDRs: podCIDRs, services: services, memo: make(map[string]advertResult)}
}

// advertKey identifies what an advert selects (not its attributes).
func advertKey(a *Advert) string {
	return fmt.Sprintf("%s|%v|%v|%v|%d|%d", a.Type, selectorKey(a.ServiceSelector), a.ServiceAddresses, a.LoadBalancerClasses,
		a.AggregationLengthIPv4, a.AggregationLengthIPv6)
}

func selectorKey(s *LabelSelector) string {
	if s == nil {
		return "<nil>"
	}
	keys := slices.Sorted(maps.Keys(s.MatchLabels))
	out := ""
	for _, k := range keys {
		out += k + "=" + s.MatchLabels[k] + ","
	}
	return out + fmt.Sprint(s.MatchExpressions)
}

// Routes returns the routes (both families) advert a yields, aggregated.
// The returned map is shared: read-only.
func (c *AdvertCache) Routes(a *Advert) (map[netip.Prefix]struct{}, error) {
	key := advertKey(a)
	if r, ok := c.memo[key]; ok {
		return r.routes, r.err
	}
	r := advertResult{routes: make(map[netip.Prefix]struct{})}
	add := func(p netip.Prefix, aggregatable bool) {
		if aggregatable {
			if p.Addr().Is4() {
				p = aggregate(p, int(a.AggregationLengthIPv4))
			} else {
				p = aggregate(p, int(a.AggregationLengthIPv6))
			}
		}
		r.routes[p] = struct{}{}
	}
	switch a.Type {
	case PodCIDRAdvert:
		for _, p := range c.podCIDRs {
			add(p.Masked(), true)
		}
	case ServiceAdvert:
		vr := VirtualRouter{ServiceSelector: a.ServiceSelector, ServiceAdvertisements: a.ServiceAddresses, LoadBalancerClasses: a.LoadBalancerClasses}
		if len(vr.ServiceAdvertisements) == 0 {
			vr.ServiceAdvertisements = []ServiceAddressType{LoadBalancerIPAddresses}
		}
		if len(vr.LoadBalancerClasses) == 0 {
			vr.LoadBalancerClasses = []string{DefaultLoadBalancerClass}
		}
		m, err := vr.serviceMatcher()
		if err != nil {
			r.err = err
			break
		}
		if c.services != nil && m.sel != nil {
			var buf []netip.Prefix
			for svc := range c.services {
				buf = m.appendPrefixes(buf[:0], svc)
				local := svc.ExternalTrafficPolicyLocal
				for _, p := range buf {
					add(p, !local)
				}
			}
		}
	default:
		r.err = fmt.Errorf("unknown advertisement type %q", a.Type)
	}
	c.memo[key] = r
	return r.routes, r.err
}

// PeerRoutes returns the routes peer p is sent: per family, the routes of
// that family its adverts yield, with their merged attributes.
func (c *AdvertCache) PeerRoutes(p *Peer) (PeerRoutes, error) {
	out := make(PeerRoutes)
	for _, pf := range p.PeerFamilies {
		v4 := pf.Family == IPv4Unicast
		for i := range pf.Adverts {
			a := &pf.Adverts[i]
			routes, err := c.Routes(a)
			if err != nil {
				return nil, fmt.Errorf("peer %s: family %s: advertisement %d: %w", p.Name, pf.Family, i, err)
			}
			for pfx := range routes {
				if pfx.Addr().Is4() != v4 {
					continue
				}
				if cur, ok := out[pfx]; ok {
					if !a.Attributes.IsZero() {
						out[pfx] = cur.Merge(a.Attributes)
					}
				} else {
					out[pfx] = a.Attributes
				}
			}
		}
	}
	return out, nil
}

// HasServiceAdverts reports whether any peer family of the spec has a
// service advertisement (a manager then needs the services).
func (s *NodeSpec) HasServiceAdverts() bool {
	if s == nil {
		return false
	}
	for _, in := range s.Instances {
		for _, p := range in.Peers {
			for _, f := range p.PeerFamilies {
				for _, a := range f.Adverts {
					if a.Type == ServiceAdvert && a.ServiceSelector != nil {
						return true
					}
				}
			}
		}
	}
	return false
}

// LearnedRoute is a route learned from a peer and accepted by its import
// prefix list: a candidate for the node's forwarding table. It is a
// comparable value.
type LearnedRoute struct {
	Prefix  netip.Prefix
	NextHop netip.Addr
	// LocalASN is the instance that learned it; Peer the neighbor it came
	// from.
	LocalASN uint32
	Peer     netip.Addr
}

// LearnedRouteSource is what consumes learned routes needs of a manager
// (package gobgp's Manager implements it): the learned routes, one per
// prefix, in no particular order, safe for concurrent use.
type LearnedRouteSource interface {
	LearnedRoutes() []LearnedRoute
}

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
// zero value is not usable, use [NewAdvertCache]. Everything it computes is
// kept in sorted slices, without a map per route: with 10k services a
// reconcile costs about what selecting them does.
//
// AdvertCache is not safe for concurrent use.
type AdvertCache struct {
	podCIDRs []netip.Prefix
	services iter.Seq[*Service]
	memo     map[string]advertResult
	buf      []netip.Prefix
}

type advertResult struct {
	routes []netip.Prefix // sorted (IPv4 first), unique
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

// Routes returns the routes (both families, IPv4 first, sorted, without
// duplicates) advert a yields, aggregated. The slice is shared:
// read-only.
func (c *AdvertCache) Routes(a *Advert) ([]netip.Prefix, error) {
	key := advertKey(a)
	if r, ok := c.memo[key]; ok {
		return r.routes, r.err
	}
	var r advertResult
	agg := func(p netip.Prefix) netip.Prefix {
		if p.Addr().Is4() {
			return aggregate(p, int(a.AggregationLengthIPv4))
		}
		return aggregate(p, int(a.AggregationLengthIPv6))
	}
	switch a.Type {
	case PodCIDRAdvert:
		for _, p := range c.podCIDRs {
			r.routes = append(r.routes, agg(p.Masked()))
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
		if c.services == nil || m.sel == nil {
			break
		}
		aggregating := a.AggregationLengthIPv4 != 0 || a.AggregationLengthIPv6 != 0
		for svc := range c.services {
			if !aggregating || svc.ExternalTrafficPolicyLocal {
				r.routes = m.appendPrefixes(r.routes, svc)
				continue
			}
			c.buf = m.appendPrefixes(c.buf[:0], svc)
			for _, p := range c.buf {
				r.routes = append(r.routes, agg(p))
			}
		}
	default:
		r.err = fmt.Errorf("unknown advertisement type %q", a.Type)
	}
	slices.SortFunc(r.routes, comparePrefix)
	r.routes = slices.Compact(r.routes)
	c.memo[key] = r
	return r.routes, r.err
}

// RouteGroup is a set of routes a peer is sent with the same attributes.
type RouteGroup struct {
	Attributes Attributes
	// Prefixes are sorted (IPv4 first) and unique.
	Prefixes []netip.Prefix
}

// familyRange returns the part of sorted routes of family f.
func familyRange(routes []netip.Prefix, f Family) []netip.Prefix {
	split, _ := slices.BinarySearchFunc(routes, true, func(p netip.Prefix, _ bool) int {
		if p.Addr().Is4() {
			return -1
		}
		return 1
	})
	if f == IPv6Unicast {
		return routes[split:]
	}
	return routes[:split]
}

// PeerGroups returns the routes peer p is sent, grouped by their
// attributes: per family, the routes of that family its adverts yield; a
// route several adverts yield gets their merged attributes
// ([Attributes.Merge]). Groups are sorted by [Attributes.Key]; no route is
// in two groups.
func (c *AdvertCache) PeerGroups(p *Peer) ([]RouteGroup, error) {
	type source struct {
		routes []netip.Prefix
		attrs  *Attributes
		key    string
	}
	var sources []source
	for _, pf := range p.PeerFamilies {
		for i := range pf.Adverts {
			a := &pf.Adverts[i]
			routes, err := c.Routes(a)
			if err != nil {
				return nil, fmt.Errorf("peer %s: family %s: advertisement %d: %w", p.Name, pf.Family, i, err)
			}
			if r := familyRange(routes, pf.Family); len(r) > 0 {
				sources = append(sources, source{r, &a.Attributes, a.Attributes.Key()})
			}
		}
	}
	switch len(sources) {
	case 0:
		return nil, nil
	case 1:
		return []RouteGroup{{Attributes: *sources[0].attrs, Prefixes: sources[0].routes}}, nil
	}
	// A k-way merge of the sorted sources (k is small), merging the
	// attributes of a route that several yield.
	groups := map[string]*RouteGroup{}
	pos := make([]int, len(sources))
	var last *RouteGroup // most routes in a row share a group
	lastKey := ""
	for {
		var min netip.Prefix
		found := false
		for i, s := range sources {
			if pos[i] < len(s.routes) && (!found || comparePrefix(s.routes[pos[i]], min) < 0) {
				min, found = s.routes[pos[i]], true
			}
		}
		if !found {
			break
		}
		var attrs Attributes
		var key string
		n := 0
		for i, s := range sources {
			if pos[i] < len(s.routes) && s.routes[pos[i]] == min {
				pos[i]++
				if n == 0 {
					attrs, key = *s.attrs, s.key
				} else if !s.attrs.IsZero() {
					attrs = attrs.Merge(*s.attrs)
					key = attrs.Key()
				}
				n++
			}
		}
		g := last
		if g == nil || key != lastKey {
			if g = groups[key]; g == nil {
				g = &RouteGroup{Attributes: attrs}
				groups[key] = g
			}
			last, lastKey = g, key
		}
		g.Prefixes = append(g.Prefixes, min)
	}
	out := make([]RouteGroup, 0, len(groups))
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		out = append(out, *groups[k])
	}
	return out, nil
}

// PeerRoutes returns the routes peer p is sent as a map of prefix to
// attributes (see [AdvertCache.PeerGroups]); for tests and views, as it
// costs a map entry per route.
func (c *AdvertCache) PeerRoutes(p *Peer) (PeerRoutes, error) {
	groups, err := c.PeerGroups(p)
	if err != nil {
		return nil, err
	}
	out := make(PeerRoutes)
	for _, g := range groups {
		for _, pfx := range g.Prefixes {
			out[pfx] = g.Attributes
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

package bgp

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// WithDefaults returns a deep copy of p with every zero-valued optional field
// of every virtual router and neighbor set to its default (see
// [VirtualRouter] and [Neighbor]); p is not modified. It returns nil for nil.
func (p *PeeringPolicy) WithDefaults() *PeeringPolicy {
	c := p.Clone()
	if c == nil {
		return nil
	}
	for i := range c.VirtualRouters {
		vr := &c.VirtualRouters[i]
		if len(vr.ServiceAdvertisements) == 0 {
			vr.ServiceAdvertisements = []ServiceAddressType{LoadBalancerIPAddresses}
		}
		if len(vr.LoadBalancerClasses) == 0 {
			vr.LoadBalancerClasses = []string{DefaultLoadBalancerClass}
		}
		for j := range c.VirtualRouters[i].Neighbors {
			c.VirtualRouters[i].Neighbors[j].setDefaults()
		}
	}
	return c
}

func (n *Neighbor) setDefaults() {
	if n.PeerPort == 0 {
		n.PeerPort = DefaultPeerPort
	}
	if n.EBGPMultihopTTL == 0 {
		n.EBGPMultihopTTL = DefaultEBGPMultihopTTL
	}
	if n.ConnectRetryTime == 0 {
		n.ConnectRetryTime = DefaultConnectRetryTime
	}
	if n.HoldTime == 0 && n.KeepaliveTime == 0 {
		n.HoldTime = DefaultHoldTime
		n.KeepaliveTime = DefaultKeepaliveTime
	} else if n.KeepaliveTime == 0 && n.HoldTime > 0 {
		// RFC 4271 section 10: a third of the hold time, whole seconds.
		n.KeepaliveTime = max((n.HoldTime / 3).Truncate(time.Second), time.Second)
	} else if n.HoldTime == 0 && n.KeepaliveTime > 0 {
		n.HoldTime = max(3*n.KeepaliveTime, DefaultHoldTime)
	}
	if n.GracefulRestart.Enabled && n.GracefulRestart.RestartTime == 0 {
		n.GracefulRestart.RestartTime = DefaultRestartTime
	}
	if len(n.Families) == 0 {
		n.Families = []Family{IPv4Unicast, IPv6Unicast}
	}
}

// Validate checks a policy that already has its defaults applied (see
// [PeeringPolicy.WithDefaults]) and returns one error that joins a
// *[FieldError] for every bad field; every such error matches
// [ErrInvalidPolicy]. Timers are checked against RFC 4271: whole seconds,
// hold time 3s..65535s (the RFC's 0, "no keepalives", is not supported),
// keepalive 1s..hold time, connect retry 1s..65535s.
func (p *PeeringPolicy) Validate() error {
	if p == nil {
		return &FieldError{Field: "policy", Reason: "is nil"}
	}
	var errs []error
	add := func(field string, value any, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...)})
	}
	if p.NodeSelector != nil {
		if _, err := p.NodeSelector.selector(); err != nil {
			add("nodeSelector", nil, "%v", err)
		}
	}
	if len(p.VirtualRouters) == 0 {
		add("virtualRouters", nil, "at least one virtual router is required")
	}
	asns := make(map[uint32]int)
	for i, vr := range p.VirtualRouters {
		f := fmt.Sprintf("virtualRouters[%d]", i)
		if vr.LocalASN == 0 {
			add(f+".localASN", vr.LocalASN, "must be 1..4294967295")
		} else if prev, dup := asns[vr.LocalASN]; dup {
			add(f+".localASN", vr.LocalASN, "duplicates virtualRouters[%d]", prev)
		} else {
			asns[vr.LocalASN] = i
		}
		if vr.ServiceSelector != nil {
			if _, err := vr.ServiceSelector.selector(); err != nil {
				add(f+".serviceSelector", nil, "%v", err)
			}
		}
		seenTypes := make(map[ServiceAddressType]bool)
		for k, typ := range vr.ServiceAdvertisements {
			af := fmt.Sprintf("%s.serviceAdvertisements[%d]", f, k)
			switch {
			case typ != LoadBalancerIPAddresses && typ != ClusterIPAddresses && typ != ExternalIPAddresses:
				add(af, typ, "unknown service address type, want %q, %q or %q", LoadBalancerIPAddresses, ClusterIPAddresses, ExternalIPAddresses)
			case seenTypes[typ]:
				add(af, typ, "duplicate service address type")
			}
			seenTypes[typ] = true
		}
		seenClasses := make(map[string]bool)
		for k, class := range vr.LoadBalancerClasses {
			cf := fmt.Sprintf("%s.loadBalancerClasses[%d]", f, k)
			if msgs := validation.IsQualifiedName(class); len(msgs) > 0 {
				add(cf, class, "not a Kubernetes load-balancer class: %s", strings.Join(msgs, "; "))
			} else if seenClasses[class] {
				add(cf, class, "duplicate load-balancer class")
			}
			seenClasses[class] = true
		}
		peers := make(map[string]int)
		for j, n := range vr.Neighbors {
			nf := fmt.Sprintf("%s.neighbors[%d]", f, j)
			if n.PeerAddress.IsValid() {
				key := n.PeerAddress.Unmap().String()
				if prev, dup := peers[key]; dup {
					add(nf+".peerAddress", n.PeerAddress, "duplicates %s.neighbors[%d]", f, prev)
				} else {
					peers[key] = j
				}
			}
			errs = append(errs, validateNeighbor(nf, n)...)
		}
	}
	return errors.Join(errs...)
}

// validateNeighbor checks a neighbor with its defaults applied; field
// names start with nf.
func validateNeighbor(nf string, n Neighbor) []error {
	var errs []error
	add := func(field string, value any, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...)})
	}
	if !n.PeerAddress.IsValid() {
		add(nf+".peerAddress", nil, "is required")
	} else {
		if n.PeerAddress.Zone() != "" {
			add(nf+".peerAddress", n.PeerAddress, "must not have a zone")
		}
		if n.PeerAddress.IsUnspecified() || n.PeerAddress.IsMulticast() {
			add(nf+".peerAddress", n.PeerAddress, "must be a unicast address")
		}
		if n.LocalAddress.IsValid() && n.LocalAddress.Unmap().Is4() != n.PeerAddress.Unmap().Is4() {
			add(nf+".localAddress", n.LocalAddress, "must be of the same IP family as peerAddress")
		}
	}
	if n.PeerPort == 0 {
		add(nf+".peerPort", n.PeerPort, "must be 1..65535")
	}
	if n.PeerASN == 0 {
		add(nf+".peerASN", n.PeerASN, "must be 1..4294967295")
	}
	if n.EBGPMultihopTTL == 0 {
		add(nf+".eBGPMultihopTTL", n.EBGPMultihopTTL, "must be 1..255")
	}
	errs = append(errs, validateTimers(nf, n)...)
	if len(n.Password) > MaxPasswordLength {
		add(nf+".password", nil, "is %d bytes long, at most %d allowed by TCP-MD5", len(n.Password), MaxPasswordLength)
	}
	if len(n.Families) == 0 {
		add(nf+".families", nil, "at least one address family is required")
	}
	seen := make(map[Family]bool)
	for k, fam := range n.Families {
		switch {
		case fam != IPv4Unicast && fam != IPv6Unicast:
			add(fmt.Sprintf("%s.families[%d]", nf, k), fam, "unsupported address family, want %q or %q", IPv4Unicast, IPv6Unicast)
		case seen[fam]:
			add(fmt.Sprintf("%s.families[%d]", nf, k), fam, "duplicate address family")
		}
		seen[fam] = true
	}
	return errs
}

// Validate checks a spec (its neighbors with defaults applied, as the
// translators [SpecFromPolicy] and [Resolve] make them) and returns one
// error joining a *[FieldError] for every bad field, named from
// "instances[i]": instance names and local ASNs unique, router IDs IPv4,
// peer names and addresses unique per instance, each peer's session as
// [PeeringPolicy.Validate] checks a neighbor, its families matching its
// PeerFamilies, adverts of a known type with selectors that parse and
// aggregation lengths within the family, and import prefix lists of the
// family. A nil spec is valid (it withdraws everything).
func (s *NodeSpec) Validate() error {
	if s == nil {
		return nil
	}
	var errs []error
	add := func(field string, value any, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...)})
	}
	names, asns := map[string]int{}, map[uint32]int{}
	for i, in := range s.Instances {
		f := fmt.Sprintf("instances[%d]", i)
		if prev, dup := names[in.Name]; dup {
			add(f+".name", in.Name, "duplicates instances[%d]", prev)
		}
		names[in.Name] = i
		if in.LocalASN == 0 {
			add(f+".localASN", in.LocalASN, "must be 1..4294967295")
		} else if prev, dup := asns[in.LocalASN]; dup {
			add(f+".localASN", in.LocalASN, "duplicates instances[%d]", prev)
		} else {
			asns[in.LocalASN] = i
		}
		if in.RouterID.IsValid() && (!in.RouterID.Is4() || in.RouterID.IsUnspecified()) {
			add(f+".routerID", in.RouterID, "must be a non-zero IPv4 address")
		}
		peerNames, addrs := map[string]int{}, map[netip.Addr]int{}
		for j, p := range in.Peers {
			pf := fmt.Sprintf("%s.peers[%d]", f, j)
			if prev, dup := peerNames[p.Name]; dup {
				add(pf+".name", p.Name, "duplicates %s.peers[%d]", f, prev)
			}
			peerNames[p.Name] = j
			if p.PeerAddress.IsValid() {
				if prev, dup := addrs[p.PeerAddress.Unmap()]; dup {
					add(pf+".peerAddress", p.PeerAddress, "duplicates %s.peers[%d]", f, prev)
				}
				addrs[p.PeerAddress.Unmap()] = j
			}
			errs = append(errs, validateNeighbor(pf, p.Neighbor)...)
			fams := make([]Family, len(p.PeerFamilies))
			for k, pfam := range p.PeerFamilies {
				fams[k] = pfam.Family
				ff := fmt.Sprintf("%s.families[%d]", pf, k)
				for l, m := range pfam.Import {
					if err := m.Validate(); err != nil {
						add(fmt.Sprintf("%s.import[%d]", ff, l), m.String(), "%v", err)
					} else if m.Prefix.Addr().Is4() != (pfam.Family == IPv4Unicast) {
						add(fmt.Sprintf("%s.import[%d]", ff, l), m.String(), "is not of the family %s", pfam.Family)
					}
				}
				for l, a := range pfam.Adverts {
					af := fmt.Sprintf("%s.adverts[%d]", ff, l)
					switch a.Type {
					case PodCIDRAdvert, ServiceAdvert:
					default:
						add(af+".type", a.Type, "want %q or %q", PodCIDRAdvert, ServiceAdvert)
					}
					if a.ServiceSelector != nil {
						if _, err := a.ServiceSelector.selector(); err != nil {
							add(af+".serviceSelector", nil, "%v", err)
						}
					}
					if a.AggregationLengthIPv4 > 32 {
						add(af+".aggregationLengthIPv4", a.AggregationLengthIPv4, "must be 1..32")
					}
					if a.AggregationLengthIPv6 > 128 {
						add(af+".aggregationLengthIPv6", a.AggregationLengthIPv6, "must be 1..128")
					}
				}
			}
			if !slices.Equal(fams, p.Families) {
				add(pf+".families", p.Families, "must list the families of its peer families %v", fams)
			}
		}
	}
	return errors.Join(errs...)
}

func validateTimers(nf string, n Neighbor) []error {
	var errs []error
	add := func(field string, value any, reason string) {
		errs = append(errs, &FieldError{Field: nf + "." + field, Value: value, Reason: reason})
	}
	whole := func(field string, d time.Duration) bool {
		if d%time.Second != 0 || d < 0 {
			add(field, d, "must be a non-negative whole number of seconds")
			return false
		}
		return true
	}
	if whole("connectRetryTime", n.ConnectRetryTime) {
		if n.ConnectRetryTime < time.Second || n.ConnectRetryTime > MaxHoldTime {
			add("connectRetryTime", n.ConnectRetryTime, "must be 1s..65535s")
		}
	}
	holdOK := whole("holdTime", n.HoldTime)
	if holdOK && (n.HoldTime < MinHoldTime || n.HoldTime > MaxHoldTime) {
		add("holdTime", n.HoldTime, "must be 3s..65535s (RFC 4271 section 4.2; a hold time of 0 is not supported)")
		holdOK = false
	}
	if whole("keepaliveTime", n.KeepaliveTime) && holdOK {
		switch {
		case n.KeepaliveTime < time.Second:
			add("keepaliveTime", n.KeepaliveTime, "must be at least 1s (RFC 4271 section 4.4)")
		case n.KeepaliveTime > n.HoldTime:
			add("keepaliveTime", n.KeepaliveTime, fmt.Sprintf("must not exceed holdTime %s (RFC 4271 section 4.4)", n.HoldTime))
		}
	}
	if n.GracefulRestart.Enabled && whole("gracefulRestart.restartTime", n.GracefulRestart.RestartTime) {
		if n.GracefulRestart.RestartTime < time.Second || n.GracefulRestart.RestartTime > MaxRestartTime {
			add("gracefulRestart.restartTime", n.GracefulRestart.RestartTime, "must be 1s..4095s (RFC 4724 section 3)")
		}
	}
	return errs
}

// ValidateState checks a policy (with its defaults applied) against the
// node state it is applied with, for problems that no field of the policy
// shows alone: a passive neighbor of a virtual router for which the node
// annotates no local port (see [AnnotationPrefix]) can never come up, as
// the speaker does not listen. It returns one error joining a *[FieldError]
// per problem; each matches [ErrInvalidPolicy]. A nil state has no
// annotations.
func (p *PeeringPolicy) ValidateState(state *ControlPlaneState) error {
	if p == nil {
		return &FieldError{Field: "policy", Reason: "is nil"}
	}
	var annotations AnnotationMap
	if state != nil {
		annotations = state.Annotations
	}
	var errs []error
	for i, vr := range p.VirtualRouters {
		if annotations[vr.LocalASN].LocalPort != 0 {
			continue
		}
		for j, n := range vr.Neighbors {
			if n.Passive {
				errs = append(errs, &FieldError{
					Field: fmt.Sprintf("virtualRouters[%d].neighbors[%d].passive", i, j),
					Reason: fmt.Sprintf("neighbor %s can never connect: the node does not listen for virtual router %d "+
						"(annotate the node with %s%d: local-port=<port>, or make the neighbor active)",
						n.PeerAddress, vr.LocalASN, AnnotationPrefix, vr.LocalASN),
				})
			}
		}
	}
	return errors.Join(errs...)
}

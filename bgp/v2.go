package bgp

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Kinds of the configuration objects, as they appear in [NodeSpec].Source,
// conditions and errors.
const (
	KindPeeringPolicy      = "BGPPeeringPolicy"
	KindClusterConfig      = "BGPClusterConfig"
	KindPeerConfig         = "BGPPeerConfig"
	KindAdvertisement      = "BGPAdvertisement"
	KindNodeConfigOverride = "BGPNodeConfigOverride"
	KindAuthSecret         = "Secret"
)

// ClusterConfig is a v2 BGP cluster configuration (BGPClusterConfig, after
// Cilium's CiliumBGPClusterConfig): the BGP instances of the nodes it
// selects. A plain value; see [ClusterConfigFromModel] for the checks.
type ClusterConfig struct {
	Name string
	// NodeSelector selects the nodes; nil selects every node.
	NodeSelector *LabelSelector
	Instances    []ClusterInstance
}

// ClusterInstance is a BGP instance of a [ClusterConfig].
type ClusterInstance struct {
	Name     string
	LocalASN uint32
	// LocalPort is the listening port; 0: no listening (the default).
	LocalPort uint16
	Peers     []ClusterPeer
}

// ClusterPeer is a neighbor of a [ClusterInstance].
type ClusterPeer struct {
	Name        string
	PeerAddress netip.Addr
	PeerASN     uint32
	// PeerConfigRef names the [PeerConfig]; empty: the defaults (both
	// unicast families, no advertisement, no import).
	PeerConfigRef string
}

// PeerConfig is a v2 BGP peer configuration (BGPPeerConfig, after Cilium's
// CiliumBGPPeerConfig), shared by the peers that name it.
type PeerConfig struct {
	Name string
	// PeerPort is the peer's TCP port; 0: 179.
	PeerPort uint16
	// Passive makes the speaker wait for the peer to connect (needs a
	// local port).
	Passive bool
	// ConnectRetryTime, HoldTime, KeepaliveTime: see [Neighbor]; zero: the
	// defaults.
	ConnectRetryTime, HoldTime, KeepaliveTime time.Duration
	// AuthSecretRef names the Secret (in the BGP secrets namespace) whose
	// "password" key enables TCP-MD5; empty: no authentication.
	AuthSecretRef string
	// EBGPMultihopTTL: see [Neighbor]; 0: 1.
	EBGPMultihopTTL uint8
	GracefulRestart GracefulRestart
	// Families; empty: IPv4 and IPv6 unicast, without advertisements or
	// imports.
	Families []PeerConfigFamily
}

// PeerConfigFamily is one address family of a [PeerConfig].
type PeerConfigFamily struct {
	Family Family
	// Advertisements selects [Advertisement] objects by their labels; nil
	// selects none.
	Advertisements *LabelSelector
	// Import accepts routes from the peer (see [PeerFamily].Import).
	Import []PrefixMatch
}

// Advertisement is a v2 BGP advertisement (BGPAdvertisement, after Cilium's
// CiliumBGPAdvertisement), selected by peer families through its labels.
type Advertisement struct {
	Name    string
	Labels  map[string]string
	Adverts []Advert
}

// NodeConfigOverride overrides, for the node it is named after, settings of
// the instances and peers of the node's [ClusterConfig]
// (BGPNodeConfigOverride).
type NodeConfigOverride struct {
	// Name is the node's name.
	Name      string
	Instances []OverrideInstance
}

// OverrideInstance overrides an instance, named as in the cluster config.
// Zero fields override nothing.
type OverrideInstance struct {
	Name      string
	RouterID  netip.Addr
	LocalPort uint16
	LocalASN  uint32
	Peers     []OverridePeer
}

// OverridePeer overrides a peer's local address.
type OverridePeer struct {
	Name         string
	LocalAddress netip.Addr
}

// fieldErrs collects *FieldError values.
type fieldErrs []error

func (e *fieldErrs) add(field string, value any, format string, args ...any) {
	*e = append(*e, &FieldError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...)})
}

func (e fieldErrs) err(kind, name string) error {
	if len(e) == 0 {
		return nil
	}
	return fmt.Errorf("%s %q: %w", kind, name, errors.Join(e...))
}

// selectorChecked converts a model selector and checks it.
func selectorChecked(m *bgpmodel.LabelSelector, field string, errs *fieldErrs) *LabelSelector {
	s := selectorFromModel(m)
	if s != nil {
		if _, err := s.selector(); err != nil {
			errs.add(field, nil, "%v", err)
		}
	}
	return s
}

func checkName(field, name string, errs *fieldErrs) {
	if err := kubemodel.ValidateName(name); err != nil {
		errs.add(field, name, "%v", err)
	}
}

func addrChecked(s, field string, required bool, errs *fieldErrs) netip.Addr {
	if s == "" {
		if required {
			errs.add(field, nil, "is required")
		}
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
		errs.add(field, s, "not a unicast IP address")
		return netip.Addr{}
	}
	return a.Unmap()
}

func portChecked(v uint32, field string, errs *fieldErrs) uint16 {
	if v > 65535 {
		errs.add(field, v, "must be 1..65535")
		return 0
	}
	return uint16(v)
}

// ClusterConfigFromModel converts and checks a stored cluster config: the
// name, the node selector, instance names (unique, Kubernetes names) and
// local ASNs (1..4294967295, unique), local ports, peer names (unique per
// instance), addresses (unicast, unique per instance), peer ASNs and the
// peer config references. Every problem is a *[FieldError] (matching
// [ErrInvalidPolicy]), joined, under an error naming the object.
func ClusterConfigFromModel(m *bgpmodel.ClusterConfig) (*ClusterConfig, error) {
	var errs fieldErrs
	c := &ClusterConfig{Name: m.GetName()}
	checkName("metadata.name", c.Name, &errs)
	c.NodeSelector = selectorChecked(m.GetNodeSelector(), "spec.nodeSelector", &errs)
	if len(m.GetBgpInstances()) == 0 {
		errs.add("spec.bgpInstances", nil, "at least one instance is required")
	}
	names, asns := map[string]int{}, map[uint32]int{}
	for i, mi := range m.GetBgpInstances() {
		f := fmt.Sprintf("spec.bgpInstances[%d]", i)
		in := ClusterInstance{Name: mi.GetName(), LocalASN: mi.GetLocalAsn(), LocalPort: portChecked(mi.GetLocalPort(), f+".localPort", &errs)}
		checkName(f+".name", in.Name, &errs)
		if prev, dup := names[in.Name]; dup {
			errs.add(f+".name", in.Name, "duplicates spec.bgpInstances[%d]", prev)
		}
		names[in.Name] = i
		if in.LocalASN == 0 {
			errs.add(f+".localASN", in.LocalASN, "must be 1..4294967295")
		} else if prev, dup := asns[in.LocalASN]; dup {
			errs.add(f+".localASN", in.LocalASN, "duplicates spec.bgpInstances[%d]", prev)
		} else {
			asns[in.LocalASN] = i
		}
		peerNames, addrs := map[string]int{}, map[netip.Addr]int{}
		for j, mp := range mi.GetPeers() {
			pf := fmt.Sprintf("%s.peers[%d]", f, j)
			p := ClusterPeer{Name: mp.GetName(), PeerASN: mp.GetPeerAsn(), PeerConfigRef: mp.GetPeerConfigRef().GetName()}
			checkName(pf+".name", p.Name, &errs)
			if prev, dup := peerNames[p.Name]; dup {
				errs.add(pf+".name", p.Name, "duplicates %s.peers[%d]", f, prev)
			}
			peerNames[p.Name] = j
			p.PeerAddress = addrChecked(mp.GetPeerAddress(), pf+".peerAddress", true, &errs)
			if p.PeerAddress.IsValid() {
				if prev, dup := addrs[p.PeerAddress]; dup {
					errs.add(pf+".peerAddress", p.PeerAddress, "duplicates %s.peers[%d]", f, prev)
				}
				addrs[p.PeerAddress] = j
			}
			if p.PeerASN == 0 {
				errs.add(pf+".peerASN", p.PeerASN, "must be 1..4294967295")
			}
			if ref := mp.GetPeerConfigRef(); ref != nil {
				if g := ref.GetGroup(); g != "" && g != Group {
					errs.add(pf+".peerConfigRef.group", g, "must be %q", Group)
				}
				if k := ref.GetKind(); k != "" && k != KindPeerConfig {
					errs.add(pf+".peerConfigRef.kind", k, "must be %q", KindPeerConfig)
				}
				if p.PeerConfigRef != "" {
					checkName(pf+".peerConfigRef.name", p.PeerConfigRef, &errs)
				}
			}
			in.Peers = append(in.Peers, p)
		}
		c.Instances = append(c.Instances, in)
	}
	return c, errs.err(KindClusterConfig, c.Name)
}

// Group is the API group of the v2 custom resources.
const Group = "bgp.vswitchkit.io"

// familyFromAFI converts an afi/safi pair.
func familyFromAFI(afi, safi string) (Family, bool) {
	if safi != "" && safi != "unicast" {
		return "", false
	}
	switch afi {
	case "ipv4":
		return IPv4Unicast, true
	case "ipv6":
		return IPv6Unicast, true
	}
	return "", false
}

// AFI returns the address family identifier of f as written in the v2
// resources ("ipv4", "ipv6") and its SAFI ("unicast").
func (f Family) AFI() (afi, safi string) {
	if f == IPv6Unicast {
		return "ipv6", "unicast"
	}
	return "ipv4", "unicast"
}

// PeerConfigFromModel converts and checks a stored peer config: the name,
// the port, the timers (as [PeeringPolicy.Validate] checks them, after
// defaults), the multihop TTL, the graceful-restart time, the secret
// reference, the families (ipv4 or ipv6 unicast, each at most once), their
// advertisement selectors and import prefix lists (a valid prefix without
// host bits, prefix length <= ge <= le <= 32 or 128, of the family).
// Problems are *[FieldError] values, joined, under an error naming the
// object.
func PeerConfigFromModel(m *bgpmodel.PeerConfig) (*PeerConfig, error) {
	var errs fieldErrs
	c := &PeerConfig{
		Name:             m.GetName(),
		Passive:          m.GetTransport().GetPassive(),
		ConnectRetryTime: seconds(m.GetTimers().GetConnectRetryTimeSeconds()),
		HoldTime:         seconds(m.GetTimers().GetHoldTimeSeconds()),
		KeepaliveTime:    seconds(m.GetTimers().GetKeepAliveTimeSeconds()),
		AuthSecretRef:    m.GetAuthSecretRef(),
		GracefulRestart: GracefulRestart{
			Enabled:     m.GetGracefulRestart().GetEnabled(),
			RestartTime: seconds(m.GetGracefulRestart().GetRestartTimeSeconds()),
		},
	}
	checkName("metadata.name", c.Name, &errs)
	c.PeerPort = portChecked(m.GetTransport().GetPeerPort(), "spec.transport.peerPort", &errs)
	if ttl := m.GetEbgpMultihop(); ttl > 255 {
		errs.add("spec.ebgpMultihop", ttl, "must be 1..255")
	} else {
		c.EBGPMultihopTTL = uint8(ttl)
	}
	if c.AuthSecretRef != "" {
		if msgs := validation.IsDNS1123Subdomain(c.AuthSecretRef); len(msgs) > 0 {
			errs.add("spec.authSecretRef", c.AuthSecretRef, "not a Secret name: %s", strings.Join(msgs, "; "))
		}
	}
	// The timers, as a neighbor with its defaults applied.
	n := c.neighbor(netip.MustParseAddr("192.0.2.1"), 1, "")
	for _, e := range validateTimers("spec", n) {
		var fe *FieldError
		if errors.As(e, &fe) {
			fe.Field = strings.NewReplacer("connectRetryTime", "timers.connectRetryTimeSeconds", "holdTime", "timers.holdTimeSeconds",
				"keepaliveTime", "timers.keepAliveTimeSeconds", "restartTime", "restartTimeSeconds").Replace(fe.Field)
		}
		errs = append(errs, e)
	}
	seen := map[Family]int{}
	for i, mf := range m.GetFamilies() {
		f := fmt.Sprintf("spec.families[%d]", i)
		fam, ok := familyFromAFI(mf.GetAfi(), mf.GetSafi())
		if !ok {
			errs.add(f, mf.GetAfi()+"/"+mf.GetSafi(), "unsupported address family, want afi ipv4 or ipv6 with safi unicast")
			continue
		}
		if prev, dup := seen[fam]; dup {
			errs.add(f, fam, "duplicates spec.families[%d]", prev)
			continue
		}
		seen[fam] = i
		pf := PeerConfigFamily{Family: fam, Advertisements: selectorChecked(mf.GetAdvertisements(), f+".advertisements", &errs)}
		for j, mp := range mf.GetImportPrefixes() {
			ef := fmt.Sprintf("%s.importPrefixes[%d]", f, j)
			pm, ok := prefixMatchFromModel(mp, ef, &errs)
			if !ok {
				continue
			}
			if pm.Prefix.Addr().Is4() != (fam == IPv4Unicast) {
				errs.add(ef+".prefix", pm.Prefix, "is not of the family %s", fam)
				continue
			}
			pf.Import = append(pf.Import, pm)
		}
		c.Families = append(c.Families, pf)
	}
	return c, errs.err(KindPeerConfig, c.Name)
}

func prefixMatchFromModel(m *bgpmodel.PrefixMatch, field string, errs *fieldErrs) (PrefixMatch, bool) {
	p, err := netip.ParsePrefix(m.GetPrefix())
	if err != nil {
		errs.add(field+".prefix", m.GetPrefix(), "not an IP prefix")
		return PrefixMatch{}, false
	}
	if m.GetGe() > 128 || m.GetLe() > 128 {
		errs.add(field, fmt.Sprintf("ge %d le %d", m.GetGe(), m.GetLe()), "prefix lengths must be at most 128")
		return PrefixMatch{}, false
	}
	pm := PrefixMatch{Prefix: p, GE: uint8(m.GetGe()), LE: uint8(m.GetLe())}
	if err := pm.Validate(); err != nil {
		errs.add(field, pm.String(), "%v", err)
		return PrefixMatch{}, false
	}
	return pm, true
}

// neighbor returns the session a peer with this config has, with defaults
// applied (families included).
func (c *PeerConfig) neighbor(addr netip.Addr, asn uint32, password string) Neighbor {
	n := Neighbor{
		PeerAddress: addr, PeerPort: c.PeerPort, PeerASN: asn, Passive: c.Passive,
		EBGPMultihopTTL: c.EBGPMultihopTTL, ConnectRetryTime: c.ConnectRetryTime, HoldTime: c.HoldTime,
		KeepaliveTime: c.KeepaliveTime, GracefulRestart: c.GracefulRestart, Password: password,
	}
	for _, f := range c.Families {
		n.Families = append(n.Families, f.Family)
	}
	n.setDefaults()
	return n
}

// AdvertisementFromModel converts and checks a stored advertisement: the
// name and labels, each entry's type (PodCIDR or Service), a Service
// entry's address kinds (at least one, known, unique), selector and
// load-balancer classes, the aggregation lengths (1..32, 1..128) and the
// communities (standard, well-known names, large). Problems are
// *[FieldError] values, joined, under an error naming the object.
func AdvertisementFromModel(m *bgpmodel.Advertisement) (*Advertisement, error) {
	var errs fieldErrs
	a := &Advertisement{Name: m.GetName(), Labels: maps.Clone(m.GetLabels())}
	checkName("metadata.name", a.Name, &errs)
	for k, v := range a.Labels {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs.add("metadata.labels", k, "not a label key: %s", strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			errs.add("metadata.labels."+k, v, "not a label value: %s", strings.Join(msgs, "; "))
		}
	}
	for i, e := range m.GetAdvertisements() {
		f := fmt.Sprintf("spec.advertisements[%d]", i)
		ad := Advert{Type: AdvertType(e.GetAdvertisementType())}
		aggr := func(v *uint32, max uint32, field string) uint8 {
			if v == nil {
				return 0
			}
			if *v == 0 || *v > max {
				errs.add(field, *v, "must be 1..%d", max)
				return 0
			}
			return uint8(*v)
		}
		switch ad.Type {
		case PodCIDRAdvert:
			if e.GetService() != nil || e.GetSelector() != nil {
				errs.add(f, nil, "service and selector are for advertisementType Service")
			}
			if pc := e.GetPodCidr(); pc != nil {
				ad.AggregationLengthIPv4 = aggr(pc.AggregationLengthIpv4, 32, f+".podCIDR.aggregationLengthIPv4")
				ad.AggregationLengthIPv6 = aggr(pc.AggregationLengthIpv6, 128, f+".podCIDR.aggregationLengthIPv6")
			}
		case ServiceAdvert:
			if e.GetPodCidr() != nil {
				errs.add(f+".podCIDR", nil, "is for advertisementType PodCIDR")
			}
			svc := e.GetService()
			if len(svc.GetAddresses()) == 0 {
				errs.add(f+".service.addresses", nil, "at least one of %q, %q, %q is required", LoadBalancerIPAddresses, ClusterIPAddresses, ExternalIPAddresses)
			}
			seenTypes := map[ServiceAddressType]bool{}
			for k, t := range svc.GetAddresses() {
				typ := ServiceAddressType(t)
				af := fmt.Sprintf("%s.service.addresses[%d]", f, k)
				switch {
				case typ != LoadBalancerIPAddresses && typ != ClusterIPAddresses && typ != ExternalIPAddresses:
					errs.add(af, t, "unknown service address type, want %q, %q or %q", LoadBalancerIPAddresses, ClusterIPAddresses, ExternalIPAddresses)
				case seenTypes[typ]:
					errs.add(af, t, "duplicate service address type")
				default:
					ad.ServiceAddresses = append(ad.ServiceAddresses, typ)
				}
				seenTypes[typ] = true
			}
			for k, class := range svc.GetLoadBalancerClasses() {
				if msgs := validation.IsQualifiedName(class); len(msgs) > 0 {
					errs.add(fmt.Sprintf("%s.service.loadBalancerClasses[%d]", f, k), class, "not a Kubernetes load-balancer class: %s", strings.Join(msgs, "; "))
				}
			}
			ad.LoadBalancerClasses = slices.Clone(svc.GetLoadBalancerClasses())
			ad.ServiceSelector = selectorChecked(e.GetSelector(), f+".selector", &errs)
			if svc != nil {
				ad.AggregationLengthIPv4 = aggr(svc.AggregationLengthIpv4, 32, f+".service.aggregationLengthIPv4")
				ad.AggregationLengthIPv6 = aggr(svc.AggregationLengthIpv6, 128, f+".service.aggregationLengthIPv6")
			}
		default:
			errs.add(f+".advertisementType", e.GetAdvertisementType(), "want %q or %q", PodCIDRAdvert, ServiceAdvert)
		}
		comm := e.GetAttributes().GetCommunities()
		var lp *uint32
		if at := e.GetAttributes(); at != nil {
			lp = at.LocalPreference
		}
		attrs, err := AttributesSpec{
			Standard: comm.GetStandard(), WellKnown: comm.GetWellKnown(), Large: comm.GetLarge(), LocalPreference: lp,
		}.Parse(f + ".attributes")
		if err != nil {
			errs = append(errs, err)
		}
		ad.Attributes = attrs
		a.Adverts = append(a.Adverts, ad)
	}
	return a, errs.err(KindAdvertisement, a.Name)
}

// NodeConfigOverrideFromModel converts and checks a stored node override:
// the name (a node name), instance names (unique), router IDs (non-zero
// IPv4), local ports and ASNs, peer names (unique) and local addresses.
// Problems are *[FieldError] values, joined, under an error naming the
// object.
func NodeConfigOverrideFromModel(m *bgpmodel.NodeConfigOverride) (*NodeConfigOverride, error) {
	var errs fieldErrs
	o := &NodeConfigOverride{Name: m.GetName()}
	checkName("metadata.name", o.Name, &errs)
	names := map[string]int{}
	for i, mi := range m.GetBgpInstances() {
		f := fmt.Sprintf("spec.bgpInstances[%d]", i)
		in := OverrideInstance{Name: mi.GetName(), LocalASN: mi.GetLocalAsn(), LocalPort: portChecked(mi.GetLocalPort(), f+".localPort", &errs)}
		checkName(f+".name", in.Name, &errs)
		if prev, dup := names[in.Name]; dup {
			errs.add(f+".name", in.Name, "duplicates spec.bgpInstances[%d]", prev)
		}
		names[in.Name] = i
		if s := mi.GetRouterId(); s != "" {
			a, err := netip.ParseAddr(s)
			if err != nil || !a.Is4() || a.IsUnspecified() {
				errs.add(f+".routerID", s, "must be a non-zero IPv4 address")
			} else {
				in.RouterID = a
			}
		}
		peerNames := map[string]int{}
		for j, mp := range mi.GetPeers() {
			pf := fmt.Sprintf("%s.peers[%d]", f, j)
			p := OverridePeer{Name: mp.GetName(), LocalAddress: addrChecked(mp.GetLocalAddress(), pf+".localAddress", false, &errs)}
			checkName(pf+".name", p.Name, &errs)
			if prev, dup := peerNames[p.Name]; dup {
				errs.add(pf+".name", p.Name, "duplicates %s.peers[%d]", f, prev)
			}
			peerNames[p.Name] = j
			in.Peers = append(in.Peers, p)
		}
		o.Instances = append(o.Instances, in)
	}
	return o, errs.err(KindNodeConfigOverride, o.Name)
}

// Clone returns a deep copy of c (nil for nil).
func (c *ClusterConfig) Clone() *ClusterConfig {
	if c == nil {
		return nil
	}
	out := &ClusterConfig{Name: c.Name, NodeSelector: c.NodeSelector.Clone(), Instances: slices.Clone(c.Instances)}
	for i := range out.Instances {
		out.Instances[i].Peers = slices.Clone(out.Instances[i].Peers)
	}
	return out
}

// Clone returns a deep copy of c (nil for nil).
func (c *PeerConfig) Clone() *PeerConfig {
	if c == nil {
		return nil
	}
	out := *c
	out.Families = slices.Clone(c.Families)
	for i := range out.Families {
		out.Families[i].Advertisements = out.Families[i].Advertisements.Clone()
		out.Families[i].Import = slices.Clone(out.Families[i].Import)
	}
	return &out
}

// Clone returns a deep copy of a (nil for nil).
func (a *Advertisement) Clone() *Advertisement {
	if a == nil {
		return nil
	}
	out := &Advertisement{Name: a.Name, Labels: maps.Clone(a.Labels), Adverts: slices.Clone(a.Adverts)}
	for i := range out.Adverts {
		out.Adverts[i] = out.Adverts[i].Clone()
	}
	return out
}

// Clone returns a deep copy of o (nil for nil).
func (o *NodeConfigOverride) Clone() *NodeConfigOverride {
	if o == nil {
		return nil
	}
	out := &NodeConfigOverride{Name: o.Name, Instances: slices.Clone(o.Instances)}
	for i := range out.Instances {
		out.Instances[i].Peers = slices.Clone(out.Instances[i].Peers)
	}
	return out
}

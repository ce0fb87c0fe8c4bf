package ipam

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"time"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/internal/cfgutil"
)

// Config configures an [IPAM]. The zero value is valid and gives the
// documented defaults (IPv4):
//
//	PodSubnetCIDR 10.1.0.0/16, per-node /24
//	VPPHostSubnetCIDR 172.30.0.0/16, per-node /24
//	NodeInterconnectCIDR 192.168.16.0/24
//	VXLANCIDR 192.168.30.0/24
//	ServiceCIDR 10.96.0.0/12
//
// Every range may be IPv4 or IPv6 (families may differ between ranges).
// Prefixes must not have host bits set and must not overlap each other. The
// JSON names follow the original configuration file (podSubnetCIDR, …), so a
// Config can be loaded from YAML or JSON; netip.Prefix parses the CIDRs.
//
// A Config is a plain value: New copies it, so changing it afterwards has
// no effect. It is not safe for concurrent modification.
type Config struct {
	// PodSubnetCIDR is the range of pod IPs of all nodes. Default
	// 10.1.0.0/16. With ExternalIPAM it is the cluster pod CIDR that holds
	// every node's Kubernetes-assigned pod CIDR.
	PodSubnetCIDR netip.Prefix `json:"podSubnetCIDR,omitzero"`
	// PodSubnetOneNodePrefixLen is the prefix length of one node's slice of
	// PodSubnetCIDR: node ID n gets slice number n. Default: address bits
	// minus 8 (24 for IPv4, 120 for IPv6). Unused with ExternalIPAM.
	PodSubnetOneNodePrefixLen int `json:"podSubnetOneNodePrefixLen,omitempty"`

	// VPPHostSubnetCIDR is the range of the VPP-to-host links of all nodes.
	// Default 172.30.0.0/16.
	VPPHostSubnetCIDR netip.Prefix `json:"vppHostSubnetCIDR,omitzero"`
	// VPPHostSubnetOneNodePrefixLen is the prefix length of one node's slice
	// of VPPHostSubnetCIDR. Default: address bits minus 8. A slice needs at
	// least 8 addresses (VPP end, Linux end, NAT loopback).
	VPPHostSubnetOneNodePrefixLen int `json:"vppHostSubnetOneNodePrefixLen,omitempty"`

	// NodeInterconnectCIDR is the subnet of the nodes' interconnect
	// interfaces; node ID n gets the address network+n. Default
	// 192.168.16.0/24 (in single-CIDR mode: carved from SingleCIDR).
	NodeInterconnectCIDR netip.Prefix `json:"nodeInterconnectCIDR,omitzero"`
	// NodeInterconnectDHCP means the interconnect addresses come from DHCP:
	// IPAM computes none and NodeInterconnectCIDR must be unset.
	NodeInterconnectDHCP bool `json:"nodeInterconnectDHCP,omitempty"`
	// DefaultGateway is the gateway of the node interconnect network; it is
	// never handed out as a node IP: node IDs from the gateway's offset
	// upward are shifted up by one address. Optional; when set it must be
	// a host address of NodeInterconnectCIDR (same family, not the network
	// or broadcast address), and it must be unset with
	// NodeInterconnectDHCP.
	DefaultGateway netip.Addr `json:"defaultGateway,omitzero"`

	// VXLANCIDR is the subnet of the VXLAN BVI interfaces; node ID n gets
	// network+n. Default 192.168.30.0/24.
	VXLANCIDR netip.Prefix `json:"vxlanCIDR,omitzero"`

	// ServiceCIDR is the Kubernetes service range. Default 10.96.0.0/12.
	ServiceCIDR netip.Prefix `json:"serviceCIDR,omitzero"`

	// SingleCIDR, when set, enables the single-CIDR mode: for a block of
	// B-bit addresses with prefix length P (B-P must be at least 18) the pod
	// range is the first /(B-16) of the block, the VPP-host range the
	// second, both with per-node prefix B-7; the node interconnect range is
	// /(B-9) block number 256 and the VXLAN range block number 257. An
	// explicit NodeInterconnectCIDR wins; with NodeInterconnectDHCP there is
	// none. PodSubnetCIDR, VPPHostSubnetCIDR and VXLANCIDR must then be
	// unset, and the per-node prefix lengths unset or equal to B-7.
	SingleCIDR netip.Prefix `json:"singleCIDR,omitzero"`

	// ExternalIPAM takes this node's pod subnet from the pod CIDR that
	// Kubernetes assigned to the node (the first of kubemodel.Node.PodCidrs
	// inside PodSubnetCIDR) instead of computing it from the node ID, and
	// pushes a [PodCIDRChange] when it changes. Requires NodeName and
	// EventLoop.
	ExternalIPAM bool `json:"externalIPAM,omitempty"`
	// NodeName is the name of this node's Kubernetes node object (the key
	// kubemodel.NodeKey(NodeName)). Required with ExternalIPAM.
	NodeName string `json:"nodeName,omitempty"`
	// EventLoop receives the PodCIDRChange events. Required with
	// ExternalIPAM, unused otherwise.
	EventLoop controller.EventLoop `json:"-"`

	// Store persists pod IP allocations so that they survive a crash (see
	// "Persistence" in the package documentation; ipam/etcdstore and
	// ipam/boltstore implement it). Nil: allocations live in memory only
	// and are recovered from the Kubernetes pod state alone, so an address
	// allocated just before a crash and not yet reflected in Kubernetes can
	// be handed out twice. Set a Store in production.
	Store Store `json:"-"`
	// StoreTimeout bounds every Store call. Default 5s; negative is an
	// error.
	StoreTimeout time.Duration `json:"storeTimeout,omitempty"`

	// Logger receives debug logs. Nil: logs are discarded.
	Logger *slog.Logger `json:"-"`
}

// Documented defaults.
var (
	defaultPodSubnet     = netip.MustParsePrefix("10.1.0.0/16")
	defaultVPPHostSubnet = netip.MustParsePrefix("172.30.0.0/16")
	defaultNodeIC        = netip.MustParsePrefix("192.168.16.0/24")
	defaultVXLAN         = netip.MustParsePrefix("192.168.30.0/24")
	defaultService       = netip.MustParsePrefix("10.96.0.0/12")
)

const defaultStoreTimeout = 5 * time.Second

// layout is the validated, defaulted address plan of the cluster (the part
// that does not depend on this node's ID). It is immutable.
type layout struct {
	podAll   netip.Prefix
	podLen   int
	hostAll  netip.Prefix
	hostLen  int
	nodeNet  netip.Prefix // invalid with DHCP
	gateway  netip.Addr   // a host address of nodeNet, or invalid
	vxlan    netip.Prefix
	service  netip.Prefix
	external bool
	// storeTimeout is Config.StoreTimeout with its default.
	storeTimeout time.Duration
}

// configErrors collects ConfigErrors.
type configErrors []error

func (ce *configErrors) add(field, value, format string, args ...any) {
	*ce = append(*ce, &ConfigError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...)})
}

func prefixString(p netip.Prefix) string {
	if p == (netip.Prefix{}) {
		return ""
	}
	if !p.IsValid() {
		return p.Addr().String() + "/" + strconv.Itoa(p.Bits())
	}
	return p.String()
}

// checkPrefix validates a configured prefix; zero (unset) is fine.
func (ce *configErrors) checkPrefix(field string, p netip.Prefix) bool {
	if p == (netip.Prefix{}) {
		return true
	}
	a := p.Addr()
	switch {
	case !p.IsValid():
		ce.add(field, prefixString(p), "not a valid CIDR")
	case a.Is4In6():
		ce.add(field, p.String(), "IPv4-mapped IPv6 prefix; write it as IPv4")
	case p.Masked() != p:
		ce.add(field, p.String(), "has host bits set (network is %s)", p.Masked())
	default:
		return true
	}
	return false
}

// resolveConfig applies defaults and validates cfg. It returns the layout
// or every problem found, joined.
func resolveConfig(cfg Config) (layout, error) {
	var ce configErrors
	var l layout
	okPod := ce.checkPrefix("PodSubnetCIDR", cfg.PodSubnetCIDR)
	okHost := ce.checkPrefix("VPPHostSubnetCIDR", cfg.VPPHostSubnetCIDR)
	okNode := ce.checkPrefix("NodeInterconnectCIDR", cfg.NodeInterconnectCIDR)
	okVX := ce.checkPrefix("VXLANCIDR", cfg.VXLANCIDR)
	okSvc := ce.checkPrefix("ServiceCIDR", cfg.ServiceCIDR)
	okSingle := ce.checkPrefix("SingleCIDR", cfg.SingleCIDR)
	if cfg.DefaultGateway.IsValid() && cfg.DefaultGateway.Zone() != "" {
		ce.add("DefaultGateway", cfg.DefaultGateway.String(), "must not have an IPv6 zone")
	}
	storeTimeout := cfg.StoreTimeout
	if len(cfgutil.Durations([]cfgutil.Duration{{Name: "StoreTimeout", Value: &storeTimeout, Default: defaultStoreTimeout}})) > 0 {
		ce.add("StoreTimeout", cfg.StoreTimeout.String(), "must not be negative")
	}
	if cfg.NodeInterconnectDHCP && cfg.NodeInterconnectCIDR.IsValid() {
		ce.add("NodeInterconnectCIDR", cfg.NodeInterconnectCIDR.String(), "must be unset when NodeInterconnectDHCP is on")
	}
	if cfg.ExternalIPAM {
		if cfg.NodeName == "" {
			ce.add("NodeName", "", "required with ExternalIPAM")
		}
		if cfg.EventLoop == nil {
			ce.add("EventLoop", "", "required with ExternalIPAM")
		}
	}
	if !(okPod && okHost && okNode && okVX && okSvc && okSingle) {
		return l, errors.Join(ce...)
	}

	l.external = cfg.ExternalIPAM
	l.storeTimeout = storeTimeout
	l.podLen, l.hostLen = cfg.PodSubnetOneNodePrefixLen, cfg.VPPHostSubnetOneNodePrefixLen
	l.nodeNet, l.vxlan, l.service = cfg.NodeInterconnectCIDR, cfg.VXLANCIDR, cfg.ServiceCIDR
	if cfg.SingleCIDR.IsValid() {
		s := cfg.SingleCIDR
		b := s.Addr().BitLen()
		if b-s.Bits() < 18 {
			ce.add("SingleCIDR", s.String(), "too small: needs a prefix of at most /%d", b-18)
			return l, errors.Join(ce...)
		}
		for _, f := range []struct {
			name string
			p    netip.Prefix
		}{{"PodSubnetCIDR", cfg.PodSubnetCIDR}, {"VPPHostSubnetCIDR", cfg.VPPHostSubnetCIDR}, {"VXLANCIDR", cfg.VXLANCIDR}} {
			if f.p.IsValid() {
				ce.add(f.name, f.p.String(), "must be unset in single-CIDR mode (SingleCIDR %s)", s)
			}
		}
		for _, f := range []struct {
			name string
			v    int
		}{{"PodSubnetOneNodePrefixLen", l.podLen}, {"VPPHostSubnetOneNodePrefixLen", l.hostLen}} {
			if f.v != 0 && f.v != b-7 {
				ce.add(f.name, strconv.Itoa(f.v), "must be unset or %d in single-CIDR mode", b-7)
			}
		}
		base := addrBits(s.Addr())
		is4 := s.Addr().Is4()
		l.podAll = netip.PrefixFrom(base.toAddr(is4), b-16)
		l.hostAll = netip.PrefixFrom(base.add(u128{lo: 1}.shl(16)).toAddr(is4), b-16)
		l.podLen, l.hostLen = b-7, b-7
		if !l.nodeNet.IsValid() && !cfg.NodeInterconnectDHCP {
			l.nodeNet = netip.PrefixFrom(base.add(u128{lo: 256}.shl(9)).toAddr(is4), b-9)
		}
		l.vxlan = netip.PrefixFrom(base.add(u128{lo: 257}.shl(9)).toAddr(is4), b-9)
	} else {
		l.podAll, l.hostAll = cfg.PodSubnetCIDR, cfg.VPPHostSubnetCIDR
		if !l.podAll.IsValid() {
			l.podAll = defaultPodSubnet
		}
		if !l.hostAll.IsValid() {
			l.hostAll = defaultVPPHostSubnet
		}
		if !l.nodeNet.IsValid() && !cfg.NodeInterconnectDHCP {
			l.nodeNet = defaultNodeIC
		}
		if !l.vxlan.IsValid() {
			l.vxlan = defaultVXLAN
		}
	}
	if !l.service.IsValid() {
		l.service = defaultService
	}
	if l.podLen == 0 {
		l.podLen = l.podAll.Addr().BitLen() - 8
	}
	if l.hostLen == 0 {
		l.hostLen = l.hostAll.Addr().BitLen() - 8
	}
	if !l.external {
		checkPerNode(&ce, "PodSubnetOneNodePrefixLen", l.podLen, l.podAll, 2, "network, gateway, broadcast and one pod")
	}
	checkPerNode(&ce, "VPPHostSubnetOneNodePrefixLen", l.hostLen, l.hostAll, 3, "network, VPP end, Linux end, NAT loopback and broadcast")
	if l.nodeNet.IsValid() {
		if hostBits(l.nodeNet) < 2 {
			ce.add("NodeInterconnectCIDR", l.nodeNet.String(), "too small: needs at least one node address besides network and broadcast")
		}
		switch g := cfg.DefaultGateway; {
		case !g.IsValid() || g.Zone() != "":
			// unset, or reported above
		case !l.nodeNet.Contains(g):
			ce.add("DefaultGateway", g.String(), "not in NodeInterconnectCIDR %s", l.nodeNet)
		case g == l.nodeNet.Addr() || g == lastAddr(l.nodeNet):
			ce.add("DefaultGateway", g.String(), "is the network or broadcast address of NodeInterconnectCIDR %s", l.nodeNet)
		default:
			l.gateway = g
		}
	} else if cfg.DefaultGateway.IsValid() {
		ce.add("DefaultGateway", cfg.DefaultGateway.String(), "must be unset when NodeInterconnectDHCP is on (IPAM computes no node interconnect address)")
	}
	if hostBits(l.vxlan) < 2 {
		ce.add("VXLANCIDR", l.vxlan.String(), "too small: needs at least one node address besides network and broadcast")
	}

	// Overlaps between the ranges.
	ranges := []struct {
		name string
		p    netip.Prefix
	}{
		{"PodSubnetCIDR", l.podAll},
		{"VPPHostSubnetCIDR", l.hostAll},
		{"NodeInterconnectCIDR", l.nodeNet},
		{"VXLANCIDR", l.vxlan},
		{"ServiceCIDR", l.service},
	}
	for i := range ranges {
		for j := i + 1; j < len(ranges); j++ {
			a, b := ranges[i], ranges[j]
			if a.p.IsValid() && b.p.IsValid() && a.p.Overlaps(b.p) {
				ce.add(b.name, b.p.String(), "overlaps %s %s", a.name, a.p)
			}
		}
	}
	if len(ce) > 0 {
		return layout{}, errors.Join(ce...)
	}
	return l, nil
}

// checkPerNode validates a per-node prefix length against its range: it must
// be longer than the range's prefix and leave at least 2^minHostBits
// addresses per node.
func checkPerNode(ce *configErrors, field string, perNode int, all netip.Prefix, minHostBits int, what string) {
	b := all.Addr().BitLen()
	switch {
	case perNode <= all.Bits():
		ce.add(field, strconv.Itoa(perNode), "per-node prefix must be longer than the all-nodes prefix %s", all)
	case perNode > b-minHostBits:
		ce.add(field, strconv.Itoa(perNode), "per-node prefix too long: at most /%d leaves room for %s", b-minHostBits, what)
	}
}

// nodeSlice returns slice number id of length perNode inside all.
func nodeSlice(rangeName string, all netip.Prefix, perNode int, id uint32) (netip.Prefix, error) {
	if id == 0 {
		return netip.Prefix{}, fmt.Errorf("%w: node ID 0 is never allocated", ErrInvalidNodeID)
	}
	if k := perNode - all.Bits(); k < 32 && uint64(id) >= uint64(1)<<k {
		return netip.Prefix{}, fmt.Errorf("%w: node ID %d beyond the capacity of %s %s with per-node /%d (node IDs 1..%d)",
			ErrInvalidNodeID, id, rangeName, all, perNode, uint64(1)<<k-1)
	}
	h := uint(all.Addr().BitLen() - perNode)
	return netip.PrefixFrom(nthAddr(all, u128{lo: uint64(id)}.shl(h)), perNode), nil
}

// nodeHostAddr returns the address of node id in subnet p: network+id,
// skipping gw (if valid) so that it is never handed out.
func nodeHostAddr(rangeName string, p netip.Prefix, gw netip.Addr, id uint32) (netip.Addr, error) {
	if id == 0 {
		return netip.Addr{}, fmt.Errorf("%w: node ID 0 is never allocated", ErrInvalidNodeID)
	}
	n := uint64(id)
	if gw.IsValid() {
		if gwOff, ok := offsetIn(p, gw); ok && n >= gwOff {
			n++
		}
	}
	h := hostBits(p)
	if h < 64 {
		size := uint64(1) << h
		if n == size-1 {
			return netip.Addr{}, fmt.Errorf("%w: node ID %d would get the broadcast address %s of %s %s",
				ErrInvalidNodeID, id, lastAddr(p), rangeName, p)
		}
		if n >= size {
			return netip.Addr{}, fmt.Errorf("%w: node ID %d falls outside %s %s", ErrInvalidNodeID, id, rangeName, p)
		}
	}
	return nthAddr(p, u128{lo: n}), nil
}

// podPoolRange returns the allocatable offsets of a pod subnet: everything
// but the network (0), the gateway (1) and the broadcast (last) address. In
// subnets with more than 2^64 addresses only the first 2^64 offsets are
// used (no node can run that many pods).
func podPoolRange(p netip.Prefix) (lo, hi uint64) {
	h := hostBits(p)
	switch {
	case h < 64:
		return 2, uint64(1)<<h - 2
	case h == 64:
		return 2, ^uint64(0) - 1
	default:
		return 2, ^uint64(0)
	}
}

package vppmodel

import (
	"net/netip"
	"strconv"
)

// Keys of the cnat kinds.
const (
	CnatKeyPrefix            = KeyRoot + "cnat/"
	CnatTranslationKeyPrefix = CnatKeyPrefix + "translation/"
	CnatInterfaceKeyPrefix   = CnatKeyPrefix + "interface/"
	// CnatSnatKey is the key of the one CnatSnat.
	CnatSnatKey = CnatKeyPrefix + "snat"
)

// MaxCnatPaths bounds the paths of one CnatTranslation: the request must
// fit VPP's API buffer; the real VPP 26.06 takes 10000 paths in one
// request (about 490 kB; the driver's TestCnatScenario).
const MaxCnatPaths = 10000

// Bits of CnatTranslation.FlowHashConfig (VPP's ip_flow_hash_config_v2).
const (
	CnatFlowHashSrcIP uint32 = 1 << iota
	CnatFlowHashDstIP
	CnatFlowHashSrcPort
	CnatFlowHashDstPort
	CnatFlowHashProto
	CnatFlowHashReverse
	CnatFlowHashSymmetric
	CnatFlowHashFlowLabel
	CnatFlowHashGTPv1TEID
	// MaxCnatFlowHashConfig is every bit VPP 26.06 knows.
	MaxCnatFlowHashConfig = 1<<9 - 1
)

// MaxCnatExcludedPrefixes bounds CnatSnat.ExcludedPrefixes.
const MaxCnatExcludedPrefixes = 1024

// CnatProtocolName returns the name of a translation's protocol in its key
// ("tcp", "udp"), or its number.
func CnatProtocolName(protocol uint32) string {
	switch protocol {
	case ProtoTCP:
		return "tcp"
	case ProtoUDP:
		return "udp"
	}
	return strconv.FormatUint(uint64(protocol), 10)
}

// CnatTranslationKey returns the key of the translation of a virtual
// endpoint, e.g. vpp/cnat/translation/tcp/10.96.0.10:80 or
// vpp/cnat/translation/udp/[fd00::10]:53.
func CnatTranslationKey(protocol uint32, vip netip.Addr, port uint32) string {
	return CnatTranslationKeyPrefix + CnatProtocolName(protocol) + "/" + netip.AddrPortFrom(vip, uint16(port)).String()
}

// CnatInterfaceKey returns the key of the cnat configuration of the
// interface iface.
func CnatInterfaceKey(iface string) string { return CnatInterfaceKeyPrefix + iface }

// parseCnatAddr parses an address of a cnat value: IPv4 or IPv6, not
// unspecified, not IPv4-mapped, without a zone.
func parseCnatAddr(what, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.IsUnspecified() || a.Is4In6() || a.Zone() != "" {
		return netip.Addr{}, invalid("%s %q is not an IPv4 or IPv6 address", what, s)
	}
	return a, nil
}

func validateCnatTranslation(m *CnatTranslation) (string, error) {
	if m == nil {
		return "", invalid("nil cnat translation")
	}
	vip, err := parseCnatAddr("cnat translation: vip", m.GetVip())
	if err != nil {
		return "", err
	}
	name := CnatProtocolName(m.GetProtocol()) + " " + netip.AddrPortFrom(vip, uint16(m.GetPort())).String()
	switch {
	case m.GetPort() == 0 || m.GetPort() > 65535:
		return "", invalid("cnat translation %s: port %d is not 1-65535", vip, m.GetPort())
	case m.GetProtocol() != ProtoTCP && m.GetProtocol() != ProtoUDP:
		// The traces show cnat translating TCP and UDP; SCTP (and the
		// rest) is not known to work.
		return "", invalid("cnat translation %s: protocol %d is not TCP (6) or UDP (17)", name, m.GetProtocol())
	case len(m.GetPaths()) == 0:
		// VPP 26.06 dies on a translation update without paths.
		return "", invalid("cnat translation %s: no paths (delete the translation instead)", name)
	case len(m.GetPaths()) > MaxCnatPaths:
		return "", invalid("cnat translation %s: %d paths, at most %d", name, len(m.GetPaths()), MaxCnatPaths)
	}
	if _, ok := CnatTranslation_LbType_name[int32(m.GetLbType())]; !ok {
		return "", invalid("cnat translation %s: unknown lb_type %d", name, m.GetLbType())
	}
	if m.GetFlowHashConfig() > MaxCnatFlowHashConfig {
		return "", invalid("cnat translation %s: flow_hash_config %#x has bits VPP does not know (at most %#x)", name, m.GetFlowHashConfig(), MaxCnatFlowHashConfig)
	}
	type pathKey struct {
		dst, src         netip.Addr
		dstPort, srcPort uint32
	}
	seen := make(map[pathKey]bool, len(m.GetPaths()))
	for i, p := range m.GetPaths() {
		dst, err := parseCnatAddr("dst_ip", p.GetDstIp())
		if err != nil {
			return "", invalid("cnat translation %s: path %d: %v", name, i, err)
		}
		k := pathKey{dst: dst, dstPort: p.GetDstPort(), srcPort: p.GetSrcPort()}
		if dst.Is4() != vip.Is4() {
			return "", invalid("cnat translation %s: path %d: %s is of another family than the vip", name, i, dst)
		}
		if p.GetDstPort() == 0 || p.GetDstPort() > 65535 {
			return "", invalid("cnat translation %s: path %d: dst_port %d is not 1-65535", name, i, p.GetDstPort())
		}
		if p.GetSrcPort() > 65535 || (p.GetSrcPort() != 0 && p.GetSrcIp() == "") {
			return "", invalid("cnat translation %s: path %d: src_port %d needs src_ip and must be at most 65535", name, i, p.GetSrcPort())
		}
		if s := p.GetSrcIp(); s != "" {
			src, err := parseCnatAddr("src_ip", s)
			if err != nil {
				return "", invalid("cnat translation %s: path %d: %v", name, i, err)
			}
			if src.Is4() != vip.Is4() {
				return "", invalid("cnat translation %s: path %d: src_ip %s is of another family than the vip", name, i, src)
			}
			k.src = src
		}
		if seen[k] {
			return "", invalid("cnat translation %s: path %d: the same backend twice (cnat has no weights)", name, i)
		}
		seen[k] = true
	}
	return CnatTranslationKey(m.GetProtocol(), vip, m.GetPort()), nil
}

func validateCnatSnat(m *CnatSnat) error {
	if m == nil {
		return invalid("nil cnat snat")
	}
	if m.GetIp4() == "" && m.GetIp6() == "" {
		return invalid("cnat snat: no address (ip4, ip6 or both; delete the key for none)")
	}
	if s := m.GetIp4(); s != "" {
		if a, err := parseCnatAddr("cnat snat: ip4", s); err != nil || !a.Is4() {
			return invalid("cnat snat: ip4 %q is not an IPv4 address", s)
		}
	}
	if s := m.GetIp6(); s != "" {
		if a, err := parseCnatAddr("cnat snat: ip6", s); err != nil || !a.Is6() {
			return invalid("cnat snat: ip6 %q is not an IPv6 address", s)
		}
	}
	if len(m.GetExcludedPrefixes()) > MaxCnatExcludedPrefixes {
		return invalid("cnat snat: %d excluded prefixes, at most %d", len(m.GetExcludedPrefixes()), MaxCnatExcludedPrefixes)
	}
	seen := map[netip.Prefix]bool{}
	for _, s := range m.GetExcludedPrefixes() {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().Zone() != "" || p.Addr().Is4In6() {
			return invalid("cnat snat: excluded prefix %q is not an IPv4 or IPv6 prefix", s)
		}
		if p.Masked() != p {
			return invalid("cnat snat: excluded prefix %s has host bits set (want %s)", p, p.Masked())
		}
		if seen[p] {
			return invalid("cnat snat: excluded prefix %s twice", p)
		}
		seen[p] = true
	}
	if _, ok := CnatSnat_Policy_name[int32(m.GetPolicy())]; !ok {
		return invalid("cnat snat: unknown policy %d", m.GetPolicy())
	}
	return nil
}

func validateCnatInterface(m *CnatInterface) error {
	if m == nil {
		return invalid("nil cnat interface")
	}
	if !validName(m.GetInterface()) {
		return invalid("cnat interface %q: not an interface name", m.GetInterface())
	}
	if !m.GetFeature() && !m.GetSnatPod() && !m.GetSnatHost() && !m.GetSnatV4() && !m.GetSnatV6() {
		return invalid("cnat interface %s: sets nothing (feature, snat_v4, snat_v6, snat_pod or snat_host; delete the key for none)", m.GetInterface())
	}
	return nil
}

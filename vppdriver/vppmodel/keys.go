package vppmodel

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
)

// KeyRoot is the first segment of every key of this package.
const KeyRoot = "vpp/"

// Key prefixes of the model kinds.
const (
	InterfaceKeyPrefix  = KeyRoot + "interface/"
	VrfTableKeyPrefix   = KeyRoot + "vrf/"
	RouteKeyPrefix      = KeyRoot + "route/"
	IPNeighborKeyPrefix = KeyRoot + "neighbor/"
)

// ErrInvalid is wrapped by every validation and key-parsing error.
var ErrInvalid = errors.New("invalid vpp model")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// InterfaceKey returns the key of the interface with the given logical name.
func InterfaceKey(name string) string { return InterfaceKeyPrefix + name }

// VrfTableKey returns the key of a VRF table.
func VrfTableKey(proto VrfTable_Protocol, id uint32) string {
	return VrfTableKeyPrefix + protoName(proto) + "/" + strconv.FormatUint(uint64(id), 10)
}

// RouteKey returns the key of the route to dst in table vrf. dst is masked.
func RouteKey(vrf uint32, dst netip.Prefix) string {
	return RouteKeyPrefix + strconv.FormatUint(uint64(vrf), 10) + "/" + dst.Masked().String()
}

// IPNeighborKey returns the key of the static neighbor ip on the interface
// with the given logical name.
func IPNeighborKey(iface string, ip netip.Addr) string {
	return IPNeighborKeyPrefix + iface + "/" + ip.String()
}

func protoName(p VrfTable_Protocol) string {
	if p == VrfTable_IPV6 {
		return "ipv6"
	}
	return "ipv4"
}

// KeyOf returns the key under which msg must be stored, after validating it.
func KeyOf(msg proto.Message) (string, error) {
	switch m := msg.(type) {
	case *Nat44Global, *Nat44Interface, *Nat44AddressPool, *Nat44StaticMapping, *Nat44IdentityMapping, *Nat44LbStaticMapping:
		// natKey validates as it computes the key: once is enough (a
		// load-balanced mapping may have hundreds of backends).
		k, err := natKey(msg)
		if err != nil {
			return "", invalid("%v", err)
		}
		return k, nil
	case *CnatTranslation:
		// Validation computes the key (a translation may have thousands
		// of paths: once is enough).
		return validateCnatTranslation(m)
	}
	if err := Validate(msg); err != nil {
		return "", err
	}
	switch m := msg.(type) {
	case *Interface:
		return InterfaceKey(m.GetName()), nil
	case *VrfTable:
		return VrfTableKey(m.GetProtocol(), m.GetId()), nil
	case *Route:
		p, _ := netip.ParsePrefix(m.GetDstNetwork())
		return RouteKey(m.GetVrf(), p), nil
	case *IPNeighbor:
		ip, _ := netip.ParseAddr(m.GetIpAddress())
		return IPNeighborKey(m.GetInterface(), ip), nil
	case *ACL:
		return ACLKey(m.GetName()), nil
	case *ACLInterface:
		return ACLInterfaceKey(m.GetInterface()), nil
	case *CnatSnat:
		return CnatSnatKey, nil
	case *CnatInterface:
		return CnatInterfaceKey(m.GetInterface()), nil
	}
	return "", invalid("unsupported message type %T", msg)
}

// CheckKey validates msg and checks that key is its key.
func CheckKey(key string, msg proto.Message) error {
	want, err := KeyOf(msg)
	if err != nil {
		return fmt.Errorf("key %q: %w", key, err)
	}
	if want != key {
		return invalid("key %q does not match its value (want %q)", key, want)
	}
	return nil
}

// NewValueForKey returns an empty message of the kind that key names, or an
// error if key is not one of this package's keys.
func NewValueForKey(key string) (proto.Message, error) {
	switch {
	case strings.HasPrefix(key, InterfaceKeyPrefix):
		return &Interface{}, nil
	case strings.HasPrefix(key, VrfTableKeyPrefix):
		return &VrfTable{}, nil
	case strings.HasPrefix(key, RouteKeyPrefix):
		return &Route{}, nil
	case strings.HasPrefix(key, IPNeighborKeyPrefix):
		return &IPNeighbor{}, nil
	case strings.HasPrefix(key, ACLKeyPrefix):
		return &ACL{}, nil
	case strings.HasPrefix(key, ACLInterfaceKeyPrefix):
		return &ACLInterface{}, nil
	case strings.HasPrefix(key, CnatTranslationKeyPrefix):
		return &CnatTranslation{}, nil
	case key == CnatSnatKey:
		return &CnatSnat{}, nil
	case strings.HasPrefix(key, CnatInterfaceKeyPrefix):
		return &CnatInterface{}, nil
	case key == Nat44GlobalKey:
		return &Nat44Global{}, nil
	case strings.HasPrefix(key, Nat44InterfaceKeyPrefix):
		return &Nat44Interface{}, nil
	case strings.HasPrefix(key, Nat44AddressPoolKeyPrefix):
		return &Nat44AddressPool{}, nil
	case strings.HasPrefix(key, Nat44StaticMappingKeyPrefix):
		return &Nat44StaticMapping{}, nil
	case strings.HasPrefix(key, Nat44IdentityMappingKeyPrefix):
		return &Nat44IdentityMapping{}, nil
	case strings.HasPrefix(key, Nat44LbStaticMappingKeyPrefix):
		return &Nat44LbStaticMapping{}, nil
	}
	return nil, invalid("key %q is not a vpp model key", key)
}

// Validate reports what makes msg unusable.
func Validate(msg proto.Message) error {
	switch m := msg.(type) {
	case *Interface:
		return validateInterface(m)
	case *VrfTable:
		if m == nil {
			return invalid("nil vrf table")
		}
		if m.GetProtocol() != VrfTable_IPV4 && m.GetProtocol() != VrfTable_IPV6 {
			return invalid("vrf table %d: unknown protocol %d", m.GetId(), m.GetProtocol())
		}
		if m.GetId() == 0 {
			return invalid("vrf table 0 always exists and cannot be owned")
		}
		if len(m.GetLabel()) > 40 {
			return invalid("vrf table %d: label longer than 40 bytes", m.GetId())
		}
		return nil
	case *Route:
		return validateRoute(m)
	case *IPNeighbor:
		return validateNeighbor(m)
	case *ACL:
		return validateACL(m)
	case *ACLInterface:
		return validateACLInterface(m)
	case *CnatTranslation:
		_, err := validateCnatTranslation(m)
		return err
	case *CnatSnat:
		return validateCnatSnat(m)
	case *CnatInterface:
		return validateCnatInterface(m)
	case *Nat44Global, *Nat44Interface, *Nat44AddressPool, *Nat44StaticMapping, *Nat44IdentityMapping, *Nat44LbStaticMapping:
		if _, err := natKey(m); err != nil {
			return invalid("%v", err)
		}
		return nil
	}
	return invalid("unsupported message type %T", msg)
}

// MaxInterfaceNameLen bounds Interface.Name so that the ownership tag fits
// VPP's 64-byte interface tag.
const MaxInterfaceNameLen = 56

// validName reports whether name can be an Interface name: 1 to
// MaxInterfaceNameLen bytes without '/', '=' or white space.
func validName(name string) bool {
	return name != "" && len(name) <= MaxInterfaceNameLen && !strings.ContainsAny(name, "/= \t\n")
}

// MaxHostIfNameLen bounds Linux interface names (IFNAMSIZ - 1).
const MaxHostIfNameLen = 15

func validateInterface(m *Interface) error {
	if m == nil {
		return invalid("nil interface")
	}
	name := m.GetName()
	if !validName(name) {
		return invalid("interface name %q must be 1-%d bytes without '/', '=' or spaces", name, MaxInterfaceNameLen)
	}
	switch m.GetType() {
	case Interface_LOOPBACK:
	case Interface_AF_PACKET:
		if m.GetAfPacket().GetHostIfName() == "" {
			return invalid("interface %q: af_packet needs af_packet.host_if_name", name)
		}
	case Interface_TAP:
		if err := validateTap(m.GetTap()); err != nil {
			return invalid("interface %q: %v", name, err)
		}
	case Interface_MEMIF:
		mm := m.GetMemif()
		if rs := mm.GetRingSize(); rs != 0 && (rs&(rs-1) != 0 || rs > 1<<16) {
			return invalid("interface %q: memif ring_size %d is not a power of two <= 65536", name, rs)
		}
		if mm.GetBufferSize() > 65535 || len(mm.GetSecret()) > 24 || len(mm.GetSocketFilename()) > 107 {
			return invalid("interface %q: memif buffer_size > 65535, secret > 24 bytes or socket path > 107 bytes", name)
		}
	case Interface_VXLAN_TUNNEL:
		if err := validateVxlan(m.GetVxlan()); err != nil {
			return invalid("interface %q: %v", name, err)
		}
	case Interface_EXISTING:
		vn := m.GetExisting().GetVppName()
		if vn == "" || len(vn) > 63 {
			return invalid("interface %q: an existing interface needs existing.vpp_name (1-63 bytes)", name)
		}
		if m.GetMacAddress() != "" {
			return invalid("interface %q: the MAC address of an existing interface is not set by the driver", name)
		}
	default:
		return invalid("interface %q: unsupported type %v", name, m.GetType())
	}
	if mac := m.GetMacAddress(); mac != "" {
		if _, err := ParseMAC(mac); err != nil {
			return invalid("interface %q: %v", name, err)
		}
	}
	if u := m.GetUnnumbered(); u != "" {
		if !validName(u) || u == name {
			return invalid("interface %q: unnumbered %q must name another interface", name, u)
		}
		if len(m.GetIpAddresses()) > 0 {
			return invalid("interface %q: an unnumbered interface has no addresses of its own", name)
		}
	}
	seen := map[netip.Addr]bool{}
	for _, a := range m.GetIpAddresses() {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return invalid("interface %q: address %q: %v", name, a, err)
		}
		if seen[p.Addr()] {
			return invalid("interface %q: address %s given twice", name, p.Addr())
		}
		seen[p.Addr()] = true
	}
	return nil
}

func validateTap(t *TapLink) error {
	if len(t.GetHostIfName()) > MaxHostIfNameLen || strings.ContainsAny(t.GetHostIfName(), "/ \t\n") {
		return fmt.Errorf("tap host_if_name %q must be at most %d bytes without '/' or spaces", t.GetHostIfName(), MaxHostIfNameLen)
	}
	if len(t.GetHostNamespace()) > 63 {
		return fmt.Errorf("tap host_namespace %q is longer than 63 bytes", t.GetHostNamespace())
	}
	if mac := t.GetHostMacAddress(); mac != "" {
		if _, err := ParseMAC(mac); err != nil {
			return fmt.Errorf("tap host_mac_address: %v", err)
		}
	}
	var fam [2]bool
	for _, a := range t.GetHostIpAddresses() {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return fmt.Errorf("tap host address %q: %v", a, err)
		}
		if fam[famOf(p.Addr())] {
			return fmt.Errorf("tap host addresses: at most one of each family")
		}
		fam[famOf(p.Addr())] = true
	}
	fam = [2]bool{}
	for _, g := range t.GetHostGateways() {
		a, err := netip.ParseAddr(g)
		if err != nil {
			return fmt.Errorf("tap host gateway %q: %v", g, err)
		}
		if fam[famOf(a)] {
			return fmt.Errorf("tap host gateways: at most one of each family")
		}
		fam[famOf(a)] = true
	}
	return nil
}

func famOf(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

func validateNeighbor(m *IPNeighbor) error {
	if m == nil {
		return invalid("nil ip neighbor")
	}
	if !validName(m.GetInterface()) {
		return invalid("ip neighbor: interface %q is not a valid interface name", m.GetInterface())
	}
	ip, err := netip.ParseAddr(m.GetIpAddress())
	if err != nil || ip.Zone() != "" || ip.Is4In6() {
		return invalid("ip neighbor on %q: ip_address %q is not an IPv4 or IPv6 address", m.GetInterface(), m.GetIpAddress())
	}
	if _, err := ParseMAC(m.GetMacAddress()); err != nil {
		return invalid("ip neighbor %s on %q: %v", ip, m.GetInterface(), err)
	}
	return nil
}

func validateRoute(m *Route) error {
	if m == nil {
		return invalid("nil route")
	}
	dst, err := netip.ParsePrefix(m.GetDstNetwork())
	if err != nil {
		return invalid("route dst_network %q: %v", m.GetDstNetwork(), err)
	}
	if dst.Masked() != dst {
		return invalid("route dst_network %q has host bits set (want %s)", m.GetDstNetwork(), dst.Masked())
	}
	if len(m.GetPaths()) == 0 {
		return invalid("route %s: no paths", dst)
	}
	if len(m.GetPaths()) > 255 {
		return invalid("route %s: more than 255 paths", dst)
	}
	for i, p := range m.GetPaths() {
		if p.GetOutgoingInterface() == "" && p.GetNextHop() == "" {
			return invalid("route %s: path %d has neither outgoing_interface nor next_hop", dst, i)
		}
		if p.GetWeight() > 255 {
			return invalid("route %s: path %d: weight %d > 255", dst, i, p.GetWeight())
		}
		if nh := p.GetNextHop(); nh != "" {
			a, err := netip.ParseAddr(nh)
			if err != nil {
				return invalid("route %s: path %d: next_hop %q: %v", dst, i, nh, err)
			}
			if a.Is4() != dst.Addr().Is4() {
				return invalid("route %s: path %d: next hop %s is of another address family", dst, i, a)
			}
		}
	}
	return nil
}

// ParseMAC parses "aa:bb:cc:dd:ee:ff".
func ParseMAC(s string) ([6]byte, error) {
	var mac [6]byte
	parts := strings.Split(s, ":")
	if len(parts) != 6 {
		return mac, fmt.Errorf("MAC address %q: want 6 colon-separated bytes", s)
	}
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 16, 8)
		if err != nil || len(p) != 2 {
			return mac, fmt.Errorf("MAC address %q: bad byte %q", s, p)
		}
		mac[i] = byte(v)
	}
	return mac, nil
}

func validateVxlan(v *VxlanLink) error {
	src, err := netip.ParseAddr(v.GetSrcAddress())
	if err != nil {
		return fmt.Errorf("vxlan src_address %q: %v", v.GetSrcAddress(), err)
	}
	dst, err := netip.ParseAddr(v.GetDstAddress())
	if err != nil {
		return fmt.Errorf("vxlan dst_address %q: %v", v.GetDstAddress(), err)
	}
	if src.Is4() != dst.Is4() || src == dst {
		return fmt.Errorf("vxlan endpoints %s and %s must differ and be of one family", src, dst)
	}
	if v.GetVni() >= 1<<24 {
		return fmt.Errorf("vxlan vni %d does not fit 24 bits", v.GetVni())
	}
	if _, ok := VxlanLink_Payload_name[int32(v.GetPayload())]; !ok {
		return fmt.Errorf("vxlan payload %d is unknown", v.GetPayload())
	}
	return nil
}

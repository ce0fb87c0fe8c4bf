package vppmodel

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Key prefixes of the NAT44-ED models.
const (
	Nat44KeyPrefix                = KeyRoot + "nat44/"
	Nat44GlobalKey                = Nat44KeyPrefix + "global"
	Nat44InterfaceKeyPrefix       = Nat44KeyPrefix + "interface/"
	Nat44AddressPoolKeyPrefix     = Nat44KeyPrefix + "pool/"
	Nat44StaticMappingKeyPrefix   = Nat44KeyPrefix + "static/"
	Nat44IdentityMappingKeyPrefix = Nat44KeyPrefix + "identity/"
	Nat44LbStaticMappingKeyPrefix = Nat44KeyPrefix + "lb/"
)

// Nat44InterfaceKey returns the key of the NAT44 features of an interface.
func Nat44InterfaceKey(iface string) string { return Nat44InterfaceKeyPrefix + iface }

// Nat44AddressPoolKey returns the key of an address pool.
func Nat44AddressPoolKey(first, last netip.Addr, twiceNAT bool) string {
	k := Nat44AddressPoolKeyPrefix + first.String() + "-" + last.String()
	if twiceNAT {
		k += "/twice-nat"
	}
	return k
}

// Nat44InterfaceAddressPoolKey returns the key of the pool that is the
// IPv4 address of the interface iface.
func Nat44InterfaceAddressPoolKey(iface string, twiceNAT bool) string {
	k := Nat44AddressPoolKeyPrefix + "if:" + iface
	if twiceNAT {
		k += "/twice-nat"
	}
	return k
}

func protoKey(p Nat44Protocol) string {
	if p == Nat44Protocol_NAT44_PROTOCOL_UNSPECIFIED {
		return "any"
	}
	return strings.ToLower(p.String())
}

// Nat44StaticMappingKey returns the key of a static mapping.
func Nat44StaticMappingKey(p Nat44Protocol, external netip.Addr, port uint32) string {
	return Nat44StaticMappingKeyPrefix + protoKey(p) + "/" + netip.AddrPortFrom(external, uint16(port)).String()
}

// Nat44IdentityMappingKey returns the key of an identity mapping of an
// address, or of the first address of the interface iface when iface is
// not empty.
func Nat44IdentityMappingKey(p Nat44Protocol, ip netip.Addr, iface string, port uint32) string {
	where := ip.String()
	if iface != "" {
		where = "if:" + iface
	}
	return Nat44IdentityMappingKeyPrefix + protoKey(p) + "/" + where + ":" + strconv.FormatUint(uint64(port), 10)
}

// Nat44LbStaticMappingKey returns the key of a load-balanced mapping.
func Nat44LbStaticMappingKey(p Nat44Protocol, external netip.Addr, port uint32) string {
	return Nat44LbStaticMappingKeyPrefix + protoKey(p) + "/" + netip.AddrPortFrom(external, uint16(port)).String()
}

func parse4(what, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("%s %q is not an IPv4 address", what, s)
	}
	return a, nil
}

func checkProto(p Nat44Protocol) error {
	if _, ok := Nat44Protocol_name[int32(p)]; !ok {
		return fmt.Errorf("unknown protocol %d", p)
	}
	return nil
}

func checkPort(what string, port uint32) error {
	if port > 65535 {
		return fmt.Errorf("%s %d > 65535", what, port)
	}
	return nil
}

func natKey(msg any) (string, error) {
	switch m := msg.(type) {
	case *Nat44Global:
		if m == nil {
			return "", fmt.Errorf("nil nat44 global")
		}
		return Nat44GlobalKey, nil
	case *Nat44Interface:
		if m.GetInterface() == "" || (!m.GetInside() && !m.GetOutside() && !m.GetOutputFeature()) {
			return "", fmt.Errorf("nat44 interface %q: needs a name and inside and/or outside, or output_feature", m.GetInterface())
		}
		if m.GetOutputFeature() && (m.GetInside() || m.GetOutside()) {
			return "", fmt.Errorf("nat44 interface %q: output_feature excludes inside and outside", m.GetInterface())
		}
		return Nat44InterfaceKey(m.GetInterface()), nil
	case *Nat44AddressPool:
		if iface := m.GetInterface(); iface != "" {
			if m.GetFirstIp() != "" || m.GetLastIp() != "" || m.GetVrf() != 0 {
				return "", fmt.Errorf("nat44 pool of interface %q: first_ip, last_ip and vrf must be unset", iface)
			}
			return Nat44InterfaceAddressPoolKey(iface, m.GetTwiceNat()), nil
		}
		first, err := parse4("nat44 pool first_ip", m.GetFirstIp())
		if err != nil {
			return "", err
		}
		last := first
		if m.GetLastIp() != "" {
			if last, err = parse4("nat44 pool last_ip", m.GetLastIp()); err != nil {
				return "", err
			}
		}
		if last.Less(first) || u32(last)-u32(first) >= 1<<16 {
			return "", fmt.Errorf("nat44 pool %s-%s: want first <= last and at most 65536 addresses", first, last)
		}
		return Nat44AddressPoolKey(first, last, m.GetTwiceNat()), nil
	case *Nat44StaticMapping:
		ext, err := parse4("nat44 static external_ip", m.GetExternalIp())
		if err != nil {
			return "", err
		}
		if _, err := parse4("nat44 static local_ip", m.GetLocalIp()); err != nil {
			return "", err
		}
		if err := checkProto(m.GetProtocol()); err != nil {
			return "", err
		}
		if err := checkPort("local_port", m.GetLocalPort()); err != nil {
			return "", err
		}
		if err := checkPort("external_port", m.GetExternalPort()); err != nil {
			return "", err
		}
		if m.GetProtocol() == Nat44Protocol_NAT44_PROTOCOL_UNSPECIFIED && (m.GetLocalPort() != 0 || m.GetExternalPort() != 0) {
			return "", fmt.Errorf("nat44 static %s: an address-only mapping (no protocol) has no ports", ext)
		}
		return Nat44StaticMappingKey(m.GetProtocol(), ext, m.GetExternalPort()), nil
	case *Nat44IdentityMapping:
		var ip netip.Addr
		if m.GetInterface() == "" {
			var err error
			if ip, err = parse4("nat44 identity ip", m.GetIp()); err != nil {
				return "", err
			}
		} else if m.GetIp() != "" {
			return "", fmt.Errorf("nat44 identity: set ip or interface, not both")
		}
		if err := checkProto(m.GetProtocol()); err != nil {
			return "", err
		}
		if err := checkPort("port", m.GetPort()); err != nil {
			return "", err
		}
		return Nat44IdentityMappingKey(m.GetProtocol(), ip, m.GetInterface(), m.GetPort()), nil
	case *Nat44LbStaticMapping:
		ext, err := parse4("nat44 lb external_ip", m.GetExternalIp())
		if err != nil {
			return "", err
		}
		if m.GetProtocol() == Nat44Protocol_NAT44_PROTOCOL_UNSPECIFIED || checkProto(m.GetProtocol()) != nil {
			return "", fmt.Errorf("nat44 lb %s: needs a protocol", ext)
		}
		if err := checkPort("external_port", m.GetExternalPort()); err != nil {
			return "", err
		}
		if len(m.GetBackends()) < 2 {
			return "", fmt.Errorf("nat44 lb %s: needs at least 2 backends (VPP rejects fewer)", ext)
		}
		seen := make(map[uint64]struct{}, len(m.GetBackends())) // IPv4 address and port
		for i, b := range m.GetBackends() {
			ip, err := netip.ParseAddr(b.GetIp())
			if err != nil || !ip.Is4() {
				return "", fmt.Errorf("nat44 lb backend %d ip %q is not an IPv4 address", i, b.GetIp())
			}
			if err := checkPort("backend port", b.GetPort()); err != nil {
				return "", err
			}
			ap := netip.AddrPortFrom(ip, uint16(b.GetPort()))
			id := uint64(u32(ip))<<16 | uint64(b.GetPort())
			if _, dup := seen[id]; dup {
				return "", fmt.Errorf("nat44 lb %s: backend %s given twice", ext, ap)
			}
			seen[id] = struct{}{}
			if b.GetProbability() < 1 || b.GetProbability() > 100 {
				return "", fmt.Errorf("nat44 lb %s: backend %s probability %d not in 1-100", ext, ap, b.GetProbability())
			}
		}
		return Nat44LbStaticMappingKey(m.GetProtocol(), ext, m.GetExternalPort()), nil
	}
	return "", nil
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

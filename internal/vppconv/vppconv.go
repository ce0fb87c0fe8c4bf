// Package vppconv converts between net/netip values and GoVPP binapi types.
// Its functions are pure and safe for concurrent use.
package vppconv

import (
	"net/netip"

	"go.fd.io/govpp/binapi/ip_types"
)

// Address converts a to a binapi address.
func Address(a netip.Addr) ip_types.Address {
	var out ip_types.Address
	if a.Is4() {
		out.Af = ip_types.ADDRESS_IP4
		out.Un.SetIP4(a.As4())
	} else {
		out.Af = ip_types.ADDRESS_IP6
		out.Un.SetIP6(a.As16())
	}
	return out
}

// AddrOf converts a binapi address to netip.
func AddrOf(a ip_types.Address) netip.Addr {
	if a.Af == ip_types.ADDRESS_IP6 {
		return netip.AddrFrom16(a.Un.GetIP6())
	}
	return netip.AddrFrom4(a.Un.GetIP4())
}

// Prefix converts p (host bits kept) to a binapi prefix.
func Prefix(p netip.Prefix) ip_types.Prefix {
	return ip_types.Prefix{Address: Address(p.Addr()), Len: uint8(p.Bits())}
}

// PrefixOf converts a binapi prefix (host bits kept) to netip. An invalid
// length gives the zero Prefix.
func PrefixOf(p ip_types.Prefix) netip.Prefix {
	a := AddrOf(p.Address)
	if int(p.Len) > a.BitLen() {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(a, int(p.Len))
}

// UnionAddr reads an address of the given family from a union (used in
// fib paths). v6 selects IPv6.
func UnionAddr(u ip_types.AddressUnion, v6 bool) netip.Addr {
	if v6 {
		return netip.AddrFrom16(u.GetIP6())
	}
	return netip.AddrFrom4(u.GetIP4())
}

// Union stores a into an address union; the zero Addr gives zero bytes.
func Union(a netip.Addr) ip_types.AddressUnion {
	var u ip_types.AddressUnion
	switch {
	case a.Is4():
		u.SetIP4(a.As4())
	case a.Is6():
		u.SetIP6(a.As16())
	}
	return u
}

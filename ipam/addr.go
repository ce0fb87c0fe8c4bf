package ipam

import (
	"encoding/binary"
	"math/bits"
	"net"
	"net/netip"
)

// u128 is an unsigned 128-bit integer used for address arithmetic. IPv4
// addresses occupy the low 32 bits.
type u128 struct{ hi, lo uint64 }

// addrBits returns the address as an integer (IPv4 in the low 32 bits).
func addrBits(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{lo: uint64(binary.BigEndian.Uint32(b[:]))}
	}
	b := a.As16()
	return u128{hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:])}
}

// toAddr converts u back into an address of the given family.
func (u u128) toAddr(is4 bool) netip.Addr {
	if is4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(u.lo))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], u.hi)
	binary.BigEndian.PutUint64(b[8:], u.lo)
	return netip.AddrFrom16(b)
}

func (u u128) add(v u128) u128 {
	lo, carry := bits.Add64(u.lo, v.lo, 0)
	hi, _ := bits.Add64(u.hi, v.hi, carry)
	return u128{hi: hi, lo: lo}
}

func (u u128) sub(v u128) u128 {
	lo, borrow := bits.Sub64(u.lo, v.lo, 0)
	hi, _ := bits.Sub64(u.hi, v.hi, borrow)
	return u128{hi: hi, lo: lo}
}

// shl shifts u left by n bits (n < 128).
func (u u128) shl(n uint) u128 {
	switch {
	case n == 0:
		return u
	case n >= 64:
		return u128{hi: u.lo << (n - 64)}
	default:
		return u128{hi: u.hi<<n | u.lo>>(64-n), lo: u.lo << n}
	}
}

// lowOnes returns an integer with the n low bits set (n <= 128).
func lowOnes(n uint) u128 {
	switch {
	case n >= 128:
		return u128{hi: ^uint64(0), lo: ^uint64(0)}
	case n >= 64:
		return u128{hi: 1<<(n-64) - 1, lo: ^uint64(0)}
	default:
		return u128{lo: 1<<n - 1}
	}
}

// hostBits is the number of host bits of p.
func hostBits(p netip.Prefix) uint { return uint(p.Addr().BitLen() - p.Bits()) }

// nthAddr returns the address at offset n from the network address of p.
// The caller checks that n is inside p.
func nthAddr(p netip.Prefix, n u128) netip.Addr {
	return addrBits(p.Addr()).add(n).toAddr(p.Addr().Is4())
}

// lastAddr returns the last (broadcast) address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	return addrBits(p.Addr()).add(lowOnes(hostBits(p))).toAddr(p.Addr().Is4())
}

// offsetIn returns the offset of a from the network address of p. ok is false
// when a is not in p or the offset does not fit 64 bits.
func offsetIn(p netip.Prefix, a netip.Addr) (uint64, bool) {
	if !p.Contains(a) {
		return 0, false
	}
	d := addrBits(a).sub(addrBits(p.Addr()))
	if d.hi != 0 {
		return 0, false
	}
	return d.lo, true
}

// toNetIP converts a to a net.IP of its natural length (4 or 16 bytes).
// The result is a new slice. The invalid Addr gives nil.
func toNetIP(a netip.Addr) net.IP {
	if !a.IsValid() {
		return nil
	}
	return net.IP(a.AsSlice())
}

// toIPNet converts p to a *net.IPNet. The invalid Prefix gives nil.
func toIPNet(p netip.Prefix) *net.IPNet {
	if !p.IsValid() {
		return nil
	}
	return &net.IPNet{IP: toNetIP(p.Addr()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// addrIPNet returns a with the mask of p, as *net.IPNet.
func addrIPNet(a netip.Addr, p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: toNetIP(a), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

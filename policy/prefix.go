package policy

import (
	"net/netip"
	"slices"
)

// ipRange is the addresses from..to of one family, both included.
type ipRange struct{ from, to netip.Addr }

// lastAddr returns the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr()
	if a.Is4() {
		b := a.As4()
		for i := p.Bits(); i < 32; i++ {
			b[i/8] |= 0x80 >> (i % 8)
		}
		return netip.AddrFrom4(b)
	}
	b := a.As16()
	for i := p.Bits(); i < 128; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom16(b)
}

// rangesOf returns the sorted, merged ranges covered by ps (touching ranges
// merge). IPv4 ranges come before IPv6 ones.
func rangesOf(ps []netip.Prefix) []ipRange {
	rs := make([]ipRange, 0, len(ps))
	for _, p := range ps {
		rs = append(rs, ipRange{p.Masked().Addr(), lastAddr(p)})
	}
	return mergeRanges(rs)
}

// mergeRanges sorts rs and merges overlapping and touching ranges, in place.
func mergeRanges(rs []ipRange) []ipRange {
	if len(rs) == 0 {
		return nil
	}
	slices.SortFunc(rs, func(a, b ipRange) int { return a.from.Compare(b.from) })
	return coalesce(rs)
}

// subtractRanges returns a minus b (both sorted and merged).
func subtractRanges(a, b []ipRange) []ipRange {
	var out []ipRange
	for _, r := range a {
		cur := r
		ok := true
		for _, x := range b {
			if x.from.BitLen() != cur.from.BitLen() || x.to.Compare(cur.from) < 0 || x.from.Compare(cur.to) > 0 {
				continue // other family, or no overlap
			}
			if x.from.Compare(cur.from) > 0 {
				out = append(out, ipRange{cur.from, x.from.Prev()})
			}
			if x.to.Compare(cur.to) >= 0 {
				ok = false
				break
			}
			cur.from = x.to.Next()
		}
		if ok {
			out = append(out, cur)
		}
	}
	return out
}

// prefixesOf returns the fewest prefixes that cover exactly rs.
func prefixesOf(rs []ipRange) []netip.Prefix {
	if len(rs) == 0 {
		return nil
	}
	out := make([]netip.Prefix, 0, len(rs)) // at least one per range
	for _, r := range rs {
		from := r.from
		for {
			bits := from.BitLen()
			// The largest aligned block at from that ends within r.
			p := netip.PrefixFrom(from, bits)
			for b := bits - 1; b >= 0; b-- {
				q := netip.PrefixFrom(from, b)
				if q.Masked().Addr() != from || lastAddr(q).Compare(r.to) > 0 {
					break
				}
				p = q
			}
			out = append(out, p)
			last := lastAddr(p)
			if last.Compare(r.to) >= 0 {
				break
			}
			from = last.Next()
		}
	}
	return out
}

// Aggregate returns the fewest prefixes that cover exactly the addresses
// of ps (a host is a /32 or /128 prefix): overlapping and adjacent
// prefixes are merged. IPv4 prefixes come first, each family in address
// order. The result is a new slice.
func Aggregate(ps []netip.Prefix) []netip.Prefix {
	return prefixesOf(rangesOf(ps))
}

// hostPrefix returns the single-address prefix of a.
func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// blockPrefixes returns cidr minus except as the fewest prefixes.
func blockPrefixes(cidr netip.Prefix, except []netip.Prefix) []netip.Prefix {
	return prefixesOf(subtractRanges(rangesOf([]netip.Prefix{cidr}), rangesOf(except)))
}

// aggregateSorted is Aggregate of the host prefixes of addrs, which are
// sorted (duplicates allowed): one pass, no sort.
func aggregateSorted(addrs []netip.Addr) []netip.Prefix {
	rs := make([]ipRange, 0, len(addrs)) // at most one per address
	for _, a := range addrs {
		if n := len(rs); n > 0 {
			last := &rs[n-1]
			if a == last.to {
				continue
			}
			if next := last.to.Next(); next.IsValid() && a == next && a.BitLen() == last.to.BitLen() {
				last.to = a
				continue
			}
		}
		rs = append(rs, ipRange{a, a})
	}
	return prefixesOf(rs)
}

// mergeAggregated is Aggregate of the union of lists, each an output of
// Aggregate (sorted, IPv4 first): merged in one pass per list, no sort.
// When the union is one of the lists (the others add nothing to it, as a
// namespace's frontends beside the pods of its team), that list is
// returned as it is: nothing is copied.
func mergeAggregated(lists [][]netip.Prefix) []netip.Prefix {
	if l := coveringList(lists); l != nil {
		return l
	}
	var merged []ipRange
	for _, l := range lists {
		rs := make([]ipRange, len(l))
		for i, p := range l {
			rs[i] = ipRange{p.Addr(), lastAddr(p)}
		}
		merged = mergeTwo(merged, rs)
	}
	return prefixesOf(coalesce(merged))
}

// coveringList returns the longest of lists (each an output of Aggregate)
// if every prefix of the others lies inside one of its prefixes, nil
// otherwise. The union is then that list: a prefix of an aggregated list
// is an aligned block, and an aligned block inside a range of addresses
// lies inside one of the blocks into which Aggregate cuts the range.
func coveringList(lists [][]netip.Prefix) []netip.Prefix {
	if len(lists) == 0 {
		return nil
	}
	longest := 0
	for i, l := range lists {
		if len(l) > len(lists[longest]) {
			longest = i
		}
	}
	long := lists[longest]
	if len(long) == 0 {
		return nil
	}
	for i, l := range lists {
		if i == longest {
			continue
		}
		for _, q := range l {
			// The last prefix of long that starts at or before q.
			j, found := slices.BinarySearchFunc(long, q.Addr(), func(p netip.Prefix, a netip.Addr) int { return p.Addr().Compare(a) })
			if !found {
				j--
			}
			if j < 0 || long[j].Bits() > q.Bits() || !long[j].Contains(q.Addr()) {
				return nil
			}
		}
	}
	return long
}

// mergeTwo merges two sorted range lists by start.
func mergeTwo(a, b []ipRange) []ipRange {
	out := make([]ipRange, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].from.Compare(b[0].from) <= 0 {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// coalesce merges overlapping and touching ranges of a list sorted by
// start, in place.
func coalesce(rs []ipRange) []ipRange {
	if len(rs) == 0 {
		return nil
	}
	out := rs[:1]
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		next := last.to.Next()
		if r.from.BitLen() == last.to.BitLen() && (r.from.Compare(last.to) <= 0 || (next.IsValid() && r.from == next)) {
			if r.to.Compare(last.to) > 0 {
				last.to = r.to
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

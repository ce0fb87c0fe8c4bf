package gobgp

import (
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSortedListsModel checks the merges the manager uses instead of maps
// (unionPaths, diffPrefixes, pathTable.diff, mergePaths) against maps, on
// random lists.
func TestSortedListsModel(t *testing.T) {
	seed := uint64(7)
	if s := os.Getenv("SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = n
	}
	t.Logf("seed %d (SEED=%d go test -run TestSortedListsModel ./bgp/gobgp reproduces it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	randList := func() []netip.Prefix {
		set := map[netip.Prefix]bool{}
		for range rng.IntN(40) {
			if rng.IntN(4) == 0 {
				set[netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 15: byte(rng.IntN(16))}), 64+rng.IntN(2)*64)] = true
			} else {
				set[netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.IntN(32))}), 32)] = true
			}
		}
		out := make([]netip.Prefix, 0, len(set))
		for p := range set {
			out = append(out, p.Masked())
		}
		slices.SortFunc(out, comparePrefixes)
		return slices.Compact(out)
	}
	nh := nextHops{v4: netip.MustParseAddr("192.0.2.1"), v6: netip.MustParseAddr("2001:db8::1")}
	for range 2000 {
		lists := [][]netip.Prefix{randList(), randList(), randList()}[:1+rng.IntN(3)]
		union := unionPaths(lists, nh)
		want := map[netip.Prefix]bool{}
		for _, l := range lists {
			for _, p := range l {
				want[p] = true
			}
		}
		require.Len(t, union, len(want))
		require.True(t, slices.IsSortedFunc(union, func(a, b pathEntry) int { return comparePrefixes(a.prefix, b.prefix) }))
		for _, e := range union {
			require.True(t, want[e.prefix])
			require.Equal(t, nh.hopOf(e.prefix), e.nh)
		}

		was, now := randList(), randList()
		added, removed := diffPrefixes(was, now)
		inWas, inNow := map[netip.Prefix]bool{}, map[netip.Prefix]bool{}
		for _, p := range was {
			inWas[p] = true
		}
		for _, p := range now {
			inNow[p] = true
		}
		for _, p := range added {
			require.True(t, inNow[p] && !inWas[p])
		}
		for _, p := range removed {
			require.True(t, inWas[p] && !inNow[p])
		}
		n := 0
		for p := range inNow {
			if !inWas[p] {
				n++
			}
		}
		require.Len(t, added, n)

		// The path table's diff, with next hops that may change.
		other := nextHops{v4: netip.MustParseAddr("192.0.2.2"), v6: nh.v6}
		pt := &pathTable{applied: unionPaths([][]netip.Prefix{was}, nh)}
		wantPaths := unionPaths([][]netip.Prefix{now}, other)
		gone, add := pt.diff(wantPaths)
		for _, e := range gone {
			require.True(t, inWas[e.prefix] && !inNow[e.prefix])
		}
		for _, e := range add {
			require.True(t, inNow[e.prefix])
			require.True(t, !inWas[e.prefix] || e.prefix.Addr().Is4(), "kept IPv6 paths keep their next hop")
		}
		merged := mergePaths(pt.applied, add)
		require.True(t, slices.IsSortedFunc(merged, func(a, b pathEntry) int { return comparePrefixes(a.prefix, b.prefix) }))
	}
}

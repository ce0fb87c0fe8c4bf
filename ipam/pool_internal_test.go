package ipam

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/internal/testseed"
)

// poolOracle is the naive reference: a set and a cursor, scanned linearly.
type poolOracle struct {
	lo, hi, cursor uint64
	used           map[uint64]bool
}

func (o *poolOracle) alloc() (uint64, bool) {
	off := o.cursor
	for range o.hi - o.lo + 1 {
		if off >= o.hi {
			off = o.lo
		} else {
			off++
		}
		if !o.used[off] {
			o.used[off] = true
			o.cursor = off
			return off, true
		}
	}
	return 0, false
}

func TestPoolModel(t *testing.T) {
	cases := []struct {
		name   string
		lo, hi uint64
	}{
		{"ipv4 /27", 2, 30},
		{"ipv4 /24", 2, 254},
		{"single address", 2, 2},
		{"crosses chunks", chunkSize - 40, 2*chunkSize + 70},
		{"top of the 64-bit space", math.MaxUint64 - 200, math.MaxUint64},
		{"top minus one", math.MaxUint64 - chunkSize - 10, math.MaxUint64 - 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seed := testseed.Seeds(t, 1)[0]
			testseed.Log(t, seed)
			rng := rand.New(rand.NewPCG(seed, tc.lo))
			p := newPool(tc.lo, tc.hi)
			o := &poolOracle{lo: tc.lo, hi: tc.hi, cursor: tc.hi, used: map[uint64]bool{}}
			var live []uint64
			for step := range 20000 {
				if rng.IntN(100) < 55 || len(live) == 0 {
					want, wantOK := o.alloc()
					got, gotOK := p.alloc()
					require.Equal(t, wantOK, gotOK, "step %d alloc ok", step)
					require.Equal(t, want, got, "step %d alloc", step)
					if gotOK {
						live = append(live, got)
					}
				} else {
					k := rng.IntN(len(live))
					off := live[k]
					live[k] = live[len(live)-1]
					live = live[:len(live)-1]
					delete(o.used, off)
					require.True(t, p.release(off), "step %d release %d", step, off)
					require.False(t, p.release(off), "double release")
				}
				require.Equal(t, uint64(len(o.used)), p.n)
			}
			for off := range o.used {
				require.True(t, p.used(off))
			}
		})
	}
}

func TestPoolClaim(t *testing.T) {
	p := newPool(2, 10)
	require.True(t, p.claim(5))
	require.False(t, p.claim(5), "claimed twice")
	require.False(t, p.claim(1), "below range")
	require.False(t, p.claim(11), "above range")
	for _, want := range []uint64{2, 3, 4, 6} {
		got, ok := p.alloc()
		require.True(t, ok)
		require.Equal(t, want, got)
	}
}

func TestPoolSparseMemory(t *testing.T) {
	// An IPv6 /64 per node: allocation must not size anything to the slice.
	lo, hi := podPoolRange(netip.MustParsePrefix("fd00::/64"))
	require.Equal(t, uint64(2), lo)
	require.Equal(t, uint64(math.MaxUint64-1), hi)
	p := newPool(lo, hi)
	for range 10000 {
		_, ok := p.alloc()
		require.True(t, ok)
	}
	require.LessOrEqual(t, len(p.chunks), 3)
	// Churn far into the range: empty chunks behind the cursor are freed.
	p2 := newPool(lo, hi)
	for range 100000 {
		off, ok := p2.alloc()
		require.True(t, ok)
		require.True(t, p2.release(off))
	}
	require.LessOrEqual(t, len(p2.chunks), 1)

	// More than 64 host bits: capped at 2^64 offsets.
	lo, hi = podPoolRange(netip.MustParsePrefix("fd00::/56"))
	require.Equal(t, uint64(2), lo)
	require.Equal(t, uint64(math.MaxUint64), hi)
}

func TestU128(t *testing.T) {
	a := netip.MustParseAddr("fe10:f00d::ffff:ffff:ffff:ffff")
	require.Equal(t, "fe10:f00d:0:1::", addrBits(a).add(u128{lo: 1}).toAddr(false).String())
	require.Equal(t, u128{hi: 1}, u128{lo: 1}.shl(64))
	require.Equal(t, u128{hi: 0x80, lo: 0}, u128{lo: 1}.shl(71))
	require.Equal(t, u128{hi: 1, lo: 1 << 63}, u128{lo: 3}.shl(63))
	require.Equal(t, u128{lo: math.MaxUint64}, u128{hi: 1}.sub(u128{lo: 1}))
	require.Equal(t, "255.255.255.255", lastAddr(netip.MustParsePrefix("0.0.0.0/0")).String())
	require.Equal(t, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", lastAddr(netip.MustParsePrefix("::/0")).String())
	off, ok := offsetIn(netip.MustParsePrefix("fd00::/56"), netip.MustParseAddr("fd00:0:0:1::"))
	require.False(t, ok, "offset beyond 64 bits: %d", off)
}

func TestParseIPv4MatchesNetip(t *testing.T) {
	for _, s := range []string{
		"10.1.5.2", "0.0.0.0", "255.255.255.255", "1.2.3.4", "10.1.5.256", "10.1.5", "10.1.5.2.", ".10.1.5.2",
		"10..5.2", "010.1.5.2", "10.1.5.02", "10.1.5.0", "1.2.3.4.5", "::ffff:1.2.3.4", "fe80::1", "", "a.b.c.d",
		"1.2.3.4 ", "300.1.1.1", "99.99.99.99", "1.2.3.-4",
	} {
		v, ok := parseIPv4(s)
		a, err := netip.ParseAddr(s)
		want := err == nil && a.Is4()
		require.Equal(t, want, ok, "%q", s)
		if ok {
			require.Equal(t, a, u128{lo: uint64(v)}.toAddr(true), "%q", s)
		}
	}
}

func FuzzParseIPv4(f *testing.F) {
	f.Add("10.1.5.2")
	f.Add("010.1.5.2")
	f.Add("::ffff:1.2.3.4")
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := parseIPv4(s)
		a, err := netip.ParseAddr(s)
		if want := err == nil && a.Is4(); ok != want {
			t.Fatalf("%q: parseIPv4 ok=%v, netip: %v %v", s, ok, a, err)
		}
		if ok && a != (u128{lo: uint64(v)}.toAddr(true)) {
			t.Fatalf("%q: parseIPv4 %d, netip %v", s, v, a)
		}
	})
}

func TestPoolCloneAndMax(t *testing.T) {
	p := newPool(2, 3*chunkSize+100)
	_, ok := p.max()
	require.False(t, ok)
	for _, off := range []uint64{2, 70, chunkSize + 5, 2*chunkSize + 63, 2*chunkSize + 64} {
		require.True(t, p.claim(off))
	}
	require.True(t, p.release(2*chunkSize+64))
	m, ok := p.max()
	require.True(t, ok)
	require.Equal(t, uint64(2*chunkSize+63), m)

	q := p.clone()
	require.True(t, q.claim(3*chunkSize+1))
	require.True(t, q.release(70))
	require.True(t, p.used(70), "the clone is deep")
	require.False(t, p.used(3*chunkSize+1))
	require.Equal(t, uint64(4), p.n)
	require.Equal(t, uint64(4), q.n)
	m, _ = q.max()
	require.Equal(t, uint64(3*chunkSize+1), m)
}

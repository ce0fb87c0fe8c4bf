package policy

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mp(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestAggregate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in, want []netip.Prefix
	}{
		{"empty", nil, nil},
		{"one host", mp("10.1.1.2/32"), mp("10.1.1.2/32")},
		{"pair", mp("10.1.1.2/32", "10.1.1.3/32"), mp("10.1.1.2/31")},
		{"unaligned pair", mp("10.1.1.3/32", "10.1.1.4/32"), mp("10.1.1.3/32", "10.1.1.4/32")},
		{"run 2..9", mp("10.1.1.2/32", "10.1.1.3/32", "10.1.1.4/32", "10.1.1.5/32", "10.1.1.6/32", "10.1.1.7/32", "10.1.1.8/32", "10.1.1.9/32"),
			mp("10.1.1.2/31", "10.1.1.4/30", "10.1.1.8/31")},
		{"contained", mp("10.0.0.0/8", "10.1.1.2/32"), mp("10.0.0.0/8")},
		{"adjacent blocks", mp("10.0.0.0/25", "10.0.0.128/25"), mp("10.0.0.0/24")},
		{"duplicates", mp("10.1.1.2/32", "10.1.1.2/32"), mp("10.1.1.2/32")},
		{"host bits masked", mp("10.1.1.7/24"), mp("10.1.1.0/24")},
		{"both families", mp("fd00::1/128", "10.1.1.1/32", "fd00::0/128"), mp("10.1.1.1/32", "fd00::/127")},
		{"everything v4", mp("0.0.0.0/1", "128.0.0.0/1"), mp("0.0.0.0/0")},
		{"top of v4", mp("255.255.255.255/32", "255.255.255.254/32"), mp("255.255.255.254/31")},
		{"v4 end and v6 start do not merge", mp("255.255.255.255/32", "::/128"), mp("255.255.255.255/32", "::/128")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Aggregate(tc.in))
		})
	}
}

func TestBlockPrefixes(t *testing.T) {
	for _, tc := range []struct {
		cidr   string
		except []netip.Prefix
		want   []netip.Prefix
	}{
		{"10.0.0.0/24", nil, mp("10.0.0.0/24")},
		{"10.0.0.0/24", mp("10.0.0.0/25"), mp("10.0.0.128/25")},
		{"10.0.0.0/24", mp("10.0.0.5/32"), mp("10.0.0.0/30", "10.0.0.4/32", "10.0.0.6/31", "10.0.0.8/29", "10.0.0.16/28", "10.0.0.32/27", "10.0.0.64/26", "10.0.0.128/25")},
		{"10.0.0.0/24", mp("10.0.0.0/24"), nil},
		{"10.0.0.0/24", mp("10.0.0.0/16"), nil},
		{"10.0.0.0/24", mp("192.168.0.0/16", "fd00::/8"), mp("10.0.0.0/24")},
		{"0.0.0.0/0", mp("10.0.0.0/8"), mp("0.0.0.0/5", "8.0.0.0/7", "11.0.0.0/8", "12.0.0.0/6", "16.0.0.0/4", "32.0.0.0/3", "64.0.0.0/2", "128.0.0.0/1")},
		{"::/0", mp("::/1"), mp("8000::/1")},
	} {
		t.Run(tc.cidr, func(t *testing.T) {
			assert.Equal(t, tc.want, blockPrefixes(netip.MustParsePrefix(tc.cidr), tc.except))
		})
	}
}

// TestAggregateModel checks Aggregate against a set of the 256 addresses of
// one /24: the result covers exactly the input, and no two result
// prefixes could be merged into one.
func TestAggregateModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for range 500 {
		var in []netip.Prefix
		var want [256]bool
		for range r.IntN(40) {
			bits := 24 + r.IntN(9)
			a := netip.AddrFrom4([4]byte{10, 0, 0, byte(r.IntN(256))})
			p := netip.PrefixFrom(a, bits).Masked()
			in = append(in, p)
			for x := int(p.Addr().As4()[3]); x <= int(lastAddr(p).As4()[3]); x++ {
				want[x] = true
			}
		}
		got := Aggregate(in)
		var have [256]bool
		for _, p := range got {
			for x := int(p.Addr().As4()[3]); x <= int(lastAddr(p).As4()[3]); x++ {
				require.False(t, have[x], "overlap in %v", got)
				have[x] = true
			}
		}
		require.Equal(t, want, have, "in %v got %v", in, got)
		for i := 1; i < len(got); i++ {
			a, b := got[i-1], got[i]
			if a.Bits() == b.Bits() && lastAddr(a).Next() == b.Addr() {
				parent := netip.PrefixFrom(a.Addr(), a.Bits()-1)
				require.NotEqual(t, a.Addr(), parent.Masked().Addr(), "%v and %v could be one prefix", a, b)
			}
		}
	}
}

func FuzzAggregate(f *testing.F) {
	f.Add([]byte{10, 0, 0, 1, 32, 10, 0, 0, 2, 31})
	f.Fuzz(func(t *testing.T, b []byte) {
		var in []netip.Prefix
		for len(b) >= 5 {
			in = append(in, netip.PrefixFrom(netip.AddrFrom4([4]byte(b[:4])), int(b[4])%33))
			b = b[5:]
		}
		got := Aggregate(in)
		rs := rangesOf(in)
		assert.Equal(t, rs, rangesOf(got), "same addresses")
		assert.Equal(t, got, Aggregate(got), "idempotent")
	})
}

func TestAggregateSortedEqualsAggregate(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	for range 300 {
		var addrs []netip.Addr
		var hosts []netip.Prefix
		for range r.IntN(60) {
			a := netip.AddrFrom4([4]byte{10, 0, byte(r.IntN(2)), byte(r.IntN(256))})
			if r.IntN(4) == 0 {
				a = netip.AddrFrom16([16]byte{0xfd, 15: byte(r.IntN(256))})
			}
			addrs = append(addrs, a)
			hosts = append(hosts, hostPrefix(a))
		}
		slices.SortFunc(addrs, netip.Addr.Compare)
		require.Equal(t, Aggregate(hosts), aggregateSorted(addrs), "addrs %v", addrs)
	}
}

func TestMergeAggregated(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	for range 300 {
		var lists [][]netip.Prefix
		var all []netip.Prefix
		for range 1 + r.IntN(4) {
			var in []netip.Prefix
			for range r.IntN(30) {
				a := netip.AddrFrom4([4]byte{10, 0, 0, byte(r.IntN(256))})
				if r.IntN(5) == 0 {
					a = netip.AddrFrom16([16]byte{0xfd, 15: byte(r.IntN(256))})
				}
				in = append(in, netip.PrefixFrom(a, a.BitLen()-r.IntN(4)).Masked())
			}
			lists = append(lists, Aggregate(in))
			all = append(all, in...)
		}
		require.Equal(t, Aggregate(all), mergeAggregated(lists))
		// A list beside one that covers it (a namespace's frontends
		// beside its team): the covering list itself.
		var sub []netip.Prefix
		for _, p := range all {
			if r.IntN(3) == 0 {
				sub = append(sub, p)
			}
		}
		part, whole := Aggregate(sub), Aggregate(all)
		got := mergeAggregated([][]netip.Prefix{part, whole})
		require.Equal(t, whole, got)
		if len(whole) > 0 && len(part) < len(whole) {
			assert.Same(t, &whole[0], &got[0], "not copied")
		}
	}
}

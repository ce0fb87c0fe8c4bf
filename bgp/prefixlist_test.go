package bgp_test

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/internal/testseed"
)

func TestPrefixMatch(t *testing.T) {
	tests := []struct {
		entry string
		match []string
		miss  []string
	}{
		{entry: "0.0.0.0/0", match: []string{"0.0.0.0/0"}, miss: []string{"10.0.0.0/8", "::/0"}},
		{entry: "10.0.0.0/8", match: []string{"10.0.0.0/8"}, miss: []string{"10.1.0.0/16", "11.0.0.0/8", "0.0.0.0/0"}},
		{entry: "10.0.0.0/8 le 24", match: []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24"}, miss: []string{"10.1.2.0/25", "11.0.0.0/16", "0.0.0.0/0"}},
		{entry: "10.0.0.0/8 ge 16", match: []string{"10.1.0.0/16", "10.1.2.3/32"}, miss: []string{"10.0.0.0/8", "10.0.0.0/15"}},
		{entry: "10.0.0.0/8 ge 16 le 24", match: []string{"10.1.0.0/16", "10.255.255.0/24"}, miss: []string{"10.0.0.0/8", "10.1.2.0/25", "12.1.0.0/16"}},
		{entry: "0.0.0.0/0 le 32", match: []string{"0.0.0.0/0", "192.0.2.1/32"}, miss: []string{"2001:db8::/32"}},
		{entry: "2001:db8::/32 le 64", match: []string{"2001:db8:1::/48", "2001:db8::/64"}, miss: []string{"2001:db8::/65", "10.0.0.0/8"}},
		{entry: "::/0", match: []string{"::/0"}, miss: []string{"2001:db8::/32"}},
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			m, err := bgp.ParsePrefixMatch(tt.entry)
			require.NoError(t, err)
			assert.Equal(t, tt.entry, m.String())
			for _, p := range tt.match {
				assert.True(t, m.Matches(netip.MustParsePrefix(p)), "%s matches %s", tt.entry, p)
			}
			for _, p := range tt.miss {
				assert.False(t, m.Matches(netip.MustParsePrefix(p)), "%s does not match %s", tt.entry, p)
			}
		})
	}
}

func TestParsePrefixMatchRejects(t *testing.T) {
	for _, bad := range []string{
		"", "10.0.0.1/8", "10.0.0.0/8 le 7", "10.0.0.0/8 ge 33", "10.0.0.0/8 ge 24 le 16", "10.0.0.0/8 le", "10.0.0.0/8 le 0",
		"10.0.0.0/8 eq 16", "10.0.0.0/8 le 16 le 24", "10.0.0.0", "nope/8", "2001:db8::/32 le 129", "fe80::%eth0/64",
	} {
		_, err := bgp.ParsePrefixMatch(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// TestPrefixMatchModel checks Matches against a naive reading of the
// rules on random entries and prefixes (seed logged; -args -seed=N
// reproduces).
func TestPrefixMatchModel(t *testing.T) {
	seed := testseed.Clock(t)
	rng := rand.New(rand.NewPCG(seed, seed))
	for range 20000 {
		bits := rng.IntN(33)
		base, _ := netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(4)), 0}).Prefix(bits)
		m := bgp.PrefixMatch{Prefix: base}
		if rng.IntN(2) == 0 && bits < 32 {
			m.GE = uint8(bits + rng.IntN(33-bits))
		}
		if rng.IntN(2) == 0 {
			lo := max(bits, int(m.GE))
			m.LE = uint8(lo + rng.IntN(33-lo))
		}
		if m.Validate() != nil {
			continue
		}
		pbits := rng.IntN(33)
		p, _ := netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(4)), byte(rng.IntN(256))}).Prefix(pbits)
		lo, hi := bits, bits
		if m.GE != 0 {
			lo, hi = int(m.GE), 32
		}
		if m.LE != 0 {
			hi = int(m.LE)
		}
		want := pbits >= bits && base.Contains(p.Addr()) && pbits >= lo && pbits <= hi
		if got := m.Matches(p); got != want {
			t.Fatalf("seed %d: %v matches %v: got %v, want %v", seed, m, p, got, want)
		}
	}
}

func FuzzParsePrefixMatch(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8 ge 16 le 24", "0.0.0.0/0", "::/0 le 64", "1.2.3.0/24 ge 30"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := bgp.ParsePrefixMatch(s)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("%q parsed but does not validate: %v", s, err)
		}
		back, err := bgp.ParsePrefixMatch(m.String())
		if err != nil || back != m {
			t.Fatalf("%q: %v does not round-trip: %v %v", s, m, back, err)
		}
		if m.MinLen() > m.MaxLen() || !m.Matches(netip.PrefixFrom(m.Prefix.Addr(), m.MinLen()).Masked()) {
			t.Fatalf("%v does not match its own shortest prefix", m)
		}
	})
}

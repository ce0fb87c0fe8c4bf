package bgp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
)

func TestParseCommunity(t *testing.T) {
	tests := []struct {
		in   string
		want bgp.Community
		bad  bool
	}{
		{in: "65000:100", want: 65000<<16 | 100},
		{in: "0:0", want: 0},
		{in: "65535:65535", want: 0xffffffff},
		{in: "4294967295", want: 0xffffffff},
		{in: "100", want: 100},
		{in: "65536:1", bad: true},
		{in: "1:65536", bad: true},
		{in: "4294967296", bad: true},
		{in: "-1:2", bad: true},
		{in: "01:2", bad: true},
		{in: "1:", bad: true},
		{in: ":1", bad: true},
		{in: "1:2:3", bad: true},
		{in: "no-export", bad: true},
		{in: " 1:2", bad: true},
		{in: "", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := bgp.ParseCommunity(tt.in)
			if tt.bad {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "community")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			back, err := bgp.ParseCommunity(got.String())
			require.NoError(t, err)
			assert.Equal(t, got, back, "String round-trips")
		})
	}
}

func TestParseWellKnownAndLargeCommunity(t *testing.T) {
	c, err := bgp.ParseWellKnownCommunity("no-export")
	require.NoError(t, err)
	assert.Equal(t, "65535:65281", c.String())
	c, err = bgp.ParseWellKnownCommunity("blackhole")
	require.NoError(t, err)
	assert.Equal(t, "65535:666", c.String())
	_, err = bgp.ParseWellKnownCommunity("no-exports")
	require.ErrorContains(t, err, "no-export")
	assert.Len(t, bgp.WellKnownCommunityNames(), 14)

	l, err := bgp.ParseLargeCommunity("4294967295:1:0")
	require.NoError(t, err)
	assert.Equal(t, bgp.LargeCommunity{GlobalAdmin: 4294967295, LocalData1: 1}, l)
	assert.Equal(t, "4294967295:1:0", l.String())
	for _, bad := range []string{"1:2", "1:2:3:4", "4294967296:1:1", "a:b:c", "1::2", ""} {
		_, err := bgp.ParseLargeCommunity(bad)
		assert.Error(t, err, bad)
	}
}

func TestAttributesMergeAndParse(t *testing.T) {
	lp := func(v uint32) *uint32 { return &v }
	a, err := bgp.AttributesSpec{Standard: []string{"65000:2", "65000:1", "65000:2"}, WellKnown: []string{"no-export"},
		Large: []string{"1:2:3"}, LocalPreference: lp(100)}.Parse("attrs")
	require.NoError(t, err)
	assert.Equal(t, "communities=[65000:1 65000:2 65535:65281] large=[1:2:3] local-pref=100", a.String(), "sorted, without duplicates")
	b, err := bgp.AttributesSpec{Standard: []string{"65000:3"}, Large: []string{"1:2:3", "0:0:1"}, LocalPreference: lp(200)}.Parse("attrs")
	require.NoError(t, err)
	m := a.Merge(b)
	assert.Equal(t, "communities=[65000:1 65000:2 65000:3 65535:65281] large=[0:0:1 1:2:3] local-pref=200", m.String(),
		"union of communities, the larger local preference (as Cilium merges overlapping advertisements)")
	assert.Equal(t, "communities=[65000:1 65000:2 65535:65281] large=[1:2:3] local-pref=100", a.String(), "Merge leaves its operands alone")
	assert.True(t, m.Equal(b.Merge(a)), "Merge is commutative")
	assert.Equal(t, m.Key(), b.Merge(a).Key())
	assert.NotEqual(t, a.Key(), b.Key())
	assert.True(t, bgp.Attributes{}.IsZero())
	assert.Equal(t, "", bgp.Attributes{}.Key())

	_, err = bgp.AttributesSpec{Standard: []string{"65000:1", "70000:1"}, WellKnown: []string{"bogus"}, Large: []string{"1:2"}}.Parse("spec.advertisements[0].attributes")
	require.ErrorIs(t, err, bgp.ErrInvalidPolicy)
	for _, f := range []string{"communities.standard[1]", "communities.wellKnown[0]", "communities.large[0]"} {
		assert.ErrorContains(t, err, "spec.advertisements[0].attributes."+f)
	}
}

func FuzzParseCommunity(f *testing.F) {
	for _, s := range []string{"65000:100", "0:0", "4294967295", "1:2:3", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := bgp.ParseCommunity(s)
		if err != nil {
			return
		}
		back, err := bgp.ParseCommunity(c.String())
		if err != nil || back != c {
			t.Fatalf("%q parsed to %v, which does not round-trip (%v, %v)", s, c, back, err)
		}
		if l, err := bgp.ParseLargeCommunity(s + ":0"); err == nil && s != c.String() && l.LocalData2 != 0 {
			t.Fatalf("impossible")
		}
	})
}

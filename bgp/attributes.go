package bgp

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Community is a standard BGP community (RFC 1997): a 32-bit value, written
// "<high>:<low>" with two 16-bit halves (usually ASN:value). The zero value
// is community 0:0 (well-known "internet").
type Community uint32

// LargeCommunity is a BGP large community (RFC 8092): three 32-bit values,
// written "<global admin>:<local 1>:<local 2>". It is comparable.
type LargeCommunity struct {
	GlobalAdmin, LocalData1, LocalData2 uint32
}

// wellKnownCommunities maps the names of well-known communities to their
// values, as Cilium's CiliumBGPAdvertisement accepts them (IANA's "BGP
// Well-known Communities" registry).
var wellKnownCommunities = map[string]Community{
	"internet":                   0x00000000,
	"planned-shut":               0xffff0000,
	"accept-own":                 0xffff0001,
	"route-filter-translated-v4": 0xffff0002,
	"route-filter-v4":            0xffff0003,
	"route-filter-translated-v6": 0xffff0004,
	"route-filter-v6":            0xffff0005,
	"llgr-stale":                 0xffff0006,
	"no-llgr":                    0xffff0007,
	"blackhole":                  0xffff029a,
	"no-export":                  0xffffff01,
	"no-advertise":               0xffffff02,
	"no-export-subconfed":        0xffffff03,
	"no-peer":                    0xffffff04,
}

// WellKnownCommunityNames returns the names [ParseWellKnownCommunity]
// accepts, sorted.
func WellKnownCommunityNames() []string {
	names := make([]string, 0, len(wellKnownCommunities))
	for n := range wellKnownCommunities {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ParseCommunity parses a standard community: "<0..65535>:<0..65535>" or a
// decimal 32-bit number ("4294967295"), as Cilium's "standard" values are
// written. Signs, spaces, empty parts and leading zeros are errors.
func ParseCommunity(s string) (Community, error) {
	if hi, lo, ok := strings.Cut(s, ":"); ok {
		h, err1 := parseDecimal(hi, 16)
		l, err2 := parseDecimal(lo, 16)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("community %q: want <0..65535>:<0..65535> or a decimal 32-bit number", s)
		}
		return Community(h<<16 | l), nil
	}
	v, err := parseDecimal(s, 32)
	if err != nil {
		return 0, fmt.Errorf("community %q: want <0..65535>:<0..65535> or a decimal 32-bit number", s)
	}
	return Community(v), nil
}

// ParseWellKnownCommunity returns the value of a well-known community by its
// name ("no-export", "blackhole", …; see [WellKnownCommunityNames]).
func ParseWellKnownCommunity(name string) (Community, error) {
	c, ok := wellKnownCommunities[name]
	if !ok {
		return 0, fmt.Errorf("well-known community %q: unknown name, want one of %s", name, strings.Join(WellKnownCommunityNames(), ", "))
	}
	return c, nil
}

// ParseLargeCommunity parses "<0..4294967295>:<0..4294967295>:<0..4294967295>".
func ParseLargeCommunity(s string) (LargeCommunity, error) {
	parts := strings.Split(s, ":")
	if len(parts) == 3 {
		var v [3]uint64
		ok := true
		for i, p := range parts {
			n, err := parseDecimal(p, 32)
			if err != nil {
				ok = false
				break
			}
			v[i] = n
		}
		if ok {
			return LargeCommunity{uint32(v[0]), uint32(v[1]), uint32(v[2])}, nil
		}
	}
	return LargeCommunity{}, fmt.Errorf("large community %q: want three decimal 32-bit numbers separated by colons", s)
}

// String returns "<high>:<low>".
func (c Community) String() string {
	return strconv.FormatUint(uint64(c>>16), 10) + ":" + strconv.FormatUint(uint64(c&0xffff), 10)
}

// String returns "<global admin>:<local 1>:<local 2>".
func (c LargeCommunity) String() string {
	return fmt.Sprintf("%d:%d:%d", c.GlobalAdmin, c.LocalData1, c.LocalData2)
}

func compareLarge(a, b LargeCommunity) int {
	return cmp.Or(cmp.Compare(a.GlobalAdmin, b.GlobalAdmin), cmp.Compare(a.LocalData1, b.LocalData1),
		cmp.Compare(a.LocalData2, b.LocalData2))
}

// Attributes are the path attributes an advertisement sets on its routes.
// The zero value sets none. Communities and LargeCommunities are kept
// sorted and without duplicates by [Attributes.Merge] and the parsers of
// this package.
//
// An Attributes value is not safe for concurrent use while being modified;
// values handed out by this package are read-only.
type Attributes struct {
	// Communities are standard communities, well-known ones included.
	Communities []Community
	// LargeCommunities are large communities.
	LargeCommunities []LargeCommunity
	// LocalPreference is the LOCAL_PREF attribute; nil leaves the
	// speaker's default (100). It is sent to internal (iBGP) peers only:
	// RFC 4271 forbids it towards external peers.
	LocalPreference *uint32
}

// IsZero reports whether a sets no attribute.
func (a Attributes) IsZero() bool {
	return len(a.Communities) == 0 && len(a.LargeCommunities) == 0 && a.LocalPreference == nil
}

// Equal reports whether a and b set the same attributes.
func (a Attributes) Equal(b Attributes) bool {
	if (a.LocalPreference == nil) != (b.LocalPreference == nil) ||
		(a.LocalPreference != nil && *a.LocalPreference != *b.LocalPreference) {
		return false
	}
	return slices.Equal(a.Communities, b.Communities) && slices.Equal(a.LargeCommunities, b.LargeCommunities)
}

// Clone returns a deep copy of a.
func (a Attributes) Clone() Attributes {
	a.Communities = slices.Clone(a.Communities)
	a.LargeCommunities = slices.Clone(a.LargeCommunities)
	if a.LocalPreference != nil {
		lp := *a.LocalPreference
		a.LocalPreference = &lp
	}
	return a
}

// Merge returns the attributes of a route that two advertisements select,
// as Cilium merges overlapping advertisements: the union of the
// communities and the larger local preference (RFC 4271: the higher degree
// of preference wins). Neither a nor b is modified.
func (a Attributes) Merge(b Attributes) Attributes {
	out := Attributes{
		Communities:      append(slices.Clone(a.Communities), b.Communities...),
		LargeCommunities: append(slices.Clone(a.LargeCommunities), b.LargeCommunities...),
	}
	out.normalize()
	switch {
	case a.LocalPreference != nil && b.LocalPreference != nil:
		lp := max(*a.LocalPreference, *b.LocalPreference)
		out.LocalPreference = &lp
	case a.LocalPreference != nil:
		lp := *a.LocalPreference
		out.LocalPreference = &lp
	case b.LocalPreference != nil:
		lp := *b.LocalPreference
		out.LocalPreference = &lp
	}
	return out
}

// normalize sorts the communities and drops duplicates.
func (a *Attributes) normalize() {
	slices.Sort(a.Communities)
	a.Communities = slices.Compact(a.Communities)
	if len(a.Communities) == 0 {
		a.Communities = nil
	}
	slices.SortFunc(a.LargeCommunities, compareLarge)
	a.LargeCommunities = slices.Compact(a.LargeCommunities)
	if len(a.LargeCommunities) == 0 {
		a.LargeCommunities = nil
	}
}

// Key returns a string that is equal for equal attributes, for grouping
// routes by their attributes.
func (a Attributes) Key() string {
	if a.IsZero() {
		return ""
	}
	var b strings.Builder
	for _, c := range a.Communities {
		b.WriteString(c.String())
		b.WriteByte(',')
	}
	b.WriteByte('|')
	for _, c := range a.LargeCommunities {
		b.WriteString(c.String())
		b.WriteByte(',')
	}
	b.WriteByte('|')
	if a.LocalPreference != nil {
		b.WriteString(strconv.FormatUint(uint64(*a.LocalPreference), 10))
	}
	return b.String()
}

// String describes the attributes for logs and tests, e.g.
// "communities=[65000:100] large=[65000:1:2] local-pref=200".
func (a Attributes) String() string {
	var parts []string
	if len(a.Communities) > 0 {
		parts = append(parts, fmt.Sprintf("communities=%v", a.Communities))
	}
	if len(a.LargeCommunities) > 0 {
		parts = append(parts, fmt.Sprintf("large=%v", a.LargeCommunities))
	}
	if a.LocalPreference != nil {
		parts = append(parts, fmt.Sprintf("local-pref=%d", *a.LocalPreference))
	}
	return strings.Join(parts, " ")
}

// AttributesSpec is an advertisement's attributes as a user writes them
// (Cilium's "attributes" of a CiliumBGPAdvertisement): community strings
// and a local preference. [AttributesSpec.Parse] turns it into
// [Attributes].
type AttributesSpec struct {
	// Standard communities, "<0..65535>:<0..65535>" or a decimal 32-bit
	// number.
	Standard []string
	// WellKnown communities by name (see [WellKnownCommunityNames]).
	WellKnown []string
	// Large communities, "<a>:<b>:<c>" of 32-bit numbers.
	Large []string
	// LocalPreference; nil leaves the default.
	LocalPreference *uint32
}

// Parse parses every community; the error joins one *[FieldError] per bad
// string, named under field (e.g. "advertisements[0].attributes").
func (s AttributesSpec) Parse(field string) (Attributes, error) {
	var a Attributes
	var errs []error
	for i, c := range s.Standard {
		v, err := ParseCommunity(c)
		if err != nil {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("%s.communities.standard[%d]", field, i), Reason: err.Error()})
			continue
		}
		a.Communities = append(a.Communities, v)
	}
	for i, c := range s.WellKnown {
		v, err := ParseWellKnownCommunity(c)
		if err != nil {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("%s.communities.wellKnown[%d]", field, i), Reason: err.Error()})
			continue
		}
		a.Communities = append(a.Communities, v)
	}
	for i, c := range s.Large {
		v, err := ParseLargeCommunity(c)
		if err != nil {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("%s.communities.large[%d]", field, i), Reason: err.Error()})
			continue
		}
		a.LargeCommunities = append(a.LargeCommunities, v)
	}
	if s.LocalPreference != nil {
		lp := *s.LocalPreference
		a.LocalPreference = &lp
	}
	a.normalize()
	return a, joinSorted(errs)
}

package bgp

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// PrefixMatch is one entry of an import prefix list, with the semantics of
// the usual router prefix lists: a route matches when its prefix lies
// within Prefix and its length is in GE..LE. With GE and LE both zero only
// Prefix itself matches (exact); LE alone (GE zero) matches the lengths
// Prefix.Bits()..LE; GE alone matches GE..the family's maximum (32, 128).
//
// A PrefixMatch is a comparable value; the zero value is invalid.
type PrefixMatch struct {
	// Prefix is the covering prefix, masked.
	Prefix netip.Prefix
	// GE and LE bound the accepted prefix lengths (0: not set).
	GE, LE uint8
}

// MinLen returns the shortest prefix length the entry accepts.
func (m PrefixMatch) MinLen() int {
	if m.GE != 0 {
		return int(m.GE)
	}
	return m.Prefix.Bits()
}

// MaxLen returns the longest prefix length the entry accepts.
func (m PrefixMatch) MaxLen() int {
	switch {
	case m.LE != 0:
		return int(m.LE)
	case m.GE != 0:
		return m.Prefix.Addr().BitLen()
	}
	return m.Prefix.Bits()
}

// Matches reports whether route p is accepted by the entry. Prefixes of
// the other IP family never match.
func (m PrefixMatch) Matches(p netip.Prefix) bool {
	if !m.Prefix.IsValid() || !p.IsValid() || p.Addr().Is4() != m.Prefix.Addr().Is4() {
		return false
	}
	b := p.Bits()
	return b >= m.MinLen() && b <= m.MaxLen() && b >= m.Prefix.Bits() && m.Prefix.Contains(p.Addr())
}

// Validate checks the entry: a valid prefix in canonical form (host bits
// zero), and Prefix.Bits() <= GE <= LE <= the family's maximum where set.
func (m PrefixMatch) Validate() error {
	if !m.Prefix.IsValid() {
		return fmt.Errorf("prefix is required")
	}
	if m.Prefix.Addr().Zone() != "" {
		return fmt.Errorf("prefix %s must not have a zone", m.Prefix)
	}
	if m.Prefix.Masked() != m.Prefix {
		return fmt.Errorf("prefix %s has host bits set (want %s)", m.Prefix, m.Prefix.Masked())
	}
	maxBits := m.Prefix.Addr().BitLen()
	if m.GE != 0 && (int(m.GE) < m.Prefix.Bits() || int(m.GE) > maxBits) {
		return fmt.Errorf("ge %d must be %d..%d (the prefix length..%d)", m.GE, m.Prefix.Bits(), maxBits, maxBits)
	}
	if m.LE != 0 && (int(m.LE) < m.Prefix.Bits() || int(m.LE) > maxBits) {
		return fmt.Errorf("le %d must be %d..%d (the prefix length..%d)", m.LE, m.Prefix.Bits(), maxBits, maxBits)
	}
	if m.GE != 0 && m.LE != 0 && m.GE > m.LE {
		return fmt.Errorf("ge %d must not exceed le %d", m.GE, m.LE)
	}
	return nil
}

// String returns the entry in router syntax, e.g. "10.0.0.0/8 ge 16 le 24".
func (m PrefixMatch) String() string {
	s := m.Prefix.String()
	if m.GE != 0 {
		s += " ge " + strconv.Itoa(int(m.GE))
	}
	if m.LE != 0 {
		s += " le " + strconv.Itoa(int(m.LE))
	}
	return s
}

// ParsePrefixMatch parses router syntax: "<prefix>[ ge <n>][ le <n>]" (the
// form [PrefixMatch.String] writes), and validates it.
func ParsePrefixMatch(s string) (PrefixMatch, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return PrefixMatch{}, fmt.Errorf("prefix list entry %q: empty", s)
	}
	p, err := netip.ParsePrefix(f[0])
	if err != nil {
		return PrefixMatch{}, fmt.Errorf("prefix list entry %q: %w", s, err)
	}
	m := PrefixMatch{Prefix: p}
	seen := map[string]bool{}
	for i := 1; i < len(f); i += 2 {
		if i+1 >= len(f) || (f[i] != "ge" && f[i] != "le") || seen[f[i]] {
			return PrefixMatch{}, fmt.Errorf("prefix list entry %q: want <prefix> [ge <n>] [le <n>]", s)
		}
		seen[f[i]] = true
		n, err := parseDecimal(f[i+1], 8)
		if err != nil || n == 0 {
			return PrefixMatch{}, fmt.Errorf("prefix list entry %q: %s %q is not a prefix length 1..128", s, f[i], f[i+1])
		}
		if f[i] == "ge" {
			m.GE = uint8(n)
		} else {
			m.LE = uint8(n)
		}
	}
	if err := m.Validate(); err != nil {
		return PrefixMatch{}, fmt.Errorf("prefix list entry %q: %w", s, err)
	}
	return m, nil
}

// aggregate returns p shortened to bits if it is longer, else p.
func aggregate(p netip.Prefix, bits int) netip.Prefix {
	if bits <= 0 || p.Bits() <= bits {
		return p
	}
	q, _ := p.Addr().Prefix(bits)
	return q
}

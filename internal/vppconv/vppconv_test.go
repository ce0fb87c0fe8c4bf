package vppconv

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.fd.io/govpp/binapi/ip_types"
)

func TestRoundTrip(t *testing.T) {
	tests := []string{"10.1.2.3/24", "0.0.0.0/0", "255.255.255.255/32", "fd00::1/64", "::/0", "2001:db8::/128"}
	for _, s := range tests {
		t.Run(s, func(t *testing.T) {
			p := netip.MustParsePrefix(s)
			assert.Equal(t, p, PrefixOf(Prefix(p)))
			assert.Equal(t, p.Addr(), AddrOf(Address(p.Addr())))
			assert.Equal(t, p.Addr(), UnionAddr(Union(p.Addr()), p.Addr().Is6()))
		})
	}
	assert.Equal(t, netip.Prefix{}, PrefixOf(ip_types.Prefix{Len: 33}), "invalid length")
	assert.Equal(t, ip_types.AddressUnion{}, Union(netip.Addr{}))
}

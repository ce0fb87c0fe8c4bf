package gobgptest_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
)

// TestPeers peers two test peers with each other (one active, one passive)
// and checks that routes, next hops, counts and capabilities are reported.
func TestPeers(t *testing.T) {
	a := gobgptest.StartPeer(t, gobgptest.PeerConfig{Address: netip.MustParseAddr("127.0.0.51"), ASN: 65051})
	b := gobgptest.StartPeer(t, gobgptest.PeerConfig{Address: netip.MustParseAddr("127.0.0.52"), ASN: 65052})
	assert.Equal(t, netip.MustParseAddr("127.0.0.52"), b.Address())
	assert.Equal(t, uint32(65052), b.ASN())
	assert.NotZero(t, b.Port())
	n := b.NeighborFor(netip.MustParseAddr("127.0.0.51"))
	assert.Equal(t, bgp.Neighbor{PeerAddress: b.Address(), PeerPort: uint16(b.Port()), PeerASN: 65052,
		LocalAddress: netip.MustParseAddr("127.0.0.51"), ConnectRetryTime: 2 * time.Second, HoldTime: 9 * time.Second,
		KeepaliveTime: 3 * time.Second}, n)

	b.AddNeighbor(t, gobgptest.Neighbor{Address: a.Address(), ASN: 65051, RestartTime: 30 * time.Second,
		Families: []bgp.Family{bgp.IPv4Unicast}})
	a.AddNeighbor(t, gobgptest.Neighbor{Address: b.Address(), ASN: 65052, Active: true, Port: b.Port(), RestartTime: 30 * time.Second})
	a.AddPath(t, netip.MustParsePrefix("198.51.100.0/24"), netip.MustParseAddr("127.0.0.51"))
	a.AddPath(t, netip.MustParsePrefix("2001:db8::/64"), netip.MustParseAddr("fd00::51"))

	b.WaitPrefix(t, netip.MustParsePrefix("198.51.100.0/24"), true)
	b.WaitCount(t, bgp.IPv4Unicast, 1)
	assert.Equal(t, map[netip.Prefix]gobgptest.Route{
		netip.MustParsePrefix("198.51.100.0/24"): {NextHop: netip.MustParseAddr("127.0.0.51")},
	}, b.Routes(t, bgp.IPv4Unicast))
	assert.Equal(t, 0, b.Count(bgp.IPv6Unicast), "b offers IPv4 only")
	assert.Len(t, a.Routes(t, bgp.IPv6Unicast), 1, "a originated it")

	r, notification, ok := b.GracefulRestartFlags(t, a.Address())
	require.True(t, ok)
	assert.True(t, notification)
	assert.False(t, r, "a is not restarting")
	_, _, ok = b.GracefulRestartFlags(t, netip.MustParseAddr("127.0.0.99"))
	assert.False(t, ok, "unknown neighbor")
}

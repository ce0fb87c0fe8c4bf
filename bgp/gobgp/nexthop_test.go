package gobgp

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
)

// TestDualStackIPv6Session peers over IPv6 (both ends on ::1) and advertises
// both families: each family's next hop is the node's address of that
// family, never the session's address (an IPv6 next hop for an IPv4 route
// is a martian to a peer without RFC 8950).
func TestDualStackIPv6Session(t *testing.T) {
	ctx := context.Background()
	local := netip.MustParseAddr("::1")
	peer := startTestPeer(t, "::1", 65022, peerOpts{neighbor: local, asn: 65021})
	m := runManager(t, Config{})

	state := testState(testNode("10.244.21.0/24", "fd00:10:244:21::/64"))
	// A next hop is only an attribute here (nothing is sent to it); the
	// peer refuses loopback next hops outside IPv4 loopback sessions.
	state.IPv4 = netip.MustParseAddr("192.0.2.21").AsSlice()
	state.IPv6 = netip.MustParseAddr("fd00::21").AsSlice()
	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65021, neighborOf(peer, "::1")), state))
	waitEstablished(t, m, peer.addr)

	require.Eventually(t, func() bool {
		return len(peer.received(t, "v4")) == 1 && len(peer.received(t, "v6")) == 1
	}, waitFor, 20*time.Millisecond)
	assert.Equal(t, map[netip.Prefix]netip.Addr{netip.MustParsePrefix("10.244.21.0/24"): netip.MustParseAddr("192.0.2.21")},
		peer.received(t, "v4"), "the IPv4 next hop is the node's IPv4 address")
	assert.Equal(t, map[netip.Prefix]netip.Addr{netip.MustParsePrefix("fd00:10:244:21::/64"): netip.MustParseAddr("fd00::21")},
		peer.received(t, "v6"), "the IPv6 next hop is the node's IPv6 address")

	ps, err := m.Peers(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, []bgp.Family{bgp.IPv4Unicast, bgp.IPv6Unicast}, ps[0].Negotiated)
	assert.Empty(t, ps[0].Disabled)
	assert.Equal(t, map[bgp.Family]int{bgp.IPv4Unicast: 1, bgp.IPv6Unicast: 1}, ps[0].Advertised)
}

// TestNoIPv6AddressNoIPv6Routes: without an IPv6 address of the node, IPv6
// routes have no valid next hop; they must not go out (the old code sent
// them via ::ffff:127.0.0.1).
func TestNoIPv6AddressNoIPv6Routes(t *testing.T) {
	ctx := context.Background()
	local := netip.MustParseAddr("127.0.0.23")
	peer := startTestPeer(t, "127.0.0.24", 65024, peerOpts{neighbor: local, asn: 65023})
	m := runManager(t, Config{})

	state := testState(testNode("10.244.23.0/24", "fd00:10:244:23::/64"))
	state.IPv4 = local.AsSlice()
	state.IPv6 = nil
	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65023, neighborOf(peer, "127.0.0.23")), state))
	waitEstablished(t, m, peer.addr)
	require.Eventually(t, func() bool { return peer.count("v4") == 1 }, waitFor, 20*time.Millisecond)
	assert.Empty(t, peer.received(t, "v6"), "no IPv6 route without an IPv6 next hop")

	ps, err := m.Peers(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, []bgp.Family{bgp.IPv4Unicast}, ps[0].Negotiated, "IPv6 is not offered")
	assert.Contains(t, ps[0].Disabled[bgp.IPv6Unicast], "no IPv6 address")
	assert.Equal(t, map[bgp.Family]int{bgp.IPv4Unicast: 1}, ps[0].Advertised)

	// A neighbor that only speaks IPv6 cannot be configured at all: an
	// error, and a status saying why.
	n := neighborOf(peer, "127.0.0.23")
	n.Families = []bgp.Family{bgp.IPv6Unicast}
	err = m.ConfigurePeers(ctx, testPolicy(65023, n), state)
	require.ErrorContains(t, err, "no address family can be offered")
	ps, err = m.Peers(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, bgp.SessionIdle, ps[0].State)
	assert.Contains(t, ps[0].Disabled[bgp.IPv6Unicast], "no IPv6 address")
	require.Eventually(t, func() bool { return peer.count("v4") == 0 }, waitFor, 20*time.Millisecond)
}

// TestAdvertisedCountsNegotiatedFamiliesOnly: a peer that only negotiates
// IPv4 gets no IPv6 routes, and none are counted as advertised.
func TestAdvertisedCountsNegotiatedFamiliesOnly(t *testing.T) {
	ctx := context.Background()
	local := netip.MustParseAddr("127.0.0.25")
	peer := startTestPeer(t, "127.0.0.26", 65026, peerOpts{neighbor: local, asn: 65025, families: []string{"v4"}})
	m := runManager(t, Config{})
	state := testState(testNode("10.244.25.0/24", "fd00:10:244:25::/64"))
	state.IPv4 = local.AsSlice()
	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65025, neighborOf(peer, "127.0.0.25")), state))
	waitEstablished(t, m, peer.addr)
	require.Eventually(t, func() bool { return peer.count("v4") == 1 }, waitFor, 20*time.Millisecond)
	ps, err := m.Peers(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, []bgp.Family{bgp.IPv4Unicast}, ps[0].Negotiated)
	assert.Equal(t, map[bgp.Family]int{bgp.IPv4Unicast: 1}, ps[0].Advertised, "IPv6 routes are not sent, not counted")
	assert.Empty(t, ps[0].Disabled, "IPv6 is offered; the peer declined it")
}

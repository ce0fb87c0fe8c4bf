package gobgp

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

func TestConfigurePeersNotRunning(t *testing.T) {
	m, err := New(Config{})
	require.NoError(t, err)
	err = m.ConfigurePeers(context.Background(), nil, nil)
	require.ErrorIs(t, err, ErrNotRunning)
}

func TestNewRejectsBadListenAddress(t *testing.T) {
	_, err := New(Config{ListenAddresses: []netip.Addr{{}}})
	require.ErrorContains(t, err, "ListenAddresses[0]")
}

func TestRunTwice(t *testing.T) {
	m := runManager(t, Config{})
	err := m.Run(context.Background())
	require.ErrorIs(t, err, ErrAlreadyRunning)
	require.ErrorIs(t, err, lifecycle.ErrAlreadyRunning, "one ErrAlreadyRunning for every package")
	assert.EqualError(t, err, "gobgp: Run called more than once")
}

func TestConfigurePeersRejectsFlawedPolicy(t *testing.T) {
	m := runManager(t, Config{})
	p := testPolicy(65001, bgp.Neighbor{PeerAddress: netip.MustParseAddr("127.0.0.2"), PeerASN: 65002, HoldTime: 2 * time.Second})
	err := m.ConfigurePeers(context.Background(), p, testState(testNode("10.244.1.0/24")))
	require.ErrorIs(t, err, bgp.ErrInvalidPolicy)
	assert.ErrorContains(t, err, "virtualRouters[0].neighbors[0].holdTime")
	ps, err := m.Peers(context.Background())
	require.NoError(t, err)
	assert.Empty(t, ps, "a flawed policy must not change anything")
}

func TestConfigurePeersNoRouterID(t *testing.T) {
	m := runManager(t, Config{})
	p := testPolicy(65001)
	state := testState(testNode("10.244.1.0/24"))
	state.IPv4 = nil
	err := m.ConfigurePeers(context.Background(), p, state)
	require.ErrorContains(t, err, "no router ID")
}

// TestSessionAndPodCIDR covers the whole life of a policy against a passive
// GoBGP peer: applied -> Established -> pod CIDRs received (IPv4 and IPv6);
// changed -> routes updated; nil -> withdrawn and disconnected.
func TestSessionAndPodCIDR(t *testing.T) {
	ctx := context.Background()
	peer := startTestPeer(t, "127.0.0.2", 65002, peerOpts{neighbor: netip.MustParseAddr("127.0.0.1"), asn: 65001})

	svcs := bgp.NewStore(bgp.Signaler{})
	m := runManager(t, Config{Services: svcs})
	policy := testPolicy(65001, neighborOf(peer, "127.0.0.1"))
	node := testNode("10.244.1.0/24", "fd00:10:244:1::/64")
	require.NoError(t, m.ConfigurePeers(ctx, policy, testState(node)))

	waitEstablished(t, m, peer.addr)
	require.Eventually(t, func() bool {
		return len(peer.received(t, "v4")) == 1 && len(peer.received(t, "v6")) == 1
	}, waitFor, 20*time.Millisecond)
	assert.Equal(t, map[netip.Prefix]netip.Addr{netip.MustParsePrefix("10.244.1.0/24"): netip.MustParseAddr("127.0.0.1")},
		peer.received(t, "v4"), "IPv4 next hop is the session's local address")
	assert.Equal(t, map[netip.Prefix]netip.Addr{netip.MustParsePrefix("fd00:10:244:1::/64"): netip.MustParseAddr("fd00::1")},
		peer.received(t, "v6"), "IPv6 next hop is the state's IPv6 address")

	// Status: advertised routes are queryable.
	adv, err := m.Routes(ctx, RouteQuery{LocalASN: 65001, Peer: peer.addr})
	require.NoError(t, err)
	require.Len(t, adv, 1)
	assert.Equal(t, netip.MustParsePrefix("10.244.1.0/24"), adv[0].Prefix)

	// Same policy again: nothing changes, the session stays up.
	require.NoError(t, m.ConfigurePeers(ctx, policy, testState(node)))
	ps, err := m.Peers(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, bgp.SessionEstablished, ps[0].State)
	assert.Equal(t, uint32(65002), ps[0].PeerASN)

	// Policy change: a new pod CIDR and a selected service VIP.
	svcs.SetService(bgp.Service{Namespace: "default", Name: "web", Labels: map[string]string{"bgp": "announce"},
		LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")}})
	svcs.SetService(bgp.Service{Namespace: "default", Name: "other", Labels: map[string]string{"bgp": "no"},
		LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("192.0.2.11")}})
	policy2 := policy.Clone()
	policy2.VirtualRouters[0].ServiceSelector = &bgp.LabelSelector{MatchLabels: map[string]string{"bgp": "announce"}}
	node2 := testNode("10.244.2.0/24", "fd00:10:244:1::/64")
	require.NoError(t, m.ConfigurePeers(ctx, policy2, testState(node2)))
	require.Eventually(t, func() bool {
		got := peer.received(t, "v4")
		_, vip := got[netip.MustParsePrefix("192.0.2.10/32")]
		_, pod := got[netip.MustParsePrefix("10.244.2.0/24")]
		return len(got) == 2 && vip && pod && len(peer.received(t, "v6")) == 2
	}, waitFor, 20*time.Millisecond, "peer has %v", peer.received(t, "v4"))
	waitEstablished(t, m, peer.addr)

	// nil withdraws everything and disconnects.
	require.NoError(t, m.ConfigurePeers(ctx, nil, nil))
	require.Eventually(t, func() bool {
		return len(peer.received(t, "v4")) == 0 && len(peer.received(t, "v6")) == 0
	}, waitFor, 20*time.Millisecond)
	ps, err = m.Peers(ctx)
	require.NoError(t, err)
	assert.Empty(t, ps)
	_, err = m.Routes(ctx, RouteQuery{LocalASN: 65001, Peer: peer.addr})
	require.ErrorIs(t, err, ErrUnknownRouter)
}

// TestNeighborChange replaces the neighbor of a virtual router: the old peer
// loses the routes, the new one gets them.
func TestNeighborChange(t *testing.T) {
	ctx := context.Background()
	local := netip.MustParseAddr("127.0.0.1")
	peerA := startTestPeer(t, "127.0.0.3", 65003, peerOpts{neighbor: local, asn: 65001})
	peerB := startTestPeer(t, "127.0.0.4", 65004, peerOpts{neighbor: local, asn: 65001})
	m := runManager(t, Config{})
	state := testState(testNode("10.244.7.0/24"))

	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65001, neighborOf(peerA, "127.0.0.1")), state))
	require.Eventually(t, func() bool { return peerA.count("v4") == 1 }, waitFor, 20*time.Millisecond)

	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65001, neighborOf(peerB, "127.0.0.1")), state))
	require.Eventually(t, func() bool {
		return peerA.count("v4") == 0 && peerB.count("v4") == 1
	}, waitFor, 20*time.Millisecond)
	ps, err := m.Peers(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, peerB.addr, ps[0].PeerAddress)
}

// TestReceivedRoutesAndListen: the node annotates a local port, so the
// manager listens and the peer connects actively; routes the peer
// advertises are queryable but not imported.
func TestReceivedRoutesAndListen(t *testing.T) {
	ctx := context.Background()
	localPort := freePort(t, "127.0.0.5")
	peer := startTestPeer(t, "127.0.0.6", 65006)
	peer.addNeighbor(t, peerOpts{neighbor: netip.MustParseAddr("127.0.0.5"), asn: 65005, active: true, port: localPort})
	peer.addPath(t, "198.51.100.0/24", "127.0.0.6")

	m := runManager(t, Config{ListenAddresses: []netip.Addr{netip.MustParseAddr("127.0.0.5")}})
	n := neighborOf(peer, "127.0.0.5")
	n.Passive = true
	state := testState(testNode("10.244.5.0/24"))
	state.Annotations = bgp.AnnotationMap{65005: {ASN: 65005, RouterID: netip.MustParseAddr("10.0.0.5"), LocalPort: uint16(localPort)}}
	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65005, n), state))
	waitEstablished(t, m, peer.addr)
	require.Eventually(t, func() bool {
		rs, err := m.Routes(ctx, RouteQuery{LocalASN: 65005, Peer: peer.addr, Received: true})
		return err == nil && len(rs) == 1 && rs[0].Prefix == netip.MustParsePrefix("198.51.100.0/24") &&
			len(rs[0].ASPath) == 1 && rs[0].ASPath[0] == 65006
	}, waitFor, 20*time.Millisecond)
	require.Eventually(t, func() bool { return peer.count("v4") == 2 }, waitFor, 20*time.Millisecond,
		"the peer has its own route and our pod CIDR")
	// Router ID change restarts the server; the session comes back.
	state.Annotations = bgp.AnnotationMap{65005: {ASN: 65005, RouterID: netip.MustParseAddr("10.0.0.55"), LocalPort: uint16(localPort)}}
	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65005, n), state))
	waitEstablished(t, m, peer.addr)
}

// TestTCPMD5 establishes a session protected by TCP-MD5 and checks that a
// wrong password keeps it down.
func TestTCPMD5(t *testing.T) {
	ctx := context.Background()
	local := netip.MustParseAddr("127.0.0.7")
	peer := startTestPeer(t, "127.0.0.8", 65008, peerOpts{neighbor: local, asn: 65007, password: "s3cret"})
	if !md5Supported(t, peer) {
		t.Skip("TCP-MD5 (TCP_MD5SIG) is not available on this kernel or needs privileges (CAP_NET_ADMIN): run as root on Linux")
	}
	before, ok := tcpMD5Failures(t)
	if !ok {
		t.Skip("the kernel does not count TCP-MD5 failures (TCPMD5Failure in /proc/net/netstat)")
	}
	m := runManager(t, Config{})
	n := neighborOf(peer, "127.0.0.7")
	n.Password = "wrong"
	state := testState(testNode("10.244.8.0/24"))
	state.IPv4 = local.AsSlice()
	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65007, n), state))
	// The peer's kernel drops our segments for their bad signature: the
	// session cannot come up. Recorded, not slept for: the kernel counted
	// two segments dropped (the connection attempt and a retry of it).
	require.Eventually(t, func() bool {
		now, _ := tcpMD5Failures(t)
		return now >= before+2
	}, waitFor, 20*time.Millisecond, "segments with a bad signature dropped")
	ps, err := m.Peers(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.NotEqual(t, bgp.SessionEstablished, ps[0].State)

	n.Password = "s3cret"
	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65007, n), state))
	waitEstablished(t, m, peer.addr)
	require.Eventually(t, func() bool { return peer.count("v4") == 1 }, waitFor, 20*time.Millisecond)
}

func TestRoutesErrors(t *testing.T) {
	m := runManager(t, Config{})
	_, err := m.Routes(context.Background(), RouteQuery{LocalASN: 1})
	require.True(t, errors.Is(err, ErrUnknownRouter))
}

// TestConfigurePeersRejectsWhatCannotWork: limits of GoBGP and policies that
// do not fit the node are validation errors naming the field, not silent
// adjustments or sessions that never come up.
func TestConfigurePeersRejectsWhatCannotWork(t *testing.T) {
	m := runManager(t, Config{})
	state := testState(testNode("10.244.1.0/24"))
	tests := []struct {
		name   string
		mutate func(n *bgp.Neighbor)
		want   []string
	}{
		{name: "connect retry below GoBGP's floor", mutate: func(n *bgp.Neighbor) { n.ConnectRetryTime = time.Second },
			want: []string{"virtualRouters[0].neighbors[0].connectRetryTime", "must be at least 2s"}},
		{name: "passive without a local port", mutate: func(n *bgp.Neighbor) { n.Passive = true },
			want: []string{"virtualRouters[0].neighbors[0].passive", "can never connect", "local-port"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := bgp.Neighbor{PeerAddress: netip.MustParseAddr("127.0.0.2"), PeerASN: 65002, ConnectRetryTime: 5 * time.Second}
			tt.mutate(&n)
			err := m.ConfigurePeers(context.Background(), testPolicy(65001, n), state)
			require.ErrorIs(t, err, bgp.ErrInvalidPolicy)
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
			ps, err := m.Peers(context.Background())
			require.NoError(t, err)
			assert.Empty(t, ps, "nothing is applied")
		})
	}
}

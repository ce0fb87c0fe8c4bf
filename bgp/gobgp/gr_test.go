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

// grNeighbor is a neighbor with graceful restart on.
func grNeighbor(p *testPeer, local string, restart time.Duration) bgp.Neighbor {
	n := neighborOf(p, local)
	n.GracefulRestart = bgp.GracefulRestart{Enabled: true, RestartTime: restart}
	return n
}

// stale reports whether the peer holds prefix p, and whether as stale.
func holds(t testing.TB, peer *testPeer, fam string, p string) (present, stale bool) {
	r, ok := peer.routes(t, fam)[netip.MustParsePrefix(p)]
	return ok, r.Stale
}

// TestGracefulRestartKill kills the speaker process with SIGKILL: the peer
// keeps its routes (stale) for the restart time; the restarted speaker
// announces itself with the restart flag and re-advertises, after which the
// peer holds exactly the new routes, fresh.
func TestGracefulRestartKill(t *testing.T) {
	local := netip.MustParseAddr("127.0.0.31")
	peer := startTestPeer(t, "127.0.0.32", 65032, peerOpts{neighbor: local, asn: 65031, restartTime: 120})
	spec := speakerSpec{
		Policy:   testPolicy(65031, grNeighbor(peer, "127.0.0.31", time.Minute)),
		PodCIDRs: []string{"10.244.31.0/24", "fd00:10:244:31::/64"},
		IPv4:     local, IPv6: netip.MustParseAddr("fd00::31"),
	}
	s1 := startSpeaker(t)
	s1.apply(t, spec)
	require.Eventually(t, func() bool {
		p4, s4 := holds(t, peer, "v4", "10.244.31.0/24")
		p6, s6 := holds(t, peer, "v6", "fd00:10:244:31::/64")
		return p4 && p6 && !s4 && !s6
	}, waitFor, 20*time.Millisecond)
	r, n, ok := peer.grFlags(t, local)
	require.True(t, ok, "graceful restart capability")
	assert.True(t, n, "notification (N) flag, RFC 8538")
	assert.True(t, r, "restart (R) flag: a new speaker process has restarted as far as its peers can tell")

	s1.kill(t)
	require.Eventually(t, func() bool {
		p4, s4 := holds(t, peer, "v4", "10.244.31.0/24")
		p6, s6 := holds(t, peer, "v6", "fd00:10:244:31::/64")
		return p4 && p6 && s4 && s6
	}, waitFor, 20*time.Millisecond, "the peer keeps the routes, stale, after the speaker died: %v", peer.routes(t, "v4"))

	// The restarted agent has a new pod CIDR: the peer ends up with the new
	// route, fresh, and drops the stale one at the End-of-RIB.
	spec.PodCIDRs = []string{"10.244.131.0/24", "fd00:10:244:31::/64"}
	s2 := startSpeaker(t)
	s2.apply(t, spec)
	require.Eventually(t, func() bool {
		got := peer.routes(t, "v4")
		r, ok := got[netip.MustParsePrefix("10.244.131.0/24")]
		p6, s6 := holds(t, peer, "v6", "fd00:10:244:31::/64")
		return len(got) == 1 && ok && !r.Stale && p6 && !s6
	}, waitFor, 20*time.Millisecond, "peer has %v %v", peer.routes(t, "v4"), peer.routes(t, "v6"))
	r, n, ok = peer.grFlags(t, local)
	assert.True(t, ok && r && n, "restarted speaker: R and N set")
}

// TestGracefulRestartExpires: when the speaker does not come back within the
// restart time, the peer flushes the routes.
func TestGracefulRestartExpires(t *testing.T) {
	local := netip.MustParseAddr("127.0.0.33")
	peer := startTestPeer(t, "127.0.0.34", 65034, peerOpts{neighbor: local, asn: 65033, restartTime: 120})
	s := startSpeaker(t)
	s.apply(t, speakerSpec{
		Policy:   testPolicy(65033, grNeighbor(peer, "127.0.0.33", 3*time.Second)),
		PodCIDRs: []string{"10.244.33.0/24"}, IPv4: local,
	})
	require.Eventually(t, func() bool { return peer.count("v4") == 1 }, waitFor, 20*time.Millisecond)
	s.kill(t)
	require.Eventually(t, func() bool {
		present, stale := holds(t, peer, "v4", "10.244.33.0/24")
		return !present || stale
	}, waitFor, 10*time.Millisecond)
	require.Eventually(t, func() bool { return peer.count("v4") == 0 }, waitFor, 50*time.Millisecond,
		"stale routes are flushed after the restart time")
}

// TestGracefulShutdownAndExplicitWithdrawal: a Manager whose Run ends
// (agent shutdown) leaves its routes to graceful restart; a new Manager
// refreshes them; an explicit nil policy withdraws at once although the
// restart time is long.
func TestGracefulShutdownAndExplicitWithdrawal(t *testing.T) {
	ctx := context.Background()
	local := netip.MustParseAddr("127.0.0.35")
	peer := startTestPeer(t, "127.0.0.36", 65036, peerOpts{neighbor: local, asn: 65035, restartTime: 120})
	policy := testPolicy(65035, grNeighbor(peer, "127.0.0.35", 10*time.Minute))
	state := testState(testNode("10.244.35.0/24"))
	state.IPv4 = local.AsSlice()

	m1, err := New(Config{})
	require.NoError(t, err)
	ctx1, stop1 := context.WithCancel(ctx)
	done1 := make(chan error, 1)
	go func() { done1 <- m1.Run(ctx1) }()
	require.Eventually(t, func() bool { return m1.ConfigurePeers(ctx, policy, state) == nil }, waitFor, time.Millisecond)
	waitEstablished(t, m1, peer.addr)
	require.Eventually(t, func() bool { return peer.count("v4") == 1 }, waitFor, 20*time.Millisecond)

	stop1()
	require.ErrorIs(t, <-done1, context.Canceled)
	require.Eventually(t, func() bool {
		present, stale := holds(t, peer, "v4", "10.244.35.0/24")
		return present && stale
	}, waitFor, 10*time.Millisecond, "shutdown without withdrawal: the peer keeps the route, stale")

	m2 := runManager(t, Config{})
	require.NoError(t, m2.ConfigurePeers(ctx, policy, state))
	require.Eventually(t, func() bool {
		present, stale := holds(t, peer, "v4", "10.244.35.0/24")
		return present && !stale
	}, waitFor, 20*time.Millisecond, "refreshed by the restarted manager")

	require.NoError(t, m2.ConfigurePeers(ctx, nil, nil))
	require.Eventually(t, func() bool { return peer.count("v4") == 0 }, waitFor, 20*time.Millisecond,
		"an explicit withdrawal flushes at once, not after the 10m restart time")
}

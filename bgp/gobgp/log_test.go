package gobgp

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogs: Config.Logger gets the manager's logs, each line with one
// component=bgp-gobgp, and GoBGP's own (subsystem=gobgp) at Warn and
// above only, as Config.Logger documents, also with the logger at Debug.
func TestLogs(t *testing.T) {
	ctx := context.Background()
	var logs syncBuffer
	peer := startTestPeer(t, "127.0.0.52", 65052, peerOpts{neighbor: netip.MustParseAddr("127.0.0.51"), asn: 65051})
	m, err := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	require.Eventually(t, func() bool { _, err := m.Peers(ctx); return err == nil }, waitFor, time.Millisecond)
	require.NoError(t, m.ConfigurePeers(ctx, testPolicy(65051, neighborOf(peer, "127.0.0.51")), testState(testNode("10.244.51.0/24"))))
	waitEstablished(t, m, peer.addr)
	require.NoError(t, m.ConfigurePeers(ctx, nil, nil)) // withdraw: the server stops
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Contains(t, logs.String(), "virtual router started", "the manager's own logs")
	for _, l := range lines {
		assert.Equal(t, 1, strings.Count(l, "component="), "one component: %s", l)
		assert.Contains(t, l, "component=bgp-gobgp")
		if strings.Contains(l, "subsystem=gobgp") {
			assert.True(t, strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR"), "GoBGP below Warn: %s", l)
		}
	}
}

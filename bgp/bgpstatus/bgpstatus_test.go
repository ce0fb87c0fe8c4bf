package bgpstatus_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/bgpstatus"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeKV records the writes.
type fakeKV struct {
	mu     sync.Mutex
	writes []string // keys
	values map[string][]byte
	fail   error
}

func (f *fakeKV) Put(_ context.Context, key string, value []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	if f.values == nil {
		f.values = map[string][]byte{}
	}
	f.writes = append(f.writes, key)
	f.values[key] = value
	return nil
}

func (f *fakeKV) get(key string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.values[key]
}

func (f *fakeKV) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.writes)
}

// status is a node status whose peer has received n routes.
func status(n int) *bgp.NodeStatus {
	return &bgp.NodeStatus{Node: "node-1", Source: "BGPClusterConfig/cc", Instances: []bgp.InstanceStatus{{Name: "main", LocalASN: 65001,
		Peers: []bgp.PeerStatus{{Name: "tor", PeerASN: 65000, State: bgp.SessionEstablished, Negotiated: []bgp.Family{bgp.IPv4Unicast},
			Received: map[bgp.Family]int{bgp.IPv4Unicast: n}, Uptime: time.Duration(n) * time.Second}}}}}
}

// TestPublisherWritesChangesAtABoundedRate: an unchanged status is not
// written again (uptime is not published), a change is written, and a
// stream of changes at most once per MinWriteInterval.
func TestPublisherWritesChangesAtABoundedRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		received := 1
		src := bgpstatus.SourceFunc(func(context.Context) (*bgp.NodeStatus, error) {
			mu.Lock()
			defer mu.Unlock()
			return status(received), nil
		})
		kv := &fakeKV{}
		p, err := bgpstatus.New("node-1", src, kv, bgpstatus.Config{Interval: 100 * time.Millisecond, MinWriteInterval: time.Second})
		require.NoError(t, err)
		assert.Equal(t, "/vswitchkit/bgpstatus/node-1", p.Key())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		synctest.Wait()
		require.Equal(t, 1, kv.count(), "the first status is written at once")
		var m bgpmodel.NodeStatus
		require.NoError(t, proto.Unmarshal(kv.get(p.Key()), &m))
		assert.Equal(t, "node-1", m.GetNode())
		assert.Equal(t, uint32(1), m.GetBgpInstances()[0].GetPeers()[0].GetRouteCount()[0].GetReceived())

		time.Sleep(5 * time.Second)
		assert.Equal(t, 1, kv.count(), "nothing changed: nothing written (uptime is not published)")

		// A change every 100ms for 10s: at most one write per second.
		start := time.Now()
		for range 100 {
			mu.Lock()
			received++
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
		elapsed := time.Since(start)
		writes := kv.count() - 1
		assert.LessOrEqual(t, writes, int(elapsed/time.Second)+1, "bounded by MinWriteInterval")
		assert.GreaterOrEqual(t, writes, int(elapsed/time.Second)-1, "but kept up to date")
		time.Sleep(2 * time.Second)
		require.NoError(t, proto.Unmarshal(kv.get(p.Key()), &m))
		assert.Equal(t, uint32(101), m.GetBgpInstances()[0].GetPeers()[0].GetRouteCount()[0].GetReceived(), "the last change arrives")
		assert.Equal(t, 101, p.Last().Instances[0].Peers[0].Received[bgp.IPv4Unicast])
		assert.EqualValues(t, kv.count(), p.Stats().Writes)

		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		require.ErrorIs(t, p.Run(context.Background()), bgpstatus.ErrAlreadyRunning)
	})
}

// TestPublisherFailures: failing writes are logged once, retried after a
// growing backoff (not every Interval: a cluster's publishers would hammer
// a failing etcd in step), and logged again when they succeed.
func TestPublisherFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs strings.Builder
		kv := &fakeKV{fail: errors.New("etcd down")}
		p, err := bgpstatus.New("node-1", bgpstatus.SourceFunc(func(context.Context) (*bgp.NodeStatus, error) { return status(1), nil }), kv,
			bgpstatus.Config{Interval: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
		// Waits of 1, 2, 4, 8, 16, 30, 30… s, each ±50%: 120 s hold 5
		// to 11 attempts (every Interval: 120).
		errs := p.Stats().Errors
		assert.GreaterOrEqual(t, errs, uint64(5))
		assert.LessOrEqual(t, errs, uint64(11))
		kv.mu.Lock()
		kv.fail = nil
		kv.mu.Unlock()
		time.Sleep(bgpstatus.MaxRetryInterval * 3 / 2)
		synctest.Wait()
		assert.Equal(t, 1, kv.count())
		assert.Contains(t, logs.String(), "publishing the BGP status again")
		// Back to every Interval after the success.
		reads := p.Stats().Reads
		time.Sleep(10 * time.Second)
		synctest.Wait()
		assert.InDelta(t, 10, p.Stats().Reads-reads, 1, "reads every Interval again")
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
}

func TestNewChecks(t *testing.T) {
	_, err := bgpstatus.New("Bad_Name", nil, nil, bgpstatus.Config{Interval: -1})
	require.Error(t, err)
	for _, s := range []string{"node name", "source is nil", "writer is nil", "Interval"} {
		assert.ErrorContains(t, err, s)
	}
}

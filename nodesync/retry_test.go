package nodesync_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
)

// logRecords is a slog.Handler that keeps "LEVEL message" of each record.
type logRecords struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Level.String()+" "+r.Message)
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

func (l *logRecords) warnings() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, m := range l.msgs {
		if strings.HasPrefix(m, "WARN") {
			out = append(out, m)
		}
	}
	return out
}

// TestRetriesLoggedOnce: failed DB requests that Run retries are logged
// when the failures start and when they end, not per retry (CONTRIBUTING
// R10).
func TestRetriesLoggedOnce(t *testing.T) {
	db := nodesynctest.NewMemDB()
	var mu sync.Mutex
	fails := 5
	db.SetHooks(nodesynctest.Hooks{Txn: func(string) error {
		mu.Lock()
		defer mu.Unlock()
		if fails > 0 {
			fails--
			return nodesynctest.ErrInjected
		}
		return nil
	}})
	logs := &logRecords{}
	h := startHarness(t, db, "node-a", nodesync.Config{RetryBackoff: time.Microsecond, Logger: slog.New(logs)})
	require.Equal(t, uint32(1), h.ns.GetNodeID())
	assert.Equal(t, []string{"WARN allocating the node ID failing, retrying", "WARN allocating the node ID recovered"}, logs.warnings())
}

// TestRetriesAreSpread: nodes whose requests fail at the same moment (an
// etcd outage) do not come back at the same moment: their retries are
// jittered. The randomness is the backoff's own (not seedable); the
// bounds fail with a probability below 1e-6.
func TestRetriesAreSpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 30
		db := nodesynctest.NewMemDB()
		var mu sync.Mutex
		var retries []time.Duration
		start := time.Now()
		db.SetHooks(nodesynctest.Hooks{Txn: func(key string) error {
			if !strings.HasSuffix(key, "alloc/ticket") {
				return nil // the claim that follows a ticket at once
			}
			mu.Lock()
			defer mu.Unlock()
			if d := time.Since(start); d == 0 {
				return nodesynctest.ErrInjected // every first attempt fails together
			} else {
				retries = append(retries, d)
			}
			return nil
		}})
		for i := range n {
			launchHarness(t, db, fmt.Sprintf("node-%02d", i), nodesync.Config{RetryBackoff: time.Second}, &controllertest.EventRecorder{})
		}
		time.Sleep(2 * time.Second)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, retries, n)
		slices.Sort(retries)
		assert.Less(t, retries[0], 900*time.Millisecond, "the earliest retry (jitter ±50%: each of 30 is above 900ms with p=0.6)")
		assert.Greater(t, retries[n-1], 1100*time.Millisecond, "the latest retry")
		t.Logf("retries after %v", retries)
		assert.Greater(t, len(slices.Compact(retries)), n/2, "mostly distinct instants")
	})
}

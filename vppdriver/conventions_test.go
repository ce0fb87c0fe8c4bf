package vppdriver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"

	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// TestRunLifecycle: Run returns its context's error (so a requested stop
// is told from a failure), and a second Run is refused with the module's
// one ErrAlreadyRunning (CONTRIBUTING R4).
func TestRunLifecycle(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	d, err := vppdriver.New(func() adapter.VppAPI { return vpp.NewAdapter() }, testCfg())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	require.Eventually(t, d.Connected, 10*time.Second, time.Millisecond)

	err = d.Run(context.Background())
	require.ErrorIs(t, err, vppdriver.ErrAlreadyRunning)
	assert.ErrorIs(t, err, lifecycle.ErrAlreadyRunning, "one value for the module")
	assert.EqualError(t, err, "vppdriver: Run called more than once")

	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	assert.False(t, d.Connected(), "disconnected before Run returned")

	// Stopped by a deadline, while VPP is away.
	vpp.Stop()
	d, err = vppdriver.New(func() adapter.VppAPI { return vpp.NewAdapter() }, testCfg())
	require.NoError(t, err)
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, d.Run(ctx), context.DeadlineExceeded)
}

// TestConfig: zero fields take their defaults; negative durations and
// counts are errors, every bad field named at once (CONTRIBUTING R7).
func TestConfig(t *testing.T) {
	newAdapter := func() adapter.VppAPI { return nil }
	_, err := vppdriver.New(newAdapter, vppdriver.Config{})
	require.NoError(t, err)

	tests := []struct {
		name string
		cfg  vppdriver.Config
		bad  []string
	}{
		{"one negative duration", vppdriver.Config{RequestTimeout: -time.Second}, []string{"RequestTimeout -1s is negative"}},
		{"all of them", vppdriver.Config{RequestTimeout: -1, Window: -1, RetryInitial: -1, RetryMax: -1, ReconnectInterval: -1, HealthInterval: -1},
			[]string{"RequestTimeout", "Window -1 is negative", "RetryInitial", "RetryMax", "ReconnectInterval", "HealthInterval"}},
		{"RetryMax below RetryInitial is raised, not an error", vppdriver.Config{RetryInitial: time.Second, RetryMax: time.Millisecond}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := vppdriver.New(newAdapter, tc.cfg)
			if tc.bad == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, vppdriver.ErrInvalidConfig)
			for _, b := range tc.bad {
				assert.ErrorContains(t, err, b)
			}
		})
	}
}

// logBuffer collects JSON log records.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the records logged so far, and for each how many
// "component" attributes it has.
func (b *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		r["#components"] = strings.Count(line, `"component":`)
		out = append(out, r)
	}
	return out
}

func messages(recs []map[string]any, level string) []string {
	var out []string
	for _, r := range recs {
		if r["level"] == level {
			out = append(out, r["msg"].(string))
		}
	}
	return out
}

// TestConnectionLogs: every record carries component=vppdriver once, with
// typed attributes and no message prefix; VPP being away is a degraded
// state logged at Warn once when it begins and once when it ends, however
// many connect attempts fail in between (CONTRIBUTING R9, R10).
func TestConnectionLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logBuffer
		vpp := vppsim.New(vppsim.Config{})
		vpp.Stop()
		cfg := testCfg()
		cfg.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		d, err := vppdriver.New(func() adapter.VppAPI { return vpp.NewAdapter() }, cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()

		time.Sleep(50 * cfg.ReconnectInterval) // about 50 failed attempts
		synctest.Wait()
		recs := logs.records(t)
		assert.Equal(t, []string{"cannot connect to VPP; retrying"}, messages(recs, "WARN"))
		assert.GreaterOrEqual(t, len(messages(recs, "DEBUG")), 40, "the other attempts at Debug")

		vpp.Start()
		time.Sleep(2 * cfg.ReconnectInterval)
		synctest.Wait()
		require.True(t, d.Connected())
		vpp.Restart() // the connection is lost: noticed by the health probe
		time.Sleep(10 * cfg.HealthInterval)
		synctest.Wait()
		require.True(t, d.Connected())
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)

		recs = logs.records(t)
		assert.Equal(t, []string{
			"cannot connect to VPP; retrying", "connected to VPP again; resyncing",
			"lost the VPP connection; reconnecting", "connected to VPP again; resyncing",
		}, messages(recs, "WARN"))
		for _, r := range recs {
			assert.Equal(t, 1, r["#components"], "%v", r)
			assert.Equal(t, "vppdriver", r["component"])
			assert.False(t, strings.HasPrefix(r["msg"].(string), "vppdriver"), "no message prefix: %v", r["msg"])
		}
		assert.Contains(t, recs[0], "error")
	})
}

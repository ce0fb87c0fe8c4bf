package watcher

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/internal/retry"
)

func TestPusher(t *testing.T) {
	for _, tc := range []struct {
		name     string
		refusals int   // PushEvent fails this many times, then succeeds
		pushErr  error // the failure
		giveUp   time.Duration
		wantErr  error
		wantWait time.Duration // fake time spent
		wantRecs int
	}{
		{name: "accepted at once", wantRecs: 1},
		{name: "queue full three times", refusals: 3, pushErr: controller.ErrQueueFull, wantWait: 7 * time.Millisecond, wantRecs: 1},
		{name: "backoff capped", refusals: 10, pushErr: controller.ErrQueueFull,
			wantWait: (1 + 2 + 4 + 8 + 16 + 32 + 64 + 100 + 100 + 100) * time.Millisecond, wantRecs: 1},
		{name: "other errors are retried too", refusals: 1, pushErr: errRefused, wantWait: time.Millisecond, wantRecs: 1},
		// After 31 ms the next wait (32 ms) would end past 50 ms: give up
		// instead of waiting past the bound.
		{name: "gives up", refusals: 1 << 30, pushErr: controller.ErrQueueFull, giveUp: 50 * time.Millisecond,
			wantErr: errGaveUp, wantWait: (1 + 2 + 4 + 8 + 16) * time.Millisecond},
		{name: "loop stopped", refusals: 1, pushErr: controller.ErrStopped, wantErr: controller.ErrStopped},
		{name: "context ends the retries", refusals: 1 << 30, pushErr: controller.ErrQueueFull,
			wantErr: context.DeadlineExceeded, wantWait: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				left := tc.refusals
				rec := &controllertest.EventRecorder{PushErr: func(controller.Event) error {
					if left > 0 {
						left--
						return tc.pushErr
					}
					return nil
				}}
				var c counters
				retried := 0
				p := pusher{loop: rec, min: defaultPushMinBackoff, max: defaultPushMaxBackoff, stats: &c,
					onRefused: func(controller.Event, error) { retried++ }}
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				begin := time.Now()
				err := p.push(ctx, controller.NewDBResync(), tc.giveUp)
				if tc.wantErr == nil {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, tc.wantErr)
				}
				assert.Equal(t, tc.wantWait, time.Since(begin))
				assert.Equal(t, tc.wantRecs, rec.Len())
				if tc.refusals > 0 && tc.pushErr != controller.ErrStopped {
					assert.Equal(t, 1, retried, "the first refusal is reported once")
					assert.Positive(t, c.pushRetries.Load())
				}
			})
		})
	}
}

func TestBackoff(t *testing.T) {
	bases := []time.Duration{100, 200, 400, 800, 1000, 1000}
	// Many runs: every wait lies within ±20% of its base, and the jitter
	// really spreads the waits.
	lowest, highest := make([]time.Duration, len(bases)), make([]time.Duration, len(bases))
	for run := range 200 {
		b := retry.NewBackoff(100*time.Millisecond, time.Second)
		if run%2 == 1 {
			for range 3 {
				b.NextBackOff()
			}
			b.Reset() // starts over from the minimum
		}
		for i, base := range bases {
			d := b.NextBackOff()
			base *= time.Millisecond
			require.InDelta(t, float64(base), float64(d), 0.2*float64(base)+1, "run %d step %d", run, i)
			if run == 0 || d < lowest[i] {
				lowest[i] = d
			}
			highest[i] = max(highest[i], d)
		}
	}
	for i, base := range bases {
		base *= time.Millisecond
		assert.Less(t, lowest[i], base-base/10, "step %d: jitter below the base", i)
		assert.Greater(t, highest[i], base+base/10, "step %d: jitter above the base", i)
	}
}

// TestPusherWithoutGiveUpRetriesPastTheLibraryDefault: giveUp 0 retries
// until ctx ends, also past the backoff library's default limit of 15
// minutes.
func TestPusherWithoutGiveUpRetriesPastTheLibraryDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		rec := &controllertest.EventRecorder{PushErr: func(controller.Event) error {
			if time.Since(begin) < 20*time.Minute {
				return controller.ErrQueueFull
			}
			return nil
		}}
		var c counters
		p := pusher{loop: rec, min: defaultPushMinBackoff, max: defaultPushMaxBackoff, stats: &c}
		require.NoError(t, p.push(t.Context(), controller.NewDBResync(), 0))
		assert.Equal(t, 1, rec.Len())
		assert.GreaterOrEqual(t, time.Since(begin), 20*time.Minute)
	})
}

// TestPusherReportsRefusalOncePerEpisode: a loop that keeps refusing is a
// degraded state, reported once when it starts (the first refusal) and
// once when it ends (the first event accepted after refusals), not once
// per event (CONTRIBUTING R10).
func TestPusherReportsRefusalOncePerEpisode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var full atomic.Bool
		rec := &controllertest.EventRecorder{PushErr: func(controller.Event) error {
			if full.Load() {
				return controller.ErrQueueFull
			}
			return nil
		}}
		var c counters
		var got []string
		p := pusher{loop: rec, min: defaultPushMinBackoff, max: defaultPushMaxBackoff, stats: &c,
			onRefused:  func(ev controller.Event, _ error) { got = append(got, "refused "+ev.GetName()) },
			onAccepted: func() { got = append(got, "accepted") }}
		require.NoError(t, p.push(t.Context(), controller.NewDBResync(), 0), "the loop is accepting")
		// Three changes given up in a row, then a DBResync accepted after
		// more refusals: one episode.
		full.Store(true)
		for range 3 {
			require.ErrorIs(t, p.push(t.Context(), &controller.KubeStateChange{Key: "k"}, 10*time.Millisecond), errGaveUp)
		}
		time.AfterFunc(time.Second, func() { full.Store(false) })
		require.NoError(t, p.push(t.Context(), controller.NewDBResync(), 0))
		// Accepted at once: nothing to report.
		require.NoError(t, p.push(t.Context(), controller.NewDBResync(), 0))
		// A second episode.
		full.Store(true)
		time.AfterFunc(time.Second, func() { full.Store(false) })
		require.NoError(t, p.push(t.Context(), &controller.KubeStateChange{Key: "k"}, 0))
		assert.Equal(t, []string{"refused Kubernetes State Change", "accepted", "refused Kubernetes State Change", "accepted"}, got)
	})
}

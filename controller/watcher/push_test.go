package watcher

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
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
		{name: "gives up", refusals: 1 << 30, pushErr: controller.ErrQueueFull, giveUp: 50 * time.Millisecond,
			wantErr: errGaveUp, wantWait: (1 + 2 + 4 + 8 + 16 + 32) * time.Millisecond},
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
					onRetry: func(controller.Event, error) { retried++ }}
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
	b := backoff{min: 100 * time.Millisecond, max: time.Second}
	for i, base := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		d := b.next()
		base *= time.Millisecond
		assert.InDelta(t, float64(base), float64(d), 0.2*float64(base)+1, "step %d", i)
	}
	b.reset()
	assert.InDelta(t, float64(100*time.Millisecond), float64(b.next()), float64(20*time.Millisecond)+1)
}

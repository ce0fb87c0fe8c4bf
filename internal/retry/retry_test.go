package retry

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		assert.NoError(t, Sleep(context.Background(), time.Second))
		assert.Equal(t, time.Second, time.Since(start))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.ErrorIs(t, Sleep(ctx, time.Hour), context.DeadlineExceeded)
		assert.Equal(t, 2*time.Second, time.Since(start))
	})
}

func TestNewBackoff(t *testing.T) {
	b := NewBackoff(100*time.Millisecond, time.Second)
	for i, base := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		d := b.NextBackOff()
		base *= time.Millisecond
		assert.InDelta(t, float64(base), float64(d), 0.2*float64(base)+1, "wait %d", i)
	}
	b.Reset()
	assert.InDelta(t, float64(100*time.Millisecond), float64(b.NextBackOff()), float64(20*time.Millisecond)+1)
}

// Package retry holds the waiting helpers that the module's packages share:
// exponential backoff policies (NewBackoff; NewClientBackoff for the
// clients of a server shared by many), a sleep that ends with its context,
// and Degraded, which logs a retried failure once when it starts and once
// when it ends.
package retry

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// NewBackoff returns an exponential backoff from min, doubling up to max,
// with ±20% jitter. Call NextBackOff for the next wait and Reset after a
// success. It is owned by one goroutine.
func NewBackoff(min, max time.Duration) *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: min, RandomizationFactor: 0.2, Multiplier: 2, MaxInterval: max}
}

// Sleep waits for d or until ctx is done; then it returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

package retry

import (
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// NewClientBackoff returns the backoff of a client of a server that many
// clients share (every agent of a cluster against one etcd): exponential
// from min, doubling up to max, with ±50% jitter. Clients that failed at
// the same moment (a server restart, requests that timed out together
// under load) thus spread their retries over a window as wide as the wait
// itself instead of coming back in synchronized waves. Call NextBackOff
// for the next wait and Reset after a success. It is owned by one
// goroutine.
func NewClientBackoff(min, max time.Duration) *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: min, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: max}
}

// Degraded logs a failing operation that its caller retries, the way
// CONTRIBUTING.md R10 asks: one Warn when the failures start, one when the
// operation succeeds again, nothing per retry. It is owned by one
// goroutine; create it with [NewDegraded].
type Degraded struct {
	log   *slog.Logger
	what  string
	since time.Time
	fails int
}

// NewDegraded returns a Degraded that logs to log about what, e.g.
// "connecting to etcd".
func NewDegraded(log *slog.Logger, what string) *Degraded {
	return &Degraded{log: log, what: what}
}

// Fail records a failed attempt that will be retried in wait. The first
// failure after a success (or ever) logs "<what> failing, retrying" with
// err and wait; later ones only count.
func (d *Degraded) Fail(err error, wait time.Duration) {
	if d.fails == 0 {
		d.since = time.Now()
		d.log.Warn(d.what+" failing, retrying", slog.Any("error", err), slog.Duration("in", wait))
	}
	d.fails++
}

// OK records a success: after failures it logs "<what> recovered" with
// the number of failures and how long they lasted, and starts over.
func (d *Degraded) OK() {
	if d.fails == 0 {
		return
	}
	d.log.Warn(d.what+" recovered", slog.Int("failures", d.fails), slog.Duration("after", time.Since(d.since)))
	d.fails = 0
}

// Failing reports whether failures were recorded since the last success.
func (d *Degraded) Failing() bool { return d.fails > 0 }

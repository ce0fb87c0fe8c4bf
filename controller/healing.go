package controller

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// healing is the state of healing resyncs after errors. It is owned by the
// Run goroutine.
type healing struct {
	pending   bool  // a healing resync is scheduled (at most one, I5)
	err       error // the error it heals
	timer     *time.Timer
	failures  int           // healing resyncs that failed in a row
	since     time.Time     // when the first of them failed
	nextDelay time.Duration // backoff of the next one after a failure
}

// scheduleHealing arranges a healing resync after err, as decide
// decided. immediate asks for no delay (an abort), unless healing already
// failed. failedHealing is set when err comes from a healing resync: the
// backoff grows and, after Config.MaxHealingAttempts failures in a row,
// the loop stops.
func (l *Loop) scheduleHealing(err error, immediate, failedHealing bool) {
	h := &l.heal
	if failedHealing {
		l.stats.healFailed.Add(1)
		h.failures++
		if h.failures == 1 {
			h.since = time.Now()
		}
		l.stats.healFailing.Store(int64(h.failures))
		l.health.setHealing(h.failures, h.since, err)
		if l.cfg.MaxHealingAttempts > 0 && h.failures >= l.cfg.MaxHealingAttempts {
			l.fatal = fmt.Errorf("%w (%d attempts): %w", ErrHealingFailed, h.failures, err)
			return
		}
	}
	if h.pending {
		return
	}
	delay := l.cfg.HealingDelay
	if h.failures > 0 {
		delay = h.nextDelay
	}
	if immediate && h.failures == 0 {
		delay = 0
	}
	h.nextDelay = min(max(delay, l.cfg.HealingDelay)*2, l.cfg.MaxHealingDelay)
	// The retries of a failed healing resync wait ±50%: a resync reads
	// through the agent's clients (the IPAM store, nodesync), and the
	// agents of a cluster whose resyncs failed together against an
	// overloaded etcd must not come back in step.
	if delay > 0 && h.failures > 0 {
		delay = time.Duration(float64(delay) * (0.5 + rand.Float64()))
	}
	h.pending = true
	h.err = err
	l.stats.healScheduled.Add(1)
	if h.timer == nil {
		h.timer = time.NewTimer(delay)
	} else {
		h.timer.Reset(delay)
	}
	// Warn when the failures start; the later attempts of the same streak
	// at Debug, the recovery at Info (CONTRIBUTING R10).
	level := slog.LevelWarn
	if h.failures > 0 {
		level = slog.LevelDebug
	}
	l.log.LogAttrs(context.Background(), level, "healing resync scheduled", slog.Duration("delay", delay),
		slog.Int("failedAttempts", h.failures), slog.Any("error", err))
}

// healingSucceeded resets the backoff after a resync without a transient
// error.
func (l *Loop) healingSucceeded() {
	h := &l.heal
	if h.failures > 0 {
		l.log.Info("healing resync succeeded", slog.Int("failedAttempts", h.failures))
	}
	h.failures = 0
	h.nextDelay = 0
	l.stats.healFailing.Store(0)
	l.health.setHealing(0, time.Time{}, nil)
}

// healC returns the channel of the pending healing timer, or nil.
func (l *Loop) healC() <-chan time.Time {
	if !l.heal.pending {
		return nil
	}
	return l.heal.timer.C
}

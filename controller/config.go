package controller

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Config configures a [Loop]. The zero value is valid: every field documents
// the default that a zero value selects.
type Config struct {
	// Logger receives the loop's logs. Default: discard.
	Logger *slog.Logger

	// QueueSize bounds the number of events waiting for processing (events
	// pushed from outside, and separately follow-up events pushed by
	// handlers). PushEvent returns ErrQueueFull beyond it. Default: 4096.
	QueueSize int

	// StartupResyncDeadline is how long the loop waits for the first
	// DBResync before Healthy reports ErrStartupResyncMissing. Events other
	// than DBResync keep waiting either way. Default: 30s; negative: never.
	StartupResyncDeadline time.Duration

	// HealingDelay is the delay before the first healing resync after a
	// failed event; it doubles after every failed healing resync up to
	// MaxHealingDelay. An AbortEventError schedules healing immediately.
	// Default: 1s.
	HealingDelay time.Duration

	// MaxHealingDelay caps the backoff of healing resyncs. Default: 1m.
	MaxHealingDelay time.Duration

	// MaxHealingAttempts is the number of healing resyncs that may fail in a
	// row before the loop stops with an error wrapping ErrHealingFailed.
	// Default: 5; negative: never give up.
	MaxHealingAttempts int

	// PeriodicHealingInterval, when positive, runs a periodic healing
	// resync (a DownstreamResync: no handler calls, the southbound re-applies
	// the committed state) at this interval. Default: off.
	PeriodicHealingInterval time.Duration

	// HistorySize is the number of processed events kept in the history.
	// Default: 1000; negative: no history.
	HistorySize int

	// CommitTimeout, when positive, bounds every Southbound.Commit call.
	// Default: no bound other than the Run context.
	CommitTimeout time.Duration

	// ShutdownTimeout bounds the Shutdown event (pushed, or processed after
	// the Run context was cancelled): its commit gets a context that ends
	// ShutdownTimeout after the event started, and once that passed no
	// further handler is called and nothing is committed. A handler call
	// in progress cannot be interrupted. Default: 30s.
	ShutdownTimeout time.Duration
}

// withDefaults returns the config with defaults filled in, or an error
// naming every invalid field.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.QueueSize < 0 {
		errs = append(errs, fmt.Errorf("QueueSize %d is negative", c.QueueSize))
	} else if c.QueueSize == 0 {
		c.QueueSize = 4096
	}
	if c.StartupResyncDeadline == 0 {
		c.StartupResyncDeadline = 30 * time.Second
	}
	if c.HealingDelay < 0 {
		errs = append(errs, fmt.Errorf("HealingDelay %v is negative", c.HealingDelay))
	} else if c.HealingDelay == 0 {
		c.HealingDelay = time.Second
	}
	if c.MaxHealingDelay < 0 {
		errs = append(errs, fmt.Errorf("MaxHealingDelay %v is negative", c.MaxHealingDelay))
	} else if c.MaxHealingDelay == 0 {
		c.MaxHealingDelay = time.Minute
	}
	if c.MaxHealingDelay < c.HealingDelay {
		c.MaxHealingDelay = c.HealingDelay
	}
	if c.MaxHealingAttempts == 0 {
		c.MaxHealingAttempts = 5
	}
	if c.PeriodicHealingInterval < 0 {
		errs = append(errs, fmt.Errorf("PeriodicHealingInterval %v is negative", c.PeriodicHealingInterval))
	}
	if c.HistorySize == 0 {
		c.HistorySize = 1000
	}
	if c.CommitTimeout < 0 {
		errs = append(errs, fmt.Errorf("CommitTimeout %v is negative", c.CommitTimeout))
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("ShutdownTimeout %v is negative", c.ShutdownTimeout))
	} else if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("controller: invalid config: %w", err)
	}
	return c, nil
}

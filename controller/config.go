package controller

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/vswitchkit/vswitchkit/internal/cfgutil"
)

// Config configures a [Loop]. The zero value is valid: every field documents
// the default that a zero value selects. A negative duration or count is
// an error, except for the fields whose doc says what negative means
// ("off": never, no history, never give up).
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
	// MaxHealingDelay, and those later waits are jittered by ±50% (so
	// that a cluster's agents whose resyncs failed together do not retry
	// in step). An AbortEventError schedules healing immediately.
	// Default: 1s.
	HealingDelay time.Duration

	// MaxHealingDelay caps the backoff of healing resyncs. Default: 1m.
	MaxHealingDelay time.Duration

	// MaxHealingAttempts, when positive, is the number of healing resyncs
	// that may fail in a row before the loop stops with an error wrapping
	// ErrHealingFailed. Default (zero or negative): never give up — the
	// loop keeps healing with the capped, jittered backoff while Healthy
	// reports ErrHealing. A resync fails while what it reads is unreachable
	// (an etcd without quorum, starved by a cluster's cold start), and an
	// agent that gave up would be restarted only to read everything again.
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
	// the Run context was cancelled): its handlers (ContextOf) and its
	// commit get a context that ends ShutdownTimeout after the event
	// started, and once that passed no further handler is called and
	// nothing is committed. It also bounds the event in progress when the
	// Run context is cancelled: its handlers' context is cancelled
	// ShutdownTimeout after that. A handler call in progress cannot be
	// interrupted. Default: 30s.
	ShutdownTimeout time.Duration
}

// withDefaults returns the config with defaults filled in, or an error
// naming every invalid field (CONTRIBUTING R7: zero means the default;
// negative means "off" for StartupResyncDeadline, MaxHealingAttempts and
// HistorySize, and is an error for every other field).
func (c Config) withDefaults() (Config, error) {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	errs := cfgutil.Ints([]cfgutil.Int{
		{Name: "QueueSize", Value: &c.QueueSize, Default: 4096},
		{Name: "MaxHealingAttempts", Value: &c.MaxHealingAttempts, Default: -1, Off: true},
		{Name: "HistorySize", Value: &c.HistorySize, Default: 1000, Off: true},
	})
	errs = append(errs, cfgutil.Durations([]cfgutil.Duration{
		{Name: "StartupResyncDeadline", Value: &c.StartupResyncDeadline, Default: 30 * time.Second, Off: true},
		{Name: "HealingDelay", Value: &c.HealingDelay, Default: time.Second},
		{Name: "MaxHealingDelay", Value: &c.MaxHealingDelay, Default: time.Minute},
		{Name: "PeriodicHealingInterval", Value: &c.PeriodicHealingInterval}, // zero: off
		{Name: "CommitTimeout", Value: &c.CommitTimeout},                     // zero: no bound
		{Name: "ShutdownTimeout", Value: &c.ShutdownTimeout, Default: 30 * time.Second},
	})...)
	if c.MaxHealingDelay < c.HealingDelay {
		c.MaxHealingDelay = c.HealingDelay
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("controller: invalid config: %w", err)
	}
	return c, nil
}

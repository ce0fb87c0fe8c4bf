package vppdriver

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/vswitchkit/vswitchkit/internal/cfgutil"
)

// Config configures a [Driver]. The zero value is valid: a zero field
// selects the default its doc names; a negative duration or count is a
// configuration error ([New] reports every bad field at once). It is a
// plain value; New copies it.
type Config struct {
	// Logger receives driver logs; New adds component=vppdriver. Default:
	// discard.
	Logger *slog.Logger

	// RequestTimeout bounds the wait for every window of Window replies to
	// pipelined requests and every window of dumps (a late reply is a
	// transport failure: the driver reconnects). Default: 5s.
	RequestTimeout time.Duration

	// Window is the number of requests sent on a stream before their replies
	// are read. Default: 256.
	Window int

	// RetryInitial and RetryMax bound the exponential backoff of a key's
	// retriable failures: attempt n+1 follows attempt n after
	// RetryInitial*2^(n-1), at most RetryMax, without jitter (the retries
	// go to the local VPP, there is no herd to spread). Defaults: 100ms and
	// 10s; a RetryMax below RetryInitial is raised to it.
	RetryInitial time.Duration
	RetryMax     time.Duration

	// FailingAfter is the number of failed attempts in a row after which
	// a key counts as failing: it is logged at Warn (once, and once more
	// when it is configured again, deleted or given a new value, never
	// per retry), counted in Stats.Failing and named by Driver.Degraded.
	// A permanent failure counts at once. Default: 3 (with the default
	// backoff, 300ms of failing).
	FailingAfter int

	// ReconnectInterval is the wait between connect attempts. Default: 500ms.
	ReconnectInterval time.Duration

	// HealthInterval is the period of the control_ping health probe that
	// detects a dead or restarted VPP. Default: 1s.
	HealthInterval time.Duration

	// TagPrefix marks objects the driver owns: interface tags and IP table
	// names start with it. Default: "vsk:".
	TagPrefix string
}

// withDefaults fills in the defaults and returns an error (wrapping
// ErrInvalidConfig) that names every bad field.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	errs = append(errs, cfgutil.Durations([]cfgutil.Duration{
		{Name: "RequestTimeout", Value: &c.RequestTimeout, Default: 5 * time.Second},
		{Name: "RetryInitial", Value: &c.RetryInitial, Default: 100 * time.Millisecond},
		{Name: "RetryMax", Value: &c.RetryMax, Default: 10 * time.Second},
		{Name: "ReconnectInterval", Value: &c.ReconnectInterval, Default: 500 * time.Millisecond},
		{Name: "HealthInterval", Value: &c.HealthInterval, Default: time.Second},
	})...)
	errs = append(errs, cfgutil.Ints([]cfgutil.Int{
		{Name: "Window", Value: &c.Window, Default: 256},
		{Name: "FailingAfter", Value: &c.FailingAfter, Default: 3},
	})...)
	if c.RetryMax < c.RetryInitial {
		c.RetryMax = c.RetryInitial
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.TagPrefix == "" {
		c.TagPrefix = "vsk:"
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return c, nil
}

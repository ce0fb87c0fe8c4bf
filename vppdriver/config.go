package vppdriver

import (
	"log/slog"
	"time"
)

// Config configures a [Driver]. The zero value is valid.
type Config struct {
	// Logger receives driver logs. Default: discard.
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

	// ReconnectInterval is the wait between connect attempts. Default: 500ms.
	ReconnectInterval time.Duration

	// HealthInterval is the period of the control_ping health probe that
	// detects a dead or restarted VPP. Default: 1s.
	HealthInterval time.Duration

	// TagPrefix marks objects the driver owns: interface tags and IP table
	// names start with it. Default: "vsk:".
	TagPrefix string
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.Window <= 0 {
		c.Window = 256
	}
	if c.RetryInitial <= 0 {
		c.RetryInitial = 100 * time.Millisecond
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 10 * time.Second
	}
	if c.RetryMax < c.RetryInitial {
		c.RetryMax = c.RetryInitial
	}
	if c.ReconnectInterval <= 0 {
		c.ReconnectInterval = 500 * time.Millisecond
	}
	if c.HealthInterval <= 0 {
		c.HealthInterval = time.Second
	}
	if c.TagPrefix == "" {
		c.TagPrefix = "vsk:"
	}
	return c
}

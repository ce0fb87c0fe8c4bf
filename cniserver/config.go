package cniserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
	"github.com/vswitchkit/vswitchkit/internal/cfgutil"
)

// DefaultSocketPath is where the server listens and the plugin connects
// when neither is configured otherwise.
const DefaultSocketPath = "/run/vswitchkit/cni.sock"

// Config configures a [Server]. The zero value is valid: every field
// documents the default that its zero value selects. It is a plain value,
// not safe for concurrent modification; New copies it.
type Config struct {
	// SocketPath is the unix socket the server listens on; its directory is
	// created if missing. Default: DefaultSocketPath. The plugin finds it
	// in the network configuration ("agentSocket"), with the same default.
	SocketPath string

	// InterfaceType is the interface type of pods that
	// InterfaceTypeFor does not decide. Default: podiface.Default, which
	// lets the pod handler choose (see the package documentation for how
	// the server prepares an af_packet veth pair in that case).
	InterfaceType podiface.Type

	// InterfaceTypeFor, if set, picks the interface type of one pod, e.g.
	// from its podiface.TypeAnnotation in the agent's Kubernetes state.
	// It is called for every ADD of a new attachment, from the request's
	// goroutine; returning podiface.Default falls back to
	// InterfaceType, an error fails the ADD (CNI error code 7 for an
	// error wrapping ErrInvalidConfig, else 11). Default: nil.
	InterfaceTypeFor func(ctx context.Context, pod kubemodel.PodID) (podiface.Type, error)

	// Ready tells STATUS whether the agent can serve ADD: nil means ready,
	// an error is reported with CNI error code 50 (51 if it wraps
	// ErrLimitedConnectivity). Typically it reports a missing start-up
	// resync. Default: nil, always ready while Run serves.
	Ready func(ctx context.Context) error

	// MTU, if positive, is set on the veth pairs and pod interfaces the
	// server configures. Default (zero): the kernel's (1500). Negative is
	// an error.
	MTU int

	// RequestTimeout bounds one request (the plugin bounds it too, and a
	// request ends when the plugin goes away). Default: 2 minutes.
	RequestTimeout time.Duration

	// CleanupTimeout bounds the undoing of a failed or abandoned ADD, which
	// runs even after the request ended. Default: 1 minute.
	CleanupTimeout time.Duration

	// Logger receives the server's logs. Default: discard.
	Logger *slog.Logger
}

// ErrInvalidConfig is wrapped by every error of [New] about its Config, and
// may be wrapped by Config.InterfaceTypeFor for a pod whose configuration
// is wrong.
var ErrInvalidConfig = errors.New("cniserver: invalid config")

func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.SocketPath == "" {
		c.SocketPath = DefaultSocketPath
	} else if !filepath.IsAbs(c.SocketPath) {
		errs = append(errs, fmt.Errorf("SocketPath %q is not absolute", c.SocketPath))
	}
	if _, err := podiface.ParseType(string(c.InterfaceType)); err != nil {
		errs = append(errs, fmt.Errorf("InterfaceType: %w", err))
	}
	errs = append(errs, cfgutil.Ints([]cfgutil.Int{{Name: "MTU", Value: &c.MTU}})...) // zero: the kernel's
	if c.MTU > 65535 {
		errs = append(errs, fmt.Errorf("MTU %d out of range", c.MTU))
	}
	errs = append(errs, cfgutil.Durations([]cfgutil.Duration{
		{Name: "RequestTimeout", Value: &c.RequestTimeout, Default: 2 * time.Minute},
		{Name: "CleanupTimeout", Value: &c.CleanupTimeout, Default: time.Minute},
	})...)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return c, nil
}

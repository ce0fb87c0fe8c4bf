package vppdriver

import (
	"errors"
	"fmt"

	"go.fd.io/govpp/api"

	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

var (
	// ErrNotConnected: VPP is not connected; the desired state is kept and
	// applied after the next connect.
	ErrNotConnected = errors.New("vppdriver: not connected to VPP")

	// ErrIncompatible: VPP lacks some of the binary-API messages the driver
	// uses, or has them with another CRC. The error names them.
	ErrIncompatible = errors.New("vppdriver: VPP binary API incompatible")

	// ErrInvalidValue: a key or value of a commit is not a valid model.
	ErrInvalidValue = errors.New("vppdriver: invalid value")

	// ErrTransport: a request could not be sent or its reply did not arrive
	// in time; the driver reconnects and resyncs.
	ErrTransport = errors.New("vppdriver: VPP transport failure")

	// ErrNoSuchInterface: VPP has no interface of the name that an
	// EXISTING interface adopts (retried: it may appear, e.g. after VPP
	// has started its NICs).
	ErrNoSuchInterface = errors.New("vppdriver: no such VPP interface")

	// ErrAlreadyRunning is wrapped by the error a second call of
	// [Driver.Run] returns. It is the module's one ErrAlreadyRunning value
	// (every package's is the same), so errors.Is works across packages.
	ErrAlreadyRunning = lifecycle.ErrAlreadyRunning

	// ErrDegraded is wrapped by the error [Driver.Degraded] returns while
	// keys keep failing (see Config.FailingAfter): part of the desired
	// state is not in VPP, and the driver keeps retrying it.
	ErrDegraded = errors.New("vppdriver: degraded")

	// ErrInvalidConfig is wrapped by the error [New] returns for a bad
	// Config; the error names every bad field.
	ErrInvalidConfig = errors.New("vppdriver: invalid config")
)

// VPPError is a non-zero retval of a VPP reply, with the request that got
// it. errors.As to [api.VPPApiError] also works.
type VPPError struct {
	Request string // message name
	Retval  int32
}

func (e *VPPError) Error() string {
	return fmt.Sprintf("%s: %v", e.Request, api.VPPApiError(e.Retval))
}

// Unwrap returns the GoVPP error for the retval.
func (e *VPPError) Unwrap() error { return api.VPPApiError(e.Retval) }

// Retriable tells whether retrying the same request may succeed later
// (e.g. a missing interface or table that may appear). Invalid values and
// routes without paths are permanent.
func (e *VPPError) Retriable() bool {
	switch e.Retval {
	case -7, -52: // INVALID_VALUE, NO_PATHS_IN_ROUTE
		return false
	}
	return true
}

// IsRetriable tells whether err is worth retrying.
func IsRetriable(err error) bool {
	var ve *VPPError
	if errors.As(err, &ve) {
		return ve.Retriable()
	}
	return !errors.Is(err, ErrInvalidValue) && !errors.Is(err, ErrIncompatible)
}

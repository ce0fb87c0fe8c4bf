// Package lifecycle holds what every long-running component of the module
// shares about its Run method (CONTRIBUTING.md, R4): the one
// ErrAlreadyRunning value and a guard that makes Run single-use.
package lifecycle

import (
	"errors"
	"sync/atomic"
)

// ErrAlreadyRunning is returned (wrapped with the package's name) by a
// second call of a component's Run. Every package's ErrAlreadyRunning is
// this value, so errors.Is works across packages.
//
//lint:ignore ST1005 the message starts with the method's name
var ErrAlreadyRunning = errors.New("Run called more than once")

// Once makes Run single-use. The zero value is ready. It is safe for
// concurrent use.
type Once struct{ started atomic.Bool }

// Start reports ErrAlreadyRunning, wrapped as "<pkg>: Run called more
// than once", when called before; nil the first time.
func (o *Once) Start(pkg string) error {
	if o.started.Swap(true) {
		return &runError{pkg: pkg}
	}
	return nil
}

// Started reports whether Start was called.
func (o *Once) Started() bool { return o.started.Load() }

type runError struct{ pkg string }

func (e *runError) Error() string { return e.pkg + ": " + ErrAlreadyRunning.Error() }
func (e *runError) Unwrap() error { return ErrAlreadyRunning }

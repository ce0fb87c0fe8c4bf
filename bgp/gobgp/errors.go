package gobgp

import (
	"errors"

	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

// ErrAlreadyRunning is returned (wrapped) by a second call of [Manager.Run].
// It is the same value as every other package's ErrAlreadyRunning
// (internal/lifecycle), so errors.Is works across packages.
var ErrAlreadyRunning = lifecycle.ErrAlreadyRunning

var (
	// ErrNotRunning is returned by the methods of a [Manager] whose Run has
	// not started yet or has returned.
	ErrNotRunning = errors.New("gobgp: manager is not running")

	// ErrUnknownRouter is returned by [Manager.Routes] for a local ASN that
	// has no running server.
	ErrUnknownRouter = errors.New("gobgp: no virtual router with this local ASN")
)

package gobgp

import "errors"

var (
	// ErrNotRunning is returned by the methods of a [Manager] whose Run has
	// not started yet or has returned.
	ErrNotRunning = errors.New("gobgp: manager is not running")

	// ErrAlreadyRunning is returned by a second call of [Manager.Run].
	ErrAlreadyRunning = errors.New("gobgp: Run called more than once")

	// ErrUnknownRouter is returned by [Manager.Routes] for a local ASN that
	// has no running server.
	ErrUnknownRouter = errors.New("gobgp: no virtual router with this local ASN")
)

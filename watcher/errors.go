package watcher

import (
	"errors"

	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

// ErrAlreadyRunning is returned (wrapped) by a second call of [Watcher.Run].
// It is the same value as every other package's ErrAlreadyRunning
// (internal/lifecycle), so errors.Is works across packages.
var ErrAlreadyRunning = lifecycle.ErrAlreadyRunning

// Sentinel errors of the watcher.
var (
	// ErrMirror is wrapped by the error [Watcher.Run] returns when the local
	// mirror file cannot be opened (bad path, permissions, a file that is not
	// a bbolt database, or another process holding its lock).
	ErrMirror = errors.New("watcher: local mirror unusable")

	// ErrClientConfig is wrapped by the error [Watcher.Run] returns when the
	// etcd client cannot be configured: a TLS file cannot be read or holds
	// no usable certificate or key. Retrying would not help.
	ErrClientConfig = errors.New("watcher: invalid etcd client configuration")

	// ErrClientClosed is returned by [Watcher.Run] when the client given to
	// [NewWithClient] was closed while Run was using it.
	ErrClientClosed = errors.New("watcher: etcd client closed")

	// ErrBadKey is wrapped by errors reporting a key that does not belong to
	// any registered resource or does not follow the resource's key scheme.
	ErrBadKey = errors.New("watcher: bad key")

	// ErrBadValue is wrapped by errors reporting a value that does not
	// decode into the message type of its key.
	ErrBadValue = errors.New("watcher: value does not decode")
)

package watcher

import (
	"errors"
	"fmt"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
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

	// ErrLayout is wrapped by the error [Watcher.Run] returns when the
	// Kubernetes state in etcd is in a key layout the watcher does not
	// read (see [LayoutError]): the agent must not run on state it would
	// misread.
	ErrLayout = errors.New("watcher: Kubernetes state in a key layout this watcher does not read")
)

// LayoutError tells why the watcher refuses the Kubernetes state in etcd:
// its layout key names a layout the watcher does not know (a reflector of
// a newer version wrote it), or a value appeared in the flat layout while
// the layout key says per-node (a reflector of an older version writes
// beside the current one). It wraps [ErrLayout].
type LayoutError struct {
	// Key is the key, relative to the Kubernetes-state prefix, that the
	// watcher refuses: kubemodel.LayoutKey, or the flat key written.
	Key string
	// Value is the layout key's value as stored (for an unknown layout).
	Value string
	// Layout is the layout in force (for a flat key written beside it).
	Layout int
}

func (e *LayoutError) Error() string {
	if e.Key != kubemodel.LayoutKey {
		return fmt.Sprintf("watcher: %s was written in the flat key layout (1) while etcd's layout key says %d: "+
			"a reflector of an older version writes beside the current one; stop it", e.Key, e.Layout)
	}
	return fmt.Sprintf("watcher: etcd's layout key %s holds %q; this watcher reads layouts 1 (no key) and 2: "+
		"upgrade the agent to the reflector's version", e.Key, e.Value)
}

// Unwrap returns ErrLayout.
func (e *LayoutError) Unwrap() error { return ErrLayout }

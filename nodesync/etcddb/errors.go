package etcddb

import (
	"errors"

	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

// ErrAlreadyRunning is returned (wrapped) by [DB.Run] when it is called
// more than once. It is the module's one value (internal/lifecycle), so
// errors.Is matches it across packages.
var ErrAlreadyRunning = lifecycle.ErrAlreadyRunning

// errClosed ends Run's connection attempts once the DB is closed.
var errClosed = errors.New("etcddb: closed")

package cniserver

import (
	"errors"

	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

// ErrAlreadyRunning is returned (wrapped) by a second call of [Server.Run].
// It is the same value as every other package's ErrAlreadyRunning
// (internal/lifecycle), so errors.Is works across packages.
var ErrAlreadyRunning = lifecycle.ErrAlreadyRunning

// Errors of the [Linux] contract.
var (
	// ErrNetnsNotFound: the namespace path does not exist or is not a
	// network namespace. An ADD reports it with CNI error code 3 (the
	// container is gone).
	ErrNetnsNotFound = errors.New("cniserver: network namespace not found")

	// ErrLinkNotFound: the link does not exist.
	ErrLinkNotFound = errors.New("cniserver: link not found")

	// ErrLinkExists: the name is taken by another link. An ADD whose
	// CNI_IFNAME already exists in the pod's namespace fails with it, as
	// the CNI specification requires.
	ErrLinkExists = errors.New("cniserver: link already exists")
)

// Errors of the server.
var (
	// ErrLimitedConnectivity, wrapped by the error of Config.Ready, makes
	// STATUS report CNI error code 51 (existing pods may have limited
	// connectivity) instead of 50 (no ADD can be served).
	ErrLimitedConnectivity = errors.New("cniserver: existing pods may have limited connectivity")
)

// CNI error codes of this plugin beyond the specification's (which
// reserves 0-99 and lets plugins define 100 and above). The codes of the
// specification that the server and the plugin use are listed in the
// package documentation.
const (
	// CodeCheckFailed: CHECK found the pod's interface, addresses, routes
	// or neighbor entries not as the agent configured them.
	CodeCheckFailed uint = 100
	// CodeAddFailed: the agent could not connect the pod: a handler failed
	// the AddPod event, returned no usable result, or the configuration of
	// the pod's namespace failed. Everything done for the ADD was undone.
	CodeAddFailed uint = 101
)

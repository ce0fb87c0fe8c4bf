package etcdstore

import (
	"errors"

	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

// Sentinel errors, wrapped with details by the returned errors.
var (
	// ErrNotOwner is returned by the Store methods when their context ends
	// before Run has acquired the node's records (another agent with the
	// same node name holds them, etcd is unreachable, or Run is not
	// running).
	ErrNotOwner = errors.New("etcdstore: this store does not own the node's IPAM records")

	// ErrOwnershipLost is returned by the Store methods and by Run once the
	// store no longer owns the node's records: its lease expired (an etcd
	// outage longer than the lease TTL), the owner key was deleted or taken
	// over, or Run returned. It is final: the application restarts the
	// agent (or creates a new Store and IPAM) to take the records again.
	ErrOwnershipLost = errors.New("etcdstore: ownership of the node's IPAM records lost")

	// ErrAlreadyRunning is returned (wrapped) by [Store.Run] when it is
	// called more than once. It is the module's one value
	// (internal/lifecycle), so errors.Is matches it across packages.
	ErrAlreadyRunning = lifecycle.ErrAlreadyRunning
)

// errStopped is wrapped into the lost error when Run returns normally.
var errStopped = errors.New("the store's Run returned")

// errClientClosed is wrapped into the lost error when the store's etcd
// client was closed under it (the agent is going away).
var errClientClosed = errors.New("the etcd client was closed")

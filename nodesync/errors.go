package nodesync

import (
	"errors"
	"fmt"
	"time"

	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

// Sentinel errors. Match them with errors.Is; most are returned wrapped.
var (
	// ErrNotConnected is returned by ClusterWideDB and ProtoBroker
	// implementations while the database connection is not established.
	ErrNotConnected = errors.New("nodesync: database not connected")

	// ErrCompacted is returned by ProtoBroker.Watch when the requested start
	// revision has been compacted away; the caller re-lists and watches again.
	ErrCompacted = errors.New("nodesync: watch revision compacted")

	// ErrNoFreeID is returned (wrapped) by NodeSync.Run when every ID up to
	// Config.MaxNodeID is taken, so this node cannot get one.
	ErrNoFreeID = errors.New("nodesync: no free node ID")

	// ErrNotReady is returned by methods that need the node ID (PublishNodeIPs,
	// the start-up Resync) before Run has allocated it.
	ErrNotReady = errors.New("nodesync: node ID not allocated yet")

	// ErrNotRunning is returned (wrapped, together with ErrNotReady) by the
	// start-up Resync when Run has not been called within a few seconds
	// (see [NodeSync.Resync]): only Run allocates the node ID, so waiting
	// longer would only block the event loop.
	ErrNotRunning = errors.New("nodesync: Run has not been called")

	// ErrAlreadyRunning is returned (wrapped) by Run when it is called
	// more than once. It is the module's one value
	// (internal/lifecycle), so errors.Is matches it across packages.
	ErrAlreadyRunning = lifecycle.ErrAlreadyRunning

	// ErrNodeReleased is returned (wrapped) by Run when this node's record
	// was deleted while it was running, e.g. by [ReleaseNode]: its ID may be
	// handed to another node, so it must stop using it.
	ErrNodeReleased = errors.New("nodesync: this node's record was released")

	// ErrNodeIDLost is returned (wrapped) by Run when this node started
	// with its ID from Config.LocalState while the DB was unreachable, and
	// the DB, once reachable, says that another node owns that ID now: this
	// node must stop using it.
	ErrNodeIDLost = errors.New("nodesync: this node's ID is owned by another node")
)

// notRunningError is the start-up Resync's error when Run was not called:
// it wraps ErrNotRunning and ErrNotReady.
type notRunningError struct{ waited time.Duration }

func (e *notRunningError) Error() string {
	return fmt.Sprintf("%v (the start-up resync waited %v for it; the node ID cannot be allocated without it)", ErrNotRunning, e.waited)
}

func (e *notRunningError) Unwrap() []error { return []error{ErrNotRunning, ErrNotReady} }

// RecordError reports a malformed record found in the database. Records of
// other nodes that are malformed are skipped (and logged); they never stop
// this node. RecordError is immutable and safe for concurrent use.
type RecordError struct {
	// Key is the key of the record, relative to the nodesync prefix.
	Key string
	// Err says what is wrong.
	Err error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("nodesync: malformed record %q: %v", e.Key, e.Err)
}

// Unwrap returns the underlying error.
func (e *RecordError) Unwrap() error { return e.Err }

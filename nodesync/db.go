package nodesync

import (
	"context"

	"google.golang.org/protobuf/proto"
)

// ClusterWideDB defines the API that a DB client must provide for NodeSync
// to be able to allocate node IDs and to publish node IPs to other nodes.
// [github.com/vswitchkit/vswitchkit/nodesync/etcddb] implements it over etcd;
// [github.com/vswitchkit/vswitchkit/nodesync/nodesynctest] has an in-memory
// implementation. Implementations must be safe for concurrent use.
type ClusterWideDB interface {
	// OnConnect registers callback to be triggered once the (first)
	// connection to DB is established. If the connection is already
	// established, the callback is called immediately (synchronously).
	// An error returned by the callback is only reported by the DB (logged);
	// it does not affect the connection.
	OnConnect(callback func() error)

	// NewBroker creates a new instance of DB broker prefixing all keys with
	// the given prefix.
	NewBroker(prefix string) ProtoBroker

	// PutIfNotExists atomically puts the given key-value pair into DB if
	// there is no value set for the key (a compare-create transaction). key
	// is absolute (not prefixed). It returns false and a nil error when the
	// key already exists, and [ErrNotConnected] before the DB has connected.
	PutIfNotExists(key string, value []byte) (succeeded bool, err error)

	// Close closes the connection to DB and releases all allocated
	// resources. Calls after the first return nil.
	Close() error
}

// ProtoBroker reads and writes protobuf values under one key prefix. Keys
// passed to and returned from its methods are relative to that prefix.
// Implementations must be safe for concurrent use and return
// [ErrNotConnected] (possibly wrapped) while the DB is not connected.
type ProtoBroker interface {
	// Put stores value under key and returns the revision of the write.
	Put(ctx context.Context, key string, value proto.Message) (revision int64, err error)

	// List returns every key-value pair whose key starts with keyPrefix,
	// sorted by key, as one consistent snapshot taken at the returned
	// revision.
	List(ctx context.Context, keyPrefix string) (ListResult, error)

	// Delete removes key and reports whether it was deleted. With
	// modRevision > 0 the deletion is conditional: the key is deleted only
	// if its ModRevision equals modRevision (a compare-delete); otherwise
	// Delete returns false and a nil error.
	Delete(ctx context.Context, key string, modRevision int64) (deleted bool, err error)

	// Watch calls fn, in revision order, for every change of a key starting
	// with keyPrefix made at fromRevision or later. It blocks until ctx is
	// done (then it returns ctx.Err()) or the watch fails: [ErrCompacted]
	// when fromRevision is no longer available, another error when the
	// connection is lost. fn runs on the calling goroutine and must not
	// call Watch.
	Watch(ctx context.Context, keyPrefix string, fromRevision int64, fn func(WatchEvent)) error
}

// KV is one stored key-value pair returned by [ProtoBroker.List]. It is a
// plain value: safe for concurrent use as long as nobody modifies it.
type KV struct {
	// Key is relative to the broker's prefix.
	Key string
	// Value is the serialized protobuf value; see [KV.Unmarshal].
	Value []byte
	// CreateRevision is the revision at which the key was created.
	CreateRevision int64
	// ModRevision is the revision of the last change of the key.
	ModRevision int64
}

// Unmarshal decodes kv.Value into msg.
func (kv KV) Unmarshal(msg proto.Message) error { return proto.Unmarshal(kv.Value, msg) }

// ListResult is a consistent snapshot of a key range. It is a plain value:
// safe for concurrent use as long as nobody modifies it.
type ListResult struct {
	// Revision is the DB revision the snapshot was taken at.
	Revision int64
	// KVs are the pairs found, sorted by key.
	KVs []KV
}

// WatchEvent is one change reported by [ProtoBroker.Watch]. It is a plain
// value: safe for concurrent use as long as nobody modifies it.
type WatchEvent struct {
	// Key is relative to the broker's prefix.
	Key string
	// Value is the new serialized value; nil when the key was deleted.
	Value []byte
	// Revision is the DB revision of the change.
	Revision int64
}

// Deleted reports whether the event is a deletion.
func (ev WatchEvent) Deleted() bool { return ev.Value == nil }

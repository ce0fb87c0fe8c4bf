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

	// Txn applies txn atomically: if every condition of txn.If holds, it
	// runs txn.Then, otherwise txn.Else, all at one revision (an etcd
	// transaction). Operations see the writes of earlier operations of the
	// same branch. Keys are relative to the broker's prefix. The result
	// holds, per operation of the branch that ran, the pairs a get found
	// (nil for puts and deletes). Like etcd, implementations refuse (with an
	// error, changing nothing) a branch that puts or deletes the same key
	// twice. A get of an older revision that has been
	// compacted fails the whole Txn with [ErrCompacted] (possibly wrapped).
	// An error other than ErrCompacted leaves the outcome unknown: the
	// transaction may or may not have been applied.
	Txn(ctx context.Context, txn Txn) (TxnResult, error)
}

// PageLister is an optional interface of a [ProtoBroker], detected by type
// assertion: reading a range in pages. [NodeSync.Run] reads the node
// records with it when the broker has it, page by page at the revision of
// the first page, and retries a failed request for that page alone, so
// that every node reads the records once even when requests fail (with
// thousands of nodes starting at once, a whole-list retry would read the
// list again per failure). Without it, Run uses List and retries it
// whole. [github.com/vswitchkit/vswitchkit/nodesync/etcddb] and
// [github.com/vswitchkit/vswitchkit/nodesync/nodesynctest] implement it.
type PageLister interface {
	// ListPage returns, sorted by key, the first pairs (at most limit; 0
	// means the implementation's page size) whose key starts with
	// keyPrefix and sorts after the key after ("" for the first page), as
	// they were at revision (0: the current revision). The result's
	// Revision is the revision read: the first page's is the one to pass
	// for the following pages. more tells whether pairs follow. A revision
	// that has been compacted away fails with [ErrCompacted] (possibly
	// wrapped).
	ListPage(ctx context.Context, keyPrefix, after string, revision, limit int64) (page ListResult, more bool, err error)
}

// CmpTarget selects the revision that a [Cmp] compares.
type CmpTarget int

const (
	// CreateRevision is the revision that created the key; 0 when the key
	// does not exist.
	CreateRevision CmpTarget = iota + 1
	// ModRevision is the revision of the key's last change; 0 when the key
	// does not exist.
	ModRevision
)

// Cmp is one condition of a [Txn]: the Target revision of Key equals
// Revision. With Prefix set it holds when every key starting with Key
// satisfies it, and also when there is no such key; {Prefix: true,
// Target: CreateRevision, Revision: 0} thus means "no key starts with
// Key". Cmp is a plain value, safe for concurrent use as long as nobody
// modifies it.
type Cmp struct {
	Key      string
	Prefix   bool
	Target   CmpTarget
	Revision int64
}

// OpType is the kind of an [Op].
type OpType int

const (
	// OpGet reads a key or, with Op.Prefix, every key starting with Op.Key.
	OpGet OpType = iota + 1
	// OpPut stores Op.Value under Op.Key.
	OpPut
	// OpDelete removes Op.Key (no error if it does not exist).
	OpDelete
)

// Op is one operation of a [Txn]. Op is a plain value, safe for
// concurrent use as long as nobody modifies it.
type Op struct {
	Type OpType
	Key  string
	// Value is stored by OpPut (nil stores an empty value).
	Value []byte
	// Prefix makes OpGet read every key starting with Key, sorted by key.
	Prefix bool
	// Limit caps the pairs an OpGet with Prefix returns (the first Limit
	// keys in key order); 0 means no limit.
	Limit int64
	// Revision makes OpGet read the state at that revision instead of the
	// current one; 0 means current.
	Revision int64
}

// Txn is a transaction for [ProtoBroker.Txn]: the operations in Then run
// when every condition in If holds, the ones in Else otherwise. Etcd
// limits a transaction to 128 operations by default. Txn is a plain value,
// safe for concurrent use as long as nobody modifies it.
type Txn struct {
	If   []Cmp
	Then []Op
	Else []Op
}

// TxnResult is the outcome of a [ProtoBroker.Txn]. It is a plain value:
// safe for concurrent use as long as nobody modifies it.
type TxnResult struct {
	// Succeeded tells whether the conditions held (Then ran) or not (Else
	// ran).
	Succeeded bool
	// Revision is the DB revision after the transaction.
	Revision int64
	// Results has one entry per operation of the branch that ran: the
	// pairs found by an OpGet (sorted by key, empty if none), nil for OpPut
	// and OpDelete.
	Results [][]KV
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
	// Version counts the changes of the key since its creation (1 after
	// the put that created it).
	Version int64
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

package nodesynctest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/vswitchkit/vswitchkit/nodesync"
	"google.golang.org/protobuf/proto"
)

// Hooks injects faults into a [MemDB]. Each non-nil function is called with
// the (absolute) key or key prefix before the operation; when it returns an
// error, the operation fails with that error and changes nothing. Hooks are
// called with the MemDB locked: they must not call the MemDB. Hooks is a
// plain value, installed with [MemDB.SetHooks]; the functions must be safe
// for concurrent use.
type Hooks struct {
	PutIfNotExists func(key string) error
	Put            func(key string) error
	// List is called for every List and every ListPage (each page).
	List   func(prefix string) error
	Delete func(key string) error
	Watch  func(prefix string) error
	// Txn is called with the (absolute) key of the transaction's first
	// operation of the Then branch ("" if none).
	Txn func(key string) error
	// TxnApplied is called like Txn, but after the transaction has been
	// applied: an error it returns is reported although the transaction took
	// effect, like an etcd request that times out after it was applied
	// (outcome unknown to the caller).
	TxnApplied func(key string) error
}

type entry struct {
	value          []byte
	create, modRev int64
	version        int64
}

type change struct {
	key     string
	value   []byte // nil = deleted
	rev     int64
	create  int64
	version int64
}

// MemDB is an in-memory [nodesync.ClusterWideDB]. The zero value is not
// usable; create it with [NewMemDB]. MemDB is safe for concurrent use.
type MemDB struct {
	mu        sync.Mutex
	rev       int64
	data      map[string]entry
	history   []change // changes after compacted, in revision order
	compacted int64    // revisions <= compacted are no longer watchable
	connected bool
	closed    bool
	callbacks []func() error
	hooks     Hooks
	notify    chan struct{} // closed and replaced on every change
	pageSize  int64         // ListPage's default page size
	lists     ListStats
}

// ListStats counts what List and ListPage read: the requests (failed ones
// included) and the pairs returned.
type ListStats struct {
	Requests int
	Pairs    int
}

// DefaultPageSize is the page size of [MemDB]'s ListPage when none is
// given (see [MemDB.SetPageSize]).
const DefaultPageSize = 1000

var _ nodesync.ClusterWideDB = (*MemDB)(nil)

// NewMemDB returns an empty, connected MemDB.
func NewMemDB() *MemDB {
	return &MemDB{data: make(map[string]entry), connected: true, notify: make(chan struct{}), pageSize: DefaultPageSize}
}

// NewDisconnectedMemDB returns an empty MemDB that is not connected yet:
// operations fail with nodesync.ErrNotConnected and OnConnect callbacks wait
// until [MemDB.SetConnected] is called with true.
func NewDisconnectedMemDB() *MemDB {
	db := NewMemDB()
	db.connected = false
	return db
}

// SetPageSize sets the page size of ListPage calls that give none (0:
// DefaultPageSize).
func (db *MemDB) SetPageSize(n int64) {
	if n <= 0 {
		n = DefaultPageSize
	}
	db.mu.Lock()
	db.pageSize = n
	db.mu.Unlock()
}

// ListStats returns what List and ListPage have read so far.
func (db *MemDB) ListStats() ListStats {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.lists
}

// SetHooks replaces the fault-injection hooks.
func (db *MemDB) SetHooks(h Hooks) {
	db.mu.Lock()
	db.hooks = h
	db.mu.Unlock()
}

// SetConnected connects or disconnects the DB. The first connection runs the
// callbacks registered with OnConnect (outside the lock, in registration
// order). Disconnecting ends all watches with nodesync.ErrNotConnected.
func (db *MemDB) SetConnected(connected bool) {
	db.mu.Lock()
	db.connected = connected
	var cbs []func() error
	if connected {
		cbs, db.callbacks = db.callbacks, nil
	}
	db.wakeLocked()
	db.mu.Unlock()
	for _, cb := range cbs {
		_ = cb()
	}
}

// OnConnect calls callback now if the DB is connected, otherwise when it
// connects. Errors returned by callbacks are ignored.
func (db *MemDB) OnConnect(callback func() error) {
	db.mu.Lock()
	if !db.connected {
		db.callbacks = append(db.callbacks, callback)
		db.mu.Unlock()
		return
	}
	db.mu.Unlock()
	_ = callback()
}

// Close ends all watches; later operations fail with
// nodesync.ErrNotConnected.
func (db *MemDB) Close() error {
	db.mu.Lock()
	db.closed = true
	db.wakeLocked()
	db.mu.Unlock()
	return nil
}

// Revision returns the current revision.
func (db *MemDB) Revision() int64 {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.rev
}

// Compact drops the watch history up to and including rev: watches from
// rev or earlier fail with nodesync.ErrCompacted.
func (db *MemDB) Compact(rev int64) {
	db.mu.Lock()
	defer db.mu.Unlock()
	rev = min(rev, db.rev)
	if rev <= db.compacted {
		return
	}
	i := sort.Search(len(db.history), func(i int) bool { return db.history[i].rev > rev })
	db.history = slices.Clone(db.history[i:])
	db.compacted = rev
	db.wakeLocked()
}

// Keys returns all stored keys (absolute), sorted.
func (db *MemDB) Keys() []string {
	db.mu.Lock()
	defer db.mu.Unlock()
	keys := make([]string, 0, len(db.data))
	for k := range db.data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Value returns a copy of the value stored under the absolute key.
func (db *MemDB) Value(key string) ([]byte, bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	e, ok := db.data[key]
	return slices.Clone(e.value), ok
}

// PutRaw stores value under the absolute key without any checks, e.g. to
// plant a malformed record.
func (db *MemDB) PutRaw(key string, value []byte) int64 {
	if value == nil {
		value = []byte{}
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.putLocked(key, slices.Clone(value))
}

func (db *MemDB) wakeLocked() {
	close(db.notify)
	db.notify = make(chan struct{})
}

func (db *MemDB) checkLocked() error {
	if db.closed {
		return fmt.Errorf("%w: closed", nodesync.ErrNotConnected)
	}
	if !db.connected {
		return nodesync.ErrNotConnected
	}
	return nil
}

func (db *MemDB) putLocked(key string, value []byte) int64 {
	db.rev++
	db.putAtLocked(key, value, db.rev)
	db.wakeLocked()
	return db.rev
}

// putAtLocked stores value at revision rev (already counted).
func (db *MemDB) putAtLocked(key string, value []byte, rev int64) {
	e, ok := db.data[key]
	if !ok {
		e = entry{create: rev}
	}
	e.value = value
	e.modRev = rev
	e.version++
	db.data[key] = e
	db.history = append(db.history, change{key: key, value: value, rev: rev, create: e.create, version: e.version})
}

func (db *MemDB) deleteLocked(key string) {
	db.rev++
	db.deleteAtLocked(key, db.rev)
	db.wakeLocked()
}

func (db *MemDB) deleteAtLocked(key string, rev int64) {
	delete(db.data, key)
	db.history = append(db.history, change{key: key, rev: rev})
}

// PutIfNotExists stores value under the absolute key if it does not exist.
func (db *MemDB) PutIfNotExists(key string, value []byte) (bool, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.checkLocked(); err != nil {
		return false, err
	}
	if h := db.hooks.PutIfNotExists; h != nil {
		if err := h(key); err != nil {
			return false, err
		}
	}
	if _, ok := db.data[key]; ok {
		return false, nil
	}
	if value == nil {
		value = []byte{}
	}
	db.putLocked(key, slices.Clone(value))
	return true, nil
}

// NewBroker returns a broker for keys under prefix.
func (db *MemDB) NewBroker(prefix string) nodesync.ProtoBroker {
	return &broker{db: db, prefix: prefix}
}

type broker struct {
	db     *MemDB
	prefix string
}

func (b *broker) Put(ctx context.Context, key string, value proto.Message) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	data, err := proto.Marshal(value)
	if err != nil {
		return 0, fmt.Errorf("nodesynctest: encode %s: %w", key, err)
	}
	if data == nil {
		data = []byte{}
	}
	db := b.db
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.checkLocked(); err != nil {
		return 0, err
	}
	if h := db.hooks.Put; h != nil {
		if err := h(b.prefix + key); err != nil {
			return 0, err
		}
	}
	return db.putLocked(b.prefix+key, data), nil
}

func (b *broker) List(ctx context.Context, keyPrefix string) (nodesync.ListResult, error) {
	if err := ctx.Err(); err != nil {
		return nodesync.ListResult{}, err
	}
	db := b.db
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.checkLocked(); err != nil {
		return nodesync.ListResult{}, err
	}
	full := b.prefix + keyPrefix
	db.lists.Requests++
	if h := db.hooks.List; h != nil {
		if err := h(full); err != nil {
			return nodesync.ListResult{}, err
		}
	}
	res := nodesync.ListResult{Revision: db.rev}
	for k, e := range db.data {
		if strings.HasPrefix(k, full) {
			res.KVs = append(res.KVs, nodesync.KV{
				Key: strings.TrimPrefix(k, b.prefix), Value: slices.Clone(e.value),
				CreateRevision: e.create, ModRevision: e.modRev, Version: e.version,
			})
		}
	}
	slices.SortFunc(res.KVs, func(a, b nodesync.KV) int { return strings.Compare(a.Key, b.Key) })
	db.lists.Pairs += len(res.KVs)
	return res, nil
}

var _ nodesync.PageLister = (*broker)(nil)

// ListPage reads one page of a range (see [nodesync.PageLister]); limit 0
// means the MemDB's page size. Like a historical get of Txn, a revision
// other than the current one needs the change history: it fails with
// nodesync.ErrCompacted for revisions up to the one given to Compact.
func (b *broker) ListPage(ctx context.Context, keyPrefix, after string, revision, limit int64) (nodesync.ListResult, bool, error) {
	if err := ctx.Err(); err != nil {
		return nodesync.ListResult{}, false, err
	}
	db := b.db
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.checkLocked(); err != nil {
		return nodesync.ListResult{}, false, err
	}
	full := b.prefix + keyPrefix
	db.lists.Requests++
	if h := db.hooks.List; h != nil {
		if err := h(full); err != nil {
			return nodesync.ListResult{}, false, err
		}
	}
	if limit <= 0 {
		limit = db.pageSize
	}
	op := nodesync.Op{Type: nodesync.OpGet, Key: keyPrefix, Prefix: true}
	switch {
	case revision == 0 || revision == db.rev:
		revision = db.rev
	case revision <= db.compacted:
		return nodesync.ListResult{}, false, fmt.Errorf("%w: revision %d (compacted up to %d)", nodesync.ErrCompacted, revision, db.compacted)
	case revision > db.rev:
		return nodesync.ListResult{}, false, fmt.Errorf("nodesynctest: revision %d is in the future (current %d)", revision, db.rev)
	default:
		op.Revision = revision
	}
	kvs, err := db.getLocked(b.prefix, op)
	if err != nil {
		return nodesync.ListResult{}, false, err
	}
	if after != "" {
		i, _ := slices.BinarySearchFunc(kvs, after, func(kv nodesync.KV, key string) int { return strings.Compare(kv.Key, key) })
		for i < len(kvs) && kvs[i].Key <= after {
			i++
		}
		kvs = kvs[i:]
	}
	more := int64(len(kvs)) > limit
	if more {
		kvs = kvs[:limit]
	}
	db.lists.Pairs += len(kvs)
	return nodesync.ListResult{Revision: revision, KVs: kvs}, more, nil
}

func (b *broker) Delete(ctx context.Context, key string, modRevision int64) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	db := b.db
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.checkLocked(); err != nil {
		return false, err
	}
	if h := db.hooks.Delete; h != nil {
		if err := h(b.prefix + key); err != nil {
			return false, err
		}
	}
	e, ok := db.data[b.prefix+key]
	if !ok || (modRevision > 0 && e.modRev != modRevision) {
		return false, nil
	}
	db.deleteLocked(b.prefix + key)
	return true, nil
}

func (b *broker) Watch(ctx context.Context, keyPrefix string, fromRevision int64, fn func(nodesync.WatchEvent)) error {
	db := b.db
	full := b.prefix + keyPrefix
	next := fromRevision
	for {
		db.mu.Lock()
		if err := db.checkLocked(); err != nil {
			db.mu.Unlock()
			return err
		}
		if h := db.hooks.Watch; h != nil {
			if err := h(full); err != nil {
				db.mu.Unlock()
				return err
			}
		}
		if next <= db.compacted {
			db.mu.Unlock()
			return fmt.Errorf("%w: revision %d (compacted up to %d)", nodesync.ErrCompacted, next, db.compacted)
		}
		i := sort.Search(len(db.history), func(i int) bool { return db.history[i].rev >= next })
		var batch []change
		for _, c := range db.history[i:] {
			if strings.HasPrefix(c.key, full) {
				batch = append(batch, c)
			}
		}
		if db.rev >= next {
			next = db.rev + 1
		}
		wake := db.notify
		db.mu.Unlock()
		for _, c := range batch {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fn(nodesync.WatchEvent{Key: strings.TrimPrefix(c.key, b.prefix), Value: slices.Clone(c.value), Revision: c.rev})
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Txn applies txn atomically; see [nodesync.ProtoBroker]. A historical get
// (Op.Revision > 0) needs the MemDB's change history: it fails with
// nodesync.ErrCompacted for revisions up to the one given to
// [MemDB.Compact] (etcd still serves the compaction revision itself).
func (b *broker) Txn(ctx context.Context, txn nodesync.Txn) (nodesync.TxnResult, error) {
	if err := ctx.Err(); err != nil {
		return nodesync.TxnResult{}, err
	}
	db := b.db
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.checkLocked(); err != nil {
		return nodesync.TxnResult{}, err
	}
	first := ""
	if len(txn.Then) > 0 {
		first = b.prefix + txn.Then[0].Key
	}
	if h := db.hooks.Txn; h != nil {
		if err := h(first); err != nil {
			return nodesync.TxnResult{}, err
		}
	}
	ok := true
	for _, c := range txn.If {
		if !db.cmpLocked(b.prefix, c) {
			ok = false
			break
		}
	}
	ops := txn.Else
	if ok {
		ops = txn.Then
	}
	// Validate first: a failed Txn changes nothing.
	written := make(map[string]bool)
	for _, op := range ops {
		if op.Type == nodesync.OpPut || op.Type == nodesync.OpDelete {
			if written[op.Key] {
				return nodesync.TxnResult{}, fmt.Errorf("nodesynctest: duplicate key %q given in txn request", op.Key)
			}
			written[op.Key] = true
		}
		if op.Type == nodesync.OpGet && op.Revision > 0 {
			if op.Revision <= db.compacted {
				return nodesync.TxnResult{}, fmt.Errorf("%w: revision %d (compacted up to %d)", nodesync.ErrCompacted, op.Revision, db.compacted)
			}
			if op.Revision > db.rev {
				return nodesync.TxnResult{}, fmt.Errorf("nodesynctest: revision %d is in the future (current %d)", op.Revision, db.rev)
			}
		}
	}
	res := nodesync.TxnResult{Succeeded: ok, Results: make([][]nodesync.KV, len(ops))}
	rev := db.rev + 1
	wrote := false
	for i, op := range ops {
		full := b.prefix + op.Key
		switch op.Type {
		case nodesync.OpGet:
			kvs, err := db.getLocked(b.prefix, op)
			if err != nil {
				return nodesync.TxnResult{}, err
			}
			res.Results[i] = kvs
		case nodesync.OpPut:
			v := slices.Clone(op.Value)
			if v == nil {
				v = []byte{}
			}
			db.putAtLocked(full, v, rev)
			wrote = true
		case nodesync.OpDelete:
			if _, exists := db.data[full]; exists {
				db.deleteAtLocked(full, rev)
				wrote = true
			}
		default:
			return nodesync.TxnResult{}, fmt.Errorf("nodesynctest: unknown op type %d", op.Type)
		}
	}
	if wrote {
		db.rev = rev
		db.wakeLocked()
	}
	res.Revision = db.rev
	if h := db.hooks.TxnApplied; h != nil {
		if err := h(first); err != nil {
			return nodesync.TxnResult{}, err
		}
	}
	return res, nil
}

// cmpLocked evaluates one condition.
func (db *MemDB) cmpLocked(prefix string, c nodesync.Cmp) bool {
	full := prefix + c.Key
	value := func(e entry) int64 {
		if c.Target == nodesync.CreateRevision {
			return e.create
		}
		return e.modRev
	}
	if !c.Prefix {
		return value(db.data[full]) == c.Revision
	}
	for k, e := range db.data {
		if strings.HasPrefix(k, full) && value(e) != c.Revision {
			return false
		}
	}
	return true
}

// getLocked runs one OpGet (a Revision > 0 is checked by the caller).
func (db *MemDB) getLocked(prefix string, op nodesync.Op) ([]nodesync.KV, error) {
	full := prefix + op.Key
	match := func(k string) bool {
		if op.Prefix {
			return strings.HasPrefix(k, full)
		}
		return k == full
	}
	state := make(map[string]entry)
	if op.Revision == 0 {
		for k, e := range db.data {
			if match(k) {
				state[k] = e
			}
		}
	} else {
		// The state at op.Revision: the current entries not changed since,
		// rolled back with the history (which covers every change after
		// db.compacted < op.Revision).
		for k, e := range db.data {
			if match(k) && e.modRev <= op.Revision {
				state[k] = e
			}
		}
		for i := len(db.history) - 1; i >= 0; i-- {
			c := db.history[i]
			if c.rev <= op.Revision {
				break
			}
			if !match(c.key) {
				continue
			}
			delete(state, c.key)
			// The change before c of the same key, if any, is the state.
			found := false
			for j := i - 1; j >= 0; j-- {
				p := db.history[j]
				if p.key != c.key {
					continue
				}
				found = true
				if p.rev <= op.Revision && p.value != nil {
					state[c.key] = entry{value: p.value, create: p.create, modRev: p.rev, version: p.version}
				}
				break
			}
			if !found && (c.value == nil || c.version > 1) {
				// The key existed before c, in the compacted history.
				return nil, fmt.Errorf("%w: revision %d of %s (compacted up to %d)", nodesync.ErrCompacted, op.Revision, c.key, db.compacted)
			}
		}
	}
	kvs := make([]nodesync.KV, 0, len(state))
	for k, e := range state {
		kvs = append(kvs, nodesync.KV{
			Key: strings.TrimPrefix(k, prefix), Value: slices.Clone(e.value),
			CreateRevision: e.create, ModRevision: e.modRev, Version: e.version,
		})
	}
	slices.SortFunc(kvs, func(a, b nodesync.KV) int { return strings.Compare(a.Key, b.Key) })
	if op.Prefix && op.Limit > 0 && int64(len(kvs)) > op.Limit {
		kvs = kvs[:op.Limit]
	}
	return kvs, nil
}

// ErrInjected is a ready-made error for [Hooks].
var ErrInjected = errors.New("nodesynctest: injected fault")

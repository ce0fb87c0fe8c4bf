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
	List           func(prefix string) error
	Delete         func(key string) error
	Watch          func(prefix string) error
}

type entry struct {
	value          []byte
	create, modRev int64
}

type change struct {
	key   string
	value []byte // nil = deleted
	rev   int64
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
}

var _ nodesync.ClusterWideDB = (*MemDB)(nil)

// NewMemDB returns an empty, connected MemDB.
func NewMemDB() *MemDB {
	return &MemDB{data: make(map[string]entry), connected: true, notify: make(chan struct{})}
}

// NewDisconnectedMemDB returns an empty MemDB that is not connected yet:
// operations fail with nodesync.ErrNotConnected and OnConnect callbacks wait
// until [MemDB.SetConnected] is called with true.
func NewDisconnectedMemDB() *MemDB {
	db := NewMemDB()
	db.connected = false
	return db
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
	e, ok := db.data[key]
	if !ok {
		e.create = db.rev
	}
	e.value = value
	e.modRev = db.rev
	db.data[key] = e
	db.history = append(db.history, change{key: key, value: value, rev: db.rev})
	db.wakeLocked()
	return db.rev
}

func (db *MemDB) deleteLocked(key string) {
	db.rev++
	delete(db.data, key)
	db.history = append(db.history, change{key: key, rev: db.rev})
	db.wakeLocked()
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
				CreateRevision: e.create, ModRevision: e.modRev,
			})
		}
	}
	slices.SortFunc(res.KVs, func(a, b nodesync.KV) int { return strings.Compare(a.Key, b.Key) })
	return res, nil
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

// ErrInjected is a ready-made error for [Hooks].
var ErrInjected = errors.New("nodesynctest: injected fault")

package watcher

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Layout of the mirror file (format 1):
//
//	bucket "meta":  "format" -> "1", "revision" -> 8-byte big-endian etcd
//	                revision, "kube-prefix", "ext-prefix" -> the prefixes the
//	                snapshot was taken under
//	bucket "kube":  key relative to the Kubernetes-state prefix -> raw value
//	bucket "ext":   key relative to the external-config prefix -> raw value
//
// A snapshot is complete when "meta" holds a revision; it is always written
// in the same bbolt transaction as the data, so a reader sees either the old
// or the new snapshot, never a mix.
var (
	bucketMeta = []byte("meta")
	bucketKube = []byte("kube")
	bucketExt  = []byte("ext")

	metaFormat     = []byte("format")
	metaRevision   = []byte("revision")
	metaKubePrefix = []byte("kube-prefix")
	metaExtPrefix  = []byte("ext-prefix")

	formatVersion = []byte("1")
)

// mirrorSnapshot is the content of the mirror: raw values, as delivered.
type mirrorSnapshot struct {
	rev        int64
	kubePrefix string
	extPrefix  string
	kube       map[string][]byte
	ext        map[string][]byte
}

// mirrorOp is one change of the mirror; a nil value deletes the key.
type mirrorOp struct {
	ext   bool
	key   string
	value []byte
}

// mirror is the bbolt file. It is not safe for concurrent use; the Run
// goroutine owns it.
type mirror struct {
	db *bolt.DB

	// hookPut, when set (tests only), is called after each put of a
	// rewrite with the number of puts so far; an error aborts the
	// transaction as a crash would.
	hookPut func(n int) error
	// hookWrite, when set (tests only), is called at the start of every
	// write transaction.
	hookWrite func()
}

func openMirror(path string) (*mirror, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: defaultMirrorOpenLockTimout})
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %w", ErrMirror, path, err)
	}
	return &mirror{db: db}, nil
}

func (m *mirror) close() error { return m.db.Close() }

// load returns the mirrored snapshot; ok is false when the mirror holds no
// complete snapshot (a new file).
func (m *mirror) load() (snap *mirrorSnapshot, ok bool, err error) {
	err = m.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return nil
		}
		if f := meta.Get(metaFormat); string(f) != string(formatVersion) {
			return fmt.Errorf("mirror format %q, want %q", f, formatVersion)
		}
		revb := meta.Get(metaRevision)
		if len(revb) != 8 {
			return nil
		}
		snap = &mirrorSnapshot{
			rev:        int64(binary.BigEndian.Uint64(revb)),
			kubePrefix: string(meta.Get(metaKubePrefix)),
			extPrefix:  string(meta.Get(metaExtPrefix)),
			kube:       make(map[string][]byte),
			ext:        make(map[string][]byte),
		}
		// Values are only valid during the transaction: copy them.
		read := func(name []byte, into map[string][]byte) error {
			b := tx.Bucket(name)
			if b == nil {
				return fmt.Errorf("mirror bucket %q missing", name)
			}
			return b.ForEach(func(k, v []byte) error {
				into[string(k)] = append([]byte(nil), v...)
				return nil
			})
		}
		if err := read(bucketKube, snap.kube); err != nil {
			return err
		}
		return read(bucketExt, snap.ext)
	})
	if err != nil {
		return nil, false, fmt.Errorf("read mirror: %w", err)
	}
	return snap, snap != nil, nil
}

// rewrite replaces the whole content with snap in one transaction.
func (m *mirror) rewrite(snap *mirrorSnapshot) error {
	if m.hookWrite != nil {
		m.hookWrite()
	}
	err := m.db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketKube, bucketExt} {
			if err := tx.DeleteBucket(name); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return err
			}
		}
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		n := 0
		fill := func(name []byte, kvs map[string][]byte) error {
			b, err := tx.CreateBucket(name)
			if err != nil {
				return err
			}
			// In key order: bbolt keeps a node's keys sorted until the
			// commit, so a put in random order moves half the node (a
			// rewrite of n keys costs O(n²)); in order it appends.
			b.FillPercent = 1
			for _, k := range slices.Sorted(maps.Keys(kvs)) {
				v := kvs[k]
				if err := b.Put([]byte(k), v); err != nil {
					return fmt.Errorf("put %q: %w", k, err)
				}
				n++
				if m.hookPut != nil {
					if err := m.hookPut(n); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if err := fill(bucketKube, snap.kube); err != nil {
			return err
		}
		if err := fill(bucketExt, snap.ext); err != nil {
			return err
		}
		return putMeta(meta, snap.rev, snap.kubePrefix, snap.extPrefix)
	})
	if err != nil {
		return fmt.Errorf("rewrite mirror: %w", err)
	}
	return nil
}

// apply applies ops and records rev in one transaction. The mirror must hold
// a complete snapshot.
func (m *mirror) apply(rev int64, ops []mirrorOp) error {
	if m.hookWrite != nil {
		m.hookWrite()
	}
	err := m.db.Update(func(tx *bolt.Tx) error {
		meta, kube, ext := tx.Bucket(bucketMeta), tx.Bucket(bucketKube), tx.Bucket(bucketExt)
		if meta == nil || kube == nil || ext == nil {
			return errors.New("mirror holds no snapshot to apply changes to")
		}
		for _, op := range ops {
			b := kube
			if op.ext {
				b = ext
			}
			var err error
			if op.value == nil {
				err = b.Delete([]byte(op.key))
			} else {
				err = b.Put([]byte(op.key), op.value)
			}
			if err != nil {
				return fmt.Errorf("key %q: %w", op.key, err)
			}
		}
		var revb [8]byte
		binary.BigEndian.PutUint64(revb[:], uint64(rev))
		return meta.Put(metaRevision, revb[:])
	})
	if err != nil {
		return fmt.Errorf("update mirror: %w", err)
	}
	return nil
}

func putMeta(meta *bolt.Bucket, rev int64, kubePrefix, extPrefix string) error {
	var revb [8]byte
	binary.BigEndian.PutUint64(revb[:], uint64(rev))
	for _, kv := range [][2][]byte{
		{metaFormat, formatVersion},
		{metaKubePrefix, []byte(kubePrefix)},
		{metaExtPrefix, []byte(extPrefix)},
		{metaRevision, revb[:]},
	} {
		if err := meta.Put(kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// mirrorWriter writes the mirror on a goroutine of its own, so that a slow
// disk (every transaction ends in an fsync) never delays the delivery of
// changes. The Run goroutine submits changes or full snapshots; the writer
// waits delay after the first queued change (a burst becomes one
// transaction, and no fsync competes with the processing of a change),
// then writes whatever has accumulated in one transaction, in submission
// order. A failed transaction leaves the previous consistent content: the
// writer puts its work back in front of the queue and retries with
// backoff, so a change is never lost from the mirror while Run runs.
type mirrorWriter struct {
	m     *mirror
	stats *counters
	log   *slog.Logger
	delay time.Duration // from the first queued change to its write
	retry *backoff.ExponentialBackOff
	wake  chan struct{} // capacity 1
	stop  chan struct{} // closed by close: write what is queued at once, then return
	done  chan struct{} // closed when run returns
	// failing: the last write failed (used by the run goroutine only).
	failing bool

	mu   sync.Mutex      // guards the fields below
	snap *mirrorSnapshot // a full rewrite to do (with later changes merged in); nil if none
	ops  []mirrorOp      // changes to apply on top of the mirror (when snap is nil)
	rev  int64           // revision of what is queued
}

func newMirrorWriter(m *mirror, stats *counters, log *slog.Logger, delay time.Duration, retry *backoff.ExponentialBackOff) *mirrorWriter {
	return &mirrorWriter{m: m, stats: stats, log: log, delay: delay, retry: retry,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// submit queues the changes ops (up to revision rev), or, when snap is
// set, a rewrite with the whole state snap (which ops are part of). The
// writer owns ops and snap afterwards.
func (mw *mirrorWriter) submit(ops []mirrorOp, rev int64, snap *mirrorSnapshot) {
	mw.mu.Lock()
	switch {
	case snap != nil:
		mw.snap, mw.ops = snap, nil
		mw.rev = max(mw.rev, snap.rev, rev)
	case mw.snap != nil:
		mergeOps(mw.snap, ops)
		mw.rev = max(mw.rev, rev)
	default:
		mw.ops = append(mw.ops, ops...)
		mw.rev = max(mw.rev, rev)
	}
	mw.mu.Unlock()
	select {
	case mw.wake <- struct{}{}:
	default:
	}
}

// mergeOps applies ops to a snapshot that is still to be written.
func mergeOps(snap *mirrorSnapshot, ops []mirrorOp) {
	for _, op := range ops {
		part := snap.kube
		if op.ext {
			part = snap.ext
		}
		if op.value == nil {
			delete(part, op.key)
		} else {
			part[op.key] = op.value
		}
	}
}

// requeue puts the work of a failed write back in front of what was
// queued since; a full snapshot queued since supersedes it.
func (mw *mirrorWriter) requeue(snap *mirrorSnapshot, ops []mirrorOp) {
	mw.mu.Lock()
	defer mw.mu.Unlock()
	switch {
	case mw.snap != nil:
	case snap != nil:
		mergeOps(snap, mw.ops)
		mw.snap, mw.ops = snap, nil
	default:
		mw.ops = append(ops, mw.ops...)
	}
}

// run writes until close, and what is queued then.
func (mw *mirrorWriter) run() {
	defer close(mw.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	wait := func(d time.Duration) {
		if d <= 0 {
			return
		}
		timer.Reset(d)
		select {
		case <-timer.C:
		case <-mw.stop:
			timer.Stop()
		}
	}
	for range mw.wake {
		wait(mw.delay)
		for {
			mw.mu.Lock()
			snap, ops, rev := mw.snap, mw.ops, mw.rev
			mw.snap, mw.ops = nil, nil
			mw.mu.Unlock()
			closed := mw.closing()
			if snap != nil || len(ops) > 0 {
				if mw.write(snap, ops, rev) {
					mw.retry.Reset()
				} else if !closed { // closing: the mirror keeps its previous content
					mw.requeue(snap, ops)
					wait(mw.retry.NextBackOff())
					continue
				}
			}
			if closed {
				return
			}
			break
		}
	}
}

// closing reports whether close was called. Nothing is submitted after
// close (Run's goroutine closes the writer after its last submission), so
// a queue taken after close was called holds everything.
func (mw *mirrorWriter) closing() bool {
	select {
	case <-mw.stop:
		return true
	default:
		return false
	}
}

// write writes one transaction and reports whether it succeeded.
func (mw *mirrorWriter) write(snap *mirrorSnapshot, ops []mirrorOp, rev int64) bool {
	var err error
	if snap != nil {
		snap.rev = max(snap.rev, rev)
		err = mw.m.rewrite(snap)
	} else {
		err = mw.m.apply(rev, ops)
	}
	if err != nil {
		mw.stats.mirrorErrors.Add(1)
		if !mw.failing {
			mw.failing = true
			mw.log.Warn("cannot write the local mirror; retrying", slog.Any("error", err))
		} else {
			mw.log.Debug("cannot write the local mirror", slog.Any("error", err))
		}
		return false
	}
	mw.stats.mirrorWrites.Add(1)
	if mw.failing {
		mw.failing = false
		mw.log.Info("local mirror written again")
	}
	return true
}

// close writes what is queued and stops the writer; it returns when run
// has returned.
func (mw *mirrorWriter) close() {
	close(mw.stop)
	select {
	case mw.wake <- struct{}{}:
	default:
	}
	<-mw.done
}

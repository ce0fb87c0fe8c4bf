package boltstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/cfgutil"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/internal/record"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Defaults of [Config].
const (
	// DefaultBucket is the default Config.Bucket.
	DefaultBucket = "ipam"
	// DefaultLockTimeout is the default Config.LockTimeout.
	DefaultLockTimeout = time.Second
)

// Config configures a [Store]. The zero value is valid. A Config is a plain
// value, copied by Open.
type Config struct {
	// Bucket is the bbolt bucket that holds the records. Default
	// [DefaultBucket].
	Bucket string
	// LockTimeout is how long Open waits for another process to release
	// the file before it fails with [ErrLocked]. Default
	// [DefaultLockTimeout].
	LockTimeout time.Duration
	// Logger receives the store's logs. Default: discard.
	Logger *slog.Logger
}

// Store is an [ipam.Store] in a bbolt file. See the package documentation.
//
// Store is safe for concurrent use.
type Store struct {
	db     *bolt.DB
	path   string
	bucket []byte
	log    *slog.Logger
}

var _ ipam.Store = (*Store)(nil)

// Open opens the bbolt file at path (creating it, mode 0600, if it does not
// exist) and the records' bucket, and holds the file's lock until Close.
// If another process holds the file, Open fails after cfg.LockTimeout with
// an error wrapping [ErrLocked].
func Open(path string, cfg Config) (*Store, error) {
	if errs := cfgutil.Durations([]cfgutil.Duration{{Name: "LockTimeout", Value: &cfg.LockTimeout, Default: DefaultLockTimeout}}); len(errs) > 0 {
		return nil, fmt.Errorf("boltstore: invalid config: %w", errors.Join(errs...))
	}
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: cfg.LockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (is another agent running on this node?)", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	s := &Store{db: db, path: path, bucket: []byte(cfg.Bucket), log: cfg.Logger.With(slog.String("component", "ipam-boltstore"), slog.String("path", path))}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(s.bucket)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: open %s: bucket %q: %w", path, cfg.Bucket, err)
	}
	return s, nil
}

// Close releases the file (and its lock). Calls after Close fail.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("boltstore: close %s: %w", s.path, err)
	}
	return nil
}

// PutAllocation writes the record of a.Pod and syncs it to disk. ctx is
// checked before the write starts; a started write is not interrupted.
func (s *Store) PutAllocation(ctx context.Context, a ipam.Allocation) error {
	k, err := record.Key(a.Pod)
	if err != nil {
		return fmt.Errorf("boltstore: put: %w", err)
	}
	if !a.Addr.IsValid() {
		return fmt.Errorf("boltstore: put %s: invalid address", a.Pod)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: put %s: %w", a.Pod, err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(s.bucket).Put([]byte(k), record.AppendValue(nil, a.Addr, a.ContainerID))
	})
	if err != nil {
		return fmt.Errorf("boltstore: put %s: %w", a.Pod, err)
	}
	return nil
}

// DeleteAllocation deletes the record of pod and syncs; a missing record is
// not an error.
func (s *Store) DeleteAllocation(ctx context.Context, pod kubemodel.PodID) error {
	k, err := record.Key(pod)
	if err != nil {
		return fmt.Errorf("boltstore: delete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: delete %s: %w", pod, err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(s.bucket).Delete([]byte(k))
	})
	if err != nil {
		return fmt.Errorf("boltstore: delete %s: %w", pod, err)
	}
	return nil
}

// ListAllocations returns every record. Records it cannot decode are
// logged and skipped (and left in the file).
func (s *Store) ListAllocations(ctx context.Context) ([]ipam.Allocation, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: list: %w", err)
	}
	var out []ipam.Allocation
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(s.bucket).ForEach(func(k, v []byte) error {
			a, err := record.Parse(string(k), v)
			if err != nil {
				s.log.Warn("skipping an undecodable IPAM record", slog.String("key", string(k)), slog.Any("error", err))
				return nil
			}
			out = append(out, a)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list: %w", err)
	}
	return out, nil
}

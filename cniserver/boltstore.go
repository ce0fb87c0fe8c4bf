package cniserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// BoltStore is a [Store] in a bbolt file, one JSON record per attachment
// in the bucket "cni-attachments". Every write is committed (fsync'ed)
// before it returns. It is safe for concurrent use.
type BoltStore struct {
	db *bolt.DB
}

var boltBucket = []byte("cni-attachments")

// OpenBoltStore opens (or creates, with mode 0600, creating its directory)
// the bbolt file at path. A file locked by another process gives an error
// after one second. The caller closes the store after the server's Run
// returned.
func OpenBoltStore(path string) (*BoltStore, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("cniserver: create store directory: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("cniserver: open store %s: locked by another process: %w", path, err)
		}
		return nil, fmt.Errorf("cniserver: open store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(boltBucket)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("cniserver: open store %s: %w", path, err)
	}
	return &BoltStore{db: db}, nil
}

// Close closes the file.
func (s *BoltStore) Close() error { return s.db.Close() }

func boltKey(id AttachmentID) []byte { return []byte(id.ContainerID + "/" + id.IfName) }

// PutAttachment stores a, replacing the record of a.ID.
func (s *BoltStore) PutAttachment(ctx context.Context, a Attachment) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode attachment %s: %w", a.ID, err)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(boltBucket).Put(boltKey(a.ID), v)
	})
}

// DeleteAttachment deletes the record of id; a missing one is no error.
func (s *BoltStore) DeleteAttachment(ctx context.Context, id AttachmentID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(boltBucket).Delete(boltKey(id))
	})
}

// ListAttachments returns every record. A record that cannot be decoded
// fails the call: it names an attachment whose DEL must still work.
func (s *BoltStore) ListAttachments(ctx context.Context) ([]Attachment, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Attachment
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(boltBucket).ForEach(func(k, v []byte) error {
			var a Attachment
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("decode attachment %q: %w", k, err)
			}
			out = append(out, a)
			return nil
		})
	})
	return out, err
}

var _ Store = (*BoltStore)(nil)

package nodesync

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LocalState keeps what a node needs to start without the cluster-wide DB:
// its node ID and the last snapshot of the node records. [NodeSync.Run]
// loads it once at start and saves it after every complete snapshot read
// from the DB, when it stops, and (with NodeID 0) when its ID is released
// or lost. Save replaces the whole state; a later Load returns the state of
// the last successful Save. Implementations must be safe for concurrent
// use; errors are logged by NodeSync (a failed Save does not stop it, a
// failed Load counts as no saved state). [StateFile] is a file-backed
// implementation.
type LocalState interface {
	// Load returns the saved state; ok is false when nothing is saved.
	Load() (state SavedState, ok bool, err error)
	// Save replaces the saved state.
	Save(state SavedState) error
}

// SavedState is what [LocalState] keeps. It is a plain value, safe for
// concurrent use as long as nobody modifies it.
type SavedState struct {
	// Prefix and NodeName say whose state it is: NodeSync ignores a state
	// saved under another prefix or node name.
	Prefix   string
	NodeName string
	// NodeID is this node's ID, 0 when it has none (e.g. after a release).
	NodeID uint32
	// Records is the last snapshot of the node records (keys relative to
	// Prefix, under "node/").
	Records ListResult
}

// StateFile is a [LocalState] kept in one JSON file. Save writes a
// temporary file in the same directory, syncs it and renames it over the
// old one, so a crash leaves either the old or the new state. The
// directory must exist. StateFile is safe for concurrent use as long as one
// process writes the file.
type StateFile struct {
	path string
}

var _ LocalState = (*StateFile)(nil)

// NewStateFile returns a StateFile for path, e.g.
// "/var/lib/vswitchkit/nodesync.json". It does no I/O.
func NewStateFile(path string) *StateFile { return &StateFile{path: path} }

// String returns the path of the file.
func (f *StateFile) String() string { return f.path }

// stateFileFormat is the version of the file layout.
const stateFileFormat = 1

type stateFileKV struct {
	Key            string `json:"key"`
	Value          []byte `json:"value"`
	CreateRevision int64  `json:"create_revision"`
	ModRevision    int64  `json:"mod_revision"`
	Version        int64  `json:"version"`
}

type stateFileContent struct {
	Format   int           `json:"format"`
	Prefix   string        `json:"prefix"`
	NodeName string        `json:"node_name"`
	NodeID   uint32        `json:"node_id"`
	Revision int64         `json:"revision"`
	Records  []stateFileKV `json:"records"`
}

// Load reads the file; a missing file is no saved state.
func (f *StateFile) Load() (SavedState, bool, error) {
	data, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return SavedState{}, false, nil
	}
	if err != nil {
		return SavedState{}, false, fmt.Errorf("nodesync: read local state: %w", err)
	}
	var c stateFileContent
	if err := json.Unmarshal(data, &c); err != nil {
		return SavedState{}, false, fmt.Errorf("nodesync: local state %s: %w", f.path, err)
	}
	if c.Format != stateFileFormat {
		return SavedState{}, false, fmt.Errorf("nodesync: local state %s: unknown format %d", f.path, c.Format)
	}
	s := SavedState{Prefix: c.Prefix, NodeName: c.NodeName, NodeID: c.NodeID, Records: ListResult{Revision: c.Revision}}
	for _, kv := range c.Records {
		s.Records.KVs = append(s.Records.KVs, KV(kv))
	}
	return s, true, nil
}

// Save replaces the file atomically.
func (f *StateFile) Save(s SavedState) error {
	c := stateFileContent{
		Format: stateFileFormat, Prefix: s.Prefix, NodeName: s.NodeName, NodeID: s.NodeID,
		Revision: s.Records.Revision, Records: make([]stateFileKV, 0, len(s.Records.KVs)),
	}
	for _, kv := range s.Records.KVs {
		c.Records = append(c.Records, stateFileKV(kv))
	}
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("nodesync: encode local state: %w", err)
	}
	dir := filepath.Dir(f.path)
	tmp, err := os.CreateTemp(dir, filepath.Base(f.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("nodesync: save local state: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("nodesync: save local state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("nodesync: save local state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("nodesync: save local state: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return fmt.Errorf("nodesync: save local state: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the rename durable; not all file systems support it
		d.Close()
	}
	return nil
}

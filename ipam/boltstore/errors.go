package boltstore

import "errors"

// ErrLocked is returned by [Open] when another process holds the file
// (another agent running on this node).
var ErrLocked = errors.New("boltstore: the file is locked by another process")

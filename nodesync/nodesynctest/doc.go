// Package nodesynctest provides an in-memory [nodesync.ClusterWideDB] for
// tests and examples.
//
// [MemDB] keeps revisions like etcd (one global revision, create and mod
// revision and version per key), supports compare-create (PutIfNotExists),
// conditional delete, consistent snapshots (List), transactions (Txn: key
// and prefix compares, gets including historical ones, puts and deletes),
// and watches from a revision, and lets tests inject faults ([Hooks],
// including failures reported after a transaction was applied), disconnect
// it ([MemDB.SetConnected]) and compact its history ([MemDB.Compact]). A
// conformance test shared with the etcd adapter keeps its Txn behaving
// like etcd's.
//
// # Limitations
//
// There are no leases and no size limits (etcd's 128 operations per
// transaction are not enforced). Historical reads at or below the
// compaction revision fail (etcd still serves the compaction revision). The watch history is
// kept in memory until [MemDB.Compact] trims it. Context deadlines are only
// checked when an operation starts, never in the middle of it.
//
// # Concurrency
//
// MemDB is safe for concurrent use.
package nodesynctest

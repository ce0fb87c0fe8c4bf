// Package nodesynctest provides an in-memory [nodesync.ClusterWideDB] for
// tests and examples.
//
// [MemDB] keeps revisions like etcd (one global revision, create and mod
// revision per key), supports compare-create (PutIfNotExists), conditional
// delete, consistent snapshots (List) and watches from a revision, and lets
// tests inject faults ([Hooks]), disconnect it ([MemDB.SetConnected]) and
// compact its history ([MemDB.Compact]).
//
// # Limitations
//
// There are no leases, no transactions beyond the single-key compare
// operations the interfaces need, and no size limits. The watch history is
// kept in memory until [MemDB.Compact] trims it. Context deadlines are only
// checked when an operation starts, never in the middle of it.
//
// # Concurrency
//
// MemDB is safe for concurrent use.
package nodesynctest

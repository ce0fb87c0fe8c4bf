// Package boltstore implements [ipam.Store] in a local bbolt file, so that
// pod IP allocations survive a crash or restart of the agent without
// depending on etcd.
//
// # Layout
//
// The records live in one bucket (default "ipam") of the file:
//
//	<namespace>/<name>  →  "<address>" or "<address> <container ID>"
//
// The value is the pod's address ("10.1.5.2"), followed, if the sandbox
// holding it is known (ipam.Allocation.ContainerID), by a space and that
// sandbox's container ID ("10.1.5.2 3f2a9c0e51d4"). Records written before
// holders were recorded (the address only) are read with an unknown
// holder; a version that predates holders skips (and logs) records that
// name one, so do not downgrade below it without deleting them.
//
// Every Put and Delete is one bbolt read-write transaction, committed with
// fsync before it returns; a write is therefore either durable or not
// applied when the call returns, never applied later. The file may hold
// other buckets (the agent's other local state); boltstore touches only
// its own.
//
// # Fencing
//
// [Open] takes bbolt's exclusive file lock (flock) and keeps it until
// [Store.Close]: a second agent process on the node that opens the same
// file fails with [ErrLocked] after Config.LockTimeout. The kernel releases
// the lock when the process dies, so an agent restarted after a crash
// opens the file at once.
//
// # Which store to use
//
// Use boltstore when etcd write latency or availability matter more than
// surviving the loss of the node's disk: an allocation costs one local
// bbolt transaction with fsync (about 0.3 ms on the development VM's
// disk; more on slow or busy disks) and keeps working while etcd is
// unreachable. Keep the file in a directory that survives reboots and
// agent upgrades (for example a hostPath such as
// /var/lib/vswitchkit/ipam.db). If the file is lost (a re-imaged node, a
// replaced VM, a wiped state directory), the allocations of pods not yet
// reflected in the Kubernetes state are lost with it, exactly as without
// a Store, and two pods can get one address; use ipam/etcdstore where
// that can happen.
//
// # Concurrency
//
// [Store] is safe for concurrent use.
//
// # Lifecycle
//
// [Open] opens (creating if needed) the file and the bucket: it does I/O,
// like os.Open and bbolt.Open, and starts no goroutine. [Store.Close]
// releases the file; calls after Close fail.
package boltstore

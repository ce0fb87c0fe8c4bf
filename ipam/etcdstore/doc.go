// Package etcdstore implements [ipam.Store] over etcd, so that pod IP
// allocations survive a crash of the agent and the loss of the node's
// disk.
//
// # Layout
//
// With the default prefix, the records of node N live at
//
//	/vswitchkit/ipam/N/<namespace>/<name>  →  "<address>" or "<address> <container ID>"
//
// The value is the pod's address ("10.1.5.2"), followed, if the sandbox
// holding it is known (ipam.Allocation.ContainerID), by a space and that
// sandbox's container ID ("10.1.5.2 3f2a9c0e51d4"). Records written before
// holders were recorded (the address only) are read with an unknown
// holder; a version that predates holders skips (and logs) records that
// name one, so do not downgrade below it without deleting them.
//
// The node's owner key is /vswitchkit/ipam/N (no trailing slash, so a
// prefix read of N's records never returns it). The owner key is attached
// to the lease of the agent that owns N's records; its value names that
// agent ([Config.Identity]).
//
// # Fencing
//
// Two agents started with the same node name must not both write N's
// records. [Store.Run] acquires ownership: it creates the owner key with a
// lease and keeps the lease alive. Every write is one etcd transaction
// that applies only if the owner key is still the one this store created
// (its create revision, as with concurrency.Mutex.IsOwner) and has not
// been written since this store's last write (its mod revision); the
// transaction writes the record and the owner key. So
//
//   - an agent that lost the owner key (another agent took over, an
//     operator deleted it, or its lease expired and another agent owned
//     the key since) can no longer write: its calls fail with
//     [ErrOwnershipLost], [Store.Lost] is closed and Run returns the
//     error;
//   - a lease that expired (etcd heard no keep-alive within the TTL: an
//     etcd overloaded by thousands of agents starting at once, a long
//     pause) while no other agent took the key is not a loss: Run creates
//     the owner key again with a new lease, and keeps it only if the key's
//     history since the store's last write holds no other agent's key
//     (if that history was compacted, the records are lost; its own
//     earlier attempts are told by its Identity); writes and lists made
//     meanwhile wait for the verdict, however long Run's retries take
//     (a key deleted while the lease lives, by an operator, is lost
//     after two TTLs);
//   - a keep-alive that etcd does not answer in time (the client gives
//     the lease up after its deadline: the dial timeout + 1s for the
//     first, the TTL for the others), as an overloaded etcd does while the
//     lease lives on, is not a loss: the store asks etcd whether the lease
//     lives and, if it does, keeps it alive again;
//   - a second agent with the same node name waits in Run until the first
//     releases the key (Run of the first returned, or its lease expired
//     after a crash: at most [Config.LeaseTTL]); until then its calls wait
//     and fail with [ErrNotOwner] when their context ends. An agent
//     restarted after a crash on the same node, whose store finds the
//     lease recorded in [Config.LeaseFile], takes over the lease and the
//     key at once;
//   - a write whose outcome was unknown (the request timed out after etcd
//     applied it, or before) can never be applied after a later write of
//     the store has returned: the later write changed the owner key's mod
//     revision. This is the property [ipam.Store] requires for IPAM to
//     settle failed writes safely.
//
// Reads are fenced too (ListAllocations reads only while the owner key is
// this store's).
//
// # Which store to use
//
// Use etcdstore when the node's local disk may be lost: a re-imaged node,
// a replaced VM, an ephemeral root disk. The records outlive the node, and
// the restarted agent (under the same node name) finds them. The costs,
// honestly: every allocation and release waits for one etcd transaction
// (two keys: the record and the owner key). Against a single-member etcd
// on loopback with fsync, on the 2-core development VM, that is about
// 0.4 ms — no slower than a local bbolt write there — but a production
// etcd adds network round trips and quorum replication (typically a few
// milliseconds, with spikes of tens under load) and is shared by every
// node's pod churn. Allocation fails while etcd is unreachable, and an
// agent restarted after a crash waits until the crashed agent's lease
// expires (at most [Config.LeaseTTL]; a graceful stop releases at once)
// unless the store has a [Config.LeaseFile].
// Use ipam/boltstore when etcd latency or availability matter more and
// the node's state directory survives restarts and re-images.
//
// # Concurrency
//
// [Store] is safe for concurrent use.
//
// # Lifecycle
//
// [New] does no I/O and starts no goroutine. [Store.Run] acquires the
// node's records (waiting for another owner to release them), keeps the
// lease alive and blocks until ctx is done or ownership is lost; it then
// revokes the lease (so that a restarted agent takes over at once) and
// returns. Store methods wait for ownership (bounded by their context),
// and fail once Run has returned. The etcd client is the caller's: the
// Store neither creates nor closes it.
package etcdstore

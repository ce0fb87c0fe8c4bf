// Package nodesync allocates cluster-wide node IDs and publishes the
// VPP-side IP addresses of nodes running the vswitch, over a cluster-wide
// database ([ClusterWideDB]; etcd in production through
// [github.com/vswitchkit/vswitchkit/nodesync/etcddb]).
//
// A [NodeSync] claims the smallest free positive integer, starting with 1,
// as this node's ID; a restarting node finds the ID it owns by its name and
// reuses it. Joining costs a constant number of small requests, whatever
// the size of the cluster (see # Allocation), so thousands of simultaneous
// joins all succeed; attempts are bounded only by the context given to
// [NodeSync.Run].
//
// As an event handler of the controller loop, NodeSync merges the vswitch
// records of all nodes (ID and VPP IPs, watched by Run) with the Kubernetes
// node objects (management IPs and pod CIDRs, from the "node" resource of
// DBResync and KubeStateChange) and pushes a [NodeUpdate] event when another
// node joins, leaves or changes, or when this node's management IPs or pod
// CIDRs change. [NodeSync.GetAllNodes] returns a copy of that view.
//
// Usage sketch:
//
//	db, _ := etcddb.New(etcddb.Config{Endpoints: endpoints})
//	ns, _ := nodesync.New(nodeName, db, loop, nodesync.Config{Logger: log})
//	// register ns as the first handler of loop, then:
//	g.Go(func() error { return db.Run(ctx) })
//	g.Go(func() error { return ns.Run(ctx) })
//	// after the start-up resync: ns.GetNodeID(), ns.PublishNodeIPs(...)
//
// # Allocation
//
// The claim id/<n> (a compare-create: the key must not exist) is the only
// truth about who owns ID n; the node record node/<name> carries n and is
// written in the same transaction. A first join takes two transactions: the
// first takes a ticket - the version of the counter alloc/ticket after an
// unconditional put, so tickets never conflict - unless a free-ID hint
// exists; the second claims id/<ticket>. A restart reads the node's record
// and the claim it names (two single-key reads) and writes nothing. Free IDs
// below the counter are listed as hints alloc/free/<n> by [ReleaseNode], and
// joiners claim them, smallest first, before they take tickets, so the IDs
// in use stay the smallest possible (1..N on a cluster without releases).
// Requests whose outcome is unknown (an etcd timeout after the write) are
// repeated safely: every write compares against the revisions read, and a
// ticket taken unseen is recovered by reading the counter at the pending
// record's revision. The argument is written out in alloc.go.
//
// # Freeing IDs
//
// Nodes never free their own ID: a node that restarts must get it back.
// The cluster-level component that watches Kubernetes nodes - the reflector
// or an operator - calls [ReleaseNode] when a Kubernetes node object is
// deleted; in one transaction it deletes the node's record and claim and
// adds a free-ID hint for the next joining node. A node whose record is
// released while its agent runs gets [ErrNodeReleased] from Run.
//
// # Starting without the database
//
// With Config.LocalState (e.g. [NewStateFile]), Run saves the node ID and
// the latest snapshot of the node records on the node. When the database
// has not confirmed or allocated the ID within Config.LocalFallbackDelay
// (default 5s, like the watcher's fallback to its mirror), Run starts with
// the saved ID and records: [NodeSync.Ready] closes, the start-up Resync
// succeeds and other handlers (IPAM) work. Once the database is reachable,
// Run checks that the claim id/<n> still names this node and replaces the
// saved records with current ones (a record resync into the loop). If the
// claim is gone meanwhile, Run returns [ErrNodeReleased]; if another node
// owns the ID, [ErrNodeIDLost]: the node must stop using the ID either way,
// and the saved ID is forgotten. A node whose saved ID turns out not to be
// its own before it used it (the database answered in time) simply
// allocates a new one. Without a saved ID, the start-up Resync waits for the
// database and, when Config.StartupTimeout passes, returns [ErrNotReady]
// with what is missing, e.g. "database not connected since 12:03:04;
// nothing saved in local state /var/lib/vswitchkit/nodesync.json".
//
// # Concurrency
//
// NodeSync is safe for concurrent use. The event-handler methods run on the
// loop goroutine; PublishNodeIPs does a DB request and belongs there too.
// GetNodeID, Ready and GetAllNodes may be called from any goroutine.
//
// # Lifecycle
//
// [New] does no I/O and starts no goroutine. [NodeSync.Run] waits for the
// DB connection, allocates the ID, reads the node records (closing
// [NodeSync.Ready]; or starts from local state, see above), then watches
// the records until its context ends, and returns after every goroutine it
// started has exited. The start-up Resync of the loop waits for the ID, at
// most Config.StartupTimeout and only as long as the loop's context lasts;
// if Run has not been called within [NotRunningDelay] it fails at once
// with [ErrNotRunning], so that a forgotten Run is reported in seconds
// instead of blocking the loop. Record changes reach the handler in
// batches: at most one internal event of a NodeSync waits in the loop's
// queue however many changes arrive (a storm of joins while the loop waits
// for its start-up resync costs no queue space); the handler applies them
// in order, at most 256 per event. If a push fails or the watch breaks,
// Run re-lists and pushes one snapshot. With Config.InitialNodeIPs a
// joining node writes its VPP addresses with the claim of its ID, so the
// other nodes receive one change per join.
//
// # Not done here
//
// NodeSync does not compute subnets from IDs (that is ipam), does not use
// leases (a joiner that crashes between its two transactions and never
// comes back holds its ticket, a gap in the ID sequence, until ReleaseNode
// is called for it), and does not decide when a node is gone: it trusts the
// Kubernetes node objects and ReleaseNode. Every node still reads all node
// records once at start (and after a broken watch), which is O(N) per node
// by nature; with a broker that reads pages ([PageLister], as the etcd
// adapter does) a failed request is retried for its page alone, so the
// records are read once however many requests fail.
package nodesync

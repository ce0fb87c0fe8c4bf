// Package nodesync allocates cluster-wide node IDs and publishes the
// VPP-side IP addresses of nodes running the vswitch, over a cluster-wide
// database ([ClusterWideDB]; etcd in production through
// [github.com/vswitchkit/vswitchkit/nodesync/etcddb]).
//
// A [NodeSync] claims the smallest free positive integer, starting with 1,
// as this node's ID (a compare-create of the key id/<n>); a restarting node
// finds the ID it owns by its name and reuses it. Many nodes joining at once
// are ordered by the creation of their records and claim distinct IDs
// without fighting over the same key, so hundreds of simultaneous joins all
// succeed (see alloc.go for the scheme); attempts are bounded only by the
// context given to [NodeSync.Run].
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
// # Freeing IDs
//
// Nodes never free their own ID: a node that restarts must get it back.
// The cluster-level component that watches Kubernetes nodes - the reflector
// or an operator - calls [ReleaseNode] when a Kubernetes node object is
// deleted; that frees the node's ID for the next joining node. A node whose
// record is released while its agent runs gets [ErrNodeReleased] from Run.
//
// # Records
//
// The records live under Config.Prefix: node/<name> holds a
// [github.com/vswitchkit/vswitchkit/nodesync/model.VswitchNode] (ID 0 while
// the node waits for its ID), id/<n> a NodeIDClaim naming the owner. A
// malformed record of another node is logged and skipped; it never stops
// this node. A malformed claim still counts its ID as taken.
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
// DB connection, allocates the ID (closing [NodeSync.Ready]), then watches
// the records until its context ends, and returns after every goroutine it
// started has exited. The start-up Resync of the loop waits (at most
// Config.StartupTimeout) for the ID. Record changes reach the handler as
// internal events pushed into the loop; if a push fails or the watch
// breaks, Run re-lists and pushes one snapshot.
//
// # Not done here
//
// NodeSync does not compute subnets from IDs (that is ipam), does not use
// leases (a crashed joiner that never comes back leaves a gap in the ID
// sequence until ReleaseNode is called for it), and does not decide when a
// node is gone: it trusts the Kubernetes node objects and ReleaseNode.
package nodesync

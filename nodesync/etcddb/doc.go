// Package etcddb implements [nodesync.ClusterWideDB] over an etcd cluster
// with go.etcd.io/etcd/client/v3.
//
// Usage:
//
//	db, err := etcddb.New(etcddb.Config{Endpoints: []string{"https://10.0.0.1:2379"}, TLS: tlsCfg})
//	...
//	go db.Run(ctx)        // connects, fires OnConnect callbacks, closes the client when ctx ends
//	ns, err := nodesync.New(nodeName, db, loop, nodesync.Config{})
//
// An application that already has a *clientv3.Client uses [NewFromClient]
// instead; the DB is then connected at once and does not own the client.
//
// PutIfNotExists is a compare-create transaction (the key's create revision
// must be 0); Txn maps one to one onto an etcd transaction. List reads large
// ranges in pages (Config.ListPageSize) at the revision of the first page,
// so one snapshot of thousands of node records never has to be held whole
// by the server. Watches are created with clientv3.WithRequireLeader, so a
// member that loses its leader ends the watch with an error and nodesync
// re-lists.
//
// # Concurrency
//
// [DB] is safe for concurrent use.
//
// # Lifecycle
//
// [New] does no I/O and starts no goroutine. [DB.Run] creates the client,
// retries until the first request succeeds, calls the OnConnect callbacks,
// and blocks until ctx is done; then it closes the client and returns
// ctx.Err(). [DB.Close] closes the client early; operations then fail with
// nodesync.ErrNotConnected.
package etcddb

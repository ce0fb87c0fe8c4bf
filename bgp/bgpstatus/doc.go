// Package bgpstatus publishes a node's BGP status: a [Publisher] reads the
// status from a [Source] (bgp.Controller.NodeStatus: the configuration
// applied, every instance and peer with its session, negotiated timers and
// routes per family, and the conditions) and writes it, as a
// bgpmodel.NodeStatus, under the node's own etcd key
// (bgpmodel.StatusKey: /vswitchkit/bgpstatus/<node> by default). Only
// changes are written, at most once per Config.MinWriteInterval. The
// reflector's leader copies the statuses into per-node Kubernetes objects
// (package bgp/bgpreflector); operators can read the keys directly.
//
//	pub, _ := bgpstatus.New("node-1", ctrl, bgpstatus.EtcdWriter(etcdClient), bgpstatus.Config{})
//	go pub.Run(ctx)
//
// # Concurrency
//
// [Publisher] is safe for concurrent use: Run is called once; Last and
// Stats may be called from any goroutine.
//
// # Lifecycle
//
// [New] does no I/O and starts no goroutine. [Publisher.Run] reads and
// writes until its context ends, then returns ctx.Err(); it starts no
// goroutine. The status key is left in place when Run ends: it holds the
// last status the agent published.
package bgpstatus

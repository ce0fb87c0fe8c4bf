// Package agent wires one node's complete vswitchkit agent from the
// library packages: the event loop committing to the VPP driver, the etcd
// watcher (with its local mirror), nodesync (with local state), IPAM with a
// durable store, the service processor with the node-address glue, the BGP
// control plane (GoBGP) fed by bgpglue, and the CNI pod server.
//
// It is the one place where the full agent is put together; the demo
// (examples/cluster), the per-node daemon (examples/vswitch) and the scale
// envelope (examples/scale) use it. Applications that build their own agent
// read it as the reference wiring; the library packages stay independent of
// it.
//
// # Lifecycle
//
// [Open] builds every component and opens the local state files;
// [Config.Validate] checks a configuration without doing anything.
// [Agent.Run] runs them all until its context ends or one fails, then
// stops them in order (the pod server first, the VPP driver last, which
// leaves VPP configured) and returns after every goroutine has exited.
// Components are exposed for observation (metrics, debug views); they
// must not be reconfigured.
package agent

// Package agent is the reference composition of vswitchkit: one node's
// complete agent, wired from the library packages — the event loop
// committing to the VPP driver, the etcd watcher (with its local mirror),
// nodesync (with local state), IPAM with a durable store, node and pod
// connectivity (render/nodeconn, render/podconn), the service processor
// with a service renderer (render/svcnat onto NAT44-ED, or render/svccnat
// onto cnat: [Config].Services), the BGP control plane
// (GoBGP) fed by render/bgpsource from the v1 policy or the v2 objects,
// with the routes it learns installed into VPP by render/bgproutes and its
// status published in etcd by bgp/bgpstatus, and the CNI pod server.
//
// A cluster is IPv4, IPv6 or dual-stack ([Config].IPFamily): in a
// dual-stack one a second IPAM ([Config].IPAM6) gives every pod an IPv6
// address beside its IPv4 one, the mesh carries both families, BGP
// advertises both, and the cnat renderer serves services of both (NAT44
// translates IPv4 only, and is refused in an IPv6-only cluster).
//
// The demo (examples/cluster), the per-node daemon (examples/vswitch) and
// the scale envelope (examples/scale) run it. Applications use it as it
// is, extend it, or read it as the reference wiring for their own; the
// library packages stay independent of it.
//
// # Extending the agent
//
// Between [Open] and [Agent.Run] an application can add its own parts:
//
//   - [Agent.AddHandler]: event handlers, registered after the agent's
//     own, so in every event they see what the agent's components took
//     from it, and what they put into the event's transaction is committed
//     to VPP with the rest;
//   - [Agent.AddServiceRenderer]: service renderers beside the built-in
//     one, or instead of it with [Config].Services set to [ServicesNone];
//   - [Agent.AddRunner]: long-running parts, started and stopped with the
//     agent.
//
// Every component is reachable through the [Agent]'s fields (Loop, IPAM,
// NodeSync, Services, Driver, …), to read state or to build a handler on.
//
// # Lifecycle
//
// [Open] builds every component and opens the local state files;
// [Config.Validate] checks a configuration without doing anything. A
// failed Open returns its error and leaves nothing open.
// [Agent.Run] runs them all until its context ends or one fails, then
// stops them in order (the pod server first, the VPP driver last, which
// leaves VPP configured) and returns after every goroutine has exited:
// ctx.Err() when its context ended it, else the failure. [Agent.Ready]
// says whether the agent can serve pods (the loop's start-up resync
// processed, the node ID known, VPP connected) and [Agent.WaitReady] waits
// for it, built on the loop's [controller.Loop.WaitStartupResync]: an
// agent whose Run was never called is named within seconds. Components are
// exposed for observation (metrics, debug views); they must not be
// reconfigured.
//
// # Concurrency
//
// An Agent is safe for concurrent use as far as its components are; the
// Add methods are for the goroutine that calls Open, before Run.
package agent

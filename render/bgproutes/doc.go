// Package bgproutes installs the routes that BGP peers taught a node into
// its VPP: a [Handler] turns the speaker's learned routes (those a peer
// family's import prefix list accepted, see bgp.PeerFamily and
// gobgp.Manager.LearnedRoutes) into vppdriver/vppmodel.Route values — the
// prefix, via the route's BGP next hop out of the uplink interface —
// which the event loop commits to the VPP driver.
//
//	sig := bgp.NewSignaler()
//	mgr, _ := gobgp.New(gobgp.Config{LearnedRoutes: sig, ...})
//	h, _ := bgproutes.New(mgr, sig, loop, bgproutes.Config{Uplink: "uplink"})
//	_ = loop.Register(..., h)
//	// run loop, mgr and h (each Run(ctx)) in an errgroup
//
// A route goes from VPP when the peer withdraws it, when its session goes
// down (after graceful restart's stale time when the peer negotiated
// it), or when the import list stops accepting it. By default nothing is
// imported, and the handler installs nothing.
//
// Learned routes never replace the cluster's own: a route within one of
// Config.Reserved (the pod, VPP-host and service ranges in an agent) is
// not installed, nor one whose next hop is of the other address family.
// A default route or any less specific one is installed: VPP's longest
// prefix match keeps the cluster's routes in use.
//
// # Concurrency
//
// [Handler] is safe for concurrent use: the event loop calls its handler
// methods on its goroutine, Run runs on its own.
//
// # Lifecycle
//
// [New] does no I/O and starts no goroutine. [Handler.Run] turns the
// speaker's signals into [RoutesChanged] events for the loop (at most one
// queued at a time: bursts coalesce) until its context ends, and returns
// ctx.Err(). The handler rebuilds its routes at every resync.
package bgproutes

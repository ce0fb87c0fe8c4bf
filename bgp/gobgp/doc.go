// Package gobgp implements [bgp.BGPRouterManager] with GoBGP running as an
// in-process library.
//
// A [Manager] runs one GoBGP server per local ASN (virtual router, or
// instance) of the applied configuration: a v1 peering policy
// ([Manager.ConfigurePeers]) or the internal model both APIs translate
// into, a bgp.NodeSpec ([Manager.ApplySpec]); ConfigurePeers translates
// the policy (bgp.SpecFromPolicy) and applies it the same way. Every call
// computes the difference between the applied and the desired state:
// servers whose identity (router ID, listening port) changed are
// restarted, neighbors are added, removed or re-created when their session
// configuration changed, and paths (the node's pod CIDRs and the addresses
// of the selected services, IPv4 and IPv6, aggregated where an
// advertisement says so) are added or withdrawn individually. Sessions to
// unreachable peers are retried by GoBGP in the background; they are not
// errors.
//
// # Per-peer routes and attributes
//
// Each peer is sent exactly the routes its families' advertisements yield,
// with their communities (standard, well-known, large) and local
// preference: every route is originated once, and GoBGP's global export
// policy holds, per peer and per set of attributes, a statement matching
// the peer's neighbor set and a prefix set of those routes, which adds the
// communities, sets the local preference and accepts; everything else is
// rejected. A change of the routes of an existing set edits its prefix set
// in place (a one-service change with 10k services advertised touches one
// prefix); a new peer or a new set of attributes rebuilds the policies.
// Peers whose choice changes for a route that stays originated get a soft
// reset (route refresh out). Local preference is sent to internal peers
// only (RFC 4271).
//
// # Next hops and address families
//
// Routes of each family carry the node's address of that family as next
// hop (ControlPlaneState.IPv4 for IPv4, .IPv6 for IPv6), whatever the
// family of the session: an IPv6 session carries IPv4 routes with an IPv4
// next hop. A family for which the node has no usable address is not
// offered to the neighbors, its routes are not advertised, and
// [Manager.Peers] says why (bgp.PeerStatus.Disabled); a neighbor left with
// no family at all is not configured and ConfigurePeers reports it.
// Advertised and received counts cover the families the peer negotiated.
//
// # Graceful restart
//
// With graceful restart on for a neighbor, the capability carries the
// notification flag (N, RFC 8538) and, on the first OPEN of a newly
// started server, the restart flag (R) with forwarding preserved for every
// family: the data plane keeps forwarding while the agent restarts, so a
// new agent process presents itself to its peers as restarted. When
// [Manager.Run] ends (agent shutdown) or the process dies (even by
// SIGKILL), sessions end without a withdrawal: graceful-restart peers keep
// the routes, stale, for the restart time, and the restarted agent
// re-advertises them, after which the peers drop what it no longer
// advertises (End-of-RIB). The restarting speaker does not defer its
// advertisements for End-of-RIB from its peers beyond GoBGP's minimum of a
// second, as it never uses received routes. ConfigurePeers with a nil
// policy is an explicit withdrawal: every peer gets a Cease, sent as a
// Hard Reset to peers that negotiated RFC 8538, and flushes the routes at
// once.
//
// # Learned routes
//
// Routes received from peers are kept in their Adj-RIB-In (queryable with
// [Manager.Routes]). By default none is imported. A peer family's import
// prefix list (exact, ge, le) becomes a statement of the global import
// policy that accepts the matching routes of that peer into the speaker's
// RIB; [Manager.LearnedRoutes] reports their best paths (watched with
// GoBGP's best-path events) and Config.LearnedRoutes is signalled on every
// change, for a consumer that installs them into the data plane (package
// render/bgproutes). They go when the peer withdraws them, when its
// session ends without graceful restart, or when graceful restart's timer
// for the peer expires. They are never re-advertised: the export policy
// rejects every route learned from a peer, so the speaker stays a leaf,
// not a transit router.
//
// GoBGP types stay inside this package: the API uses package bgp, netip and
// standard types only.
//
// # Lifecycle
//
// [New] does no I/O and starts no goroutine. [Manager.Run] makes the manager
// usable; while it runs, ConfigurePeers starts and stops GoBGP servers. When
// Run's context is cancelled every server is stopped without a withdrawal
// (see above: graceful-restart peers keep the routes for the restart time,
// the others receive a Cease and flush them) and Run returns after all
// GoBGP goroutines have exited. ConfigurePeers outside Run returns
// [ErrNotRunning].
//
// # Concurrency
//
// Manager is safe for concurrent use. ConfigurePeers and ApplySpec calls
// are serialized by the manager (its contract forbids overlapping calls
// anyway); status queries ([Manager.Peers], [Manager.Routes],
// [Manager.LearnedRoutes]) may run at any time.
//
// GoBGP delivers best-path events on a goroutine of its own per server,
// which ends shortly after the server's watch is cancelled (when the
// virtual router stops); it is GoBGP's, not joined by Run. GoBGP (v4.8.0)
// converts paths for its API (that watch, ListPath) outside its lock,
// reading each path's stale flag, which a graceful-restart peer-down sets
// under a read lock: the race detector reports it when a graceful-restart
// peer of a running server goes down. The flag is a bool that nothing of
// ours reads; this package's test of that case runs the manager in a
// child process.
//
// GoBGP keeps its route-selection options in package-level variables that
// every StartBgp overwrites (with the same defaults here) while other servers
// of the process read them. The values never differ, but the race detector
// reports it when a virtual router starts while another GoBGP server runs in
// the same process; this package's tests therefore run their peer speakers
// in child processes and use one virtual router per manager.
package gobgp

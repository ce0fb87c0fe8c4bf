// Package gobgp implements [bgp.BGPRouterManager] with GoBGP running as an
// in-process library.
//
// A [Manager] runs one GoBGP server per local ASN (virtual router) of the
// applied peering policy. Every [Manager.ConfigurePeers] call computes the
// difference between the applied and the desired state: servers whose
// identity (router ID, listening port) changed are restarted, neighbors are
// added, removed or re-created when their configuration changed, and paths
// (the node's pod CIDRs and the addresses of the selected services, see
// bgp.VirtualRouter.ServicePrefixes, IPv4 and IPv6) are added or withdrawn
// individually. Sessions to unreachable peers are retried by GoBGP in the
// background; they are not errors.
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
// Routes learned from peers are kept in their Adj-RIB-In (queryable with
// [Manager.Routes]) but never imported or re-advertised: the speaker is a
// leaf, not a transit router.
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
// Manager is safe for concurrent use. ConfigurePeers calls are serialized by
// the manager (its contract forbids overlapping calls anyway); status
// queries ([Manager.Peers], [Manager.Routes]) may run at any time.
//
// GoBGP keeps its route-selection options in package-level variables that
// every StartBgp overwrites (with the same defaults here) while other servers
// of the process read them. The values never differ, but the race detector
// reports it when a virtual router starts while another GoBGP server runs in
// the same process; this package's tests therefore run their peer speakers
// in child processes and use one virtual router per manager.
package gobgp

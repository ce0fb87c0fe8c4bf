// Package gobgp implements [bgp.BGPRouterManager] with GoBGP running as an
// in-process library.
//
// A [Manager] runs one GoBGP server per local ASN (virtual router) of the
// applied peering policy. Every [Manager.ConfigurePeers] call computes the
// difference between the applied and the desired state: servers whose
// identity (router ID, listening port) changed are restarted, neighbors are
// added, removed or re-created when their configuration changed, and paths
// (the node's pod CIDRs and the VIPs of the selected services, IPv4 and
// IPv6) are added or withdrawn individually. Sessions to unreachable peers
// are retried by GoBGP in the background; they are not errors.
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
// Run's context is cancelled every server is stopped (peers receive a
// CEASE notification, which withdraws our routes) and Run returns after all
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

// Package gobgptest runs real BGP speakers on loopback for tests of code
// that speaks BGP, such as package gobgp and its users.
//
// [StartPeer] starts a [Peer]: a plain GoBGP server playing the remote
// router, in a child process (the test binary re-executed; its TestMain
// must call [Main] first). Configure its neighbors with [Peer.AddNeighbor]
// (passive or active, TCP-MD5, address families, graceful restart as
// helper with RFC 8538), originate and withdraw routes with [Peer.AddPath]
// and [Peer.DeletePath], kill it with [Peer.Kill], and read what it learned
// with [Peer.Routes] (next hops, attributes, graceful-restart stale
// marks), [Peer.Count], [Peer.WaitCount], [Peer.WaitPrefix] and
// [Peer.GracefulRestartFlags], and a neighbor's session and router ID with
// [Peer.Neighbor]. [Peer.NeighborFor] returns the bgp.Neighbor
// that reaches the peer.
//
// [StartBIRD] runs BIRD 2 (Debian bird2) and [StartFRR] FRR's bgpd alone
// (Debian frr; no zebra, nothing installed in the kernel) as a peer, for
// interoperability tests; they skip the test when the daemon is not
// installed. FRR refuses routes whose next hop is a loopback address (a
// martian next hop resets the session): give the speaker under test other
// node addresses than its session's.
//
// Peers listen only on loopback addresses (127.0.0.0/8, ::1); StartPeer,
// StartBIRD and StartFRR refuse others. Peers are stopped when the test ends.
//
// # Concurrency
//
// [Peer] is safe for concurrent use; its commands are serialized over the
// child's stdin and stdout.
//
// # Limitations
//
// Unicast IPv4 and IPv6 only; no policies, route reflection or add-path.
// Originated routes may carry standard communities; the RIB reports the
// communities, large communities and local preference of what it holds.
// Polling waits give up after two minutes.
package gobgptest

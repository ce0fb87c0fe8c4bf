// Package svcnat renders Kubernetes services onto VPP's NAT44-ED plugin: it
// is a service renderer ([svcprocessor.ServiceRendererAPI]) that turns the
// service processor's combined service views into keyed vppdriver/vppmodel
// values, written into the controller transaction of the event being
// processed ([svcprocessor.RenderEvent] Txn and ResyncTxn); the vppdriver
// reconciler programs them.
//
// Usage, in an agent's wiring (after IPAM, before the loop runs):
//
//	thisNode := nodeaddr.NewNodeIPSet(nodeSync, nodeaddr.NodeIPSetConfig{OnlyNode: nodeName})
//	nat, err := svcnat.New(thisNode, ipamInstance, svcnat.Config{
//		Uplink:                 "uplink",  // the node handler's uplink
//		InterconnectInterfaces: []string{"host-ic"},
//	})
//	...
//	err = processor.RegisterRenderer(nat)
//	err = loop.Register(nodeSync, ipamInstance, thisNode, ..., processor.Handler())
//
// # What it configures (verified with real packets on VPP 26.06)
//
// The design is Contiv-VPP's: service traffic is destination-NATed by
// load-balanced static mappings on the out2in path, and the replies are
// translated back through the session on the in2out path.
//
//   - The plugin with forwarding on: traffic that matches no session and no
//     mapping (pod to pod, host to pod, node to node) passes untranslated.
//     Without forwarding VPP drops or source-NATs it.
//   - Interfaces: the processor's frontends (pods that back no service)
//     are NAT44 outside: their connections to services enter the out2in
//     path, which load-balances. Backends are inside and outside: their
//     replies leave through the in2out path (which un-NATs them), and they
//     are clients too. [Config.InterconnectInterfaces] (the VPP-host
//     interconnect, links to other nodes) are inside and outside, for
//     backends reached through them. The uplink ([Config.Uplink]) has the
//     output feature (post-routing NAT): external clients reach node ports
//     and external IPs through it, and pod traffic leaving the node through
//     it is source-NATed to the uplink's address (a pool that follows the
//     interface's address; see [Config.DisableSNAT]). Pod traffic to other
//     pods never leaves through the uplink unencapsulated (the node mesh
//     carries it in VXLAN), so it is not source-NATed.
//   - Mappings: one per frontend (protocol, address, port) of a service:
//     every IPv4 cluster IP, external IP (spec.externalIPs, the
//     load-balancer IP and ingress IPs) and, for ports with a node port,
//     every IPv4 address of this node ([NodeIPs]). A frontend with one
//     ready backend is a static mapping (VPP refuses load-balanced ones
//     with fewer than two), with more a load-balanced mapping whose
//     backends are weighted (see [Config.LocalBackendWeight]) and carry the
//     ClientIP session affinity timeout; without ready backends there is
//     no mapping. Every mapping is out2in-only (it translates connections
//     to the service, never those its backends open).
//   - Cluster IPs and the Local external traffic policy keep the client's
//     address; a pod that reaches a service backed by itself is
//     source-NATed to the NAT loopback address ([NATLoopback], a twice-NAT
//     pool) by self-twice-NAT, so that the reply comes back through VPP.
//     External traffic with the Cluster policy is twice-NATed to the NAT
//     loopback: its backend may be on another node, and the reply must
//     come back through this one. The Local policy (and the Local internal
//     policy for cluster IPs) leaves only this node's backends; a frontend
//     with none gets no mapping.
//   - TCP and UDP. SCTP ports cannot be translated by NAT44-ED: they are
//     not rendered, a warning is logged and [Stats] counts them
//     (UnsupportedPorts); nothing is turned into UDP. IPv6 addresses are
//     counted (IPv6Frontends) and left to another renderer.
//
// Two services that want one frontend (the same external IP and port, for
// example) conflict: the service first by namespace/name gets the mapping,
// the conflict is logged and counted, and the other service gets it when
// the first lets it go.
//
// # Incremental work
//
// A service change renders that service only and writes only the keys
// whose value changed: a backend added or removed changes the value of one
// load-balanced mapping, which the driver applies with one
// nat44_lb_static_mapping_add_del_local request (no delete and re-create).
// Unchanged mappings keep their model values, so the driver does not even
// compare them on a resync. A node address change re-renders the NodePort
// services only, an interface set change the interfaces that changed. A
// resync renders everything; the driver then sends VPP only what differs.
//
// # Concurrency
//
// [Renderer.Render] is called by the service processor, on the event loop,
// one call at a time; it is not safe for concurrent use. [Renderer.Stats]
// is safe for concurrent use.
//
// # Lifecycle
//
// [New] does no I/O and starts no goroutines; the renderer has nothing to
// run or stop. Without a transaction (the processor called directly, or
// reverting a failed event whose transaction the loop dropped) Render keeps
// its record of the rendered state up to date and writes nothing.
package svcnat

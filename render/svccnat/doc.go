// Package svccnat renders Kubernetes services, and the hostPorts of this
// node's pods, onto VPP's cnat plugin, for clusters of both IP families
// (IPv4, IPv6, dual-stack). It is a service renderer
// ([svcprocessor.ServiceRendererAPI]) beside render/svcnat (NAT44-ED,
// IPv4 only): it turns the service processor's combined service views
// into keyed vppdriver/vppmodel values written into the controller
// transaction of the event being processed, and it is a
// [controller.EventHandler] for the pods' hostPorts.
//
// Usage, in an agent's wiring (after IPAM, before the loop runs):
//
//	thisNode := nodeaddr.NewNodeIPSet(nodeSync, nodeaddr.NodeIPSetConfig{OnlyNode: nodeName})
//	cn, err := svccnat.New(thisNode, svccnat.SNATAddrsFunc(uplinkAddrs), svccnat.Config{
//		NodeName:               nodeName,
//		Uplink:                 "uplink",     // the node handler's uplink
//		InterconnectInterfaces: []string{"vpp-host"},
//		ExcludedPrefixes:       svccnat.ExcludedPrefixes(ipamV4, ipamV6), // the pod, service, VPP-host and VXLAN ranges
//	})
//	...
//	err = processor.RegisterRenderer(cn)
//	err = loop.Register(nodeSync, ipamInstance, thisNode, mesh, pods, processor.Handler(), cn)
//
// # What it writes (verified with real packets on VPP 26.06)
//
// One translation (vppmodel.CnatTranslation, vpp/cnat/translation/<proto>/<vip>:<port>)
// per frontend of a service: a virtual endpoint whose connections VPP
// sends to one of its paths (backends), translating the destination on
// the way in and back on the way out. Per service port (TCP or UDP):
//
//   - every cluster IP, of each family, to the ready backends of that
//     family (only this node's with the Local internal traffic policy);
//   - every external IP (spec.externalIPs, the load-balancer IP and the
//     load-balancer ingress IPs) to this node's backends of its family,
//     marked real_ip when the address is one of this node's;
//   - for a port with a node port, every address of this node ([NodeIPs])
//     with the node port, real_ip, to this node's backends of the
//     address's family.
//
// External frontends are served by this node's backends with either
// external traffic policy (see "Limits of VPP 26.06" below): with the
// Cluster policy a node without a backend of the service does not serve
// its node ports and external IPs (render/bgpsource advertises a service
// from the nodes with local backends only); the backends see the client's
// address.
//
// A frontend without a path of its family has no translation (VPP 26.06
// dies on a translation without paths), so a service whose backends all
// go has its translations deleted, and gets them again with the next
// backend. cnat has no path weights: connections are spread evenly.
//
// The hostPorts of this node's pods (kubemodel.Pod containers' ports with
// a host port): a translation of the port on the hostIP (when it is an
// address of this node), or on every address of this node of the pod
// address's family, real_ip, to the pod's address and container port,
// added and removed with the pod (its Kubernetes state: the renderer's
// handler follows the pods).
//
// The load-balancing of a service's translations is chosen by its
// annotation [LBAnnotation] ("vswitchkit.io/lb"): [LBECMP] (the default;
// cnat's default lb type: the hash of the connection's 5-tuple modulo the
// paths) or [LBMaglev] (cnat's maglev lb type: Maglev consistent hashing
// over a lookup table of 1009 entries). What Maglev
// guarantees: when one of N backends goes, its flows are spread over the
// others and the flows that hashed to the other N-1 almost all keep them
// (Maglev's table moves a few entries between the remaining backends: with
// one of four backends removed, 3-4 of about 220 such flows moved on VPP
// 26.06, against 139-147 with ecmp; TestPacketsRealVPP); a backend that comes
// takes about 1/(N+1) of the flows, from every other backend. The table is a pure function of the backends,
// so every node (and a VPP restarted) picks the same backend for a flow.
// With ecmp a change of the backends can move most flows. Established
// connections keep their backend either way (cnat keeps a session per
// connection): the difference shows for connections whose session is
// gone — after a VPP restart, or when a flow moves to another node. VPP
// keeps the lb type a translation was made with: a changed annotation
// re-creates the service's translations (the driver does it).
//
// ClientIP session affinity is expressed with cnat's flow hash: the
// translations of such a service hash the client's address only
// (vppmodel.CnatFlowHashSrcIP), so every connection of a client goes to
// the same backend while the backends stay the same — and, with maglev,
// mostly when they change. cnat has no affinity timeout: the affinity
// does not expire (sessionAffinityConfig.clientIP.timeoutSeconds is not
// expressed); with ecmp a change of the backends may move clients.
//
// SCTP ports and hostPorts are not rendered (the model refuses them: cnat
// is known to translate TCP and UDP); they are reported ([Problem]).
//
// # Source NAT
//
// One SNAT entry (vppmodel.CnatSnat): this node's source-NAT address of
// each family ([SNATAddrs]: the uplink's addresses, else the NAT
// loopback), the destinations never source-NATed
// ([Config].ExcludedPrefixes: the cluster's ranges) and cnat's K8S policy,
// which source-NATs a new connection when
//
//   - it comes in on an interface of the INCLUDE tables (the pods'; see
//     [Config].DisableSNAT) and goes to a destination outside the excluded
//     prefixes: pod traffic leaving the cluster takes the node's address;
//   - neither the interface it comes in on nor the one it leaves on is in
//     the POD table (the pods' and, from render/nodeconn, the tunnels'):
//     traffic between the uplink and the host interconnect, say;
//   - after translation its source is its destination: a pod that reaches
//     a service backed by itself (the hairpin case); the pod sees the
//     node's address as the client;
//
// and never when it leaves on an interface of the HOST table (the
// interconnects: traffic to the host keeps its source). The pods'
// interfaces are in the INCLUDE_V4, INCLUDE_V6 and POD tables; a
// loopback of the renderer's own, [AnchorInterface], stays in INCLUDE_V4
// (see its documentation).
//
// # Limits of VPP 26.06
//
// Found with packets on VPP 26.06 (TestPacketsRealVPP,
// TestTwoNodesIPv6RealVPP) and designed around:
//
//   - cnat's session state of a packet survives its VXLAN encapsulation:
//     a connection that was source-NATed where it left into a tunnel to
//     another node gets that rewrite applied once more, to the VXLAN
//     packet, by the uplink's cnat output node, from its second packet on
//     (the first one is written back already). So nothing that leaves
//     through a tunnel may be source-NATed: the tunnels are in the POD
//     table (render/nodeconn), and external frontends, whose clients would
//     need source NAT to reach a backend on another node, have this
//     node's backends only. The host reaching a cluster IP backed on
//     another node keeps its address (the cluster routes the VPP-host
//     subnets). The same holds for a translation's reverse: the reply to
//     a connection that this node translated must not leave through a
//     tunnel either, so a pod's connection to another node's address (a
//     node port or hostPort there) is source-NATed to this node's address
//     (the node interconnect range is not excluded): the reply comes back
//     through the uplink;
//   - the K8S policy's hairpin rule compares the low 32 bits of IPv6
//     addresses (its IPv4 comparison is not limited to IPv4): IPv6
//     connections between addresses that end alike (fd00:1:0:1::2 and
//     fd00:1:0:2::2, the first pods of two nodes with /64 pod subnets)
//     are source-NATed, and break through a tunnel as above. Per-node
//     IPv6 pod subnets must differ in their low 32 bits (a per-node prefix
//     length of 96 or more: IPAM's IPv6 default is 120; the agent refuses
//     a plan without);
//   - a SNAT entry with cnat clients puts an exclusive FIB entry on its
//     addresses that drops what is not a reply (VXLAN to the node's
//     address): the entry is made without clients (NO_CLIENT); with the
//     feature on every interface, replies are found by their sessions;
//   - a translation without paths kills VPP (never sent), and a SNAT entry
//     whose INCLUDE_V4 table empties forgets its excluded prefixes (the
//     anchor loopback stays in it).
//
// # Interfaces
//
// cnat translates in its own feature arcs: cnat-lookup and cnat-input on
// ip4-unicast and ip6-unicast (the destination is translated there, before
// the input ACL: acl-plugin-in-ip4-fa comes after them), cnat-output and
// cnat-writeback on ip4-output and ip6-output (source NAT and the reverse
// translation of replies, after the output ACL). A flow's packets must
// pass them where they enter and where they leave, so every interface
// that carries service traffic has the feature: the pods' (the service
// processor's frontends and backends), the uplink and the interconnects
// (Config), and the tunnels to other nodes (their owner's:
// render/nodeconn with Config.Cnat). No NAT44 feature is needed.
//
// # Incremental work
//
// A service change renders that service only and writes only the keys
// whose value changed: a backend added or removed changes the paths of
// the service's translations, which the driver applies with one
// cnat_translation_update each (in place; VPP keeps the translation's
// id and sessions). Unchanged translations keep their model values, so a
// resync that finds VPP right sends nothing. A node address change
// re-renders the services and pods bound to this node's addresses, an
// interface set change the interfaces that changed. A resync renders
// everything.
//
// # Bad input
//
// Two services, or a service and a pod, or two pods, that want one
// frontend conflict: services come before pods, each by namespace/name;
// the others get the frontend when the first lets it go. A service's
// unknown lb annotation (rendered with ecmp), an SCTP port, node ports of
// a family this node has no address of, a hostPort whose hostIP is not
// this node's or that another pod has: each is a [Problem] of that
// service or pod, logged at Warn once when it appears and listed by
// [Renderer.Problems]; everything else is rendered.
//
// # Concurrency
//
// [Renderer.Render] and the handler methods are called on the event loop,
// one call at a time; they are not safe for concurrent use.
// [Renderer.Stats] and [Renderer.Problems] are.
//
// # Lifecycle
//
// [New] does no I/O and starts no goroutines; the renderer has nothing to
// run or stop. Without a transaction (the processor called directly, or
// reverting a failed event whose transaction the loop dropped) Render
// keeps its record of the rendered state up to date and writes nothing.
package svccnat

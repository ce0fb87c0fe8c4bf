// Package bgp is the BGP control plane of a vswitchkit agent: it decides
// which BGP configuration applies to the node — a v1 peering policy or v2
// objects — and drives a [BGPRouterManager] (a BGP speaker backend, such as
// package gobgp) to apply it.
//
// # Two configuration APIs, one model
//
// v1 is the documented reference interface: one [PeeringPolicy] per node
// (after Cilium's CiliumBGPPeeringPolicy), selected with [PolicySelection]
// and applied with ConfigurePeers. v2 follows Cilium's BGP v2 resources:
// a [ClusterConfig] (instances and peers for the nodes its selector
// matches), [PeerConfig] objects (transport, timers, auth secret, graceful
// restart, families, each selecting [Advertisement] objects by label and
// carrying an import prefix list), advertisements (pod CIDRs, services by
// address kind and selector, with communities, local preference and
// aggregation), and a per-node [NodeConfigOverride] (router ID, local
// port, local ASN, local addresses). Both are translated into one internal
// model, the [NodeSpec] ([SpecFromPolicy], [Resolve]), which a
// [SpecApplier] applies; v1 and v2 selecting the same node is a reported
// conflict ([ErrConflictingConfig]), not a silent choice.
//
// Where v2 differs from Cilium, and why:
//
//   - Aggregation (AggregationLengthIPv4/IPv6) applies to pod CIDRs too,
//     not only to services (users ask for it; a pod CIDR per node is the
//     commonest thing to summarize), and a length is 1..32 / 1..128: 0
//     (a default-route "aggregate") is not accepted.
//   - Peer configs may import routes (an import prefix list per family,
//     with ge/le), which Cilium cannot; the default is still to import
//     nothing.
//   - A peer config has transport.passive (the v1 neighbor's Passive), so
//     that every v1 policy has a v2 equivalent; service entries have
//     loadBalancerClasses for the same reason.
//   - A peer whose peer config or auth secret is missing is not configured
//     at all (Cilium peers with defaults or without a password): an
//     unauthenticated session the user did not ask for is worse than none.
//     The peer shows state NotConfigured with a MissingPeerConfig or
//     MissingAuthSecret condition.
//   - There is no operator: each agent resolves its own node's
//     configuration, and the conditions Cilium puts on the cluster and
//     peer configs (MissingPeerConfigs, MissingAuthSecret,
//     ConflictingClusterConfig) are reported in the per-node status, per
//     peer or per node ([NodeStatus], [Condition]).
//   - Auth secrets come from one namespace as Cilium's do, but not
//     kube-system: see package bgp/bgpreflector.
//   - A cluster config instance needs its local ASN (Cilium allows it to
//     come from the override alone).
//
// # Status
//
// [Controller.NodeStatus] reports the node's BGP status: the source
// applied, per instance and peer the session state, when it was
// established, the negotiated timers, routes advertised, received and
// accepted per family, and conditions ([ConditionType]).
// [NodeStatusToModel] turns it into the bgpmodel.NodeStatus that agents
// publish (package bgp/bgpstatus).
//
// The pieces:
//
//   - [PeeringPolicy]: a node selector and virtual routers (local ASN,
//     pod-CIDR export, service advertisements, neighbors with timers,
//     multihop, graceful restart, TCP-MD5 password and address families),
//     with [PeeringPolicy.WithDefaults] and [PeeringPolicy.Validate], which
//     names every bad field and checks timers against RFC 4271, and
//     [PeeringPolicy.ValidateState], which rejects what cannot work on the
//     node (a passive neighbor without a listening port).
//   - Service advertisements, as in Cilium: a virtual router's
//     ServiceSelector (over the service labels plus [ServiceNamespaceLabel]
//     and [ServiceNameLabel]) picks services, ServiceAdvertisements picks
//     their load-balancer ingress IPs (the default), cluster IPs and/or
//     external IPs, LoadBalancerClasses filters LoadBalancer services by
//     spec.loadBalancerClass, and a Local traffic policy advertises a
//     service only from nodes with a ready local backend
//     ([VirtualRouter.ServicePrefixes] has the rules). [Service] is a
//     service as BGP sees it; [ServiceFromModel] converts a Kubernetes one.
//   - [PolicySelection]: exactly one policy may select a node, else
//     [ErrMultiplePolicies]. Label selectors follow Kubernetes semantics
//     (k8s.io/apimachinery's implementation underneath).
//   - [ParseAnnotations]: router ID and listening port per local ASN from
//     node annotations ([AnnotationPrefix]), parsed strictly.
//   - [Controller]: on every [Signaler] event it rebuilds a point-in-time
//     [ControlPlaneState] from a [NodeSource] and a [PolicySource] (and,
//     when it is one, an [ObjectSource] of the v2 objects) and calls
//     ConfigurePeers (v1) or ApplySpec (v2).
//   - Sources: [Store] is a programmatic source of the node, the policies,
//     the v2 objects and the services; [EventSource] is a
//     controller.EventHandler that follows this node's kubemodel.Node, the
//     peering policies and the v2 objects stored as bgpmodel values (key
//     scheme in package bgpmodel) through the event loop. Package render/bgpsource feeds a whole agent's state
//     (IPAM pod CIDRs, node sync addresses, services with local backends
//     from the service processor).
//   - [PeerStatus]: per neighbor, the session state, the families
//     negotiated, those not offered and why (no node address of that
//     family for the next hop), and the routes received, accepted and
//     advertised per negotiated family.
//   - [Attributes]: communities (standard, well-known, large) and local
//     preference, parsed from strings ([ParseCommunity],
//     [ParseLargeCommunity], [ParseWellKnownCommunity]); [PrefixMatch]:
//     import prefix-list entries with ge/le; [AdvertCache]: what adverts
//     yield for each peer, aggregated and with merged attributes.
//   - [LearnedRoute]: a route a peer's import list accepted, which the
//     agent installs into VPP (package render/bgproutes).
//
// Usage sketch:
//
//	sig := bgp.NewSignaler()
//	store := bgp.NewStore(sig)
//	mgr, _ := gobgp.New(gobgp.Config{Services: store})
//	ctrl, _ := bgp.NewController(mgr, store, store, bgp.ControllerConfig{Signaler: sig})
//	// run mgr.Run(ctx) and ctrl.Run(ctx) (e.g. in an errgroup); then feed
//	store.SetNode(node)
//	store.SetPolicy(policy)
//
// # Concurrency
//
// [Controller], [Store] and [Signaler] are safe for concurrent use. The
// controller serializes its calls into the manager, as the
// [BGPRouterManager] contract requires. Policies and states handed to a
// manager are read-only.
//
// # Lifecycle
//
// [NewController] does no I/O and starts no goroutine. [Controller.Run]
// runs the control loop on the calling goroutine until its context is
// cancelled, then withdraws everything ([Controller.FullWithdrawal]) with its
// own bounded context, and returns — unless the applied policy enables
// graceful restart: then the routes are left to the manager's shutdown,
// which ends the sessions without a withdrawal, so that the peers keep the
// routes while the agent restarts (see package gobgp). An explicit
// [Controller.FullWithdrawal] or ConfigurePeers(ctx, nil, nil) always
// withdraws at once.
//
// # Graceful restart
//
// With [GracefulRestart] enabled for a neighbor, a backend announces the
// restart (R) and notification (N, RFC 8538) flags; an agent that exits
// without withdrawing (a shutdown, a crash, SIGKILL) leaves its routes in
// the peers for RestartTime, and the restarted agent re-advertises them.
//
// This package does not speak BGP itself and does not watch Kubernetes:
// backends live in sub-packages (gobgp; gobgp/gobgptest runs GoBGP peers on
// loopback for tests) and the application feeds the sources.
package bgp

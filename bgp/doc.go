// Package bgp is the BGP control plane of a vswitchkit agent: it decides
// which BGP peering policy applies to the node and drives a
// [BGPRouterManager] (a BGP speaker backend, such as package gobgp) to
// apply it.
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
//     [ControlPlaneState] from a [NodeSource] and a [PolicySource] and calls
//     ConfigurePeers.
//   - Sources: [Store] is a programmatic source of the node, the policies
//     and the services; [EventSource] is a controller.EventHandler that
//     follows this node's kubemodel.Node and the peering policies stored as
//     bgpmodel.PeeringPolicy (key scheme in package bgpmodel) through the
//     event loop. Package render/bgpsource feeds a whole agent's state
//     (IPAM pod CIDRs, node sync addresses, services with local backends
//     from the service processor).
//   - [PeerStatus]: per neighbor, the session state, the families
//     negotiated, those not offered and why (no node address of that
//     family for the next hop), and the routes received and advertised per
//     negotiated family.
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

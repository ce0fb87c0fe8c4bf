// Package bgp is the BGP control plane of a vswitchkit agent: it decides
// which BGP peering policy applies to the node and drives a
// [BGPRouterManager] (a BGP speaker backend, such as package gobgp) to
// apply it.
//
// The pieces:
//
//   - [PeeringPolicy]: a node selector and virtual routers (local ASN,
//     pod-CIDR export, service selector, neighbors with timers, multihop,
//     graceful restart, TCP-MD5 password and address families), with
//     [PeeringPolicy.WithDefaults] and [PeeringPolicy.Validate], which names
//     every bad field and checks timers against RFC 4271.
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
//     event loop.
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
// own bounded context, and returns.
//
// This package does not speak BGP itself and does not watch Kubernetes:
// backends live in sub-packages and the application feeds the sources.
package bgp

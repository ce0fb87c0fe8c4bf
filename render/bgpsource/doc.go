// Package bgpsource feeds the BGP control plane (package bgp) from a running
// vswitchkit agent: it joins the controller event loop, IPAM, node sync and
// the service processor to a bgp.Controller and its manager.
//
// A [Source] is registered three times and used three times:
//
//	sig := bgp.NewSignaler()
//	src, _ := bgpsource.New(nodeName, sig, bgpsource.Config{
//		PodSubnets: []bgpsource.PodSubnets{ipam4, ipam6}, // *ipam.IPAM
//		Nodes:      nodeSync,                             // *nodesync.NodeSync
//	})
//	_ = sp.RegisterRenderer(src)                          // *svcprocessor.ServiceProcessor
//	_ = loop.Register(nodeSync, ipam4, sp.Handler(), src) // src after the others
//	mgr, _ := gobgp.New(gobgp.Config{Services: src})
//	ctrl, _ := bgp.NewController(mgr, src, src, bgp.ControllerConfig{Signaler: sig})
//	// run loop, mgr and ctrl (each Run(ctx)) in an errgroup
//
// What the controller then sees:
//
//   - the node: this node's Kubernetes node object (its labels select the
//     peering policy, its annotations configure the virtual routers), with
//     the pod CIDRs of IPAM ([Config.PodSubnets]) and this node's addresses
//     for router ID and next hops ([Config.IPv4]/[Config.IPv6], else the
//     VPP-side addresses node sync publishes for this node, else the
//     node object's InternalIP addresses);
//   - the peering policies stored as bgpmodel.PeeringPolicy and the v2
//     objects (cluster configs, peer configs, advertisements, node
//     overrides, auth secrets) stored as their bgpmodel values (through
//     bgp.EventSource);
//   - the services: converted from the Kubernetes service objects
//     (bgp.ServiceFromModel: labels, cluster, external and load-balancer
//     IPs, load-balancer class, traffic policies), each marked with whether
//     it has a ready backend on this node, as the service processor
//     computes it.
//
// Every change that matters — a resync (IPAM's PodCIDRChange is one), the
// node object, a policy or v2 object, a service, the local backends of a service, this
// node's NodeUpdate — signals the controller's Signaler, which rolls bursts
// up into one reconcile. Changes that BGP does not see (a service's ports
// or annotations) do not signal.
//
// # Concurrency
//
// [Source] is safe for concurrent use: the event loop calls its handler
// and renderer methods while the controller and the manager call its
// source methods on their own goroutines. The services it lists share their
// maps and slices with the source; treat them as read-only.
//
// # Lifecycle
//
// [New] does no I/O and starts no goroutine; the source has no Run. Until
// the first resync it knows no node, so the controller withdraws
// everything.
package bgpsource

// Package demo is the program behind `go run ./examples/cluster`: a
// working vswitchkit cluster on one machine, without root.
//
// [Run] builds it, in one process:
//
//   - etcd: an embedded server on loopback (package embedetcd, temporary
//     data directory) or an external one ([Options].Etcd);
//   - the Kubernetes reflector (reflector with the built-in
//     resources and bgp/bgpreflector's BGP resources) against client-go's
//     fake clientsets, which the demo fills as a cluster would be filled:
//     nodes with labels, pods whose status.podIP is set from the CNI
//     result (as kubelet does), services of every kind with
//     EndpointSlices of their pods' addresses (as the endpoint-slice
//     controller does), a NetworkPolicy (the api pods accept tcp/8080
//     from the web pods only) and the BGP configuration as v2 objects (a
//     cluster config, a peer config, two advertisements, a node override
//     per node);
//   - N simulated nodes, each the full agent of agent in
//     its own event loop on its own VPP stand-in (vppdriver/vppsim) with a
//     simulated Linux (cniservertest.FakeLinux) and a GoBGP speaker on its
//     own 127.0.0.x address; pods are added and deleted through each
//     agent's pod server over its unix socket with the request the CNI
//     plugin sends (cniplugin.Call);
//   - a route reflector: a GoBGP server (pkg/server) on 127.0.0.1 with a
//     route-reflector client for every node.
//
// It waits until every node's VPP has the mesh, every service's NAT44
// mappings have the right backends on every node, the pods the
// NetworkPolicy selects have ACLs and the route reflector has received
// every node's routes, showing progress; prints the [Summary] (with the
// policy's isolated pods and two connections checked against the ACLs on
// their path, vppsim.VPP.ACLVerdict: one allowed, one denied); makes a scripted change (a pod deleted, a backend added, a
// node leaving) and prints what changed.
//
// # Services on cnat, dual-stack
//
// With [Options].ServiceRenderer "cnat" the agents render services onto
// VPP's cnat (render/svccnat) and the wait checks every node's cnat
// translations of the services' cluster IPs instead of NAT44 mappings;
// with [Options].IPFamily "dual" (which needs cnat) the cluster is
// dual-stack (agent.DefaultIPv6Plan): every pod gets an IPv6 address
// beside its IPv4 one, every service an IPv6 cluster IP (fd00:96::…) with
// an IPv6 EndpointSlice beside the IPv4 one, and the summary shows both
// addresses of every pod and every node's cnat translations of both
// families, explained by [CnatLegend] (the command's --services cnat
// --ip-family dual).
//
// # Node IDs
//
// The agents start one at a time, in node order, each once the previous
// one is ready (agent.WaitReady: its start-up resync processed, which
// includes nodesync's claim of a node ID): node-i gets node ID i, and with
// it the same pod subnet and addresses, in every run. Started all at once,
// the agents raced for the smallest free ID.
//
// # The text summary's NAT44 lines
//
// [NATLegend] explains them; the summary ends with it. A backend written
// ADDR:PORT/N is one of a load-balanced mapping and N its probability in
// VPP, relative to the mapping's other backends.
//
// # Sessions between the speakers and the route reflector
//
// One BGP cluster config (bgp.vswitchkit.io/v2) applies to every node and
// names one peer, the route reflector. Its sessions are opened by the route
// reflector: each node's speaker listens on its own 127.0.0.x address (the
// router ID and port are the node's BGPNodeConfigOverride), and the peer
// config is passive. The other way round, every node would connect to
// 127.0.0.1 from 127.0.0.1, and the route reflector could not tell the
// nodes apart. The peer config's IPv4 family selects two advertisements:
// the pod CIDR with community 64512:100, and the load-balancer and
// external IPs of the services aggregated to /24 with community 64512:200
// (a service with externalTrafficPolicy Local stays exact, from the nodes
// with a backend): the route reflector receives the communities and the
// aggregates.
//
// # GoBGP speakers in one process
//
// GoBGP keeps its route-selection options in package variables that every
// server writes when it starts and reads while it works (see package
// bgp/gobgp). A real agent runs one speaker per process; here N+1 share one,
// so the demo starts them one after the other: the route reflector first,
// then the nodes join the cluster config one at a time (the demo labels
// them), each after the previous one has applied it, and the route
// reflector connects only after all of them have started. Every start is
// then ordered before the other speakers' work, and the demo (and its
// test) runs clean under the race detector.
//
// # Lifecycle
//
// Run joins every goroutine it starts and removes its temporary
// directories before it returns, also when its context is cancelled
// (Ctrl-C).
package demo

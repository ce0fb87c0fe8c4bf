// Package nodeaddr holds the small adapters that join vswitchkit packages, so
// that an agent's wiring needs no conversion code of its own. The core
// packages never import each other; each declares the narrow interface it
// consumes, and the types here satisfy those interfaces from what the
// other packages provide:
//
//   - [NodeIPSet]: the node addresses (from nodesync) on which NodePort
//     services are exposed, as svcprocessor.NodeIPs, kept up to date
//     incrementally as an event handler;
//   - the pod subnets from ipam for svcprocessor are
//     svcprocessor.SubnetsFromIPNet(ipam), and ipam takes the node ID from
//     nodesync directly (NodeSync satisfies ipam.NodeIDSource).
//
// The package Example wires a minimal agent: an embedded etcd, the event
// loop, the etcd watcher, nodesync, ipam with a durable store, the service
// processor and the VPP driver on the in-memory VPP stand-in.
//
// # What goes into VPP
//
// nodesync, ipam and svcprocessor put nothing into the loop's transaction:
// they keep cluster state (node IDs and addresses, pod IPs, combined
// service views) for the handlers that turn it into VPP configuration, the
// reference handlers under vppdriver (node mesh, pod interfaces, the NAT44
// service renderer). Without them the driver receives empty transactions.
//
// # Concurrency
//
// [NodeIPSet] is safe for concurrent use.
package nodeaddr

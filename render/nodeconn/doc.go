// Package nodeconn is the node connectivity handler of a vswitch agent: a
// controller.EventHandler that turns this node's addresses (from IPAM) and
// the cluster's nodes (from nodesync) into VPP configuration, as keyed
// vppdriver/vppmodel values in the loop's transaction. It never talks to VPP
// itself; the vppdriver reconciler (or any southbound owning the "vpp/"
// keys) applies the values.
//
// # This node
//
//   - the uplink ([Config].Uplink): an af_packet interface on a Linux
//     interface, or an existing VPP interface (a DPDK NIC) adopted by its
//     VPP name and never deleted, with the node-interconnect address
//     (IPAM's NodeAddr of this node's ID, or Uplink.Address) and a MAC
//     that stays the same over VPP restarts;
//   - VPP's side of the VPP-host interconnect ([Config].HostInterconnect):
//     af_packet on the host end of a veth pair, or a tap, with IPAM's
//     HostInterconnectAddrInVPP;
//   - a loopback with this node's VXLAN IP (IPAM's VxlanAddr): the
//     tunnels borrow its address;
//   - with [Config].NAT44, a NAT44 identity mapping for UDP 4789 on the
//     node IP (NAT44-ED on the uplink drops VXLAN otherwise), and the IPv4
//     tunnels as NAT44 inside and outside interfaces (replies of service
//     backends on other nodes are translated back);
//   - with [Config].Cnat (services on cnat, render/svccnat), cnat's
//     feature on every tunnel (the replies of backends on other nodes
//     come in through them), in the SNAT policy's POD table (nothing that
//     leaves through a tunnel is source-NATed: see the Config field), and
//     no NAT44 at all;
//   - the node IP is published to the other nodes (nodesync's
//     PublishNodeIPs), on every resync (nodesync writes only on change).
//
// In a dual-stack cluster ([Config].DualStack: the second family's IPAM)
// the uplink, the host interconnect and the VXLAN loopback hold this
// node's addresses of both families and both node IPs are published; the
// mesh runs over the first family's node IPs and carries both. An IPv6
// address plan (every range IPv6) builds the mesh over IPv6 node IPs.
//
// # The mesh
//
// For every other node that has an ID and has published an address of
// the node IP's family, per payload family (the families of its pod
// subnets and VPP-host subnet):
//
//	vpp/interface/vxlan-<id>       routed VXLAN tunnel node IP -> its address, VNI Config.VNI, decap ip4-input,
//	                               unnumbered to the VXLAN loopback
//	vpp/interface/vxlan6-<id>      the same for IPv6 payload (VNI Config.IPv6VNI, decap ip6-input)
//	vpp/neighbor/vxlan-<id>/<nh>   static neighbor for the next hop
//	vpp/route/0/<subnet>           its pod subnet(s) and VPP-host subnet via <nh> through the tunnel
//
// The next hop is the node's VXLAN IP for the VXLAN subnet's family (of
// either IPAM), and fe80::<id> (169.254.<id/256>.<id%256>) for a family
// without one. The pod subnets are
// IPAM's per-node slice, or with [Config].PodCIDRsFromKubernetes the pod
// CIDRs of the node's Kubernetes object (dual-stack).
//
// This is how a routed tunnel works on VPP 26.06 (verified with packets,
// see the tests): decapsulated packets go to ip4-input or ip6-input, so a
// tunnel carries one family; the tunnel needs its IP family enabled
// (unnumbered) or VPP drops what it decapsulates; and it is not a
// point-to-point interface: an attached route through it waits for ARP
// that never resolves, so routes need a next hop with a static neighbor.
//
// A node that leaves (NodeUpdate without a new state, or without an ID or
// address) loses its keys; a node whose address changes gets its tunnels
// moved (the tunnels' keys change value: VPP re-creates them) and nothing
// else: an update puts only keys whose value changed. A resync rebuilds
// every node from nodesync's GetAllNodes.
//
// # Register order
//
// After nodesync and IPAM (the handler reads this node's ID and addresses
// from them): nodesync, ipam, nodeaddr.NodeIPSet, nodeconn, podconn, the
// service processor.
//
// # Concurrency
//
// [Handler] is safe for concurrent use; the loop calls it on its goroutine.
//
// # Lifecycle
//
// [New] does no I/O and starts nothing; the handler works inside the
// controller loop. It handles no Shutdown: VPP keeps the mesh when the
// agent stops, and the next agent's resync finds it in place.
package nodeconn

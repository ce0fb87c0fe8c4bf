// Package vppsim is an in-memory VPP stand-in that plugs into GoVPP as an
// [adapter.VppAPI], so the same driver code runs against it and against a
// real VPP.
//
// A [VPP] keeps interface (local0, loopbacks, af_packet, tap v2, memif,
// VXLAN tunnels, NICs present from the start), unnumbered, address, IP
// neighbor, VRF table, route, bridge-domain and NAT44-ED tables and the
// configuration of the ACL plugin, and answers the binary-API messages listed by
// [SupportedMessages] with the retvals and dump contents that VPP 26.06
// gave in the golden traces in testdata/vpp-traces (see
// TestReplayTraces). Replies are produced asynchronously, on a goroutine of
// the adapter, as the socket client does. [VPP.Restart] simulates a VPP
// restart: all state is lost and every open adapter connection is dropped
// (SendMsg fails until the client reconnects). [VPP.SetInterceptor] injects
// failures per message.
//
// # Limits
//
//   - Only the messages of SupportedMessages exist; any other message is
//     unknown (GetMsgID fails), as on a VPP without that plugin.
//   - Dumps are compared with VPP as multisets: route dump order and FIB
//     stats indexes differ from VPP's (VPP walks its mtrie, the stand-in a
//     sorted list, and VPP allocates stats indexes for internal entries).
//   - MAC addresses chosen "randomly" are deterministic per VPP instance.
//   - A freed sw_if_index is reused last-freed-first, as VPP's pools do.
//   - Connected and special routes are derived from addresses and tables:
//     a static route that overlaps a connected prefix is shown next to it,
//     not merged as in VPP's FIB.
//   - Deleting an interface removes its addresses, its table bindings and
//     the route paths through it (routes left without a path are removed).
//   - Link state: loopbacks are link-up when admin-up; af_packet and tap
//     interfaces are always link-up. af_packet only attaches to host
//     interfaces named in [Config.HostInterfaces] (or that
//     [Config.HostInterfaceExists] knows); tap creation fails with
//     -11 unless [Config.VhostNet] is set (as on a host without
//     /dev/vhost-net).
//   - An IPv6 address that overlaps a subnet on another interface returns
//     -105 (not covered by the traces).
//   - Bridge domains created with bd_id ~0 get a pseudo-random ID that
//     differs from VPP's (random too).
//   - NAT44-ED keeps configuration only (no sessions, no translation); an
//     interface-bound mapping resolves to the interface's first IPv4
//     address at dump time, an interface-address pool follows the
//     interface's first IPv4 address as it changes. Conflicts follow
//     8-nat44_services.json: mappings conflict by external address, port
//     and protocol (static and load-balanced alike), and by local address
//     and port only when neither is OUT2IN_ONLY; a static mapping is
//     deleted by its external side; a load-balanced mapping keeps at least
//     two backends (-1); output-feature and inside/outside features exclude
//     each other (-81); forwarding set while the plugin is disabled is
//     accepted and lost, as the plugin starts without it.
//   - add_node_next knows only the vxlan4/6-input, ip4/6-input and
//     l2-input nodes.
//   - memif: interfaces never get a peer (link down), so dumps report
//     the running ring and buffer sizes of an unconnected memif (1 and 0),
//     as VPP does; socket IDs chosen for socket_id ~0, retvals and the
//     one-role-per-socket rule follow 7-memif.json.
//   - Unnumbered interfaces, IP neighbors (and the host FIB entries they
//     add), attached host routes and get_next_index follow
//     9-unnumbered_neighbor.json. Host entries that track addresses
//     (recursive next hops, VXLAN destinations) resolve through connected
//     prefixes only (not through other routes).
//   - tap_create_v3 checks a host namespace against [Config.Namespaces]
//     (-12 otherwise, before the /dev/vhost-net check, as VPP does); the
//     host-side settings of a tap (namespace, MAC, addresses) are reported
//     as given: this cannot be compared with a VPP here (no
//     /dev/vhost-net), and VPP does not report the host gateways.
//   - NICs of [Config.NICs] have device type "dpdk" (no DPDK VPP here to
//     compare with).
//   - ACL plugin (10-acl.json): ACLs and the ordered input and output
//     lists of interfaces, as configuration only: no sessions, no packets.
//     Indexes are reused last-freed-first; rules are validated and dumped
//     as VPP does; acl_interface_set_acl_list sets the output part before
//     the input part and answers any duplicate with retval 1, as VPP does;
//     deleting an interface removes its lists. [Snapshot] reports ACLs and
//     lists.
//   - Other plugins are absent: their messages are unknown.
//
// # Concurrency
//
// VPP and its adapters are safe for concurrent use. Callbacks into GoVPP
// are made from one goroutine per connected adapter, in request order.
//
// # Lifecycle
//
// [New] starts nothing. An adapter starts its reply goroutine in Connect
// and joins it in Disconnect; a disconnected adapter leaves no goroutine.
package vppsim

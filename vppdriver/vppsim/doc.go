// Package vppsim is an in-memory VPP stand-in that plugs into GoVPP as an
// [adapter.VppAPI], so the same driver code runs against it and against a
// real VPP.
//
// A [VPP] keeps interface (local0, loopbacks, af_packet, tap v2, memif,
// VXLAN tunnels, NICs present from the start), unnumbered, address, IP
// neighbor, VRF table, route, bridge-domain and NAT44-ED tables and the
// configuration of the ACL and cnat plugins, and answers the binary-API messages listed by
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
//   - cnat plugin (11-cnat.json), the 26.06 messages of
//     vppdriver/internal/binapi/cnat (GoVPP's stock cnat messages with
//     the same CRCs work too): translations, SNAT entries per forwarding
//     FIB index, the SNAT policy of the default entry (excluded prefixes,
//     interface tables, policy) and the cnat feature per interface, as
//     configuration only: no sessions (cnat_session_dump is empty), no
//     packets. Ids are reused last-freed-first; an update of a VIP keeps
//     its id, lb type and flow hash and replaces paths and flags; the dump
//     reports what VPP reports (not is_real_ip, flags or flow hash; path
//     flags with 4 when both endpoints resolved); cnat_session_purge
//     deletes every translation. Endpoints given by an interface are
//     resolved when the request comes; later address changes are not
//     followed (VPP follows them). ip_proto is not validated. VPP finds a
//     VIP by its cnat client (one per VIP or SNAT address); the stand-in
//     numbers clients as VPP does except for the clones VPP adds when an
//     is_real_ip VIP interposes on a FIB entry, which only matters to a
//     VIP given by an interface without an address (VPP then takes the
//     sw_if_index for a client index). Deleting an interface drops its
//     cnat feature and leaves it in the SNAT tables, as VPP does. [Snapshot]
//     reports all of it, with what the dumps do not show.
//   - Requests that make VPP 26.06 die (12-cnat_sessions_crashes.json) are
//     refused with [RetvalWouldCrash] and change nothing:
//     cnat_translation_update with 0 paths; cnat_set_snat_addresses(_v2)
//     with a forwarding or return FIB index that does not exist;
//     cnat_snat_policy_add_del_exclude_pfx and cnat_set_snat_policy
//     without a default SNAT entry; deleting a SNAT entry whose address's
//     cnat client went with the last translation of a VIP of that address.
//     A driver must never send them.
//   - FIB indexes: tables take them as VPP's do (per family, the index
//     freed last first); an interface's first IPv6 address takes an IPv6
//     FIB index for its link-local FIB (table ID ~0), held until the
//     interface is deleted. [VPP.FibIndex] returns a table's.
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

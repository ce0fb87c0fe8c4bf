package vppsim_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter/socketclient"
	"go.fd.io/govpp/binapi/af_packet"
	"go.fd.io/govpp/binapi/ethernet_types"
	"go.fd.io/govpp/binapi/fib_types"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip"
	"go.fd.io/govpp/binapi/ip_neighbor"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/binapi/tapv2"
	"go.fd.io/govpp/binapi/vlib"
	"go.fd.io/govpp/binapi/vxlan"
	"go.fd.io/govpp/core"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
)

// TestRecordNodePodTrace records testdata/vpp-traces/9-unnumbered_neighbor.json
// from a real VPP: unnumbered interfaces, static IP neighbors, next-node
// lookups, the interface name filter and the parts of tap_create_v3 that
// pods use. It runs only with VPPSIM_RECORD=1 (and VPP_SH).
func TestRecordNodePodTrace(t *testing.T) {
	if os.Getenv("VPPSIM_RECORD") != "1" {
		t.Skip("set VPPSIM_RECORD=1 (and VPP_SH) to record the unnumbered/neighbor trace from a real VPP")
	}
	vpp := vppdrivertest.StartRealVPP(t)
	conn, err := core.Connect(socketclient.NewVppClient(vpp.APISocket()))
	require.NoError(t, err)
	defer conn.Disconnect()
	r := &recorder{t: t, conn: conn, scenario: "unnumbered_neighbor"}
	r.step(map[string]any{"kind": "action", "action": "start fresh VPP (no prior configuration); govpp core.Connect(socketclient) to the binary-API socket"})

	// A veth pair for an af_packet interface (an Ethernet interface like a
	// pod's), created in the root namespace and removed at the end.
	vethA, vethB := "vskrec0", "vskrec1"
	sh := func(args ...string) {
		out, err := exec.Command("ip", args...).CombinedOutput()
		code := 0
		if err != nil {
			code = 1
		}
		r.step(map[string]any{"kind": "action", "action": "ip " + joinArgs(args), "exit_code": code, "output": string(out)})
		require.NoError(t, err, "ip %v: %s", args, out)
	}
	sh("link", "add", vethA, "type", "veth", "peer", "name", vethB)
	defer func() { _ = exec.Command("ip", "link", "del", vethA).Run() }()
	sh("link", "set", vethA, "up")
	sh("link", "set", vethB, "up")

	ifIdx := func(m any) interface_types.InterfaceIndex {
		switch x := m.(type) {
		case *interfaces.CreateLoopbackReply:
			return x.SwIfIndex
		case *vxlan.VxlanAddDelTunnelV3Reply:
			return x.SwIfIndex
		}
		t.Fatalf("no sw_if_index in %T", m)
		return 0
	}
	loop := func(note string) interface_types.InterfaceIndex {
		return ifIdx(r.call(note, &interfaces.CreateLoopback{}))
	}
	addr := func(note string, sw interface_types.InterfaceIndex, p string) {
		r.call(note, &interfaces.SwInterfaceAddDelAddress{SwIfIndex: sw, IsAdd: true,
			Prefix: ip_types.AddressWithPrefix(vppconv.Prefix(netip.MustParsePrefix(p)))})
	}
	unnum := func(note string, src, user interface_types.InterfaceIndex, add bool) {
		r.call(note, &interfaces.SwInterfaceSetUnnumbered{SwIfIndex: src, UnnumberedSwIfIndex: user, IsAdd: add})
	}
	mac := func(s string) ethernet_types.MacAddress {
		m, err := ethernet_types.ParseMacAddress(s)
		require.NoError(t, err)
		return m
	}
	neigh := func(note string, sw interface_types.InterfaceIndex, ipS, macS string, add bool, flags ip_neighbor.IPNeighborFlags) {
		r.call(note, &ip_neighbor.IPNeighborAddDel{IsAdd: add, Neighbor: ip_neighbor.IPNeighbor{
			SwIfIndex: sw, Flags: flags, MacAddress: mac(macS), IPAddress: vppconv.Address(netip.MustParseAddr(ipS))}})
	}
	const static = ip_neighbor.IP_API_NEIGHBOR_FLAG_STATIC
	all := interface_types.InterfaceIndex(^uint32(0))
	neighDumps := func(when string) {
		r.dump("ip_neighbor_dump IPv4, all interfaces "+when, &ip_neighbor.IPNeighborDump{SwIfIndex: all, Af: ip_types.ADDRESS_IP4})
		r.dump("ip_neighbor_dump IPv6, all interfaces "+when, &ip_neighbor.IPNeighborDump{SwIfIndex: all, Af: ip_types.ADDRESS_IP6})
	}

	// Fresh VPP.
	r.dump("ip_unnumbered_dump all (sw_if_index ~0) on a fresh VPP", &ip.IPUnnumberedDump{SwIfIndex: all})
	neighDumps("on a fresh VPP")

	// Unnumbered.
	src := loop("create_loopback: the address source (pod gateway loopback)")
	r.call("admin up source", &interfaces.SwInterfaceSetFlags{SwIfIndex: src, Flags: interface_types.IF_STATUS_API_FLAG_ADMIN_UP})
	addr("IPv4 /32 on the source", src, "10.1.1.1/32")
	addr("IPv6 /128 on the source", src, "fd00:1:1::1/128")
	afp := r.call("af_packet_create_v3 on "+vethA+" with an explicit MAC (a pod interface)", afPacketCreate(vethA, mac("02:fe:00:00:00:01")))
	pod := afPacketIndex(t, afp)
	r.call("admin up the af_packet interface", &interfaces.SwInterfaceSetFlags{SwIfIndex: pod, Flags: interface_types.IF_STATUS_API_FLAG_ADMIN_UP})
	user2 := loop("create_loopback: a second unnumbered user")
	other := loop("create_loopback: an interface with its own address")
	addr("IPv4 /24 on the other interface", other, "192.168.5.1/24")

	unnum("sw_interface_set_unnumbered af_packet use source", src, pod, true)
	unnum("sw_interface_set_unnumbered af_packet use source again (same)", src, pod, true)
	unnum("sw_interface_set_unnumbered af_packet use the other interface (change of source)", other, pod, true)
	unnum("sw_interface_set_unnumbered af_packet use source (back)", src, pod, true)
	unnum("sw_interface_set_unnumbered second user use source", src, user2, true)
	unnum("sw_interface_set_unnumbered with an unknown source sw_if_index 99", 99, user2, true)
	unnum("sw_interface_set_unnumbered unknown user sw_if_index 99", src, 99, true)
	unnum("sw_interface_set_unnumbered other use the second user (which is unnumbered itself)", user2, other, true)
	r.dump("ip_unnumbered_dump all", &ip.IPUnnumberedDump{SwIfIndex: all})
	r.dump("ip_unnumbered_dump the af_packet interface only", &ip.IPUnnumberedDump{SwIfIndex: pod})
	r.dump("ip_unnumbered_dump the source (not unnumbered)", &ip.IPUnnumberedDump{SwIfIndex: src})
	r.dump("ip_unnumbered_dump with Go zero value sw_if_index 0", &ip.IPUnnumberedDump{})
	r.dump("ip_address_dump IPv4 of the unnumbered af_packet interface", &ip.IPAddressDump{SwIfIndex: pod})
	r.dump("sw_interface_dump all", &interfaces.SwInterfaceDump{SwIfIndex: all})
	r.call("sw_interface_get_table of the unnumbered interface", &interfaces.SwInterfaceGetTable{SwIfIndex: pod})

	// Static neighbors.
	neigh("ip_neighbor_add_del add static 10.1.1.2 on the unnumbered af_packet interface", pod, "10.1.1.2", "02:00:00:00:01:02", true, static)
	neigh("ip_neighbor_add_del add the same again", pod, "10.1.1.2", "02:00:00:00:01:02", true, static)
	neigh("ip_neighbor_add_del add 10.1.1.2 again with another MAC", pod, "10.1.1.2", "02:00:00:00:01:03", true, static)
	neigh("ip_neighbor_add_del add static fd00:1:1::2 on the af_packet interface", pod, "fd00:1:1::2", "02:00:00:00:01:02", true, static)
	neigh("ip_neighbor_add_del add static fe80::2 (link-local) on the af_packet interface", pod, "fe80::2", "02:00:00:00:01:02", true, static)
	neigh("ip_neighbor_add_del add a dynamic (flags 0) 10.1.1.9 on the af_packet interface", pod, "10.1.1.9", "02:00:00:00:01:09", true, 0)
	neigh("ip_neighbor_add_del add static 192.168.5.7 on the other interface (in its subnet)", other, "192.168.5.7", "02:00:00:00:05:07", true, static)
	neigh("ip_neighbor_add_del add static 10.9.9.9 on the other interface (outside its subnet)", other, "10.9.9.9", "02:00:00:00:09:09", true, static)
	neigh("ip_neighbor_add_del add on unknown sw_if_index 99", 99, "10.1.1.3", "02:00:00:00:01:03", true, static)
	neigh("ip_neighbor_add_del add with a zero MAC", other, "192.168.5.8", "00:00:00:00:00:00", true, static)
	neighDumps("with neighbors")
	r.dump("ip_neighbor_dump IPv4 of the af_packet interface", &ip_neighbor.IPNeighborDump{SwIfIndex: pod, Af: ip_types.ADDRESS_IP4})
	r.dump("ip_route_dump IPv4 table 0 with neighbors", &ip.IPRouteDump{Table: ip.IPTable{TableID: 0}})
	r.dump("ip_route_dump IPv6 table 0 with neighbors", &ip.IPRouteDump{Table: ip.IPTable{TableID: 0, IsIP6: true}})
	route := func(note string, dst string, sw interface_types.InterfaceIndex, add bool) {
		pfx := netip.MustParsePrefix(dst)
		path := fib_types.FibPath{SwIfIndex: uint32(sw), Weight: 1}
		if pfx.Addr().Is6() {
			path.Proto = fib_types.FIB_API_PATH_NH_PROTO_IP6
		}
		r.call(note, &ip.IPRouteAddDel{IsAdd: add, Route: ip.IPRoute{Prefix: vppconv.Prefix(pfx), NPaths: 1, Paths: []fib_types.FibPath{path}}})
	}
	route("ip_route_add_del add 10.1.1.2/32 via the af_packet interface (the pod's host route; the neighbor exists)", "10.1.1.2/32", pod, true)
	route("ip_route_add_del add fd00:1:1::2/128 via the af_packet interface", "fd00:1:1::2/128", pod, true)
	r.dump("ip_route_dump IPv4 table 0 with a route and a neighbor for one address", &ip.IPRouteDump{Table: ip.IPTable{TableID: 0}})
	r.dump("ip_route_dump IPv6 table 0 with a route and a neighbor for one address", &ip.IPRouteDump{Table: ip.IPTable{TableID: 0, IsIP6: true}})
	route("ip_route_add_del add 10.1.1.77/32 via the af_packet interface (no neighbor)", "10.1.1.77/32", pod, true)
	route("ip_route_add_del add 10.1.7.0/24 via the af_packet interface (attached, not a host route)", "10.1.7.0/24", pod, true)
	route("ip_route_add_del delete 10.1.1.2/32", "10.1.1.2/32", pod, false)
	r.dump("ip_route_dump IPv4 table 0 after the route was deleted (neighbor kept)", &ip.IPRouteDump{Table: ip.IPTable{TableID: 0}})
	neigh("ip_neighbor_add_del delete 10.1.1.9", pod, "10.1.1.9", "02:00:00:00:01:09", false, 0)
	neigh("ip_neighbor_add_del delete 10.1.1.9 again", pod, "10.1.1.9", "02:00:00:00:01:09", false, 0)
	neigh("ip_neighbor_add_del delete 10.1.1.2 with another MAC and no flags", pod, "10.1.1.2", "02:00:00:00:00:00", false, 0)
	neigh("ip_neighbor_add_del delete on unknown sw_if_index 99", 99, "10.1.1.3", "02:00:00:00:01:03", false, static)

	// Unnumbered removal and interfaces going away.
	unnum("sw_interface_set_unnumbered remove second user (is_add false)", src, user2, false)
	unnum("sw_interface_set_unnumbered remove second user again", src, user2, false)
	unnum("sw_interface_set_unnumbered remove the af_packet interface naming the wrong source", other, pod, false)
	r.dump("ip_unnumbered_dump all after removals", &ip.IPUnnumberedDump{SwIfIndex: all})
	unnum("sw_interface_set_unnumbered af_packet use source (again, before the source goes)", src, pod, true)
	r.call("delete_loopback the source while the af_packet interface borrows its addresses", &interfaces.DeleteLoopback{SwIfIndex: src})
	r.dump("ip_unnumbered_dump all after the source was deleted", &ip.IPUnnumberedDump{SwIfIndex: all})
	r.call("delete_loopback the other interface (it has neighbors)", &interfaces.DeleteLoopback{SwIfIndex: other})
	neighDumps("after the other interface was deleted")

	// Next nodes (decap-next of routed VXLAN tunnels).
	next := func(note, node, nextNode string) {
		r.call(note, &vlib.GetNextIndex{NodeName: node, NextName: nextNode})
	}
	next("get_next_index vxlan4-input -> ip4-input before add_node_next", "vxlan4-input", "ip4-input")
	next("get_next_index vxlan4-input -> l2-input", "vxlan4-input", "l2-input")
	next("get_next_index unknown node", "no-such-node", "ip4-input")
	next("get_next_index unknown next node", "vxlan4-input", "no-such-node")
	r.call("add_node_next vxlan4-input -> ip4-input", &vlib.AddNodeNext{NodeName: "vxlan4-input", NextName: "ip4-input"})
	r.call("add_node_next vxlan4-input -> ip6-input", &vlib.AddNodeNext{NodeName: "vxlan4-input", NextName: "ip6-input"})
	next("get_next_index vxlan4-input -> ip4-input after add_node_next", "vxlan4-input", "ip4-input")
	next("get_next_index vxlan4-input -> ip6-input after add_node_next", "vxlan4-input", "ip6-input")
	next("get_next_index vxlan6-input -> ip6-input (not added)", "vxlan6-input", "ip6-input")
	r.call("add_node_next vxlan6-input -> ip6-input", &vlib.AddNodeNext{NodeName: "vxlan6-input", NextName: "ip6-input"})
	r.call("add_node_next vxlan6-input -> ip4-input", &vlib.AddNodeNext{NodeName: "vxlan6-input", NextName: "ip4-input"})
	next("get_next_index vxlan6-input -> ip6-input after add_node_next", "vxlan6-input", "ip6-input")
	next("get_next_index vxlan6-input -> ip4-input after add_node_next", "vxlan6-input", "ip4-input")

	// A routed tunnel carrying IPv6 over IPv4, unnumbered, with a static
	// neighbor (the next hop of routes through it).
	vxSrc := loop("create_loopback: the VXLAN loopback (unnumbered source of tunnels)")
	addr("IPv4 /32 on the VXLAN loopback", vxSrc, "192.168.30.1/32")
	uplink := loop("create_loopback as underlay uplink")
	addr("underlay IPv4 on the uplink", uplink, "192.168.16.1/24")
	tun := func(note string, vni, decap uint32) interface_types.InterfaceIndex {
		return ifIdx(r.call(note, &vxlan.VxlanAddDelTunnelV3{IsAdd: true, Instance: ^uint32(0),
			SrcAddress: vppconv.Address(netip.MustParseAddr("192.168.16.1")), DstAddress: vppconv.Address(netip.MustParseAddr("192.168.16.2")),
			SrcPort: 4789, DstPort: 4789, McastSwIfIndex: all, DecapNextIndex: decap, Vni: vni, IsL3: true}))
	}
	t4 := tun("vxlan_add_del_tunnel_v3 L3 vni 10 decap-next 2 (ip4-input of vxlan4-input)", 10, 2)
	t6 := tun("vxlan_add_del_tunnel_v3 L3 vni 11 decap-next 3 (ip6-input of vxlan4-input)", 11, 3)
	unnum("sw_interface_set_unnumbered the IPv4-payload tunnel use the VXLAN loopback", vxSrc, t4, true)
	unnum("sw_interface_set_unnumbered the IPv6-payload tunnel use the VXLAN loopback", vxSrc, t6, true)
	neigh("ip_neighbor_add_del static 192.168.30.2 on the IPv4-payload tunnel", t4, "192.168.30.2", "02:00:00:00:00:02", true, static)
	neigh("ip_neighbor_add_del static fe80::2 on the IPv6-payload tunnel", t6, "fe80::2", "02:00:00:00:00:02", true, static)
	r.dump("vxlan_tunnel_v2_dump all", &vxlan.VxlanTunnelV2Dump{SwIfIndex: all})
	r.dump("ip_route_dump IPv4 table 0 with tunnels", &ip.IPRouteDump{Table: ip.IPTable{TableID: 0}})
	r.dump("ip_route_dump IPv6 table 0 with tunnels", &ip.IPRouteDump{Table: ip.IPTable{TableID: 0, IsIP6: true}})
	r.dump("ip_unnumbered_dump all with tunnels", &ip.IPUnnumberedDump{SwIfIndex: all})
	neighDumps("with tunnels")
	r.call("vxlan delete the IPv6-payload tunnel", &vxlan.VxlanAddDelTunnelV3{IsAdd: false, Instance: ^uint32(0),
		SrcAddress: vppconv.Address(netip.MustParseAddr("192.168.16.1")), DstAddress: vppconv.Address(netip.MustParseAddr("192.168.16.2")),
		SrcPort: 4789, DstPort: 4789, McastSwIfIndex: all, DecapNextIndex: ^uint32(0), Vni: 11, IsL3: true})
	r.dump("ip_unnumbered_dump all after a tunnel was deleted", &ip.IPUnnumberedDump{SwIfIndex: all})
	neighDumps("after a tunnel was deleted")

	// The name filter (how an existing interface is found by its VPP name).
	r.dump("sw_interface_dump name filter host-"+vethA, &interfaces.SwInterfaceDump{SwIfIndex: all, NameFilterValid: true, NameFilter: "host-" + vethA})
	r.dump("sw_interface_dump name filter loop1 (a prefix of nothing else)", &interfaces.SwInterfaceDump{SwIfIndex: all, NameFilterValid: true, NameFilter: "loop1"})
	r.dump("sw_interface_dump name filter loop (a prefix of several)", &interfaces.SwInterfaceDump{SwIfIndex: all, NameFilterValid: true, NameFilter: "loop"})
	r.dump("sw_interface_dump name filter that matches nothing", &interfaces.SwInterfaceDump{SwIfIndex: all, NameFilterValid: true, NameFilter: "GigabitEthernet0/8/0"})

	// tap_create_v3 as a pod would use it (fails here: no /dev/vhost-net).
	r.call("tap_create_v3 in a network namespace with host MAC, name, IPv4 prefix and gateway (no /dev/vhost-net on this host)", &tapv2.TapCreateV3{
		ID: ^uint32(0), MacAddress: mac("02:fe:00:00:00:09"), NumRxQueues: 1, NumTxQueues: 1, RxRingSz: 256, TxRingSz: 256,
		HostMacAddrSet: true, HostMacAddr: mac("02:00:00:00:00:09"), HostNamespaceSet: true, HostNamespace: "/var/run/netns/vsk-rec-none",
		HostIfNameSet: true, HostIfName: "eth0", HostIP4PrefixSet: true,
		HostIP4Prefix: ip_types.IP4AddressWithPrefix{Address: ip_types.IP4Address{10, 1, 1, 9}, Len: 32},
		HostIP4GwSet:  true, HostIP4Gw: ip_types.IP4Address{10, 1, 1, 1}, Tag: "vsk:rec"})

	sh("netns", "add", "vsk-rec")
	defer func() { _ = exec.Command("ip", "netns", "del", "vsk-rec").Run() }()
	r.call("tap_create_v3 in an existing network namespace /var/run/netns/vsk-rec (no /dev/vhost-net on this host)", &tapv2.TapCreateV3{
		ID: ^uint32(0), MacAddress: mac("02:fe:00:00:00:09"), NumRxQueues: 1, NumTxQueues: 1, RxRingSz: 256, TxRingSz: 256,
		HostMacAddrSet: true, HostMacAddr: mac("02:00:00:00:00:09"), HostNamespaceSet: true, HostNamespace: "/var/run/netns/vsk-rec",
		HostIfNameSet: true, HostIfName: "eth0", Tag: "vsk:rec"})
	sh("netns", "del", "vsk-rec")

	r.call("af_packet_delete "+vethA, afPacketDelete(vethA))
	r.dump("ip_unnumbered_dump all at the end", &ip.IPUnnumberedDump{SwIfIndex: all})
	neighDumps("at the end")

	out, err := json.MarshalIndent(r.steps, "", "  ")
	require.NoError(t, err)
	file := filepath.Join("testdata", "vpp-traces", "9-unnumbered_neighbor.json")
	require.NoError(t, os.WriteFile(file, append(out, '\n'), 0o644))
	t.Logf("wrote %s: %d steps", file, len(r.steps))
	fmt.Fprintln(os.Stderr, vpp.CLI("show", "version"))
}

func joinArgs(args []string) string {
	s := ""
	for i, a := range args {
		if i > 0 {
			s += " "
		}
		s += a
	}
	return s
}

func afPacketCreate(host string, mac ethernet_types.MacAddress) *af_packet.AfPacketCreateV3 {
	return &af_packet.AfPacketCreateV3{Mode: af_packet.AF_PACKET_API_MODE_ETHERNET, HostIfName: host,
		HwAddr: mac, NumRxQueues: 1, NumTxQueues: 1}
}

func afPacketDelete(host string) *af_packet.AfPacketDelete {
	return &af_packet.AfPacketDelete{HostIfName: host}
}

func afPacketIndex(t *testing.T, m any) interface_types.InterfaceIndex {
	t.Helper()
	r, ok := m.(*af_packet.AfPacketCreateV3Reply)
	require.True(t, ok, "reply %T", m)
	require.Zero(t, r.Retval)
	return r.SwIfIndex
}

package vppsim_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter/socketclient"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/binapi/nat44_ed"
	"go.fd.io/govpp/binapi/nat_types"
	"go.fd.io/govpp/core"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
)

// TestRecordNATServicesTrace records testdata/vpp-traces/8-nat44_services.json
// from a real VPP: the NAT44-ED messages of the service renderer
// (forwarding, output-feature interfaces, interface-address pools) and the
// mapping behaviours it relies on (out2in-only mappings sharing a backend,
// twice-NAT, load-balanced backends added and removed). It runs only with
// VPPSIM_RECORD=1 (and VPP_SH), like TestRecordMemifTrace.
func TestRecordNATServicesTrace(t *testing.T) {
	if os.Getenv("VPPSIM_RECORD") != "1" {
		t.Skip("set VPPSIM_RECORD=1 (and VPP_SH) to record the NAT44 services trace from a real VPP")
	}
	vpp := vppdrivertest.StartRealVPP(t)
	conn, err := core.Connect(socketclient.NewVppClient(vpp.APISocket()))
	require.NoError(t, err)
	defer conn.Disconnect()
	r := &recorder{t: t, conn: conn, scenario: "nat44_services"}
	r.step(map[string]any{"kind": "action", "action": "start fresh VPP (no prior configuration); govpp core.Connect(socketclient) to the binary-API socket"})

	ip4 := func(s string) ip_types.IP4Address {
		a, err := ip_types.ParseIP4Address(s)
		require.NoError(t, err)
		return a
	}
	sw := func(i uint32) interface_types.InterfaceIndex { return interface_types.InterfaceIndex(i) }
	loop := func(note, addr string) uint32 {
		rep := r.call("create_loopback ("+note+")", &interfaces.CreateLoopback{})
		idx := uint32(rep.(*interfaces.CreateLoopbackReply).SwIfIndex)
		r.call("admin up "+note, &interfaces.SwInterfaceSetFlags{SwIfIndex: sw(idx), Flags: interface_types.IF_STATUS_API_FLAG_ADMIN_UP})
		if addr != "" {
			p, err := ip_types.ParsePrefix(addr)
			require.NoError(t, err)
			r.call("IPv4 "+addr+" on "+note, &interfaces.SwInterfaceAddDelAddress{SwIfIndex: sw(idx), IsAdd: true, Prefix: ip_types.AddressWithPrefix(p)})
		}
		return idx
	}
	uplink := loop("uplink", "192.168.16.1/24")
	podA := loop("pod A", "10.1.1.1/24")
	podB := loop("pod B", "10.1.2.1/24")

	fwd := func(note string, on bool) { r.call(note, &nat44_ed.Nat44ForwardingEnableDisable{Enable: on}) }
	output := func(note string, idx uint32, add bool) {
		r.call(note, &nat44_ed.Nat44EdAddDelOutputInterface{IsAdd: add, SwIfIndex: sw(idx)})
	}
	ifAddr := func(note string, idx uint32, add bool, flags nat_types.NatConfigFlags) {
		r.call(note, &nat44_ed.Nat44AddDelInterfaceAddr{IsAdd: add, SwIfIndex: sw(idx), Flags: flags})
	}
	feature := func(note string, idx uint32, add bool, flags nat_types.NatConfigFlags) {
		r.call(note, &nat44_ed.Nat44InterfaceAddDelFeature{IsAdd: add, SwIfIndex: sw(idx), Flags: flags})
	}
	const (
		o2i   = nat_types.NAT_IS_OUT2IN_ONLY
		self  = nat_types.NAT_IS_SELF_TWICE_NAT
		twice = nat_types.NAT_IS_TWICE_NAT
	)
	static := func(note string, add bool, flags nat_types.NatConfigFlags, proto uint8, local string, lport uint16, ext string, eport uint16) {
		r.call(note, &nat44_ed.Nat44AddDelStaticMappingV2{IsAdd: add, Flags: flags, LocalIPAddress: ip4(local), LocalPort: lport,
			ExternalIPAddress: ip4(ext), ExternalPort: eport, Protocol: proto, ExternalSwIfIndex: sw(^uint32(0)), Tag: "vsk:"})
	}
	local := func(addr string, port uint16, prob uint8) nat44_ed.Nat44LbAddrPort {
		return nat44_ed.Nat44LbAddrPort{Addr: ip4(addr), Port: port, Probability: prob}
	}
	lb := func(note string, add bool, flags nat_types.NatConfigFlags, proto uint8, ext string, port uint16, affinity uint32, locals ...nat44_ed.Nat44LbAddrPort) {
		r.call(note, &nat44_ed.Nat44AddDelLbStaticMapping{IsAdd: add, Flags: flags, ExternalAddr: ip4(ext), ExternalPort: port,
			Protocol: proto, Affinity: affinity, Tag: "vsk:", LocalNum: uint32(len(locals)), Locals: locals})
	}
	lbLocal := func(note string, add bool, proto uint8, ext string, port uint16, l nat44_ed.Nat44LbAddrPort) {
		r.call(note, &nat44_ed.Nat44LbStaticMappingAddDelLocal{IsAdd: add, ExternalAddr: ip4(ext), ExternalPort: port, Protocol: proto, Local: l})
	}
	dumps := func(when string) {
		r.dump("nat44_interface_dump "+when, &nat44_ed.Nat44InterfaceDump{})
		r.dump("nat44_ed_output_interface_get "+when, &nat44_ed.Nat44EdOutputInterfaceGet{})
		r.dump("nat44_interface_addr_dump "+when, &nat44_ed.Nat44InterfaceAddrDump{})
		r.dump("nat44_address_dump "+when, &nat44_ed.Nat44AddressDump{})
		r.dump("nat44_static_mapping_dump "+when, &nat44_ed.Nat44StaticMappingDump{})
		r.dump("nat44_lb_static_mapping_dump "+when, &nat44_ed.Nat44LbStaticMappingDump{})
	}

	// Before the plugin is enabled.
	fwd("BEFORE enable: nat44_forwarding_enable_disable enable", true)
	output("BEFORE enable: nat44_ed_add_del_output_interface add uplink", uplink, true)
	ifAddr("BEFORE enable: nat44_add_del_interface_addr add uplink", uplink, true, 0)
	r.dump("BEFORE enable: nat44_ed_output_interface_get", &nat44_ed.Nat44EdOutputInterfaceGet{})
	r.dump("BEFORE enable: nat44_interface_addr_dump", &nat44_ed.Nat44InterfaceAddrDump{})

	r.call("nat44_ed_plugin_enable_disable enable, sessions 10000", &nat44_ed.Nat44EdPluginEnableDisable{Enable: true, Sessions: 10000})
	r.call("nat44_show_running_config after enable", &nat44_ed.Nat44ShowRunningConfig{})

	// Forwarding.
	fwd("nat44_forwarding_enable_disable enable", true)
	fwd("nat44_forwarding_enable_disable enable again", true)
	r.call("nat44_show_running_config with forwarding", &nat44_ed.Nat44ShowRunningConfig{})
	fwd("nat44_forwarding_enable_disable disable", false)
	fwd("nat44_forwarding_enable_disable disable again", false)
	r.call("nat44_show_running_config without forwarding", &nat44_ed.Nat44ShowRunningConfig{})
	fwd("nat44_forwarding_enable_disable enable (kept)", true)

	// Output-feature (post-routing) interfaces.
	output("nat44_ed_add_del_output_interface add uplink", uplink, true)
	output("nat44_ed_add_del_output_interface add uplink again (duplicate)", uplink, true)
	output("nat44_ed_add_del_output_interface add sw_if_index 99 (does not exist)", 99, true)
	r.dump("nat44_ed_output_interface_get with the uplink", &nat44_ed.Nat44EdOutputInterfaceGet{})
	r.dump("nat44_interface_dump with an output-feature interface", &nat44_ed.Nat44InterfaceDump{})
	feature("nat44_interface_add_del_feature inside on the output-feature uplink", uplink, true, nat_types.NAT_IS_INSIDE)
	feature("nat44_interface_add_del_feature outside on the output-feature uplink", uplink, true, nat_types.NAT_IS_OUTSIDE)
	feature("nat44_interface_add_del_feature outside on pod A", podA, true, nat_types.NAT_IS_OUTSIDE)
	output("nat44_ed_add_del_output_interface add pod A (it has the outside feature)", podA, true)
	output("nat44_ed_add_del_output_interface delete uplink", uplink, false)
	output("nat44_ed_add_del_output_interface delete uplink again", uplink, false)
	output("nat44_ed_add_del_output_interface delete pod B (never added)", podB, false)
	r.dump("nat44_ed_output_interface_get after deletes", &nat44_ed.Nat44EdOutputInterfaceGet{})
	output("nat44_ed_add_del_output_interface add uplink (kept)", uplink, true)
	feature("nat44_interface_add_del_feature inside+outside on pod B", podB, true, nat_types.NAT_IS_INSIDE)
	feature("nat44_interface_add_del_feature outside on pod B", podB, true, nat_types.NAT_IS_OUTSIDE)

	// Interface-address pools.
	ifAddr("nat44_add_del_interface_addr add uplink", uplink, true, 0)
	ifAddr("nat44_add_del_interface_addr add uplink again (duplicate)", uplink, true, 0)
	ifAddr("nat44_add_del_interface_addr add uplink twice-NAT", uplink, true, twice)
	ifAddr("nat44_add_del_interface_addr add sw_if_index 99 (does not exist)", 99, true, 0)
	noAddr := loop("no address", "")
	ifAddr("nat44_add_del_interface_addr add an interface without an address", noAddr, true, 0)
	r.dump("nat44_interface_addr_dump", &nat44_ed.Nat44InterfaceAddrDump{})
	r.dump("nat44_address_dump with interface-address pools", &nat44_ed.Nat44AddressDump{})
	p, err := ip_types.ParsePrefix("192.168.17.1/24")
	require.NoError(t, err)
	r.call("IPv4 192.168.17.1/24 on the interface without an address", &interfaces.SwInterfaceAddDelAddress{SwIfIndex: sw(noAddr), IsAdd: true, Prefix: ip_types.AddressWithPrefix(p)})
	r.dump("nat44_address_dump after the interface got an address", &nat44_ed.Nat44AddressDump{})
	r.call("delete IPv4 192.168.17.1/24 again", &interfaces.SwInterfaceAddDelAddress{SwIfIndex: sw(noAddr), Prefix: ip_types.AddressWithPrefix(p)})
	r.dump("nat44_address_dump after the interface lost its address", &nat44_ed.Nat44AddressDump{})
	ifAddr("nat44_add_del_interface_addr delete the interface without an address", noAddr, false, 0)
	ifAddr("nat44_add_del_interface_addr delete it again", noAddr, false, 0)
	ifAddr("nat44_add_del_interface_addr delete uplink twice-NAT", uplink, false, twice)
	r.dump("nat44_interface_addr_dump after deletes", &nat44_ed.Nat44InterfaceAddrDump{})
	r.call("nat44_add_del_address_range add twice-NAT 172.30.1.254 (NAT loopback)", &nat44_ed.Nat44AddDelAddressRange{
		FirstIPAddress: ip4("172.30.1.254"), LastIPAddress: ip4("172.30.1.254"), VrfID: ^uint32(0), IsAdd: true, Flags: twice})

	// Static mappings of services.
	const tcp, udp = 6, 17
	static("static TCP 10.1.1.3:8080 <- 10.96.0.11:80 OUT2IN_ONLY|SELF_TWICE_NAT", true, o2i|self, tcp, "10.1.1.3", 8080, "10.96.0.11", 80)
	static("static TCP same local <- 192.168.16.1:30080 OUT2IN_ONLY|SELF_TWICE_NAT (two out2in-only mappings, one backend)", true, o2i|self, tcp, "10.1.1.3", 8080, "192.168.16.1", 30080)
	static("static TCP same local <- 10.96.0.12:80 without OUT2IN_ONLY", true, 0, tcp, "10.1.1.3", 8080, "10.96.0.12", 80)
	static("static UDP 10.1.1.3:53 <- 192.168.16.1:30053 OUT2IN_ONLY|TWICE_NAT", true, o2i|twice, udp, "10.1.1.3", 53, "192.168.16.1", 30053)
	static("static TCP 10.1.1.4:80 <- 10.96.0.13:80 without OUT2IN_ONLY", true, 0, tcp, "10.1.1.4", 80, "10.96.0.13", 80)
	static("static TCP same local 10.1.1.4:80 <- 10.96.0.14:80 without OUT2IN_ONLY", true, 0, tcp, "10.1.1.4", 80, "10.96.0.14", 80)
	static("static TCP same local 10.1.1.4:80 <- 10.96.0.15:80 OUT2IN_ONLY", true, o2i, tcp, "10.1.1.4", 80, "10.96.0.15", 80)
	static("static TCP 10.1.1.5:80 <- 10.96.0.11:80 OUT2IN_ONLY (external in use)", true, o2i, tcp, "10.1.1.5", 80, "10.96.0.11", 80)

	// Load-balanced mappings.
	lb("lb TCP 10.96.0.10:80, 2 locals (probability 2), OUT2IN_ONLY|SELF_TWICE_NAT, affinity 10800", true, o2i|self, tcp, "10.96.0.10", 80, 10800,
		local("10.1.1.3", 8080, 2), local("10.1.1.4", 8080, 2))
	lb("lb TCP 192.168.16.1:30081, the same 2 locals, OUT2IN_ONLY|TWICE_NAT", true, o2i|twice, tcp, "192.168.16.1", 30081, 0,
		local("10.1.1.3", 8080, 2), local("10.1.1.4", 8080, 2))
	lb("lb TCP 10.96.0.11:80 (external of a static mapping)", true, o2i|self, tcp, "10.96.0.11", 80, 0,
		local("10.1.1.3", 8080, 2), local("10.1.1.4", 8080, 2))
	static("static TCP 10.1.1.6:80 <- 10.96.0.10:80 OUT2IN_ONLY (external of an lb mapping)", true, o2i, tcp, "10.1.1.6", 80, "10.96.0.10", 80)
	lb("lb TCP 10.96.0.16:80 with the same local twice", true, o2i|self, tcp, "10.96.0.16", 80, 0,
		local("10.1.1.3", 8080, 2), local("10.1.1.3", 8080, 2))
	lb("lb TCP 10.96.0.17:80 with a local of probability 0", true, o2i|self, tcp, "10.96.0.17", 80, 0,
		local("10.1.1.3", 8080, 0), local("10.1.1.4", 8080, 2))
	lbLocal("lb local delete 10.1.1.4:8080 from 10.96.0.10:80 (2 locals left: 1)", false, tcp, "10.96.0.10", 80, local("10.1.1.4", 8080, 0))
	r.dump("nat44_lb_static_mapping_dump after removing a local of a 2-local mapping", &nat44_ed.Nat44LbStaticMappingDump{})
	lbLocal("lb local delete the last local 10.1.1.3:8080 of 10.96.0.10:80", false, tcp, "10.96.0.10", 80, local("10.1.1.3", 8080, 0))
	r.dump("nat44_lb_static_mapping_dump after removing the last local", &nat44_ed.Nat44LbStaticMappingDump{})
	lbLocal("lb local add 10.1.1.4:8080 (probability 2) back", true, tcp, "10.96.0.10", 80, local("10.1.1.4", 8080, 2))
	lbLocal("lb local add 10.1.1.5:8080 (probability 0)", true, tcp, "10.96.0.10", 80, local("10.1.1.5", 8080, 0))
	lbLocal("lb local add 10.1.1.6:8080 (probability 4)", true, tcp, "10.96.0.10", 80, local("10.1.1.6", 8080, 4))
	lbLocal("lb local delete 10.1.1.4:8080 with another probability than it was added with", false, tcp, "10.96.0.10", 80, local("10.1.1.4", 8080, 9))
	dumps("with service mappings")

	// Deletes.
	lb("delete lb TCP 192.168.16.1:30081", false, 0, tcp, "192.168.16.1", 30081, 0)
	static("delete static TCP 10.1.1.3:8080 <- 192.168.16.1:30080", false, o2i|self, tcp, "10.1.1.3", 8080, "192.168.16.1", 30080)
	static("delete static TCP 10.1.1.3:8080 <- 10.96.0.11:80 with other flags than it was added with", false, 0, tcp, "10.1.1.3", 8080, "10.96.0.11", 80)
	static("delete static with the right external but another local", false, o2i|self, udp, "10.9.9.9", 1, "192.168.16.1", 30053)
	r.dump("nat44_static_mapping_dump after deletes", &nat44_ed.Nat44StaticMappingDump{})

	// Disable wipes; re-enable.
	r.call("nat44_ed_plugin_enable_disable disable", &nat44_ed.Nat44EdPluginEnableDisable{})
	r.call("nat44_ed_plugin_enable_disable enable, sessions 10000", &nat44_ed.Nat44EdPluginEnableDisable{Enable: true, Sessions: 10000})
	r.call("nat44_show_running_config after disable and enable", &nat44_ed.Nat44ShowRunningConfig{})
	dumps("after disable and enable")

	out, err := json.MarshalIndent(r.steps, "", "  ")
	require.NoError(t, err)
	file := filepath.Join("testdata", "vpp-traces", "8-nat44_services.json")
	require.NoError(t, os.WriteFile(file, append(out, '\n'), 0o644))
	t.Logf("wrote %s: %d steps", file, len(r.steps))
	fmt.Fprintln(os.Stderr, vpp.CLI("show", "version"))
}

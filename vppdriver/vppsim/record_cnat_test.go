package vppsim_test

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter/socketclient"
	"go.fd.io/govpp/api"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/core"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/internal/binapi/cnat"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
)

// cnatEP is an IP endpoint (sw_if_index ~0: not an interface endpoint).
func cnatEP(addr string, port uint16) cnat.CnatEndpoint {
	return cnat.CnatEndpoint{Addr: vppconv.Address(netip.MustParseAddr(addr)), SwIfIndex: interface_types.InterfaceIndex(noIdx), Port: port}
}

// cnatPath is a backend without a source rewrite (src_ep: the zero address
// of the backend's family, sw_if_index ~0).
func cnatPath(addr string, port uint16) cnat.CnatEndpointTuple {
	src := cnat.CnatEndpoint{SwIfIndex: interface_types.InterfaceIndex(noIdx)}
	if netip.MustParseAddr(addr).Is6() {
		src.Addr.Af = ip_types.ADDRESS_IP6
	}
	return cnat.CnatEndpointTuple{DstEp: cnatEP(addr, port), SrcEp: src}
}

func ip4Addr(s string) ip_types.IP4Address { return netip.MustParseAddr(s).As4() }
func ip6Addr(s string) ip_types.IP6Address { return netip.MustParseAddr(s).As16() }

// cnatRecorder adds the cnat messages to a recorder.
type cnatRecorder struct{ *recorder }

func (r cnatRecorder) update(note string, tr cnat.CnatTranslation) uint32 {
	tr.NPaths = uint32(len(tr.Paths))
	return r.call(note, &cnat.CnatTranslationUpdate{Translation: tr}).(*cnat.CnatTranslationUpdateReply).ID
}

func (r cnatRecorder) loop(note string) uint32 {
	return uint32(r.call(note, &interfaces.CreateLoopback{}).(*interfaces.CreateLoopbackReply).SwIfIndex)
}

func (r cnatRecorder) addr(sw uint32, p string) {
	r.call(fmt.Sprintf("sw_interface_add_del_address %s on sw_if_index %d", p, sw), &interfaces.SwInterfaceAddDelAddress{
		SwIfIndex: interface_types.InterfaceIndex(sw), IsAdd: true, Prefix: ip_types.AddressWithPrefix(vppconv.Prefix(netip.MustParsePrefix(p)))})
}

func (r cnatRecorder) feature(note string, sw uint32, on bool) {
	r.call(note, &cnat.FeatureCnatEnableDisable{SwIfIndex: interface_types.InterfaceIndex(sw), EnableDisable: on})
}

// TestRecordCnatTrace records testdata/vpp-traces/11-cnat.json from a real
// VPP: the cnat plugin's translations (ids, updates in place, lb types,
// what the dump reports, what is accepted without validation, endpoints
// given by interface), SNAT addresses (v1 and the 26.06 v2 per FIB), the
// SNAT policy (excluded prefixes, interface tables, policy), the cnat
// feature on interfaces, pipelined updates and cnat_session_purge. What
// makes VPP 26.06 die, and sessions made by packets, are in
// 12-cnat_sessions_crashes.json (TestRecordCnatCrashTrace), which the
// replay does not use. It runs only with VPPSIM_RECORD=1 (and VPP_SH), like
// TestRecordMemifTrace.
func TestRecordCnatTrace(t *testing.T) {
	if os.Getenv("VPPSIM_RECORD") != "1" {
		t.Skip("set VPPSIM_RECORD=1 (and VPP_SH) to record the cnat trace from a real VPP")
	}
	vpp := vppdrivertest.StartRealVPP(t)
	conn, err := core.Connect(socketclient.NewVppClient(vpp.APISocket()))
	require.NoError(t, err)
	defer conn.Disconnect()
	r := cnatRecorder{&recorder{t: t, conn: conn, scenario: "cnat"}}
	r.action("start fresh VPP (no prior configuration); govpp core.Connect(socketclient) to the binary-API socket; cnat messages from vppdriver/internal/binapi/cnat (generated from VPP 26.06)")
	const tcp, udp, icmp = ip_types.IP_API_PROTO_TCP, ip_types.IP_API_PROTO_UDP, ip_types.IP_API_PROTO_ICMP
	const maglev = cnat.CNAT_LB_TYPE_MAGLEV
	paths := func(p ...cnat.CnatEndpointTuple) []cnat.CnatEndpointTuple { return p }
	del := func(note string, id uint32) { r.call(note, &cnat.CnatTranslationDel{ID: id}) }
	dumpT := func(note string) { r.dump(note, &cnat.CnatTranslationDump{}) }
	snatIf := func(note string, sw uint32, add uint8, table cnat.CnatSnatPolicyTable) {
		r.call(note, &cnat.CnatSnatPolicyAddDelIf{SwIfIndex: interface_types.InterfaceIndex(sw), IsAdd: add, Table: table})
	}
	exclude := func(note string, add uint8, p string) {
		pfx := netip.MustParsePrefix(p)
		r.call(note, &cnat.CnatSnatPolicyAddDelExcludePfx{IsAdd: add, Prefix: ip_types.Prefix{Address: vppconv.Address(pfx.Addr()), Len: uint8(pfx.Bits())}})
	}
	get := func(note string) { r.call(note, &cnat.CnatGetSnatAddresses{}) }
	dumpSnat := func(note string) { r.dump(note, &cnat.CnatSnatAddressesDump{}) }

	// A fresh VPP.
	get("cnat_get_snat_addresses on a fresh VPP")
	dumpSnat("cnat_snat_addresses_dump on a fresh VPP")
	dumpT("cnat_translation_dump on a fresh VPP")
	r.dump("cnat_session_dump on a fresh VPP", &cnat.CnatSessionDump{})
	snatIf("cnat_snat_policy_add_del_if add sw_if_index 0 table POD on a fresh VPP (no default SNAT entry yet)", 0, 1, cnat.CNAT_POLICY_POD)
	snatIf("cnat_snat_policy_add_del_if add sw_if_index 0 table 4 (not a table) on a fresh VPP", 0, 1, 4)
	r.call("cnat_set_snat_addresses all zero with sw_if_index ~0 on a fresh VPP (the form that deletes the default entry)", &cnat.CnatSetSnatAddresses{SwIfIndex: interface_types.InterfaceIndex(noIdx)})
	r.call("cnat_set_snat_addresses_v2 all zero with sw_if_index ~0, fib indexes 0 on a fresh VPP", &cnat.CnatSetSnatAddressesV2{SwIfIndex: interface_types.InterfaceIndex(noIdx)})

	sw1 := r.loop("create_loopback #1 (node interface: carries the SNAT address)")
	sw2 := r.loop("create_loopback #2 (pod side)")
	r.addr(sw1, "192.0.2.1/24")
	r.addr(sw1, "2001:db8:ff::1/64")
	r.addr(sw2, "10.1.1.1/24")
	r.addr(sw2, "fd00:1::1/64")

	// Translations.
	t1 := r.update("cnat_translation_update IPv4 TCP VIP 10.96.0.10:80 -> 10.1.1.11:8080, 10.1.1.12:8080 (lb_type default, flags 0)", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.10", 80), IPProto: tcp, Paths: paths(cnatPath("10.1.1.11", 8080), cnatPath("10.1.1.12", 8080))})
	u1 := r.update("cnat_translation_update IPv4 UDP VIP 10.96.0.10:53 -> 10.1.1.11:53 (same VIP address, other proto and port)", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.10", 53), IPProto: udp, Paths: paths(cnatPath("10.1.1.11", 53))})
	r.update("cnat_translation_update IPv4 TCP VIP 10.96.0.10:53 (same address+port as the UDP one, TCP)", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.10", 53), IPProto: tcp, Paths: paths(cnatPath("10.1.1.11", 53))})
	t6 := r.update("cnat_translation_update IPv6 TCP VIP [fd00:96::10]:443 -> [fd00:1::11]:8443, [fd00:1::12]:8443", cnat.CnatTranslation{
		Vip: cnatEP("fd00:96::10", 443), IPProto: tcp, Paths: paths(cnatPath("fd00:1::11", 8443), cnatPath("fd00:1::12", 8443))})
	r.update("cnat_translation_update IPv6 UDP VIP [fd00:96::10]:53 -> [fd00:1::11]:53", cnat.CnatTranslation{
		Vip: cnatEP("fd00:96::10", 53), IPProto: udp, Paths: paths(cnatPath("fd00:1::11", 53))})
	tm := r.update("cnat_translation_update IPv4 TCP VIP 10.96.0.20:80, lb_type MAGLEV, 3 paths", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.20", 80), IPProto: tcp, LbType: maglev,
		Paths: paths(cnatPath("10.1.1.11", 80), cnatPath("10.1.1.12", 80), cnatPath("10.1.1.13", 80))})
	r.update("cnat_translation_update IPv4 TCP VIP 10.96.0.21:80, lb_type MAGLEV, 1 path", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.21", 80), IPProto: tcp, LbType: maglev, Paths: paths(cnatPath("10.1.1.11", 80))})
	r.update("cnat_translation_update IPv6 UDP VIP [fd00:96::20]:53, lb_type MAGLEV, 2 paths, flow_hash_config src-ip|dst-ip|src-port|dst-port|proto (31)", cnat.CnatTranslation{
		Vip: cnatEP("fd00:96::20", 53), IPProto: udp, LbType: maglev,
		FlowHashConfig: ip.IP_API_V2_FLOW_HASH_SRC_IP | ip.IP_API_V2_FLOW_HASH_DST_IP | ip.IP_API_V2_FLOW_HASH_SRC_PORT | ip.IP_API_V2_FLOW_HASH_DST_PORT | ip.IP_API_V2_FLOW_HASH_PROTO,
		Paths:          paths(cnatPath("fd00:1::11", 53), cnatPath("fd00:1::12", 53))})
	r.update("cnat_translation_update IPv4 TCP VIP 10.96.0.31:80, flags ALLOC_PORT (1), is_real_ip 0", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.31", 80), IPProto: tcp, Flags: uint8(cnat.CNAT_TRANSLATION_ALLOC_PORT), Paths: paths(cnatPath("10.1.1.11", 80))})
	r.update("cnat_translation_update IPv4 TCP VIP 10.96.0.32:80, flags NO_RETURN_SESSION (4)", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.32", 80), IPProto: tcp, Flags: uint8(cnat.CNAT_TRANSLATION_NO_RETURN_SESSION), Paths: paths(cnatPath("10.1.1.11", 80))})
	r.update("cnat_translation_update IPv4 TCP VIP 10.96.0.33:80, flags NO_CLIENT (8, new in 26.06)", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.33", 80), IPProto: tcp, Flags: uint8(cnat.CNAT_TRANSLATION_NO_CLIENT), Paths: paths(cnatPath("10.1.1.11", 80))})
	r.update("cnat_translation_update IPv4 TCP VIP 192.0.2.1:30080 (the address of sw_if_index 1) with is_real_ip 1 (NodePort style)", cnat.CnatTranslation{
		Vip: cnatEP("192.0.2.1", 30080), IPProto: tcp, IsRealIP: 1, Paths: paths(cnatPath("10.1.1.11", 8080))})
	r.update(fmt.Sprintf("cnat_translation_update VIP given by interface: vip sw_if_index %d, if_af IPv4, port 30081, address zero", sw1), cnat.CnatTranslation{
		Vip:     cnat.CnatEndpoint{SwIfIndex: interface_types.InterfaceIndex(sw1), IfAf: ip_types.ADDRESS_IP4, Port: 30081},
		IPProto: tcp, IsRealIP: 1, Paths: paths(cnatPath("10.1.1.11", 8080))})
	r.update(fmt.Sprintf("cnat_translation_update VIP given by interface: vip sw_if_index %d, if_af IPv6, port 30081", sw1), cnat.CnatTranslation{
		Vip:     cnat.CnatEndpoint{Addr: ip_types.Address{Af: ip_types.ADDRESS_IP6}, SwIfIndex: interface_types.InterfaceIndex(sw1), IfAf: ip_types.ADDRESS_IP6, Port: 30081},
		IPProto: tcp, IsRealIP: 1, Paths: paths(cnatPath("fd00:1::11", 8080))})
	r.update("cnat_translation_update IPv4 TCP VIP 10.96.0.34:80, path with src_ep 192.0.2.1:0 (explicit source rewrite)", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.34", 80), IPProto: tcp, Paths: paths(cnat.CnatEndpointTuple{DstEp: cnatEP("10.1.1.11", 80), SrcEp: cnatEP("192.0.2.1", 0)})})
	r.update("cnat_translation_update IPv4 TCP VIP 10.96.0.35:80, path flags 2 (CNAT_EPT_NO_NAT in 26.06; GoVPP's stock constant says 1)", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.35", 80), IPProto: tcp, Paths: paths(cnat.CnatEndpointTuple{DstEp: cnatEP("10.1.1.11", 80), SrcEp: cnatEP("0.0.0.0", 0), Flags: uint8(cnat.CNAT_EPT_NO_NAT)})})
	r.update("cnat_translation_update IPv4 TCP VIP 10.96.0.36:80, path flags 1 (GoVPP's stock CNAT_EPT_NO_NAT value)", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.36", 80), IPProto: tcp, Paths: paths(cnat.CnatEndpointTuple{DstEp: cnatEP("10.1.1.11", 80), SrcEp: cnatEP("0.0.0.0", 0), Flags: 1})})
	dumpT("cnat_translation_dump after the adds")
	r.cli(vpp, "show", "cnat", "translation")

	// Updates in place and what is accepted without validation.
	r.update(fmt.Sprintf("cnat_translation_update SAME VIP+proto as id %d (10.96.0.10:80 TCP) with other paths 10.1.1.13:8080, 10.1.1.14:8080, 10.1.1.15:8080: same id?", t1), cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.10", 80), IPProto: tcp, Paths: paths(cnatPath("10.1.1.13", 8080), cnatPath("10.1.1.14", 8080), cnatPath("10.1.1.15", 8080))})
	r.update(fmt.Sprintf("cnat_translation_update SAME VIP+proto as id %d with lb_type MAGLEV now", t1), cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.10", 80), IPProto: tcp, LbType: maglev, Paths: paths(cnatPath("10.1.1.13", 8080), cnatPath("10.1.1.14", 8080))})
	dumpT(fmt.Sprintf("cnat_translation_dump after the in-place updates of id %d", t1))
	r.update(fmt.Sprintf("cnat_translation_update SAME VIP+proto as id %d (IPv6 [fd00:96::10]:443 TCP) with 1 path instead of 2", t6), cnat.CnatTranslation{
		Vip: cnatEP("fd00:96::10", 443), IPProto: tcp, Paths: paths(cnatPath("fd00:1::13", 8443))})
	r.update("cnat_translation_update with translation.id 77 set in the request for a new VIP 10.96.0.40:80: is the id honoured?", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.40", 80), ID: 77, IPProto: tcp, Paths: paths(cnatPath("10.1.1.11", 80))})
	r.update("cnat_translation_update mixed family: IPv4 VIP 10.96.0.41:80 -> IPv6 backend [fd00:1::11]:80", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.41", 80), IPProto: tcp, Paths: paths(cnatPath("fd00:1::11", 80))})
	r.update("cnat_translation_update mixed family: IPv6 VIP [fd00:96::41]:80 -> IPv4 backend 10.1.1.11:80 and IPv6 backend [fd00:1::11]:80", cnat.CnatTranslation{
		Vip: cnatEP("fd00:96::41", 80), IPProto: tcp, Paths: paths(cnatPath("10.1.1.11", 80), cnatPath("fd00:1::11", 80))})
	r.update("cnat_translation_update IPv4 VIP 10.96.0.42 port 0 (any port?) -> 10.1.1.11:0", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.42", 0), IPProto: tcp, Paths: paths(cnatPath("10.1.1.11", 0))})
	r.update("cnat_translation_update IPv4 VIP 10.96.0.43:80 ip_proto ICMP (1)", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.43", 80), IPProto: icmp, Paths: paths(cnatPath("10.1.1.11", 80))})
	r.update("cnat_translation_update IPv4 VIP 10.96.0.44:80 ip_proto 0 (Go zero)", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.44", 80), Paths: paths(cnatPath("10.1.1.11", 80))})
	r.update("cnat_translation_update IPv4 VIP 10.96.0.47:80, path dst_ep with Go-zero sw_if_index 0 (= interface local0, which has no address)", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.47", 80), IPProto: tcp,
		Paths: paths(cnat.CnatEndpointTuple{DstEp: cnat.CnatEndpoint{Addr: vppconv.Address(netip.MustParseAddr("10.1.1.11")), Port: 80}, SrcEp: cnat.CnatEndpoint{SwIfIndex: interface_types.InterfaceIndex(noIdx)}})})
	r.update("cnat_translation_update IPv4 VIP 10.96.0.48:80, path src_ep with Go-zero sw_if_index 0", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.48", 80), IPProto: tcp, Paths: paths(cnat.CnatEndpointTuple{DstEp: cnatEP("10.1.1.11", 80)})})
	r.update("cnat_translation_update IPv4 VIP 10.96.0.49:80 with vip sw_if_index 0 (Go zero: VIP = address of local0, which has none)", cnat.CnatTranslation{
		Vip: cnat.CnatEndpoint{Addr: vppconv.Address(netip.MustParseAddr("10.96.0.49")), Port: 80}, IPProto: tcp, Paths: paths(cnatPath("10.1.1.11", 80))})
	dumpT("cnat_translation_dump after the Go-zero sw_if_index cases")
	r.update("cnat_translation_update IPv4 VIP 10.96.0.45:80 with all endpoints Go zero (vip, path dst_ep and src_ep sw_if_index 0)", cnat.CnatTranslation{
		Vip: cnat.CnatEndpoint{Addr: vppconv.Address(netip.MustParseAddr("10.96.0.45")), Port: 80}, IPProto: tcp,
		Paths: paths(cnat.CnatEndpointTuple{DstEp: cnat.CnatEndpoint{Addr: vppconv.Address(netip.MustParseAddr("10.1.1.11")), Port: 80}})})
	r.update("cnat_translation_update lb_type 7 (not a cnat_lb_type)", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.46", 80), IPProto: tcp, LbType: 7, Paths: paths(cnatPath("10.1.1.11", 80))})
	r.update("cnat_translation_update VIP given by interface sw_if_index 99 (does not exist)", cnat.CnatTranslation{
		Vip: cnat.CnatEndpoint{SwIfIndex: 99, IfAf: ip_types.ADDRESS_IP4, Port: 30082}, IPProto: tcp, Paths: paths(cnatPath("10.1.1.11", 80))})
	r.update("cnat_translation_update the same VIP given by interface sw_if_index 99 again (an unresolved VIP: found again?)", cnat.CnatTranslation{
		Vip: cnat.CnatEndpoint{SwIfIndex: 99, IfAf: ip_types.ADDRESS_IP4, Port: 30082}, IPProto: tcp, Paths: paths(cnatPath("10.1.1.12", 80))})
	dumpT("cnat_translation_dump after updates and invalid cases")
	r.cli(vpp, "show", "cnat", "translation")

	// Deletes and id reuse.
	del(fmt.Sprintf("cnat_translation_del id %d (IPv4 UDP 10.96.0.10:53)", u1), u1)
	del(fmt.Sprintf("cnat_translation_del id %d (maglev, 3 paths), deleted after id %d", tm, u1), tm)
	del(fmt.Sprintf("cnat_translation_del id %d again", tm), tm)
	del("cnat_translation_del id 999 (does not exist)", 999)
	n1 := r.update(fmt.Sprintf("cnat_translation_update new VIP 10.96.0.50:80 after deleting id %d then id %d: is a freed id reused, which first (lowest or last freed)?", u1, tm), cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.50", 80), IPProto: tcp, Paths: paths(cnatPath("10.1.1.11", 80))})
	r.update(fmt.Sprintf("cnat_translation_update new VIP 10.96.0.51:80 (after id %d): the other freed id?", n1), cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.51", 80), IPProto: tcp, Paths: paths(cnatPath("10.1.1.11", 80))})
	r.update("cnat_translation_update re-add the deleted maglev VIP 10.96.0.20:80 (no freed id left)", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.20", 80), IPProto: tcp, LbType: maglev, Paths: paths(cnatPath("10.1.1.11", 80), cnatPath("10.1.1.12", 80))})
	dumpT("cnat_translation_dump after the deletes and re-adds")

	// SNAT addresses.
	r.call("cnat_set_snat_addresses snat_ip4 192.0.2.1, snat_ip6 2001:db8:ff::1, sw_if_index ~0", &cnat.CnatSetSnatAddresses{
		SnatIP4: ip4Addr("192.0.2.1"), SnatIP6: ip6Addr("2001:db8:ff::1"), SwIfIndex: interface_types.InterfaceIndex(noIdx)})
	get("cnat_get_snat_addresses")
	r.call(fmt.Sprintf("cnat_set_snat_addresses zero addresses, sw_if_index %d (take the addresses of the interface)", sw1), &cnat.CnatSetSnatAddresses{
		SwIfIndex: interface_types.InterfaceIndex(sw1)})
	get("cnat_get_snat_addresses")
	r.call("cnat_set_snat_addresses sw_if_index 99 (does not exist)", &cnat.CnatSetSnatAddresses{SwIfIndex: 99})
	r.call("cnat_set_snat_addresses with Go zero values (0.0.0.0, ::, sw_if_index 0)", &cnat.CnatSetSnatAddresses{})
	get("cnat_get_snat_addresses")
	r.call("cnat_set_snat_addresses_v2 snat_ip4 192.0.2.1, snat_ip6 2001:db8:ff::1, sw_if_index ~0, fwd/ret fib index 0, flags 0", &cnat.CnatSetSnatAddressesV2{
		SnatIP4: ip4Addr("192.0.2.1"), SnatIP6: ip6Addr("2001:db8:ff::1"), SwIfIndex: interface_types.InterfaceIndex(noIdx)})
	get("cnat_get_snat_addresses after v2")
	dumpSnat("cnat_snat_addresses_dump after v2")
	r.call("cnat_set_snat_addresses_v2 flags USE_AS_DEFAULT (4), snat_ip4 192.0.2.2 (IPv6 zero: kept?)", &cnat.CnatSetSnatAddressesV2{
		SnatIP4: ip4Addr("192.0.2.2"), SwIfIndex: interface_types.InterfaceIndex(noIdx), Flags: cnat.CNAT_SNAT_POLICY_F_USE_AS_DEFAULT})
	r.call("ip_table_add_del add IPv4 table_id 10", &ip.IPTableAddDel{IsAdd: true, Table: ip.IPTable{TableID: 10}})
	r.call("ip_table_add_del add IPv6 table_id 10", &ip.IPTableAddDel{IsAdd: true, Table: ip.IPTable{TableID: 10, IsIP6: true}})
	r.call("cnat_set_snat_addresses_v2 fwd_fib_index 1, ret_fib_index 1 (FIB indexes, not table ids: IPv4 index 1 is the table_id 10 just added), snat_ip4 192.0.2.3, snat_ip6 2001:db8:ff::3", &cnat.CnatSetSnatAddressesV2{
		FwdFibIndex: 1, RetFibIndex: 1, SnatIP4: ip4Addr("192.0.2.3"), SnatIP6: ip6Addr("2001:db8:ff::3"), SwIfIndex: interface_types.InterfaceIndex(noIdx)})
	r.call("cnat_set_snat_addresses_v2 IPv6 only, fwd_fib_index 3, ret_fib_index 3 (IPv6 FIB indexes 1 and 2 are the link-local FIBs of the two interfaces with IPv6 addresses, so 3 is table_id 10), snat_ip6 2001:db8:ff::4", &cnat.CnatSetSnatAddressesV2{
		FwdFibIndex: 3, RetFibIndex: 3, SnatIP6: ip6Addr("2001:db8:ff::4"), SwIfIndex: interface_types.InterfaceIndex(noIdx)})
	dumpSnat("cnat_snat_addresses_dump after the v2 calls")
	get("cnat_get_snat_addresses at the end of the SNAT address calls")

	// SNAT policy: excluded prefixes.
	exclude("cnat_snat_policy_add_del_exclude_pfx add 10.0.0.0/8", 1, "10.0.0.0/8")
	exclude("cnat_snat_policy_add_del_exclude_pfx add 10.0.0.0/8 again (duplicate)", 1, "10.0.0.0/8")
	exclude("cnat_snat_policy_add_del_exclude_pfx add fd00::/8", 1, "fd00::/8")
	exclude("cnat_snat_policy_add_del_exclude_pfx add 10.1.2.3/16 (host bits set)", 1, "10.1.2.3/16")
	exclude("cnat_snat_policy_add_del_exclude_pfx add 0.0.0.0/0", 1, "0.0.0.0/0")
	exclude("cnat_snat_policy_add_del_exclude_pfx add is_add 2 (not 0/1) 198.51.100.0/24", 2, "198.51.100.0/24")
	r.cli(vpp, "show", "cnat", "snat")
	exclude("cnat_snat_policy_add_del_exclude_pfx del 10.0.0.0/8", 0, "10.0.0.0/8")
	exclude("cnat_snat_policy_add_del_exclude_pfx del 10.0.0.0/8 again (absent)", 0, "10.0.0.0/8")
	exclude("cnat_snat_policy_add_del_exclude_pfx del fd00::/8", 0, "fd00::/8")
	exclude("cnat_snat_policy_add_del_exclude_pfx del 172.16.0.0/12 (never added)", 0, "172.16.0.0/12")

	// SNAT policy: interface tables.
	tables := []cnat.CnatSnatPolicyTable{cnat.CNAT_POLICY_INCLUDE_V4, cnat.CNAT_POLICY_INCLUDE_V6, cnat.CNAT_POLICY_POD, cnat.CNAT_POLICY_HOST}
	for _, tb := range tables {
		snatIf(fmt.Sprintf("cnat_snat_policy_add_del_if add sw_if_index %d table %s (%d)", sw2, tb, tb), sw2, 1, tb)
	}
	snatIf(fmt.Sprintf("cnat_snat_policy_add_del_if add sw_if_index %d table POD again (duplicate)", sw2), sw2, 1, cnat.CNAT_POLICY_POD)
	snatIf(fmt.Sprintf("cnat_snat_policy_add_del_if add sw_if_index %d table 4 (not a table)", sw2), sw2, 1, 4)
	snatIf("cnat_snat_policy_add_del_if add sw_if_index 99 (does not exist) table POD", 99, 1, cnat.CNAT_POLICY_POD)
	r.cli(vpp, "show", "cnat", "snat")
	// The INCLUDE_V4 table is also the entry's "initialized" mark (VPP
	// checks that its bitmap is not empty; clearing its last bit trims it).
	snatIf(fmt.Sprintf("cnat_snat_policy_add_del_if del sw_if_index %d table CNAT_POLICY_INCLUDE_V4 (0): its last interface", sw2), sw2, 0, cnat.CNAT_POLICY_INCLUDE_V4)
	r.cli(vpp, "show", "cnat", "snat")
	for _, tb := range tables[1:] {
		snatIf(fmt.Sprintf("cnat_snat_policy_add_del_if del sw_if_index %d table %s (%d) after the INCLUDE_V4 table became empty", sw2, tb, tb), sw2, 0, tb)
	}
	exclude("cnat_snat_policy_add_del_exclude_pfx del 198.51.100.0/24 after the INCLUDE_V4 table became empty", 0, "198.51.100.0/24")
	r.cli(vpp, "show", "cnat", "snat")
	snatIf(fmt.Sprintf("cnat_snat_policy_add_del_if add sw_if_index %d table POD again (initializes the entry again)", sw2), sw2, 1, cnat.CNAT_POLICY_POD)
	r.cli(vpp, "show", "cnat", "snat")
	for _, tb := range tables[1:] {
		snatIf(fmt.Sprintf("cnat_snat_policy_add_del_if del sw_if_index %d table %s (%d)", sw2, tb, tb), sw2, 0, tb)
	}
	snatIf(fmt.Sprintf("cnat_snat_policy_add_del_if del sw_if_index %d table POD again (absent)", sw2), sw2, 0, cnat.CNAT_POLICY_POD)
	exclude("cnat_snat_policy_add_del_exclude_pfx add 10.0.0.0/8 (kept for the rest of the trace)", 1, "10.0.0.0/8")
	r.cli(vpp, "show", "cnat", "snat")

	// SNAT policy selection (26.06's message; GoVPP's stock one has another CRC).
	for _, p := range []cnat.CnatSnatPolicies{cnat.CNAT_POLICY_NONE, cnat.CNAT_POLICY_IF_PFX, cnat.CNAT_POLICY_K8S, cnat.CNAT_POLICY_DNAT} {
		r.call(fmt.Sprintf("cnat_set_snat_policy policy %s (%d)", p, p), &cnat.CnatSetSnatPolicy{Policy: p})
	}
	r.call("cnat_set_snat_policy policy 4 (not in the API's enum)", &cnat.CnatSetSnatPolicy{Policy: 4})
	r.call("cnat_set_snat_policy policy 5", &cnat.CnatSetSnatPolicy{Policy: 5})
	r.call("cnat_set_snat_policy policy K8S again (leave the k8s policy set)", &cnat.CnatSetSnatPolicy{Policy: cnat.CNAT_POLICY_K8S})

	// The cnat feature on interfaces.
	r.feature(fmt.Sprintf("feature_cnat_enable_disable enable on sw_if_index %d", sw2), sw2, true)
	r.feature(fmt.Sprintf("feature_cnat_enable_disable enable on sw_if_index %d again", sw2), sw2, true)
	r.cli(vpp, "show", "interface", "features", "loop1")
	r.feature(fmt.Sprintf("feature_cnat_enable_disable disable on sw_if_index %d", sw2), sw2, false)
	r.cli(vpp, "show", "interface", "features", "loop1")
	r.feature(fmt.Sprintf("feature_cnat_enable_disable disable on sw_if_index %d again", sw2), sw2, false)
	r.feature(fmt.Sprintf("feature_cnat_enable_disable disable on sw_if_index %d (never enabled)", sw1), sw1, false)
	r.feature("feature_cnat_enable_disable enable on sw_if_index 99 (does not exist)", 99, true)

	// An interface deleted while it is in a SNAT table and has the feature.
	sw3 := r.loop("create_loopback #3 (deleted below)")
	r.feature(fmt.Sprintf("feature_cnat_enable_disable enable on sw_if_index %d", sw3), sw3, true)
	snatIf(fmt.Sprintf("cnat_snat_policy_add_del_if add sw_if_index %d table POD", sw3), sw3, 1, cnat.CNAT_POLICY_POD)
	r.call(fmt.Sprintf("delete_loopback sw_if_index %d", sw3), &interfaces.DeleteLoopback{SwIfIndex: interface_types.InterfaceIndex(sw3)})
	r.cli(vpp, "show", "cnat", "snat")
	sw3b := r.loop(fmt.Sprintf("create_loopback (reuses sw_if_index %d?)", sw3))
	r.cli(vpp, "show", "interface", "features", "loop2")
	snatIf(fmt.Sprintf("cnat_snat_policy_add_del_if del sw_if_index %d table POD (the new loopback)", sw3b), sw3b, 0, cnat.CNAT_POLICY_POD)

	// Pipelined updates.
	var reqs []api.Message
	for i := range 20 {
		reqs = append(reqs, &cnat.CnatTranslationUpdate{Translation: cnat.CnatTranslation{
			Vip: cnatEP(fmt.Sprintf("10.97.0.%d", 10+i), 80), IPProto: tcp, NPaths: 2,
			Paths: paths(cnatPath(fmt.Sprintf("10.1.2.%d", 10+i), 8080), cnatPath(fmt.Sprintf("10.1.3.%d", 10+i), 8080))}})
	}
	r.pipeline("pipelined on one stream: 20 cnat_translation_update (new IPv4 TCP VIPs 10.97.0.10-29:80, 2 paths each) sent before any reply is read", reqs)
	dumpT("cnat_translation_dump after the pipeline")

	// Purge: sessions and translations.
	r.dump("cnat_session_dump (no traffic: empty)", &cnat.CnatSessionDump{})
	r.call("cnat_session_purge", &cnat.CnatSessionPurge{})
	r.dump("cnat_session_dump after cnat_session_purge", &cnat.CnatSessionDump{})
	dumpT("cnat_translation_dump after cnat_session_purge")
	get("cnat_get_snat_addresses after cnat_session_purge")
	r.call("cnat_session_purge again", &cnat.CnatSessionPurge{})
	r.update("cnat_translation_update new VIP 10.96.0.60:80 after the purge: which id?", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.60", 80), IPProto: tcp, Paths: paths(cnatPath("10.1.1.11", 80))})
	r.update("cnat_translation_update new VIP 10.96.0.61:80", cnat.CnatTranslation{
		Vip: cnatEP("10.96.0.61", 80), IPProto: tcp, Paths: paths(cnatPath("10.1.1.11", 80))})
	dumpT("cnat_translation_dump after the purge and two updates")

	// The default SNAT entry deleted and made again. Its addresses are moved
	// off the VIP addresses first: the purge destroyed the cnat client of
	// 2001:db8:ff::1, which the entry still uses, and deleting the entry
	// then kills VPP (part H of 12-cnat_sessions_crashes.json).
	r.call("cnat_set_snat_addresses snat_ip4 192.0.2.6, snat_ip6 2001:db8:ff::6 (no VIP has these addresses)", &cnat.CnatSetSnatAddresses{
		SnatIP4: ip4Addr("192.0.2.6"), SnatIP6: ip6Addr("2001:db8:ff::6"), SwIfIndex: interface_types.InterfaceIndex(noIdx)})
	r.call("cnat_set_snat_addresses all zero with sw_if_index ~0: deletes the default entry", &cnat.CnatSetSnatAddresses{SwIfIndex: interface_types.InterfaceIndex(noIdx)})
	get("cnat_get_snat_addresses after the delete")
	dumpSnat("cnat_snat_addresses_dump after the delete (the entries of FIB index 1 and 3 stay)")
	snatIf(fmt.Sprintf("cnat_snat_policy_add_del_if add sw_if_index %d table POD without a default entry", sw2), sw2, 1, cnat.CNAT_POLICY_POD)
	r.call("cnat_set_snat_addresses all zero with sw_if_index ~0 again (nothing to delete)", &cnat.CnatSetSnatAddresses{SwIfIndex: interface_types.InterfaceIndex(noIdx)})
	r.call("cnat_set_snat_addresses_v2 all zero, sw_if_index ~0, fwd_fib_index 1: deletes the entry of FIB index 1", &cnat.CnatSetSnatAddressesV2{FwdFibIndex: 1, SwIfIndex: interface_types.InterfaceIndex(noIdx)})
	r.call("cnat_set_snat_addresses_v2 all zero, sw_if_index ~0, fwd_fib_index 3: deletes the entry of FIB index 3", &cnat.CnatSetSnatAddressesV2{FwdFibIndex: 3, SwIfIndex: interface_types.InterfaceIndex(noIdx)})
	dumpSnat("cnat_snat_addresses_dump after deleting every entry")
	r.call("cnat_set_snat_addresses snat_ip4 192.0.2.5 only (IPv6 zero, sw_if_index ~0): a new default entry", &cnat.CnatSetSnatAddresses{
		SnatIP4: ip4Addr("192.0.2.5"), SwIfIndex: interface_types.InterfaceIndex(noIdx)})
	get("cnat_get_snat_addresses of the IPv4-only entry (its sw_if_index is the IPv6 part's)")
	dumpSnat("cnat_snat_addresses_dump of the IPv4-only entry")
	snatIf(fmt.Sprintf("cnat_snat_policy_add_del_if del sw_if_index %d table POD on the new entry (nothing added yet)", sw2), sw2, 0, cnat.CNAT_POLICY_POD)
	snatIf(fmt.Sprintf("cnat_snat_policy_add_del_if add sw_if_index %d table POD on the new entry", sw2), sw2, 1, cnat.CNAT_POLICY_POD)
	r.call("cnat_set_snat_addresses snat_ip6 2001:db8:ff::5 only: completes the entry", &cnat.CnatSetSnatAddresses{
		SnatIP6: ip6Addr("2001:db8:ff::5"), SwIfIndex: interface_types.InterfaceIndex(noIdx)})
	get("cnat_get_snat_addresses of the completed entry")
	r.cli(vpp, "show", "cnat", "snat")

	r.write("11-cnat.json", vpp.Dir())
	fmt.Fprintln(os.Stderr, vpp.CLI("show", "version"))
}

// TestRecordCnatCrashTrace records testdata/vpp-traces/12-cnat_sessions_crashes.json
// from real VPPs, one fresh VPP per part: cnat sessions made by packets of
// VPP's packet generator (part A), and the requests that make VPP 26.06 die
// (translations with 0 paths, a SNAT entry for a FIB index that does not
// exist, SNAT policy calls without a default SNAT entry, deleting a SNAT
// entry whose cnat client a translation delete destroyed). TestReplayTraces
// does not replay this file: the stand-in processes no packets and refuses
// what kills VPP. It runs only with VPPSIM_RECORD=1 (and VPP_SH).
func TestRecordCnatCrashTrace(t *testing.T) {
	if os.Getenv("VPPSIM_RECORD") != "1" {
		t.Skip("set VPPSIM_RECORD=1 (and VPP_SH) to record the cnat crash trace from real VPPs")
	}
	vpp := vppdrivertest.StartRealVPP(t)
	r := cnatRecorder{&recorder{t: t, scenario: "cnat_sessions_crashes"}}
	connect := func() {
		conn, err := core.Connect(socketclient.NewVppClient(vpp.APISocket()))
		require.NoError(t, err)
		r.conn = conn
	}
	defer func() { r.conn.Disconnect() }()
	run := filepath.Join(vpp.Dir(), "run")
	stdout := func() string { b, _ := os.ReadFile(filepath.Join(run, "vpp.stdout")); return string(b) }
	alive := func() bool {
		pid, err := os.ReadFile(filepath.Join(run, "vpp.pid"))
		return err == nil && exec.Command("kill", "-0", strings.TrimSpace(string(pid))).Run() == nil
	}
	// part runs body on a fresh VPP and records whether VPP survived it and,
	// if not, what it printed (its backtrace, with paths shortened).
	first := true
	part := func(title string, body func()) {
		if !first {
			r.conn.Disconnect()
			vpp.Restart()
		}
		first = false
		connect()
		before := len(stdout())
		r.action(title + ": fresh VPP (no prior configuration); govpp core.Connect(socketclient) to the binary-API socket")
		body()
		if alive() {
			r.action("VPP still running after this part")
			return
		}
		time.Sleep(time.Second) // VPP may still be writing its backtrace
		var keep []string
		for l := range strings.SplitSeq(strings.TrimRight(stdout()[before:], "\n"), "\n") {
			if strings.Contains(l, "vnet_feature_arc_init") || strings.Contains(l, "Code:") || strings.Contains(l, "Start: PID") {
				continue
			}
			if i := strings.Index(l, "from /"); i >= 0 {
				l = l[:i] + "from " + l[strings.LastIndex(l, "/")+1:]
			}
			keep = append(keep, l)
		}
		r.step(map[string]any{"kind": "action", "action": "VPP process exited during this part (kill -0 fails); its stdout since the part started (backtrace paths shortened):",
			"exit_code": 0, "output": strings.Join(keep, "\n")})
	}
	const tcp, udp = ip_types.IP_API_PROTO_TCP, ip_types.IP_API_PROTO_UDP
	try := func(note string, tr cnat.CnatTranslation) {
		tr.NPaths = uint32(len(tr.Paths))
		r.try(note, &cnat.CnatTranslationUpdate{Translation: tr})
	}
	ping := func(note string) { r.try(note, pingFor(&cnat.CnatTranslationDump{})) }

	part("part A (sessions from packets)", func() {
		sw := r.loop("create_loopback (pod side)")
		r.addr(sw, "10.1.1.1/24")
		r.update("cnat_translation_update IPv4 UDP VIP 10.96.0.70:53 -> 10.1.1.11:5353 (target of the generated packets)", cnat.CnatTranslation{
			Vip: cnatEP("10.96.0.70", 53), IPProto: udp, Paths: []cnat.CnatEndpointTuple{cnatPath("10.1.1.11", 5353)}})
		r.cli(vpp, "create", "packet-generator", "interface", "pg0")
		r.cli(vpp, "set", "interface", "ip", "address", "pg0", "10.1.9.1/24")
		r.cli(vpp, "set", "interface", "state", "pg0", "up")
		pg := r.dump("sw_interface_dump name_filter pg0 (the packet-generator interface: packets made inside VPP, no Linux traffic)",
			&interfaces.SwInterfaceDump{SwIfIndex: interface_types.InterfaceIndex(noIdx), NameFilterValid: true, NameFilter: "pg0"})
		require.Len(t, pg, 1)
		pgIdx := uint32(pg[0].(*interfaces.SwInterfaceDetails).SwIfIndex)
		r.feature(fmt.Sprintf("feature_cnat_enable_disable enable on pg0 (sw_if_index %d)", pgIdx), pgIdx, true)
		r.cli(vpp, "packet-generator new { name cnat1 limit 2 size 64-64 interface pg0 node ip4-input data { UDP: 10.1.9.100 -> 10.96.0.70 UDP: 40001 -> 53 incrementing 1 } }")
		r.cli(vpp, "packet-generator new { name cnat2 limit 1 size 64-64 interface pg0 node ip4-input data { UDP: 10.1.9.101 -> 10.96.0.70 UDP: 40002 -> 53 incrementing 1 } }")
		r.cli(vpp, "packet-generator", "enable-stream")
		time.Sleep(500 * time.Millisecond)
		r.cli(vpp, "show", "cnat", "session")
		r.dump("cnat_session_dump after 3 generated UDP packets to 10.96.0.70:53 from 2 sources", &cnat.CnatSessionDump{})
		r.call("cnat_session_purge", &cnat.CnatSessionPurge{})
		r.dump("cnat_session_dump after cnat_session_purge", &cnat.CnatSessionDump{})
		r.dump("cnat_translation_dump after cnat_session_purge", &cnat.CnatTranslationDump{})
	})
	part("part B (0 paths, new translation)", func() {
		try("cnat_translation_update NEW IPv4 TCP VIP 10.96.0.30:80 with 0 paths (lb_type default)", cnat.CnatTranslation{Vip: cnatEP("10.96.0.30", 80), IPProto: tcp})
		ping("control_ping after it")
	})
	part("part C (0 paths, new maglev translation)", func() {
		try("cnat_translation_update NEW IPv4 TCP VIP 10.96.0.22:80 with 0 paths, lb_type MAGLEV", cnat.CnatTranslation{Vip: cnatEP("10.96.0.22", 80), IPProto: tcp, LbType: cnat.CNAT_LB_TYPE_MAGLEV})
		ping("control_ping after it")
	})
	part("part D (0 paths, existing translation)", func() {
		r.update("cnat_translation_update the translation to be emptied: IPv6 TCP VIP [fd00:96::10]:443, 2 paths", cnat.CnatTranslation{
			Vip: cnatEP("fd00:96::10", 443), IPProto: tcp, NPaths: 2, Paths: []cnat.CnatEndpointTuple{cnatPath("fd00:1::11", 8443), cnatPath("fd00:1::12", 8443)}})
		try("cnat_translation_update EXISTING IPv6 TCP VIP [fd00:96::10]:443 updated to 0 paths", cnat.CnatTranslation{Vip: cnatEP("fd00:96::10", 443), IPProto: tcp})
		ping("control_ping after it")
	})
	part("part E (a FIB index that does not exist)", func() {
		r.try("cnat_set_snat_addresses_v2 fwd_fib_index 5, ret_fib_index 5 (no FIB has index 5), snat_ip4 192.0.2.3: the outcome varies between runs (retval 0 and VPP keeps running, or VPP dies with SIGSEGV in fib_table_entry_special_dpo_add)",
			&cnat.CnatSetSnatAddressesV2{FwdFibIndex: 5, RetFibIndex: 5, SnatIP4: ip4Addr("192.0.2.3"), SwIfIndex: interface_types.InterfaceIndex(noIdx)})
		ping("control_ping after it")
	})
	part("part F (an excluded prefix without a default SNAT entry)", func() {
		r.try("cnat_snat_policy_add_del_exclude_pfx add 10.0.0.0/8 on a fresh VPP (no cnat_set_snat_addresses before)", &cnat.CnatSnatPolicyAddDelExcludePfx{
			IsAdd: 1, Prefix: vppconv.Prefix(netip.MustParsePrefix("10.0.0.0/8"))})
		ping("control_ping after it")
	})
	part("part G (a SNAT policy without a default SNAT entry)", func() {
		r.try("cnat_set_snat_policy K8S on a fresh VPP (no cnat_set_snat_addresses before)", &cnat.CnatSetSnatPolicy{Policy: cnat.CNAT_POLICY_K8S})
		ping("control_ping after it")
	})

	part("part H (a SNAT address that is also a VIP address)", func() {
		r.call("cnat_set_snat_addresses snat_ip4 192.0.2.1 (sw_if_index ~0)", &cnat.CnatSetSnatAddresses{SnatIP4: ip4Addr("192.0.2.1"), SwIfIndex: interface_types.InterfaceIndex(noIdx)})
		id := r.update("cnat_translation_update IPv4 TCP VIP 192.0.2.1:30080 (the SNAT address) -> 10.1.1.11:8080: the VIP and the SNAT address share one cnat client", cnat.CnatTranslation{
			Vip: cnatEP("192.0.2.1", 30080), IPProto: tcp, IsRealIP: 1, Paths: []cnat.CnatEndpointTuple{cnatPath("10.1.1.11", 8080)}})
		r.call("cnat_translation_del of that translation (its last translation: the client is destroyed, although the SNAT entry uses it)", &cnat.CnatTranslationDel{ID: id})
		r.try("cnat_set_snat_addresses all zero with sw_if_index ~0 (deletes the default entry, which frees the client of 192.0.2.1)", &cnat.CnatSetSnatAddresses{SwIfIndex: interface_types.InterfaceIndex(noIdx)})
		ping("control_ping after it")
	})

	r.write("12-cnat_sessions_crashes.json", vpp.Dir())
}

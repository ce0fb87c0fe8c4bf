package vppsim_test

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter/socketclient"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/acl"
	"go.fd.io/govpp/binapi/acl_types"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/core"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
)

const noIdx = ^uint32(0)

// aclRule builds an ACL rule; the ports are [first, last] ranges (for ICMP:
// type and code ranges). Prefixes are taken as written (host bits kept).
func aclRule(action acl_types.ACLAction, src, dst string, proto ip_types.IPProto, sp0, sp1, dp0, dp1 uint16) acl_types.ACLRule {
	pfx := func(s string) ip_types.Prefix {
		p := netip.MustParsePrefix(s)
		return ip_types.Prefix{Address: vppconv.Address(p.Addr()), Len: uint8(p.Bits())}
	}
	return acl_types.ACLRule{IsPermit: action, SrcPrefix: pfx(src), DstPrefix: pfx(dst), Proto: proto,
		SrcportOrIcmptypeFirst: sp0, SrcportOrIcmptypeLast: sp1, DstportOrIcmpcodeFirst: dp0, DstportOrIcmpcodeLast: dp1}
}

const (
	aclDeny    = acl_types.ACL_ACTION_API_DENY
	aclPermit  = acl_types.ACL_ACTION_API_PERMIT
	aclReflect = acl_types.ACL_ACTION_API_PERMIT_REFLECT
	protoTCP   = ip_types.IP_API_PROTO_TCP
	protoUDP   = ip_types.IP_API_PROTO_UDP
	protoICMP  = ip_types.IP_API_PROTO_ICMP
	protoICMP6 = ip_types.IP_API_PROTO_ICMP6
	protoAny   = ip_types.IP_API_PROTO_HOPOPT // 0: any protocol
)

// TestRecordACLTrace records testdata/vpp-traces/10-acl.json from a real VPP:
// the ACL plugin's messages that the NetworkPolicy renderer uses (ACLs
// added, replaced and deleted, interface lists set and changed one ACL at a
// time, dumps), the index allocation, the validation errors, an interface
// deleted with ACLs on it, pipelined adds and a 1000-rule ACL. It runs only
// with VPPSIM_RECORD=1 (and VPP_SH), like TestRecordMemifTrace.
func TestRecordACLTrace(t *testing.T) {
	if os.Getenv("VPPSIM_RECORD") != "1" {
		t.Skip("set VPPSIM_RECORD=1 (and VPP_SH) to record the ACL trace from a real VPP")
	}
	vpp := vppdrivertest.StartRealVPP(t)
	conn, err := core.Connect(socketclient.NewVppClient(vpp.APISocket()))
	require.NoError(t, err)
	defer conn.Disconnect()
	r := &recorder{t: t, conn: conn, scenario: "acl"}
	r.action("start fresh VPP (no prior configuration); govpp core.Connect(socketclient) to the binary-API socket")

	addReplace := func(note string, idx uint32, tag string, rules []acl_types.ACLRule) uint32 {
		rep := r.call(note, &acl.ACLAddReplace{ACLIndex: idx, Tag: tag, Count: uint32(len(rules)), R: rules})
		return rep.(*acl.ACLAddReplaceReply).ACLIndex
	}
	setList := func(note string, sw uint32, nInput uint8, acls ...uint32) {
		r.call(note, &acl.ACLInterfaceSetACLList{SwIfIndex: interface_types.InterfaceIndex(sw),
			Count: uint8(len(acls)), NInput: nInput, Acls: acls})
	}
	addDel := func(note string, add, input bool, sw, idx uint32) {
		r.call(note, &acl.ACLInterfaceAddDel{IsAdd: add, IsInput: input, SwIfIndex: interface_types.InterfaceIndex(sw), ACLIndex: idx})
	}
	dumpACL := func(note string, idx uint32) { r.dump(note, &acl.ACLDump{ACLIndex: idx}) }
	dumpIf := func(note string, sw uint32) {
		r.dump(note, &acl.ACLInterfaceListDump{SwIfIndex: interface_types.InterfaceIndex(sw)})
	}
	del := func(note string, idx uint32) { r.call(note, &acl.ACLDel{ACLIndex: idx}) }
	loop := func(note string) uint32 {
		return uint32(r.call(note, &interfaces.CreateLoopback{}).(*interfaces.CreateLoopbackReply).SwIfIndex)
	}
	any4 := func() []acl_types.ACLRule {
		return []acl_types.ACLRule{aclRule(aclPermit, "203.0.113.0/24", "0.0.0.0/0", protoAny, 0, 0, 0, 0)}
	}

	r.call("acl_plugin_get_version", &acl.ACLPluginGetVersion{})
	r.call("acl_plugin_get_conn_table_max_entries", &acl.ACLPluginGetConnTableMaxEntries{})
	dumpACL("acl_dump all (acl_index ~0) on a fresh VPP", noIdx)
	dumpACL("acl_dump acl_index 0 on a fresh VPP (Go zero value)", 0)
	dumpIf("acl_interface_list_dump all (sw_if_index ~0) on a fresh VPP", noIdx)

	sw1 := loop("create_loopback #1 (ACL target)")
	sw2 := loop("create_loopback #2 (ACL target, deleted later while it has ACLs)")
	sw3 := loop("create_loopback #3 (acl_interface_add_del target)")

	// New ACLs and what acl_add_replace refuses.
	a0 := addReplace("acl_add_replace new (acl_index ~0): IPv4 rules: permit TCP 10.0.0.0/8 any port -> 192.0.2.10/32 port 80; deny UDP -> 192.0.2.0/24 ports 53-53; permit ICMP echo (type 8 code 0); permit+reflect any proto 0.0.0.0/0 -> 0.0.0.0/0", noIdx, "trace-acl-v4",
		[]acl_types.ACLRule{
			aclRule(aclPermit, "10.0.0.0/8", "192.0.2.10/32", protoTCP, 0, 65535, 80, 80),
			aclRule(aclDeny, "0.0.0.0/0", "192.0.2.0/24", protoUDP, 0, 65535, 53, 53),
			aclRule(aclPermit, "0.0.0.0/0", "0.0.0.0/0", protoICMP, 8, 8, 0, 0),
			aclRule(aclReflect, "0.0.0.0/0", "0.0.0.0/0", protoAny, 0, 0, 0, 0),
		})
	a1 := addReplace("acl_add_replace new: IPv6 rules: permit TCP 2001:db8::/32 -> ::/0 ports 443-443; deny ICMPv6 echo (type 128, codes 0-255); permit+reflect UDP src ports 1000-2000 -> 2001:db8:1::5/128 ports 5000-6000; deny any ::/0 -> ::/0", noIdx, "trace-acl-v6",
		[]acl_types.ACLRule{
			aclRule(aclPermit, "2001:db8::/32", "::/0", protoTCP, 0, 65535, 443, 443),
			aclRule(aclDeny, "::/0", "::/0", protoICMP6, 128, 128, 0, 255),
			aclRule(aclReflect, "::/0", "2001:db8:1::5/128", protoUDP, 1000, 2000, 5000, 6000),
			aclRule(aclDeny, "::/0", "::/0", protoAny, 0, 0, 0, 0),
		})
	synOnly := aclRule(aclDeny, "0.0.0.0/0", "10.2.0.0/16", protoTCP, 0, 65535, 0, 65535)
	synOnly.TCPFlagsMask, synOnly.TCPFlagsValue = 0x12, 0x02
	a2 := addReplace("acl_add_replace new: mixed IPv4 and IPv6 rules in one ACL; a TCP rule with tcp_flags mask 0x12 value 0x02 (SYN without ACK)", noIdx, "trace-acl-mixed",
		[]acl_types.ACLRule{
			aclRule(aclPermit, "10.1.0.0/16", "10.2.0.0/16", protoTCP, 0, 65535, 22, 22),
			synOnly,
			aclRule(aclPermit, "fd00::/8", "fd00:1::/64", protoUDP, 0, 65535, 53, 53),
		})
	a3 := addReplace("acl_add_replace new with 0 rules (empty ACL)", noIdx, "trace-acl-empty", nil)
	addReplace("acl_add_replace new, no tag; a rule whose src prefix has host bits set (10.1.2.3/8)", noIdx, "",
		[]acl_types.ACLRule{aclRule(aclPermit, "10.1.2.3/8", "192.0.2.0/24", protoTCP, 0, 65535, 8080, 8080)})
	addReplace("acl_add_replace new; a rule whose dst prefix has host bits set (192.0.2.77/24)", noIdx, "trace-acl-dsthost",
		[]acl_types.ACLRule{aclRule(aclPermit, "10.0.0.0/8", "192.0.2.77/24", protoTCP, 0, 65535, 8080, 8080)})
	addReplace("acl_add_replace new: rule with port range first > last (dst 2000-1000)", noIdx, "trace-acl-badrange",
		[]acl_types.ACLRule{aclRule(aclPermit, "0.0.0.0/0", "0.0.0.0/0", protoTCP, 0, 65535, 2000, 1000)})
	addReplace("acl_add_replace new: rule with an IPv4 src prefix and an IPv6 dst prefix (mixed family in one rule)", noIdx, "trace-acl-mixfam",
		[]acl_types.ACLRule{aclRule(aclPermit, "10.0.0.0/8", "2001:db8::/32", protoTCP, 0, 65535, 80, 80)})
	a4 := addReplace("acl_add_replace new: IPv4 rule with ports on proto 0 (any): ports 80-80", noIdx, "trace-acl-ports-any",
		[]acl_types.ACLRule{aclRule(aclPermit, "0.0.0.0/0", "0.0.0.0/0", protoAny, 0, 65535, 80, 80)})
	addReplace("acl_add_replace new with a 64-character tag (the field is string[64]: no room for the NUL)", noIdx, strings.Repeat("t", 64),
		[]acl_types.ACLRule{aclRule(aclDeny, "0.0.0.0/0", "0.0.0.0/0", protoAny, 0, 0, 0, 0)})
	a5 := addReplace("acl_add_replace new with a 63-character tag", noIdx, strings.Repeat("u", 63),
		[]acl_types.ACLRule{aclRule(aclDeny, "0.0.0.0/0", "0.0.0.0/0", protoAny, 0, 0, 0, 0)})
	dumpACL("acl_dump all (acl_index ~0)", noIdx)
	dumpACL(fmt.Sprintf("acl_dump one index (%d)", a1), a1)
	dumpACL("acl_dump acl_index 99 (does not exist)", 99)
	r.cli(vpp, "show", "acl-plugin", "acl")

	// Replace in place.
	addReplace(fmt.Sprintf("acl_add_replace REPLACE in place (acl_index %d, existing) with 2 different rules and a new tag", a0), a0, "trace-acl-v4-replaced",
		[]acl_types.ACLRule{
			aclRule(aclDeny, "192.168.0.0/16", "0.0.0.0/0", protoAny, 0, 0, 0, 0),
			aclRule(aclPermit, "0.0.0.0/0", "198.51.100.1/32", protoUDP, 0, 65535, 123, 123),
		})
	dumpACL(fmt.Sprintf("acl_dump %d after the replace (index kept? rules replaced?)", a0), a0)
	addReplace(fmt.Sprintf("acl_add_replace REPLACE with an empty tag (acl_index %d): is the old tag kept?", a3), a3, "", nil)
	dumpACL(fmt.Sprintf("acl_dump %d after replacing with an empty tag", a3), a3)
	addReplace("acl_add_replace with acl_index 99 (does not exist)", 99, "trace-acl-missing",
		[]acl_types.ACLRule{aclRule(aclPermit, "0.0.0.0/0", "0.0.0.0/0", protoAny, 0, 0, 0, 0)})
	dumpACL("acl_dump all after the failed replace", noIdx)

	// Interface lists.
	setList(fmt.Sprintf("acl_interface_set_acl_list sw_if_index %d: count 3, n_input 2, acls [%d %d %d] (input %d,%d; output %d)", sw1, a0, a1, a2, a0, a1, a2), sw1, 2, a0, a1, a2)
	dumpIf(fmt.Sprintf("acl_interface_list_dump sw_if_index %d", sw1), sw1)
	setList(fmt.Sprintf("acl_interface_set_acl_list sw_if_index %d REPLACE: acls [%d %d %d], n_input 1 (input %d; output %d,%d): order changed", sw1, a2, a1, a0, a2, a1, a0), sw1, 1, a2, a1, a0)
	dumpIf(fmt.Sprintf("acl_interface_list_dump sw_if_index %d after the replace", sw1), sw1)
	setList(fmt.Sprintf("acl_interface_set_acl_list sw_if_index %d REPLACE: output only [%d] (n_input 0)", sw1, a1), sw1, 0, a1)
	dumpIf(fmt.Sprintf("acl_interface_list_dump sw_if_index %d after the output-only replace", sw1), sw1)
	setList(fmt.Sprintf("acl_interface_set_acl_list sw_if_index %d with acl 99 (does not exist) in the list [%d 99]", sw1, a0), sw1, 1, a0, 99)
	dumpIf(fmt.Sprintf("acl_interface_list_dump sw_if_index %d after the failed set (unchanged?)", sw1), sw1)
	setList(fmt.Sprintf("acl_interface_set_acl_list sw_if_index %d with n_input 3 > count 1", sw1), sw1, 3, a0)
	dumpIf(fmt.Sprintf("acl_interface_list_dump sw_if_index %d after n_input > count", sw1), sw1)
	setList(fmt.Sprintf("acl_interface_set_acl_list sw_if_index %d with the same ACL twice [%d %d] (n_input 2)", sw1, a0, a0), sw1, 2, a0, a0)
	dumpIf(fmt.Sprintf("acl_interface_list_dump sw_if_index %d after the duplicate list", sw1), sw1)
	setList(fmt.Sprintf("acl_interface_set_acl_list sw_if_index %d: input [%d], output [%d %d] (the same ACL twice in the OUTPUT part)", sw1, a1, a2, a2), sw1, 1, a1, a2, a2)
	dumpIf(fmt.Sprintf("acl_interface_list_dump sw_if_index %d after the duplicate output part (is anything changed?)", sw1), sw1)
	setList(fmt.Sprintf("acl_interface_set_acl_list sw_if_index %d: input [%d %d] (the same ACL twice in the INPUT part), output [%d] (new)", sw1, a1, a1, a2), sw1, 2, a1, a1, a2)
	dumpIf(fmt.Sprintf("acl_interface_list_dump sw_if_index %d after the duplicate input part (VPP sets the output part first)", sw1), sw1)
	setList(fmt.Sprintf("acl_interface_set_acl_list sw_if_index %d: input [%d] (IPv4), output [%d] (empty ACL)", sw2, a0, a3), sw2, 1, a0, a3)
	setList("acl_interface_set_acl_list on sw_if_index 99 (does not exist)", 99, 1, a0)
	dumpIf("acl_interface_list_dump all (sw_if_index ~0)", noIdx)
	dumpIf("acl_interface_list_dump sw_if_index 0 (Go zero value: local0)", 0)
	dumpIf("acl_interface_list_dump sw_if_index 99 (does not exist)", 99)
	setList(fmt.Sprintf("acl_interface_set_acl_list sw_if_index %d CLEAR (count 0)", sw1), sw1, 0)
	dumpIf(fmt.Sprintf("acl_interface_list_dump sw_if_index %d after the clear", sw1), sw1)

	// One ACL at a time.
	addDel(fmt.Sprintf("acl_interface_add_del add input acl %d on sw_if_index %d", a0, sw3), true, true, sw3, a0)
	addDel(fmt.Sprintf("acl_interface_add_del add input acl %d on sw_if_index %d (second input ACL: appended?)", a1, sw3), true, true, sw3, a1)
	addDel(fmt.Sprintf("acl_interface_add_del add output acl %d on sw_if_index %d", a2, sw3), true, false, sw3, a2)
	addDel(fmt.Sprintf("acl_interface_add_del add input acl %d on sw_if_index %d again (duplicate)", a0, sw3), true, true, sw3, a0)
	addDel(fmt.Sprintf("acl_interface_add_del add output acl %d on sw_if_index %d again (duplicate output)", a2, sw3), true, false, sw3, a2)
	dumpIf(fmt.Sprintf("acl_interface_list_dump sw_if_index %d after the adds", sw3), sw3)
	addDel(fmt.Sprintf("acl_interface_add_del del input acl %d on sw_if_index %d", a0, sw3), false, true, sw3, a0)
	addDel(fmt.Sprintf("acl_interface_add_del del input acl %d on sw_if_index %d again (not applied any more)", a0, sw3), false, true, sw3, a0)
	addDel(fmt.Sprintf("acl_interface_add_del del output acl %d on sw_if_index %d (applied as input only)", a1, sw3), false, false, sw3, a1)
	addDel(fmt.Sprintf("acl_interface_add_del add input acl 99 (does not exist) on sw_if_index %d", sw3), true, true, sw3, 99)
	addDel(fmt.Sprintf("acl_interface_add_del add input acl %d on sw_if_index 99 (does not exist)", a0), true, true, 99, a0)
	dumpIf(fmt.Sprintf("acl_interface_list_dump sw_if_index %d after the deletes", sw3), sw3)
	r.cli(vpp, "show", "acl-plugin", "interface")

	// Deletes and index reuse.
	del(fmt.Sprintf("acl_del acl %d: applied as INPUT on sw_if_index %d", a0, sw2), a0)
	del(fmt.Sprintf("acl_del acl %d: applied as OUTPUT on sw_if_index %d", a2, sw3), a2)
	del(fmt.Sprintf("acl_del acl %d (empty ACL): applied as OUTPUT on sw_if_index %d", a3, sw2), a3)
	del(fmt.Sprintf("acl_del acl %d: not applied anywhere", a4), a4)
	del(fmt.Sprintf("acl_del acl %d again (just deleted)", a4), a4)
	del("acl_del acl 99 (does not exist)", 99)
	dumpACL("acl_dump all after the deletes", noIdx)
	n1 := addReplace(fmt.Sprintf("acl_add_replace new after deleting acl %d: is the freed index reused?", a4), noIdx, "trace-acl-after-del", any4())
	addReplace("acl_add_replace new again", noIdx, "trace-acl-after-del-2", any4())
	del(fmt.Sprintf("acl_del acl %d (unused)", n1), n1)
	del(fmt.Sprintf("acl_del acl %d (unused), deleted after acl %d", a5, n1), a5)
	addReplace(fmt.Sprintf("acl_add_replace new after deleting %d then %d: which freed index comes first (lowest or last freed)?", n1, a5), noIdx, "trace-acl-reuse-1", any4())
	addReplace("acl_add_replace new: the other freed index?", noIdx, "trace-acl-reuse-2", any4())
	addReplace("acl_add_replace new: no freed index left", noIdx, "trace-acl-reuse-3", any4())
	addReplace(fmt.Sprintf("acl_add_replace REPLACE acl %d while it is applied as input on sw_if_index %d (1 rule instead of 4)", a1, sw3), a1, "trace-acl-v6-replaced-in-use",
		[]acl_types.ACLRule{aclRule(aclPermit, "2001:db8::/32", "::/0", protoTCP, 0, 65535, 443, 443)})
	dumpACL(fmt.Sprintf("acl_dump %d after replacing it while applied", a1), a1)
	dumpIf(fmt.Sprintf("acl_interface_list_dump sw_if_index %d (still applied?)", sw3), sw3)
	dumpACL("acl_dump all after the deletes and re-adds", noIdx)

	// An interface deleted while it has ACLs.
	r.call(fmt.Sprintf("delete_loopback sw_if_index %d (it has input acl %d and output acl %d)", sw2, a0, a3), &interfaces.DeleteLoopback{SwIfIndex: interface_types.InterfaceIndex(sw2)})
	dumpIf("acl_interface_list_dump all after deleting the interface", noIdx)
	dumpIf(fmt.Sprintf("acl_interface_list_dump sw_if_index %d (deleted)", sw2), sw2)
	r.cli(vpp, "show", "acl-plugin", "interface")
	del(fmt.Sprintf("acl_del acl %d after its interface was deleted", a0), a0)
	sw2b := loop(fmt.Sprintf("create_loopback (reuses sw_if_index %d?)", sw2))
	dumpIf(fmt.Sprintf("acl_interface_list_dump sw_if_index %d (the new loopback): stale ACLs?", sw2b), sw2b)

	// Pipelined adds.
	var reqs []api.Message
	for i := range 20 {
		reqs = append(reqs, &acl.ACLAddReplace{ACLIndex: noIdx, Tag: fmt.Sprintf("trace-pipe-%02d", i), Count: 2, R: []acl_types.ACLRule{
			aclRule(aclPermit, fmt.Sprintf("10.%d.0.0/16", 100+i), "0.0.0.0/0", protoTCP, 0, 65535, uint16(8000+i), uint16(8000+i)),
			aclRule(aclDeny, fmt.Sprintf("fd00:%x::/32", 100+i), "::/0", protoAny, 0, 0, 0, 0),
		}})
	}
	r.pipeline("pipelined on one stream: 20 acl_add_replace (new ACLs, 2 rules each) sent before any reply is read", reqs)
	dumpACL("acl_dump all after the pipeline", noIdx)

	// A large ACL.
	var big []acl_types.ACLRule
	for i := range 1000 {
		big = append(big, aclRule(aclPermit, fmt.Sprintf("10.%d.%d.0/24", i/256, i%256), "0.0.0.0/0", protoTCP, 0, 65535, uint16(1000+i), uint16(1000+i)))
	}
	bigIdx := addReplace("acl_add_replace new with 1000 rules (IPv4 /24 sources, one TCP port each)", noIdx, "trace-acl-1000", big)
	dumpACL(fmt.Sprintf("acl_dump the 1000-rule ACL %d", bigIdx), bigIdx)
	setList(fmt.Sprintf("acl_interface_set_acl_list sw_if_index %d: input [%d] (the 1000-rule ACL)", sw1, bigIdx), sw1, 1, bigIdx)
	dumpIf(fmt.Sprintf("acl_interface_list_dump sw_if_index %d", sw1), sw1)
	r.call("acl_plugin_get_conn_table_max_entries at the end", &acl.ACLPluginGetConnTableMaxEntries{})
	dumpIf("acl_interface_list_dump all, final", noIdx)

	r.write("10-acl.json", vpp.Dir())
	fmt.Fprintln(os.Stderr, vpp.CLI("show", "version"))
}

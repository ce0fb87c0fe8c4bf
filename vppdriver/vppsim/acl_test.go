package vppsim_test

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/acl"
	"go.fd.io/govpp/binapi/acl_types"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/core"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// step is one request of a table test and the retval it must get.
type step struct {
	req    api.Message
	retval int32
}

// run sends the steps in order on conn and checks their retvals; it returns
// the replies.
func run(t *testing.T, conn *core.Connection, steps []step) []api.Message {
	t.Helper()
	var out []api.Message
	for n, s := range steps {
		rep, err := invoke(t, conn, s.req)
		require.NoError(t, err, "step %d (%s)", n, s.req.GetMessageName())
		rv := int32(reflect.ValueOf(rep).Elem().FieldByName("Retval").Int())
		require.Equal(t, s.retval, rv, "step %d (%s %+v)", n, s.req.GetMessageName(), s.req)
		out = append(out, rep)
	}
	return out
}

func newACL(tag string, rules ...acl_types.ACLRule) *acl.ACLAddReplace {
	return &acl.ACLAddReplace{ACLIndex: noIdx, Tag: tag, Count: uint32(len(rules)), R: rules}
}

func replaceACL(idx uint32, tag string, rules ...acl_types.ACLRule) *acl.ACLAddReplace {
	return &acl.ACLAddReplace{ACLIndex: idx, Tag: tag, Count: uint32(len(rules)), R: rules}
}

func setACLs(sw uint32, nInput uint8, acls ...uint32) *acl.ACLInterfaceSetACLList {
	return &acl.ACLInterfaceSetACLList{SwIfIndex: interface_types.InterfaceIndex(sw), Count: uint8(len(acls)), NInput: nInput, Acls: acls}
}

func addDelACL(sw uint32, add, input bool, idx uint32) *acl.ACLInterfaceAddDel {
	return &acl.ACLInterfaceAddDel{SwIfIndex: interface_types.InterfaceIndex(sw), IsAdd: add, IsInput: input, ACLIndex: idx}
}

// TestACL covers the ACL plugin's semantics that 10-acl.json shows, one
// concern per case, on a VPP with loopbacks 1 and 2.
func TestACL(t *testing.T) {
	permitAll := aclRule(aclPermit, "0.0.0.0/0", "0.0.0.0/0", protoAny, 0, 0, 0, 0)
	web := aclRule(aclPermit, "10.0.0.0/8", "192.0.2.10/32", protoTCP, 0, 65535, 80, 80)
	type lists map[uint32][2][]uint32 // sw_if_index -> input, output
	tests := []struct {
		name   string
		steps  []step
		acls   []uint32 // ACL indexes in the snapshot
		lists  lists
		verify func(t *testing.T, snap vppsim.Snapshot, replies []api.Message)
	}{
		{name: "indexes: from 0, freed ones last-freed-first, a failed add uses none", steps: []step{
			{newACL("a", permitAll), 0}, {newACL("b", permitAll), 0}, {newACL("c", permitAll), 0},
			{&acl.ACLDel{ACLIndex: 1}, 0}, {&acl.ACLDel{ACLIndex: 0}, 0},
			{newACL("bad", aclRule(aclPermit, "10.1.2.3/8", "0.0.0.0/0", protoAny, 0, 0, 0, 0)), -57},
			{newACL("d", permitAll), 0}, {newACL("e", permitAll), 0}, {newACL("f", permitAll), 0},
		}, acls: []uint32{0, 1, 2, 3}, verify: func(t *testing.T, _ vppsim.Snapshot, r []api.Message) {
			var got []uint32
			for _, n := range []int{5, 6, 7, 8} {
				got = append(got, r[n].(*acl.ACLAddReplaceReply).ACLIndex)
			}
			assert.Equal(t, []uint32{noIdx, 0, 1, 3}, got)
		}},
		{name: "replace: rules and tag replaced, an empty tag clears it; a missing index -6 echoes it", steps: []step{
			{newACL("old", permitAll, web), 0},
			{replaceACL(0, "", web), 0},
			{replaceACL(7, "x", web), -6},
		}, acls: []uint32{0}, verify: func(t *testing.T, snap vppsim.Snapshot, r []api.Message) {
			assert.Equal(t, uint32(0), r[1].(*acl.ACLAddReplaceReply).ACLIndex)
			assert.Equal(t, uint32(7), r[2].(*acl.ACLAddReplaceReply).ACLIndex)
			assert.Equal(t, "", snap.ACLs[0].Tag)
			require.Len(t, snap.ACLs[0].Rules, 1)
			assert.Equal(t, vppsim.ACLRule{Action: aclPermit, Src: netip.MustParsePrefix("10.0.0.0/8"), Dst: netip.MustParsePrefix("192.0.2.10/32"),
				Proto: 6, SrcPorts: [2]uint16{0, 65535}, DstPorts: [2]uint16{80, 80}}, snap.ACLs[0].Rules[0])
		}},
		{name: "validation", steps: []step{
			{newACL("src host bits", aclRule(aclPermit, "10.1.2.3/8", "0.0.0.0/0", protoAny, 0, 0, 0, 0)), -57},
			{newACL("dst host bits", aclRule(aclPermit, "0.0.0.0/0", "192.0.2.77/24", protoAny, 0, 0, 0, 0)), -58},
			{newACL("families", aclRule(aclPermit, "10.0.0.0/8", "2001:db8::/32", protoAny, 0, 0, 0, 0)), -57},
			{newACL("src ports", aclRule(aclPermit, "0.0.0.0/0", "0.0.0.0/0", protoTCP, 2, 1, 0, 0)), -8},
			{newACL("dst ports", aclRule(aclPermit, "0.0.0.0/0", "0.0.0.0/0", protoTCP, 0, 0, 2000, 1000)), -8},
			{newACL(strings.Repeat("t", 64), permitAll), -7},
			{newACL("ok after a good rule, bad second", permitAll, aclRule(aclPermit, "::/0", "::1/64", protoAny, 0, 0, 0, 0)), -58},
			{newACL(strings.Repeat("u", 63)), 0}, // 0 rules, a 63-character tag
		}, acls: []uint32{0}},
		{name: "set_acl_list: order kept, n_input clamped, count 0 clears", steps: []step{
			{newACL("a", permitAll), 0}, {newACL("b", permitAll), 0}, {newACL("c", permitAll), 0},
			{setACLs(1, 1, 2, 1, 0), 0},
			{setACLs(2, 9, 1), 0},
			{setACLs(1, 2, 0, 1), 0}, {setACLs(1, 0), 0},
		}, acls: []uint32{0, 1, 2}, lists: lists{2: {{1}, nil}}},
		{name: "set_acl_list: unknown ACL -6 and an unknown interface -2 change nothing", steps: []step{
			{newACL("a", permitAll), 0},
			{setACLs(1, 1, 0), 0},
			{setACLs(1, 0, 0, 9), -6},
			{setACLs(9, 1, 0), -2},
		}, acls: []uint32{0}, lists: lists{1: {{0}, nil}}},
		{name: "set_acl_list: a duplicate is +1; VPP sets the output part first", steps: []step{
			{newACL("a", permitAll), 0}, {newACL("b", permitAll), 0}, {newACL("c", permitAll), 0},
			{setACLs(1, 1, 0, 1), 0},
			{setACLs(1, 1, 2, 1, 1), 1}, // duplicate output: nothing changes
			{setACLs(1, 2, 2, 2, 0), 1}, // duplicate input: the output part is already replaced
		}, acls: []uint32{0, 1, 2}, lists: lists{1: {{0}, {0}}}},
		{name: "add_del: appends; duplicates -142/-143; deleting what is not applied -6", steps: []step{
			{newACL("a", permitAll), 0}, {newACL("b", permitAll), 0},
			{addDelACL(1, true, true, 0), 0}, {addDelACL(1, true, true, 1), 0}, {addDelACL(1, true, false, 1), 0},
			{addDelACL(1, true, true, 0), -142}, {addDelACL(1, true, false, 1), -143},
			{addDelACL(1, false, false, 0), -6}, {addDelACL(1, true, true, 9), -6}, {addDelACL(9, true, true, 0), -2},
			{addDelACL(1, false, true, 0), 0},
		}, acls: []uint32{0, 1}, lists: lists{1: {{1}, {1}}}},
		{name: "acl_del: in use as input -142, as output -143, missing -6", steps: []step{
			{newACL("a"), 0}, {newACL("b"), 0},
			{setACLs(1, 1, 0, 1), 0},
			{&acl.ACLDel{ACLIndex: 0}, -142}, {&acl.ACLDel{ACLIndex: 1}, -143}, {&acl.ACLDel{ACLIndex: 5}, -6},
			{setACLs(1, 0), 0},
			{&acl.ACLDel{ACLIndex: 0}, 0}, {&acl.ACLDel{ACLIndex: 0}, -6},
		}, acls: []uint32{1}},
		{name: "deleting an interface detaches its ACLs; its index comes back without them", steps: []step{
			{newACL("a"), 0}, {newACL("b"), 0},
			{setACLs(2, 1, 0, 1), 0}, {setACLs(1, 1, 0), 0},
			{&interfaces.DeleteLoopback{SwIfIndex: 2}, 0},
			{&acl.ACLDel{ACLIndex: 1}, 0},
			{&interfaces.CreateLoopback{}, 0},
		}, acls: []uint32{0}, lists: lists{1: {{0}, nil}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vpp := vppsim.New(vppsim.Config{})
			conn, err := core.Connect(vpp.NewAdapter())
			require.NoError(t, err)
			defer conn.Disconnect()
			run(t, conn, []step{{&interfaces.CreateLoopback{}, 0}, {&interfaces.CreateLoopback{}, 0}})
			replies := run(t, conn, tc.steps)
			snap := vpp.Snapshot()
			var acls []uint32
			for _, a := range snap.ACLs {
				acls = append(acls, a.Index)
			}
			assert.Equal(t, tc.acls, acls, "ACL indexes")
			got := lists{}
			for _, l := range snap.ACLInterfaces {
				got[l.SwIfIndex] = [2][]uint32{l.Input, l.Output}
			}
			if tc.lists == nil {
				tc.lists = lists{}
			}
			assert.Equal(t, tc.lists, got, "interface ACL lists")
			if tc.verify != nil {
				tc.verify(t, snap, replies)
			}
		})
	}
}

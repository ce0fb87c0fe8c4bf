package vppsim_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/binapi/acl"
	"go.fd.io/govpp/binapi/acl_types"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/core"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

func TestACLVerdict(t *testing.T) {
	v := vppsim.New(vppsim.Config{})
	conn, err := core.Connect(v.NewAdapter())
	require.NoError(t, err)
	defer conn.Disconnect()
	ch, err := conn.NewAPIChannel()
	require.NoError(t, err)
	defer ch.Close()
	var lo interfaces.CreateLoopbackReply
	require.NoError(t, ch.SendRequest(&interfaces.CreateLoopback{}).ReceiveReply(&lo))
	require.NoError(t, ch.SendRequest(&interfaces.SwInterfaceTagAddDel{SwIfIndex: lo.SwIfIndex, Tag: "vsk:pod-a", IsAdd: true}).ReceiveReply(&interfaces.SwInterfaceTagAddDelReply{}))
	prefix := func(s string) ip_types.Prefix {
		p, err := ip_types.ParsePrefix(s)
		require.NoError(t, err)
		return p
	}
	var add acl.ACLAddReplaceReply
	require.NoError(t, ch.SendRequest(&acl.ACLAddReplace{ACLIndex: ^uint32(0), Count: 1, R: []acl_types.ACLRule{{
		IsPermit: acl_types.ACL_ACTION_API_PERMIT_REFLECT, SrcPrefix: prefix("10.1.1.0/24"), DstPrefix: prefix("0.0.0.0/0"),
		Proto: 6, SrcportOrIcmptypeLast: 65535, DstportOrIcmpcodeFirst: 80, DstportOrIcmpcodeLast: 80,
	}}}).ReceiveReply(&add))
	pkt := func(src string, port uint16) vppsim.Packet {
		return vppsim.Packet{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr("10.1.2.2"), Proto: 6, Sport: 40000, Dport: port}
	}
	permit, found := v.ACLVerdict("vsk:pod-a", true, pkt("10.1.1.5", 80))
	assert.True(t, permit)
	assert.False(t, found, "no ACL applied yet")
	require.NoError(t, ch.SendRequest(&acl.ACLInterfaceSetACLList{SwIfIndex: interface_types.InterfaceIndex(lo.SwIfIndex), Count: 1, NInput: 0,
		Acls: []uint32{add.ACLIndex}}).ReceiveReply(&acl.ACLInterfaceSetACLListReply{}))
	for _, tc := range []struct {
		src    string
		port   uint16
		output bool
		want   bool
	}{
		{"10.1.1.5", 80, true, true},
		{"10.1.1.5", 81, true, false},
		{"10.9.1.5", 80, true, false},
		{"10.9.1.5", 80, false, true}, // no input ACL
	} {
		permit, _ := v.ACLVerdict("vsk:pod-a", tc.output, pkt(tc.src, tc.port))
		assert.Equal(t, tc.want, permit, "%+v", tc)
	}
}

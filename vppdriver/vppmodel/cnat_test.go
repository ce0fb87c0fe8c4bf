package vppmodel_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

func cnatTr(edit func(*vppmodel.CnatTranslation)) *vppmodel.CnatTranslation {
	m := &vppmodel.CnatTranslation{Vip: "10.96.0.10", Port: 80, Protocol: vppmodel.ProtoTCP,
		Paths: []*vppmodel.CnatPath{{DstIp: "10.1.1.11", DstPort: 8080}, {DstIp: "10.1.1.12", DstPort: 8080}}}
	if edit != nil {
		edit(m)
	}
	return m
}

func TestCnatKeysAndValidation(t *testing.T) {
	for _, tc := range []struct {
		msg  proto.Message
		want string
	}{
		{cnatTr(nil), "vpp/cnat/translation/tcp/10.96.0.10:80"},
		{cnatTr(func(m *vppmodel.CnatTranslation) {
			m.Vip, m.Protocol, m.Port = "fd00:96::10", vppmodel.ProtoUDP, 53
			m.Paths = []*vppmodel.CnatPath{{DstIp: "fd00:1::11", DstPort: 53, SrcIp: "fd00:ff::1"}}
			m.LbType = vppmodel.CnatTranslation_MAGLEV
		}), "vpp/cnat/translation/udp/[fd00:96::10]:53"},
		{cnatTr(func(m *vppmodel.CnatTranslation) { m.FlowHashConfig = vppmodel.CnatFlowHashSrcIP }), "vpp/cnat/translation/tcp/10.96.0.10:80"},
		{&vppmodel.CnatSnat{Ip4: "192.0.2.1", ExcludedPrefixes: []string{"10.0.0.0/8"}, Policy: vppmodel.CnatSnat_K8S}, "vpp/cnat/snat"},
		{&vppmodel.CnatSnat{Ip6: "2001:db8::1"}, "vpp/cnat/snat"},
		{&vppmodel.CnatInterface{Interface: "pod-1", SnatPod: true}, "vpp/cnat/interface/pod-1"},
		{&vppmodel.CnatInterface{Interface: "anchor", SnatV4: true}, "vpp/cnat/interface/anchor"},
		{&vppmodel.CnatInterface{Interface: "pod-2", SnatV6: true}, "vpp/cnat/interface/pod-2"},
	} {
		key, err := vppmodel.KeyOf(tc.msg)
		require.NoError(t, err)
		assert.Equal(t, tc.want, key)
		empty, err := vppmodel.NewValueForKey(key)
		require.NoError(t, err)
		assert.Equal(t, tc.msg.ProtoReflect().Descriptor(), empty.ProtoReflect().Descriptor())
		require.NoError(t, vppmodel.CheckKey(key, tc.msg))
	}
	assert.Equal(t, "vpp/cnat/translation/udp/[fd00::1]:53",
		vppmodel.CnatTranslationKey(vppmodel.ProtoUDP, netip.MustParseAddr("fd00::1"), 53))

	for _, tc := range []struct {
		name string
		msg  proto.Message
		want string
	}{
		{"no paths", cnatTr(func(m *vppmodel.CnatTranslation) { m.Paths = nil }), "no paths"},
		{"bad vip", cnatTr(func(m *vppmodel.CnatTranslation) { m.Vip = "10.96.0" }), "vip"},
		{"unspecified vip", cnatTr(func(m *vppmodel.CnatTranslation) { m.Vip = "0.0.0.0" }), "vip"},
		{"port 0", cnatTr(func(m *vppmodel.CnatTranslation) { m.Port = 0 }), "port 0"},
		{"sctp", cnatTr(func(m *vppmodel.CnatTranslation) { m.Protocol = vppmodel.ProtoSCTP }), "protocol 132"},
		{"lb type", cnatTr(func(m *vppmodel.CnatTranslation) { m.LbType = 7 }), "lb_type"},
		{"flow hash", cnatTr(func(m *vppmodel.CnatTranslation) { m.FlowHashConfig = 1 << 9 }), "flow_hash_config"},
		{"mixed families", cnatTr(func(m *vppmodel.CnatTranslation) { m.Paths[1].DstIp = "fd00::1" }), "another family"},
		{"src of another family", cnatTr(func(m *vppmodel.CnatTranslation) { m.Paths[0].SrcIp = "fd00::1" }), "another family"},
		{"dst port 0", cnatTr(func(m *vppmodel.CnatTranslation) { m.Paths[0].DstPort = 0 }), "dst_port 0"},
		{"src port without src", cnatTr(func(m *vppmodel.CnatTranslation) { m.Paths[0].SrcPort = 1000 }), "needs src_ip"},
		{"the same path twice", cnatTr(func(m *vppmodel.CnatTranslation) { m.Paths[1].DstIp = "10.1.1.11" }), "twice"},
		{"snat without address", &vppmodel.CnatSnat{ExcludedPrefixes: []string{"10.0.0.0/8"}}, "no address"},
		{"snat ip4 of IPv6", &vppmodel.CnatSnat{Ip4: "2001:db8::1"}, "not an IPv4"},
		{"snat ip6 of IPv4", &vppmodel.CnatSnat{Ip6: "192.0.2.1"}, "not an IPv6"},
		{"excluded host bits", &vppmodel.CnatSnat{Ip4: "192.0.2.1", ExcludedPrefixes: []string{"10.1.2.3/16"}}, "host bits"},
		{"excluded twice", &vppmodel.CnatSnat{Ip4: "192.0.2.1", ExcludedPrefixes: []string{"10.0.0.0/8", "10.0.0.0/8"}}, "twice"},
		{"unknown policy", &vppmodel.CnatSnat{Ip4: "192.0.2.1", Policy: 1}, "policy"},
		{"cnat interface without anything", &vppmodel.CnatInterface{Interface: "pod"}, "sets nothing"},
		{"cnat interface name", &vppmodel.CnatInterface{Interface: "a/b", Feature: true}, "not an interface name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := vppmodel.KeyOf(tc.msg)
			require.ErrorIs(t, err, vppmodel.ErrInvalid)
			assert.ErrorContains(t, err, tc.want)
			require.ErrorIs(t, vppmodel.Validate(tc.msg), vppmodel.ErrInvalid)
		})
	}
}

// FuzzCnatTranslationKey: any translation that validates has a key that
// names its protocol, address and port, and validates under that key.
func FuzzCnatTranslationKey(f *testing.F) {
	f.Add("10.96.0.10", uint32(80), uint32(6), "10.1.1.1", uint32(8080), "")
	f.Add("fd00::10", uint32(53), uint32(17), "fd00::1", uint32(53), "fd00::2")
	f.Add("::ffff:10.0.0.1", uint32(1), uint32(6), "10.0.0.2", uint32(1), "")
	f.Fuzz(func(t *testing.T, vip string, port, protocol uint32, dst string, dstPort uint32, src string) {
		m := &vppmodel.CnatTranslation{Vip: vip, Port: port, Protocol: protocol,
			Paths: []*vppmodel.CnatPath{{DstIp: dst, DstPort: dstPort, SrcIp: src}}}
		key, err := vppmodel.KeyOf(m)
		if err != nil {
			require.ErrorIs(t, err, vppmodel.ErrInvalid)
			return
		}
		a := netip.MustParseAddr(vip)
		require.Equal(t, vppmodel.CnatTranslationKey(protocol, a, port), key)
		require.NoError(t, vppmodel.CheckKey(key, m))
		require.True(t, port >= 1 && port <= 65535)
	})
}

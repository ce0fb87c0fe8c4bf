package model_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/vppdriver/model"
)

func TestKeyOf(t *testing.T) {
	tests := []struct {
		name string
		msg  proto.Message
		want string
	}{
		{"loopback", &model.Interface{Name: "uplink", Type: model.Interface_LOOPBACK}, "vpp/interface/uplink"},
		{"vrf v4", &model.VrfTable{Id: 10}, "vpp/vrf/ipv4/10"},
		{"vrf v6", &model.VrfTable{Id: 10, Protocol: model.VrfTable_IPV6}, "vpp/vrf/ipv6/10"},
		{"route", &model.Route{Vrf: 3, DstNetwork: "10.1.0.0/16", Paths: []*model.Path{{NextHop: "10.0.0.1"}}}, "vpp/route/3/10.1.0.0/16"},
		{"route v6", &model.Route{DstNetwork: "2001:db8::/32", Paths: []*model.Path{{OutgoingInterface: "a"}}}, "vpp/route/0/2001:db8::/32"},
		{"neighbor", &model.IPNeighbor{Interface: "vxlan-2", IpAddress: "192.168.30.2", MacAddress: "02:00:00:00:00:02"}, "vpp/neighbor/vxlan-2/192.168.30.2"},
		{"neighbor v6", &model.IPNeighbor{Interface: "pod-1", IpAddress: "fe80::2", MacAddress: "02:00:00:00:00:02"}, "vpp/neighbor/pod-1/fe80::2"},
		{"existing", &model.Interface{Name: "uplink", Type: model.Interface_EXISTING,
			Existing: &model.ExistingLink{VppName: "GigabitEthernet0/8/0"}}, "vpp/interface/uplink"},
		{"unnumbered", &model.Interface{Name: "pod-1", Type: model.Interface_AF_PACKET,
			AfPacket: &model.AfPacketLink{HostIfName: "veth1"}, Unnumbered: "pod-gw"}, "vpp/interface/pod-1"},
		{"tap in a namespace", &model.Interface{Name: "pod-1", Type: model.Interface_TAP, Tap: &model.TapLink{
			HostIfName: "eth0", HostNamespace: "/var/run/netns/pod1", HostMacAddress: "02:00:00:00:00:01",
			HostIpAddresses: []string{"10.1.1.2/32", "fd00::2/128"}, HostGateways: []string{"10.1.1.1", "fd00::1"}}}, "vpp/interface/pod-1"},
		{"nat global", &model.Nat44Global{}, "vpp/nat44/global"},
		{"nat interface", &model.Nat44Interface{Interface: "up", Outside: true}, "vpp/nat44/interface/up"},
		{"nat pool", &model.Nat44AddressPool{FirstIp: "192.0.2.10", LastIp: "192.0.2.12"}, "vpp/nat44/pool/192.0.2.10-192.0.2.12"},
		{"nat twice pool", &model.Nat44AddressPool{FirstIp: "192.0.2.100", TwiceNat: true}, "vpp/nat44/pool/192.0.2.100-192.0.2.100/twice-nat"},
		{"nat interface pool", &model.Nat44AddressPool{Interface: "up"}, "vpp/nat44/pool/if:up"},
		{"nat interface twice pool", &model.Nat44AddressPool{Interface: "up", TwiceNat: true}, "vpp/nat44/pool/if:up/twice-nat"},
		{"nat output feature", &model.Nat44Interface{Interface: "up", OutputFeature: true}, "vpp/nat44/interface/up"},
		{"nat static", &model.Nat44StaticMapping{Protocol: model.Nat44Protocol_TCP, LocalIp: "10.0.0.1", LocalPort: 8080,
			ExternalIp: "192.0.2.20", ExternalPort: 80}, "vpp/nat44/static/tcp/192.0.2.20:80"},
		{"nat identity", &model.Nat44IdentityMapping{Protocol: model.Nat44Protocol_UDP, Interface: "up", Port: 4789},
			"vpp/nat44/identity/udp/if:up:4789"},
		{"nat lb", &model.Nat44LbStaticMapping{Protocol: model.Nat44Protocol_UDP, ExternalIp: "192.0.2.30", ExternalPort: 53,
			Backends: []*model.Nat44Backend{{Ip: "10.0.0.1", Probability: 50}, {Ip: "10.0.0.2", Probability: 50}}},
			"vpp/nat44/lb/udp/192.0.2.30:53"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := model.KeyOf(tc.msg)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			require.NoError(t, model.CheckKey(tc.want, tc.msg))
			v, err := model.NewValueForKey(got)
			require.NoError(t, err)
			assert.Equal(t, tc.msg.ProtoReflect().Descriptor().FullName(), v.ProtoReflect().Descriptor().FullName())
		})
	}
	assert.Equal(t, "vpp/route/0/10.0.0.0/8", model.RouteKey(0, netip.MustParsePrefix("10.1.2.3/8")))
	_, err := model.NewValueForKey("k8s/pod/a")
	require.ErrorIs(t, err, model.ErrInvalid)
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		msg  proto.Message
	}{
		{"empty name", &model.Interface{Type: model.Interface_LOOPBACK}},
		{"slash in name", &model.Interface{Name: "a/b", Type: model.Interface_LOOPBACK}},
		{"long name", &model.Interface{Name: string(make([]byte, 57)), Type: model.Interface_LOOPBACK}},
		{"no type", &model.Interface{Name: "a"}},
		{"af_packet no host", &model.Interface{Name: "a", Type: model.Interface_AF_PACKET}},
		{"bad mac", &model.Interface{Name: "a", Type: model.Interface_LOOPBACK, MacAddress: "00:11"}},
		{"bad address", &model.Interface{Name: "a", Type: model.Interface_LOOPBACK, IpAddresses: []string{"10.0.0.1"}}},
		{"duplicate address", &model.Interface{Name: "a", Type: model.Interface_LOOPBACK, IpAddresses: []string{"10.0.0.1/24", "10.0.0.1/16"}}},
		{"vrf 0", &model.VrfTable{}},
		{"route host bits", &model.Route{DstNetwork: "10.0.0.1/8", Paths: []*model.Path{{NextHop: "10.0.0.2"}}}},
		{"route no paths", &model.Route{DstNetwork: "10.0.0.0/8"}},
		{"route empty path", &model.Route{DstNetwork: "10.0.0.0/8", Paths: []*model.Path{{}}}},
		{"route family", &model.Route{DstNetwork: "10.0.0.0/8", Paths: []*model.Path{{NextHop: "fd00::1"}}}},
		{"route weight", &model.Route{DstNetwork: "10.0.0.0/8", Paths: []*model.Path{{NextHop: "10.0.0.2", Weight: 256}}}},
		{"nil interface", (*model.Interface)(nil)},
		{"memif ring", &model.Interface{Name: "m", Type: model.Interface_MEMIF, Memif: &model.MemifLink{RingSize: 1000}}},
		{"memif secret", &model.Interface{Name: "m", Type: model.Interface_MEMIF, Memif: &model.MemifLink{Secret: "0123456789012345678901234"}}},
		{"nat pool order", &model.Nat44AddressPool{FirstIp: "192.0.2.9", LastIp: "192.0.2.1"}},
		{"nat pool v6", &model.Nat44AddressPool{FirstIp: "fd00::1"}},
		{"nat interface no feature", &model.Nat44Interface{Interface: "a"}},
		{"nat output feature and inside", &model.Nat44Interface{Interface: "a", OutputFeature: true, Inside: true}},
		{"nat output feature and outside", &model.Nat44Interface{Interface: "a", OutputFeature: true, Outside: true}},
		{"nat interface pool with address", &model.Nat44AddressPool{Interface: "a", FirstIp: "192.0.2.1"}},
		{"nat interface pool with vrf", &model.Nat44AddressPool{Interface: "a", Vrf: 3}},
		{"nat static ports without protocol", &model.Nat44StaticMapping{LocalIp: "10.0.0.1", ExternalIp: "192.0.2.1", ExternalPort: 80}},
		{"nat identity ip and interface", &model.Nat44IdentityMapping{Ip: "10.0.0.1", Interface: "a"}},
		{"nat lb one backend", &model.Nat44LbStaticMapping{Protocol: model.Nat44Protocol_TCP, ExternalIp: "192.0.2.1",
			Backends: []*model.Nat44Backend{{Ip: "10.0.0.1", Probability: 100}}}},
		{"nat lb probability", &model.Nat44LbStaticMapping{Protocol: model.Nat44Protocol_TCP, ExternalIp: "192.0.2.1",
			Backends: []*model.Nat44Backend{{Ip: "10.0.0.1"}, {Ip: "10.0.0.2", Probability: 50}}}},
		{"vxlan no link", &model.Interface{Name: "v", Type: model.Interface_VXLAN_TUNNEL}},
		{"vxlan same ends", &model.Interface{Name: "v", Type: model.Interface_VXLAN_TUNNEL,
			Vxlan: &model.VxlanLink{SrcAddress: "10.0.0.1", DstAddress: "10.0.0.1"}}},
		{"vxlan families", &model.Interface{Name: "v", Type: model.Interface_VXLAN_TUNNEL,
			Vxlan: &model.VxlanLink{SrcAddress: "10.0.0.1", DstAddress: "fd00::1"}}},
		{"vxlan vni", &model.Interface{Name: "v", Type: model.Interface_VXLAN_TUNNEL,
			Vxlan: &model.VxlanLink{SrcAddress: "10.0.0.1", DstAddress: "10.0.0.2", Vni: 1 << 24}}},
		{"vxlan payload", &model.Interface{Name: "v", Type: model.Interface_VXLAN_TUNNEL,
			Vxlan: &model.VxlanLink{SrcAddress: "10.0.0.1", DstAddress: "10.0.0.2", Payload: 3}}},
		{"equals sign in name", &model.Interface{Name: "a=b", Type: model.Interface_LOOPBACK}},
		{"existing without name", &model.Interface{Name: "u", Type: model.Interface_EXISTING}},
		{"existing with a MAC", &model.Interface{Name: "u", Type: model.Interface_EXISTING,
			Existing: &model.ExistingLink{VppName: "host-eth0"}, MacAddress: "02:00:00:00:00:01"}},
		{"unnumbered to itself", &model.Interface{Name: "a", Type: model.Interface_LOOPBACK, Unnumbered: "a"}},
		{"unnumbered with addresses", &model.Interface{Name: "a", Type: model.Interface_LOOPBACK, Unnumbered: "b",
			IpAddresses: []string{"10.0.0.1/24"}}},
		{"unnumbered bad name", &model.Interface{Name: "a", Type: model.Interface_LOOPBACK, Unnumbered: "b/c"}},
		{"tap long host name", &model.Interface{Name: "t", Type: model.Interface_TAP, Tap: &model.TapLink{HostIfName: "0123456789abcdef"}}},
		{"tap two IPv4 host addresses", &model.Interface{Name: "t", Type: model.Interface_TAP,
			Tap: &model.TapLink{HostIpAddresses: []string{"10.0.0.1/32", "10.0.0.2/32"}}}},
		{"tap bad host gateway", &model.Interface{Name: "t", Type: model.Interface_TAP, Tap: &model.TapLink{HostGateways: []string{"x"}}}},
		{"tap bad host MAC", &model.Interface{Name: "t", Type: model.Interface_TAP, Tap: &model.TapLink{HostMacAddress: "x"}}},
		{"neighbor no MAC", &model.IPNeighbor{Interface: "a", IpAddress: "10.0.0.1"}},
		{"neighbor bad ip", &model.IPNeighbor{Interface: "a", IpAddress: "10.0.0.1/32", MacAddress: "02:00:00:00:00:01"}},
		{"neighbor bad interface", &model.IPNeighbor{Interface: "", IpAddress: "10.0.0.1", MacAddress: "02:00:00:00:00:01"}},
		{"nil neighbor", (*model.IPNeighbor)(nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, model.Validate(tc.msg), model.ErrInvalid)
		})
	}
	require.NoError(t, model.Validate(&model.Interface{Name: "a", Type: model.Interface_LOOPBACK,
		MacAddress: "02:AB:00:00:00:01", IpAddresses: []string{"10.0.0.1/24", "fd00::1/64"}}))
	require.ErrorIs(t, model.CheckKey("vpp/interface/b", &model.Interface{Name: "a", Type: model.Interface_LOOPBACK}), model.ErrInvalid)
}

func FuzzParseMAC(f *testing.F) {
	for _, s := range []string{"00:11:22:33:44:55", "ff:FF:00:00:00:0a", "", "1:2:3:4:5:6", "00:11:22:33:44:55:66", "zz:00:00:00:00:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mac, err := model.ParseMAC(s)
		if err != nil {
			return
		}
		// A parsed MAC prints back to the input, case aside.
		got := netipHW(mac)
		require.Len(t, s, 17)
		assert.Equal(t, got, lower(s))
	})
}

func netipHW(m [6]byte) string {
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 17)
	for i, b := range m {
		if i > 0 {
			out = append(out, ':')
		}
		out = append(out, hex[b>>4], hex[b&15])
	}
	return string(out)
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

// BenchmarkKeyOfLB250 is the key of a load-balanced mapping with 250
// backends (a full EndpointSlice), which the driver computes for every
// change of the service.
func BenchmarkKeyOfLB250(b *testing.B) {
	m := &model.Nat44LbStaticMapping{ExternalIp: "10.96.0.10", ExternalPort: 80, Protocol: model.Nat44Protocol_TCP}
	for i := range 250 {
		m.Backends = append(m.Backends, &model.Nat44Backend{Ip: fmt.Sprintf("10.128.%d.%d", i/30, i%30+2), Port: 8080, Probability: 1})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := model.KeyOf(m); err != nil {
			b.Fatal(err)
		}
	}
}

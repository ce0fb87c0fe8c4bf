package vppmodel_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

func TestKeyOf(t *testing.T) {
	tests := []struct {
		name string
		msg  proto.Message
		want string
	}{
		{"loopback", &vppmodel.Interface{Name: "uplink", Type: vppmodel.Interface_LOOPBACK}, "vpp/interface/uplink"},
		{"vrf v4", &vppmodel.VrfTable{Id: 10}, "vpp/vrf/ipv4/10"},
		{"vrf v6", &vppmodel.VrfTable{Id: 10, Protocol: vppmodel.VrfTable_IPV6}, "vpp/vrf/ipv6/10"},
		{"route", &vppmodel.Route{Vrf: 3, DstNetwork: "10.1.0.0/16", Paths: []*vppmodel.Path{{NextHop: "10.0.0.1"}}}, "vpp/route/3/10.1.0.0/16"},
		{"route v6", &vppmodel.Route{DstNetwork: "2001:db8::/32", Paths: []*vppmodel.Path{{OutgoingInterface: "a"}}}, "vpp/route/0/2001:db8::/32"},
		{"neighbor", &vppmodel.IPNeighbor{Interface: "vxlan-2", IpAddress: "192.168.30.2", MacAddress: "02:00:00:00:00:02"}, "vpp/neighbor/vxlan-2/192.168.30.2"},
		{"neighbor v6", &vppmodel.IPNeighbor{Interface: "pod-1", IpAddress: "fe80::2", MacAddress: "02:00:00:00:00:02"}, "vpp/neighbor/pod-1/fe80::2"},
		{"existing", &vppmodel.Interface{Name: "uplink", Type: vppmodel.Interface_EXISTING,
			Existing: &vppmodel.ExistingLink{VppName: "GigabitEthernet0/8/0"}}, "vpp/interface/uplink"},
		{"unnumbered", &vppmodel.Interface{Name: "pod-1", Type: vppmodel.Interface_AF_PACKET,
			AfPacket: &vppmodel.AfPacketLink{HostIfName: "veth1"}, Unnumbered: "pod-gw"}, "vpp/interface/pod-1"},
		{"tap in a namespace", &vppmodel.Interface{Name: "pod-1", Type: vppmodel.Interface_TAP, Tap: &vppmodel.TapLink{
			HostIfName: "eth0", HostNamespace: "/var/run/netns/pod1", HostMacAddress: "02:00:00:00:00:01",
			HostIpAddresses: []string{"10.1.1.2/32", "fd00::2/128"}, HostGateways: []string{"10.1.1.1", "fd00::1"}}}, "vpp/interface/pod-1"},
		{"nat global", &vppmodel.Nat44Global{}, "vpp/nat44/global"},
		{"nat interface", &vppmodel.Nat44Interface{Interface: "up", Outside: true}, "vpp/nat44/interface/up"},
		{"nat pool", &vppmodel.Nat44AddressPool{FirstIp: "192.0.2.10", LastIp: "192.0.2.12"}, "vpp/nat44/pool/192.0.2.10-192.0.2.12"},
		{"nat twice pool", &vppmodel.Nat44AddressPool{FirstIp: "192.0.2.100", TwiceNat: true}, "vpp/nat44/pool/192.0.2.100-192.0.2.100/twice-nat"},
		{"nat interface pool", &vppmodel.Nat44AddressPool{Interface: "up"}, "vpp/nat44/pool/if:up"},
		{"nat interface twice pool", &vppmodel.Nat44AddressPool{Interface: "up", TwiceNat: true}, "vpp/nat44/pool/if:up/twice-nat"},
		{"nat output feature", &vppmodel.Nat44Interface{Interface: "up", OutputFeature: true}, "vpp/nat44/interface/up"},
		{"nat static", &vppmodel.Nat44StaticMapping{Protocol: vppmodel.Nat44Protocol_TCP, LocalIp: "10.0.0.1", LocalPort: 8080,
			ExternalIp: "192.0.2.20", ExternalPort: 80}, "vpp/nat44/static/tcp/192.0.2.20:80"},
		{"nat identity", &vppmodel.Nat44IdentityMapping{Protocol: vppmodel.Nat44Protocol_UDP, Interface: "up", Port: 4789},
			"vpp/nat44/identity/udp/if:up:4789"},
		{"nat lb", &vppmodel.Nat44LbStaticMapping{Protocol: vppmodel.Nat44Protocol_UDP, ExternalIp: "192.0.2.30", ExternalPort: 53,
			Backends: []*vppmodel.Nat44Backend{{Ip: "10.0.0.1", Probability: 50}, {Ip: "10.0.0.2", Probability: 50}}},
			"vpp/nat44/lb/udp/192.0.2.30:53"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := vppmodel.KeyOf(tc.msg)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			require.NoError(t, vppmodel.CheckKey(tc.want, tc.msg))
			v, err := vppmodel.NewValueForKey(got)
			require.NoError(t, err)
			assert.Equal(t, tc.msg.ProtoReflect().Descriptor().FullName(), v.ProtoReflect().Descriptor().FullName())
		})
	}
	assert.Equal(t, "vpp/route/0/10.0.0.0/8", vppmodel.RouteKey(0, netip.MustParsePrefix("10.1.2.3/8")))
	_, err := vppmodel.NewValueForKey("k8s/pod/a")
	require.ErrorIs(t, err, vppmodel.ErrInvalid)
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		msg  proto.Message
	}{
		{"empty name", &vppmodel.Interface{Type: vppmodel.Interface_LOOPBACK}},
		{"slash in name", &vppmodel.Interface{Name: "a/b", Type: vppmodel.Interface_LOOPBACK}},
		{"long name", &vppmodel.Interface{Name: string(make([]byte, 57)), Type: vppmodel.Interface_LOOPBACK}},
		{"no type", &vppmodel.Interface{Name: "a"}},
		{"af_packet no host", &vppmodel.Interface{Name: "a", Type: vppmodel.Interface_AF_PACKET}},
		{"bad mac", &vppmodel.Interface{Name: "a", Type: vppmodel.Interface_LOOPBACK, MacAddress: "00:11"}},
		{"bad address", &vppmodel.Interface{Name: "a", Type: vppmodel.Interface_LOOPBACK, IpAddresses: []string{"10.0.0.1"}}},
		{"duplicate address", &vppmodel.Interface{Name: "a", Type: vppmodel.Interface_LOOPBACK, IpAddresses: []string{"10.0.0.1/24", "10.0.0.1/16"}}},
		{"vrf 0", &vppmodel.VrfTable{}},
		{"route host bits", &vppmodel.Route{DstNetwork: "10.0.0.1/8", Paths: []*vppmodel.Path{{NextHop: "10.0.0.2"}}}},
		{"route no paths", &vppmodel.Route{DstNetwork: "10.0.0.0/8"}},
		{"route empty path", &vppmodel.Route{DstNetwork: "10.0.0.0/8", Paths: []*vppmodel.Path{{}}}},
		{"route family", &vppmodel.Route{DstNetwork: "10.0.0.0/8", Paths: []*vppmodel.Path{{NextHop: "fd00::1"}}}},
		{"route weight", &vppmodel.Route{DstNetwork: "10.0.0.0/8", Paths: []*vppmodel.Path{{NextHop: "10.0.0.2", Weight: 256}}}},
		{"nil interface", (*vppmodel.Interface)(nil)},
		{"memif ring", &vppmodel.Interface{Name: "m", Type: vppmodel.Interface_MEMIF, Memif: &vppmodel.MemifLink{RingSize: 1000}}},
		{"memif secret", &vppmodel.Interface{Name: "m", Type: vppmodel.Interface_MEMIF, Memif: &vppmodel.MemifLink{Secret: "0123456789012345678901234"}}},
		{"nat pool order", &vppmodel.Nat44AddressPool{FirstIp: "192.0.2.9", LastIp: "192.0.2.1"}},
		{"nat pool v6", &vppmodel.Nat44AddressPool{FirstIp: "fd00::1"}},
		{"nat interface no feature", &vppmodel.Nat44Interface{Interface: "a"}},
		{"nat output feature and inside", &vppmodel.Nat44Interface{Interface: "a", OutputFeature: true, Inside: true}},
		{"nat output feature and outside", &vppmodel.Nat44Interface{Interface: "a", OutputFeature: true, Outside: true}},
		{"nat interface pool with address", &vppmodel.Nat44AddressPool{Interface: "a", FirstIp: "192.0.2.1"}},
		{"nat interface pool with vrf", &vppmodel.Nat44AddressPool{Interface: "a", Vrf: 3}},
		{"nat static ports without protocol", &vppmodel.Nat44StaticMapping{LocalIp: "10.0.0.1", ExternalIp: "192.0.2.1", ExternalPort: 80}},
		{"nat identity ip and interface", &vppmodel.Nat44IdentityMapping{Ip: "10.0.0.1", Interface: "a"}},
		{"nat lb one backend", &vppmodel.Nat44LbStaticMapping{Protocol: vppmodel.Nat44Protocol_TCP, ExternalIp: "192.0.2.1",
			Backends: []*vppmodel.Nat44Backend{{Ip: "10.0.0.1", Probability: 100}}}},
		{"nat lb probability", &vppmodel.Nat44LbStaticMapping{Protocol: vppmodel.Nat44Protocol_TCP, ExternalIp: "192.0.2.1",
			Backends: []*vppmodel.Nat44Backend{{Ip: "10.0.0.1"}, {Ip: "10.0.0.2", Probability: 50}}}},
		{"vxlan no link", &vppmodel.Interface{Name: "v", Type: vppmodel.Interface_VXLAN_TUNNEL}},
		{"vxlan same ends", &vppmodel.Interface{Name: "v", Type: vppmodel.Interface_VXLAN_TUNNEL,
			Vxlan: &vppmodel.VxlanLink{SrcAddress: "10.0.0.1", DstAddress: "10.0.0.1"}}},
		{"vxlan families", &vppmodel.Interface{Name: "v", Type: vppmodel.Interface_VXLAN_TUNNEL,
			Vxlan: &vppmodel.VxlanLink{SrcAddress: "10.0.0.1", DstAddress: "fd00::1"}}},
		{"vxlan vni", &vppmodel.Interface{Name: "v", Type: vppmodel.Interface_VXLAN_TUNNEL,
			Vxlan: &vppmodel.VxlanLink{SrcAddress: "10.0.0.1", DstAddress: "10.0.0.2", Vni: 1 << 24}}},
		{"vxlan payload", &vppmodel.Interface{Name: "v", Type: vppmodel.Interface_VXLAN_TUNNEL,
			Vxlan: &vppmodel.VxlanLink{SrcAddress: "10.0.0.1", DstAddress: "10.0.0.2", Payload: 3}}},
		{"equals sign in name", &vppmodel.Interface{Name: "a=b", Type: vppmodel.Interface_LOOPBACK}},
		{"existing without name", &vppmodel.Interface{Name: "u", Type: vppmodel.Interface_EXISTING}},
		{"existing with a MAC", &vppmodel.Interface{Name: "u", Type: vppmodel.Interface_EXISTING,
			Existing: &vppmodel.ExistingLink{VppName: "host-eth0"}, MacAddress: "02:00:00:00:00:01"}},
		{"unnumbered to itself", &vppmodel.Interface{Name: "a", Type: vppmodel.Interface_LOOPBACK, Unnumbered: "a"}},
		{"unnumbered with addresses", &vppmodel.Interface{Name: "a", Type: vppmodel.Interface_LOOPBACK, Unnumbered: "b",
			IpAddresses: []string{"10.0.0.1/24"}}},
		{"unnumbered bad name", &vppmodel.Interface{Name: "a", Type: vppmodel.Interface_LOOPBACK, Unnumbered: "b/c"}},
		{"tap long host name", &vppmodel.Interface{Name: "t", Type: vppmodel.Interface_TAP, Tap: &vppmodel.TapLink{HostIfName: "0123456789abcdef"}}},
		{"tap two IPv4 host addresses", &vppmodel.Interface{Name: "t", Type: vppmodel.Interface_TAP,
			Tap: &vppmodel.TapLink{HostIpAddresses: []string{"10.0.0.1/32", "10.0.0.2/32"}}}},
		{"tap bad host gateway", &vppmodel.Interface{Name: "t", Type: vppmodel.Interface_TAP, Tap: &vppmodel.TapLink{HostGateways: []string{"x"}}}},
		{"tap bad host MAC", &vppmodel.Interface{Name: "t", Type: vppmodel.Interface_TAP, Tap: &vppmodel.TapLink{HostMacAddress: "x"}}},
		{"neighbor no MAC", &vppmodel.IPNeighbor{Interface: "a", IpAddress: "10.0.0.1"}},
		{"neighbor bad ip", &vppmodel.IPNeighbor{Interface: "a", IpAddress: "10.0.0.1/32", MacAddress: "02:00:00:00:00:01"}},
		{"neighbor bad interface", &vppmodel.IPNeighbor{Interface: "", IpAddress: "10.0.0.1", MacAddress: "02:00:00:00:00:01"}},
		{"nil neighbor", (*vppmodel.IPNeighbor)(nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, vppmodel.Validate(tc.msg), vppmodel.ErrInvalid)
		})
	}
	require.NoError(t, vppmodel.Validate(&vppmodel.Interface{Name: "a", Type: vppmodel.Interface_LOOPBACK,
		MacAddress: "02:AB:00:00:00:01", IpAddresses: []string{"10.0.0.1/24", "fd00::1/64"}}))
	require.ErrorIs(t, vppmodel.CheckKey("vpp/interface/b", &vppmodel.Interface{Name: "a", Type: vppmodel.Interface_LOOPBACK}), vppmodel.ErrInvalid)
}

func FuzzParseMAC(f *testing.F) {
	for _, s := range []string{"00:11:22:33:44:55", "ff:FF:00:00:00:0a", "", "1:2:3:4:5:6", "00:11:22:33:44:55:66", "zz:00:00:00:00:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mac, err := vppmodel.ParseMAC(s)
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
	m := &vppmodel.Nat44LbStaticMapping{ExternalIp: "10.96.0.10", ExternalPort: 80, Protocol: vppmodel.Nat44Protocol_TCP}
	for i := range 250 {
		m.Backends = append(m.Backends, &vppmodel.Nat44Backend{Ip: fmt.Sprintf("10.128.%d.%d", i/30, i%30+2), Port: 8080, Probability: 1})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := vppmodel.KeyOf(m); err != nil {
			b.Fatal(err)
		}
	}
}

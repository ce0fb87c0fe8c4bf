package vppdriver

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// fuzzKinds are the message types a fuzz input can decode into.
var fuzzKinds = []func() proto.Message{
	func() proto.Message { return &vppmodel.Interface{} },
	func() proto.Message { return &vppmodel.VrfTable{} },
	func() proto.Message { return &vppmodel.Route{} },
	func() proto.Message { return &vppmodel.Nat44Global{} },
	func() proto.Message { return &vppmodel.Nat44Interface{} },
	func() proto.Message { return &vppmodel.Nat44AddressPool{} },
	func() proto.Message { return &vppmodel.Nat44StaticMapping{} },
	func() proto.Message { return &vppmodel.Nat44IdentityMapping{} },
	func() proto.Message { return &vppmodel.Nat44LbStaticMapping{} },
	func() proto.Message { return &vppmodel.IPNeighbor{} },
}

// FuzzParseValue: every message that model validation accepts converts
// into a value (conversion never disagrees with validation) whose key (as
// a readback computes it) is the message's key, and the
// value's canonical message validates under the same key and converts
// back to an equal value.
func FuzzParseValue(f *testing.F) {
	seeds := []proto.Message{
		&vppmodel.Interface{Name: "a", Type: vppmodel.Interface_LOOPBACK, MacAddress: "02:AA:00:00:00:01",
			IpAddresses: []string{"10.0.0.1/24", "fd00::1/64"}, Vrf: 3},
		&vppmodel.Interface{Name: "vx", Type: vppmodel.Interface_VXLAN_TUNNEL,
			Vxlan: &vppmodel.VxlanLink{SrcAddress: "10.0.0.1", DstAddress: "10.0.0.2", Vni: 7, EncapVrf: 2}},
		&vppmodel.Interface{Name: "m", Type: vppmodel.Interface_MEMIF, Memif: &vppmodel.MemifLink{Id: 3, RingSize: 2048}},
		&vppmodel.Interface{Name: "t", Type: vppmodel.Interface_TAP, Tap: &vppmodel.TapLink{HostIfName: "h"}},
		&vppmodel.Interface{Name: "p", Type: vppmodel.Interface_AF_PACKET, AfPacket: &vppmodel.AfPacketLink{HostIfName: "veth0"}},
		&vppmodel.Interface{Name: "t2", Type: vppmodel.Interface_TAP, Unnumbered: "a", Tap: &vppmodel.TapLink{HostIfName: "eth0",
			HostNamespace: "/var/run/netns/p", HostMacAddress: "02:00:00:00:00:01", HostIpAddresses: []string{"10.1.1.2/32", "fd00::2/128"},
			HostGateways: []string{"10.1.1.1"}}},
		&vppmodel.Interface{Name: "u", Type: vppmodel.Interface_EXISTING, Existing: &vppmodel.ExistingLink{VppName: "GigabitEthernet0/8/0"},
			IpAddresses: []string{"192.168.16.1/24"}},
		&vppmodel.Interface{Name: "vx6", Type: vppmodel.Interface_VXLAN_TUNNEL, Unnumbered: "a",
			Vxlan: &vppmodel.VxlanLink{SrcAddress: "10.0.0.1", DstAddress: "10.0.0.2", Vni: 8, Payload: vppmodel.VxlanLink_PAYLOAD_IPV6}},
		&vppmodel.IPNeighbor{Interface: "vx6", IpAddress: "fe80::2", MacAddress: "02:00:00:00:00:02"},
		&vppmodel.Route{DstNetwork: "10.1.1.2/32", Paths: []*vppmodel.Path{{OutgoingInterface: "p", NextHop: "10.1.1.2"}}},
		&vppmodel.VrfTable{Id: 5, Protocol: vppmodel.VrfTable_IPV6, Label: "x"},
		&vppmodel.Route{Vrf: 1, DstNetwork: "10.1.0.0/16", Paths: []*vppmodel.Path{{OutgoingInterface: "a", NextHop: "10.0.0.2", Weight: 1}, {NextHop: "10.0.0.3", Weight: 5}}},
		&vppmodel.Nat44Global{Sessions: 100},
		&vppmodel.Nat44Interface{Interface: "a", Inside: true},
		&vppmodel.Nat44AddressPool{FirstIp: "192.0.2.1", LastIp: "192.0.2.9", TwiceNat: true},
		&vppmodel.Nat44AddressPool{FirstIp: "192.0.2.7"},
		&vppmodel.Nat44AddressPool{Interface: "a", TwiceNat: true},
		&vppmodel.Nat44IdentityMapping{Ip: "192.0.2.8", Port: 53},
		&vppmodel.Nat44StaticMapping{LocalIp: "10.0.0.6", ExternalIp: "192.0.2.6"},
		&vppmodel.Nat44StaticMapping{Protocol: vppmodel.Nat44Protocol_TCP, LocalIp: "10.0.0.5", LocalPort: 80, ExternalIp: "192.0.2.5", ExternalPort: 8080},
		&vppmodel.Nat44IdentityMapping{Protocol: vppmodel.Nat44Protocol_UDP, Interface: "a", Port: 4789},
		&vppmodel.Nat44LbStaticMapping{Protocol: vppmodel.Nat44Protocol_TCP, ExternalIp: "192.0.2.30", ExternalPort: 80,
			Backends: []*vppmodel.Nat44Backend{{Ip: "10.1.1.12", Port: 80, Probability: 50}, {Ip: "10.1.1.11", Port: 80, Probability: 50}}},
	}
	for _, m := range seeds {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		for i, k := range fuzzKinds {
			if proto.MessageName(k()) == proto.MessageName(m) {
				f.Add(uint8(i), b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		msg := fuzzKinds[int(kind)%len(fuzzKinds)]()
		if proto.Unmarshal(data, msg) != nil {
			return
		}
		key, err := vppmodel.KeyOf(msg)
		if err != nil {
			return // invalid: rejected before conversion
		}
		v, err := parseValue(msg)
		if err != nil {
			t.Fatalf("valid %T %v does not convert: %v", msg, msg, err)
		}
		if kindOf(key) != v.kind() {
			t.Fatalf("%s: value of kind %d, key of kind %d", key, v.kind(), kindOf(key))
		}
		if v.key() != key {
			t.Fatalf("%s: the value's key is %s", key, v.key())
		}
		canon := v.message()
		if err := vppmodel.CheckKey(key, canon); err != nil {
			t.Fatalf("canonical message of %s: %v", key, err)
		}
		w, err := parseValue(canon)
		if err != nil {
			t.Fatalf("canonical message of %s does not convert: %v", key, err)
		}
		if !v.equal(w) || !w.equal(v) {
			t.Fatalf("%s: %v converts to a different value than its canonical form %v", key, msg, canon)
		}
		if needsRecreate(v, w) {
			t.Fatalf("%s: needs re-creation into its own canonical form", key)
		}
	})
}

// lbInPlaceOracle is lbInPlace by binary search, as it was first written:
// the reference for the linear merge.
func lbInPlaceOracle(old, new []backendVal) bool {
	kept, added, removed := 0, 0, 0
	for _, b := range old {
		i, ok := slices.BinarySearchFunc(new, b, cmpBackend)
		if !ok || new[i] != b {
			removed++
		} else {
			kept++
		}
	}
	for _, b := range new {
		if _, ok := slices.BinarySearchFunc(old, b, cmpBackend); !ok {
			added++
		}
	}
	return removed == 0 || (kept > 0 && kept+added >= 2)
}

// TestLBInPlaceModel compares lbInPlace with the oracle on random backend
// lists (few addresses and ports, so that keys repeat: duplicates, changed
// probabilities, overlaps).
func TestLBInPlaceModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	list := func() []backendVal {
		var out []backendVal
		for range rng.IntN(7) {
			out = append(out, newBackend(netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.IntN(4))}), uint16(80+rng.IntN(2)), uint8(rng.IntN(2)), 0))
		}
		slices.SortFunc(out, cmpBackend)
		return out
	}
	for i := range 20000 {
		old, new := list(), list()
		if i%3 == 0 && len(old) > 0 { // mostly the same, one changed
			new = slices.Clone(old)
			new[rng.IntN(len(new))].prob++
		}
		require.Equal(t, lbInPlaceOracle(old, new), lbInPlace(old, new), "old %v new %v", old, new)
	}
}

// BenchmarkLBInPlace250 is one backend added to a mapping with 250 (a
// Kubernetes EndpointSlice's maximum).
func BenchmarkLBInPlace250(b *testing.B) {
	var old []backendVal
	for i := range 250 {
		old = append(old, newBackend(netip.AddrFrom4([4]byte{10, 128, byte(i / 30), byte(i%30 + 2)}), 8080, 0, 0))
	}
	slices.SortFunc(old, cmpBackend)
	new := append(slices.Clone(old), newBackend(netip.MustParseAddr("10.129.0.250"), 8080, 0, 0))
	slices.SortFunc(new, cmpBackend)
	for b.Loop() {
		if !lbInPlace(old, new) {
			b.Fatal("not in place")
		}
	}
}

// lbDiffOracle is the backend diff by binary search, as natPut first
// computed it.
func lbDiffOracle(old, new []backendVal) (add, remove, readd []backendVal) {
	find := func(bs []backendVal, b backendVal) (backendVal, bool) {
		i, ok := slices.BinarySearchFunc(bs, b, cmpBackend)
		if !ok {
			return backendVal{}, false
		}
		return bs[i], true
	}
	for _, b := range new {
		if _, ok := find(old, b); !ok {
			add = append(add, b)
		}
	}
	for _, b := range old {
		if n, ok := find(new, b); !ok || n != b {
			remove = append(remove, b)
		}
	}
	for _, b := range new {
		if ob, ok := find(old, b); ok && ob != b {
			readd = append(readd, b)
		}
	}
	return add, remove, readd
}

// TestLBDiffModel compares lbDiff with the oracle on random backend lists.
func TestLBDiffModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	list := func() []backendVal {
		var out []backendVal
		for range rng.IntN(7) {
			out = append(out, newBackend(netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.IntN(4))}), uint16(80+rng.IntN(2)), uint8(rng.IntN(2)), 0))
		}
		slices.SortFunc(out, cmpBackend)
		return out
	}
	for i := range 20000 {
		old, new := list(), list()
		if i%3 == 0 && len(old) > 0 {
			new = slices.Clone(old)
			new[rng.IntN(len(new))].prob++
		}
		a, r, ra := lbDiff(old, new)
		wa, wr, wra := lbDiffOracle(old, new)
		require.Equal(t, wa, a, "add: old %v new %v", old, new)
		require.Equal(t, wr, r, "remove: old %v new %v", old, new)
		require.Equal(t, wra, ra, "readd: old %v new %v", old, new)
	}
}

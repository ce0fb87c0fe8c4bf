package vppsim_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/api"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/core"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/internal/binapi/cnat"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

const crash = vppsim.RetvalWouldCrash

func cnatUpdate(vip string, port uint16, lb cnat.CnatLbType, backends ...string) *cnat.CnatTranslationUpdate {
	tr := cnat.CnatTranslation{Vip: cnatEP(vip, port), IPProto: ip_types.IP_API_PROTO_TCP, LbType: lb}
	for _, b := range backends {
		tr.Paths = append(tr.Paths, cnatPath(b, 8080))
	}
	tr.NPaths = uint32(len(tr.Paths))
	return &cnat.CnatTranslationUpdate{Translation: tr}
}

func snatSet(ip4, ip6 string, sw uint32) *cnat.CnatSetSnatAddresses {
	m := &cnat.CnatSetSnatAddresses{SwIfIndex: interface_types.InterfaceIndex(sw)}
	if ip4 != "" {
		m.SnatIP4 = ip4Addr(ip4)
	}
	if ip6 != "" {
		m.SnatIP6 = ip6Addr(ip6)
	}
	return m
}

func snatIf(sw uint32, add bool, table cnat.CnatSnatPolicyTable) *cnat.CnatSnatPolicyAddDelIf {
	m := &cnat.CnatSnatPolicyAddDelIf{SwIfIndex: interface_types.InterfaceIndex(sw), Table: table}
	if add {
		m.IsAdd = 1
	}
	return m
}

func exclude(p string, add bool) *cnat.CnatSnatPolicyAddDelExcludePfx {
	m := &cnat.CnatSnatPolicyAddDelExcludePfx{Prefix: vppconv.Prefix(netip.MustParsePrefix(p))}
	if add {
		m.IsAdd = 1
	}
	return m
}

func trIDs(snap vppsim.Snapshot) []uint32 {
	var ids []uint32
	for _, tr := range snap.Cnat.Translations {
		ids = append(ids, tr.ID)
	}
	return ids
}

// TestCnat covers the cnat semantics that 11-cnat.json and
// 12-cnat_sessions_crashes.json show, one concern per case, on a VPP with
// loopback 1 (192.0.2.1/24, 2001:db8:ff::1/64) and loopback 2 (no address).
func TestCnat(t *testing.T) {
	tests := []struct {
		name   string
		steps  []step
		verify func(t *testing.T, snap vppsim.Snapshot, replies []api.Message)
	}{
		{name: "0 paths are refused (VPP 26.06 dies) and change nothing", steps: []step{
			{cnatUpdate("10.96.0.10", 80, 0, "10.1.1.11"), 0},
			{cnatUpdate("10.96.0.10", 80, 0), crash},
			{cnatUpdate("10.96.0.11", 80, cnat.CNAT_LB_TYPE_MAGLEV), crash},
		}, verify: func(t *testing.T, snap vppsim.Snapshot, _ []api.Message) {
			require.Len(t, snap.Cnat.Translations, 1)
			assert.Len(t, snap.Cnat.Translations[0].Paths, 1)
		}},
		{name: "ids: the same VIP keeps its id; freed ids are reused last-freed-first", steps: []step{
			{cnatUpdate("10.96.0.10", 80, 0, "10.1.1.11"), 0}, {cnatUpdate("10.96.0.11", 80, 0, "10.1.1.11"), 0},
			{cnatUpdate("10.96.0.12", 80, 0, "10.1.1.11"), 0},
			{cnatUpdate("10.96.0.10", 80, 0, "10.1.1.12", "10.1.1.13"), 0},
			{&cnat.CnatTranslationDel{ID: 0}, 0}, {&cnat.CnatTranslationDel{ID: 2}, 0}, {&cnat.CnatTranslationDel{ID: 2}, -6},
			{cnatUpdate("10.96.0.20", 80, 0, "10.1.1.11"), 0}, {cnatUpdate("10.96.0.21", 80, 0, "10.1.1.11"), 0},
			{cnatUpdate("10.96.0.22", 80, 0, "10.1.1.11"), 0},
		}, verify: func(t *testing.T, _ vppsim.Snapshot, r []api.Message) {
			var ids []uint32
			for _, n := range []int{0, 1, 2, 3, 7, 8, 9} {
				ids = append(ids, r[n].(*cnat.CnatTranslationUpdateReply).ID)
			}
			assert.Equal(t, []uint32{0, 1, 2, 0, 2, 0, 3}, ids)
		}},
		{name: "an update replaces paths and flags, keeps the lb type", steps: []step{
			{cnatUpdate("10.96.0.10", 80, 0, "10.1.1.11"), 0},
			{&cnat.CnatTranslationUpdate{Translation: cnat.CnatTranslation{Vip: cnatEP("10.96.0.10", 80), IPProto: ip_types.IP_API_PROTO_TCP,
				LbType: cnat.CNAT_LB_TYPE_MAGLEV, IsRealIP: 1, Flags: uint8(cnat.CNAT_TRANSLATION_ALLOC_PORT), NPaths: 1,
				Paths: []cnat.CnatEndpointTuple{{DstEp: cnatEP("10.1.1.12", 80), SrcEp: cnatEP("0.0.0.0", 0), Flags: uint8(cnat.CNAT_EPT_NO_NAT)}}}}, 0},
		}, verify: func(t *testing.T, snap vppsim.Snapshot, _ []api.Message) {
			require.Len(t, snap.Cnat.Translations, 1)
			tr := snap.Cnat.Translations[0]
			assert.Equal(t, uint8(0), tr.LBType)
			assert.True(t, tr.IsRealIP)
			assert.Equal(t, uint8(cnat.CNAT_TRANSLATION_ALLOC_PORT), tr.Flags)
			assert.Equal(t, []vppsim.CnatPath{{Dst: vppsim.CnatEndpoint{Addr: netip.MustParseAddr("10.1.1.12"), SwIfIndex: noIdx, Port: 80, Resolved: true},
				Src: vppsim.CnatEndpoint{Addr: netip.IPv4Unspecified(), SwIfIndex: noIdx, Resolved: true}, Flags: 2}}, tr.Paths)
		}},
		{name: "a VIP by interface resolves to its address; an address-less one is unresolved and never found again", steps: []step{
			{&cnat.CnatTranslationUpdate{Translation: cnat.CnatTranslation{Vip: cnat.CnatEndpoint{SwIfIndex: 1, IfAf: ip_types.ADDRESS_IP6, Port: 30080},
				IPProto: 6, NPaths: 1, Paths: []cnat.CnatEndpointTuple{cnatPath("fd00:1::11", 80)}}}, 0},
			{&cnat.CnatTranslationUpdate{Translation: cnat.CnatTranslation{Vip: cnat.CnatEndpoint{SwIfIndex: 2, Port: 30080},
				IPProto: 6, NPaths: 1, Paths: []cnat.CnatEndpointTuple{cnatPath("10.1.1.11", 80)}}}, 0},
			{&cnat.CnatTranslationUpdate{Translation: cnat.CnatTranslation{Vip: cnat.CnatEndpoint{SwIfIndex: 2, Port: 30080},
				IPProto: 6, NPaths: 1, Paths: []cnat.CnatEndpointTuple{cnatPath("10.1.1.11", 80)}}}, 0},
			{&cnat.CnatTranslationUpdate{Translation: cnat.CnatTranslation{Vip: cnat.CnatEndpoint{SwIfIndex: 1, IfAf: 2, Port: 30080},
				IPProto: 6, NPaths: 1, Paths: []cnat.CnatEndpointTuple{cnatPath("10.1.1.11", 80)}}}, -97}, // if_af not a family
		}, verify: func(t *testing.T, snap vppsim.Snapshot, _ []api.Message) {
			assert.Equal(t, []uint32{0, 1, 2}, trIDs(snap))
			assert.Equal(t, vppsim.CnatEndpoint{Addr: netip.MustParseAddr("2001:db8:ff::1"), SwIfIndex: 1, Port: 30080, Resolved: true}, snap.Cnat.Translations[0].VIP)
			assert.Equal(t, vppsim.CnatEndpoint{Addr: netip.IPv4Unspecified(), SwIfIndex: 2, Port: 30080}, snap.Cnat.Translations[1].VIP)
		}},
		{name: "a Go-zero vip sw_if_index overwrites the paths of the translation of client 0", steps: []step{
			{cnatUpdate("10.96.0.10", 80, 0, "10.1.1.11"), 0},
			{&cnat.CnatTranslationUpdate{Translation: cnat.CnatTranslation{Vip: cnat.CnatEndpoint{Addr: vppconv.Address(netip.MustParseAddr("10.96.0.49")), Port: 80},
				IPProto: 6, NPaths: 1, Paths: []cnat.CnatEndpointTuple{cnatPath("10.9.9.9", 80)}}}, 0},
		}, verify: func(t *testing.T, snap vppsim.Snapshot, r []api.Message) {
			assert.Equal(t, uint32(0), r[1].(*cnat.CnatTranslationUpdateReply).ID)
			require.Len(t, snap.Cnat.Translations, 1)
			assert.Equal(t, netip.MustParseAddr("10.96.0.10"), snap.Cnat.Translations[0].VIP.Addr)
			assert.Equal(t, netip.MustParseAddr("10.9.9.9"), snap.Cnat.Translations[0].Paths[0].Dst.Addr)
		}},
		{name: "cnat_session_purge deletes every translation; ids come back from the last freed", steps: []step{
			{cnatUpdate("10.96.0.10", 80, 0, "10.1.1.11"), 0}, {cnatUpdate("10.96.0.11", 80, 0, "10.1.1.11"), 0},
			{snatSet("192.0.2.1", "", noIdx), 0},
			{&cnat.CnatSessionPurge{}, 0},
			{cnatUpdate("10.96.0.12", 80, 0, "10.1.1.11"), 0},
		}, verify: func(t *testing.T, snap vppsim.Snapshot, _ []api.Message) {
			assert.Equal(t, []uint32{1}, trIDs(snap))
			require.Len(t, snap.Cnat.SNAT, 1, "the SNAT addresses stay")
		}},
		{name: "SNAT: set, get, delete; a FIB index that does not exist is refused", steps: []step{
			{&cnat.CnatGetSnatAddresses{}, -30},
			{snatSet("", "", noIdx), -30},
			{snatSet("192.0.2.7", "", noIdx), 0},
			{snatSet("", "", 1), 0}, // from loopback 1: both addresses
			{&cnat.CnatSetSnatAddressesV2{FwdFibIndex: 5, RetFibIndex: 5, SnatIP4: ip4Addr("192.0.2.3"), SwIfIndex: interface_types.InterfaceIndex(noIdx)}, crash},
			{&ip.IPTableAddDel{IsAdd: true, Table: ip.IPTable{TableID: 10}}, 0},
			{&cnat.CnatSetSnatAddressesV2{FwdFibIndex: 1, RetFibIndex: 1, SnatIP4: ip4Addr("192.0.2.3"), SwIfIndex: interface_types.InterfaceIndex(noIdx)}, 0},
			{&cnat.CnatGetSnatAddresses{}, 0},
		}, verify: func(t *testing.T, snap vppsim.Snapshot, r []api.Message) {
			get := r[7].(*cnat.CnatGetSnatAddressesReply)
			assert.Equal(t, "192.0.2.1", netip.AddrFrom4(get.SnatIP4).String())
			assert.Equal(t, "2001:db8:ff::1", netip.AddrFrom16(get.SnatIP6).String())
			assert.Equal(t, interface_types.InterfaceIndex(1), get.SwIfIndex)
			require.Len(t, snap.Cnat.SNAT, 2)
			assert.Equal(t, uint32(1), snap.Cnat.SNAT[1].FwdFibIndex)
		}},
		{name: "SNAT: deleting the entry after its address's client went with a VIP is refused (VPP 26.06 dies)", steps: []step{
			{snatSet("192.0.2.1", "", noIdx), 0},
			{cnatUpdate("192.0.2.1", 30080, 0, "10.1.1.11"), 0},
			{&cnat.CnatTranslationDel{ID: 0}, 0},
			{snatSet("", "", noIdx), crash},
			{snatSet("192.0.2.6", "", noIdx), 0}, // moving the address off first is safe
			{snatSet("", "", noIdx), 0},
			{&cnat.CnatGetSnatAddresses{}, -30},
		}},
		{name: "SNAT policy calls without a default entry: exclude and policy refused (VPP dies), interfaces -30", steps: []step{
			{exclude("10.0.0.0/8", true), crash},
			{&cnat.CnatSetSnatPolicy{Policy: cnat.CNAT_POLICY_K8S}, crash},
			{snatIf(1, true, cnat.CNAT_POLICY_POD), -30},
			{snatIf(1, true, 4), -7},
			{snatIf(9, true, cnat.CNAT_POLICY_POD), -2},
		}},
		{name: "SNAT policy: the INCLUDE_V4 table is the initialized mark; the next add drops the excluded prefixes", steps: []step{
			{snatSet("192.0.2.1", "", noIdx), 0},
			{&cnat.CnatSetSnatPolicy{Policy: 5}, -7}, {&cnat.CnatSetSnatPolicy{Policy: cnat.CNAT_POLICY_K8S}, 0},
			{snatIf(2, false, cnat.CNAT_POLICY_POD), 0}, // not initialized: ignored
			{exclude("10.1.2.3/16", true), 0}, {exclude("fd00::/8", true), 0},
			{snatIf(1, true, cnat.CNAT_POLICY_INCLUDE_V4), 0}, {snatIf(1, true, cnat.CNAT_POLICY_POD), 0},
			{snatIf(1, false, cnat.CNAT_POLICY_INCLUDE_V4), 0}, // its last interface: not initialized any more
			{snatIf(1, false, cnat.CNAT_POLICY_POD), 0},        // ignored
			{exclude("fd00::/8", false), 0},                    // ignored
			{snatIf(2, true, cnat.CNAT_POLICY_HOST), 0},        // initializes again: the prefixes go
			{exclude("10.9.0.0/16", true), 0},
		}, verify: func(t *testing.T, snap vppsim.Snapshot, _ []api.Message) {
			require.Len(t, snap.Cnat.SNAT, 1)
			e := snap.Cnat.SNAT[0]
			assert.True(t, e.Initialized)
			assert.Equal(t, uint8(cnat.CNAT_POLICY_K8S), e.Policy)
			assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}, e.ExcludedPrefixes)
			assert.Equal(t, [4][]uint32{nil, nil, {1}, {2}}, e.Interfaces)
		}},
		{name: "SNAT tables keep a deleted interface", steps: []step{
			{snatSet("192.0.2.1", "", noIdx), 0},
			{snatIf(2, true, cnat.CNAT_POLICY_POD), 0},
			{&interfaces.DeleteLoopback{SwIfIndex: 2}, 0},
		}, verify: func(t *testing.T, snap vppsim.Snapshot, _ []api.Message) {
			assert.Equal(t, []uint32{2}, snap.Cnat.SNAT[0].Interfaces[cnat.CNAT_POLICY_POD])
		}},
		{name: "feature_cnat_enable_disable counts; a deleted interface loses it", steps: []step{
			{&cnat.FeatureCnatEnableDisable{SwIfIndex: 1, EnableDisable: true}, 0},
			{&cnat.FeatureCnatEnableDisable{SwIfIndex: 1, EnableDisable: true}, 0},
			{&cnat.FeatureCnatEnableDisable{SwIfIndex: 1}, 0},
			{&cnat.FeatureCnatEnableDisable{SwIfIndex: 2}, 0},
			{&cnat.FeatureCnatEnableDisable{SwIfIndex: 2, EnableDisable: true}, 0},
			{&interfaces.DeleteLoopback{SwIfIndex: 2}, 0},
			{&cnat.FeatureCnatEnableDisable{SwIfIndex: 9, EnableDisable: true}, -2},
		}, verify: func(t *testing.T, snap vppsim.Snapshot, _ []api.Message) {
			assert.Equal(t, []vppsim.CnatFeature{{SwIfIndex: 1, Count: 1}}, snap.Cnat.Features)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vpp := vppsim.New(vppsim.Config{})
			conn, err := core.Connect(vpp.NewAdapter())
			require.NoError(t, err)
			defer conn.Disconnect()
			addr := func(p string) api.Message {
				return &interfaces.SwInterfaceAddDelAddress{SwIfIndex: 1, IsAdd: true, Prefix: ip_types.AddressWithPrefix(vppconv.Prefix(netip.MustParsePrefix(p)))}
			}
			run(t, conn, []step{{&interfaces.CreateLoopback{}, 0}, {&interfaces.CreateLoopback{}, 0},
				{addr("192.0.2.1/24"), 0}, {addr("2001:db8:ff::1/64"), 0}})
			replies := run(t, conn, tc.steps)
			if tc.verify != nil {
				tc.verify(t, vpp.Snapshot(), replies)
			}
		})
	}
}

// TestFibIndex: FIB indexes per family, as VPP allocates them (11-cnat.json
// steps 74-78): IPv4 table 10 after table 0 is 1; in IPv6 each interface
// with an IPv6 address holds a link-local FIB first; a deleted table's index
// is the next one reused.
func TestFibIndex(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	conn, err := core.Connect(vpp.NewAdapter())
	require.NoError(t, err)
	defer conn.Disconnect()
	addr := func(sw interface_types.InterfaceIndex, p string) api.Message {
		return &interfaces.SwInterfaceAddDelAddress{SwIfIndex: sw, IsAdd: true, Prefix: ip_types.AddressWithPrefix(vppconv.Prefix(netip.MustParsePrefix(p)))}
	}
	table := func(id uint32, v6, add bool) api.Message {
		return &ip.IPTableAddDel{IsAdd: add, Table: ip.IPTable{TableID: id, IsIP6: v6}}
	}
	run(t, conn, []step{{&interfaces.CreateLoopback{}, 0}, {&interfaces.CreateLoopback{}, 0},
		{addr(1, "2001:db8:ff::1/64"), 0}, {addr(1, "2001:db8:fe::1/64"), 0}, {addr(2, "fd00:1::1/64"), 0}, {addr(2, "10.1.1.1/24"), 0},
		{table(10, false, true), 0}, {table(10, true, true), 0}, {table(20, false, true), 0}})
	for _, tc := range []struct {
		id   uint32
		v6   bool
		want uint32
	}{{0, false, 0}, {10, false, 1}, {20, false, 2}, {0, true, 0}, {10, true, 3}} {
		got, ok := vpp.FibIndex(tc.id, tc.v6)
		require.True(t, ok, "table %d v6=%v", tc.id, tc.v6)
		assert.Equal(t, tc.want, got, "table %d v6=%v", tc.id, tc.v6)
	}
	run(t, conn, []step{{table(10, false, false), 0}, {table(30, false, true), 0},
		{&interfaces.DeleteLoopback{SwIfIndex: 1}, 0}, {table(30, true, true), 0}})
	got, _ := vpp.FibIndex(30, false)
	assert.Equal(t, uint32(1), got, "IPv4 table 30 takes the index table 10 freed")
	got, _ = vpp.FibIndex(30, true)
	assert.Equal(t, uint32(1), got, "IPv6 table 30 takes the link-local index loopback 1 freed")
	_, ok := vpp.FibIndex(10, false)
	assert.False(t, ok)
}

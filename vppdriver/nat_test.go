package vppdriver_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/nat44_ed"
	"go.fd.io/govpp/binapi/nat_types"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// dump runs one dump on its own connection to the VPP.
func dump(t *testing.T, vpp *vppsim.VPP, req api.Message) []api.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := vppdrivertest.Dump(ctx, vpp.NewAdapter(), req)
	require.NoError(t, err)
	return out
}

func lbBackends(t *testing.T, vpp *vppsim.VPP) []string {
	var out []string
	for _, m := range dump(t, vpp, &nat44_ed.Nat44LbStaticMappingDump{}) {
		for _, l := range m.(*nat44_ed.Nat44LbStaticMappingDetails).Locals {
			out = append(out, netip.AddrPortFrom(netip.AddrFrom4(l.Addr), l.Port).String())
		}
	}
	return out
}

func natIfaces(t *testing.T, vpp *vppsim.VPP) map[uint32]nat_types.NatConfigFlags {
	out := map[uint32]nat_types.NatConfigFlags{}
	for _, m := range dump(t, vpp, &nat44_ed.Nat44InterfaceDump{}) {
		d := m.(*nat44_ed.Nat44InterfaceDetails)
		out[uint32(d.SwIfIndex)] = d.Flags
	}
	return out
}

// TestNat44 applies a NAT44-ED configuration (plugin, features, pools
// incl. twice-NAT, static, identity and load-balanced mappings), changes
// it, resyncs with foreign and stale mappings in VPP, and removes it.
func TestNat44(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	d := startDriver(t, vpp, testCfg())
	lb := &vppmodel.Nat44LbStaticMapping{Protocol: vppmodel.Nat44Protocol_UDP, ExternalIp: "192.0.2.30", ExternalPort: 53,
		Affinity: 10800, Out2InOnly: true, SelfTwiceNat: true, Backends: []*vppmodel.Nat44Backend{
			{Ip: "10.1.1.11", Port: 5353, Probability: 33}, {Ip: "10.1.1.12", Port: 5353, Probability: 33},
			{Ip: "10.1.1.13", Port: 5353, Probability: 34}}}
	static := &vppmodel.Nat44StaticMapping{Protocol: vppmodel.Nat44Protocol_TCP, LocalIp: "10.1.1.10", LocalPort: 8080,
		ExternalIp: "192.0.2.20", ExternalPort: 80, Out2InOnly: true}
	state := kv(t,
		loop("uplink", true, 0, "192.0.2.1/24"),
		loop("pods", true, 0, "10.1.1.1/24"),
		&vppmodel.Nat44Global{Sessions: 10000},
		&vppmodel.Nat44Interface{Interface: "pods", Inside: true},
		&vppmodel.Nat44Interface{Interface: "uplink", Outside: true},
		&vppmodel.Nat44AddressPool{FirstIp: "192.0.2.10", LastIp: "192.0.2.12", Vrf: ^uint32(0)},
		&vppmodel.Nat44AddressPool{FirstIp: "192.0.2.100", Vrf: ^uint32(0), TwiceNat: true},
		static, lb,
		&vppmodel.Nat44IdentityMapping{Protocol: vppmodel.Nat44Protocol_UDP, Interface: "uplink", Port: 4789},
	)
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))

	snap := vpp.Snapshot()
	up, _ := ifaceByTag(snap, "vsk:uplink")
	pods, _ := ifaceByTag(snap, "vsk:pods")
	assert.Equal(t, map[uint32]nat_types.NatConfigFlags{up.SwIfIndex: nat_types.NAT_IS_OUTSIDE, pods.SwIfIndex: nat_types.NAT_IS_INSIDE}, natIfaces(t, vpp))
	assert.Len(t, dump(t, vpp, &nat44_ed.Nat44AddressDump{}), 4)
	assert.Equal(t, []string{"10.1.1.11:5353", "10.1.1.12:5353", "10.1.1.13:5353"}, lbBackends(t, vpp))
	ids := dump(t, vpp, &nat44_ed.Nat44IdentityMappingDump{})
	require.Len(t, ids, 2, "record + resolved")
	sm := dump(t, vpp, &nat44_ed.Nat44StaticMappingDump{})
	require.Len(t, sm, 1)
	assert.Equal(t, nat_types.NAT_IS_OUT2IN_ONLY, sm[0].(*nat44_ed.Nat44StaticMappingDetails).Flags)

	// A resync of the same state reads everything back as configured.
	before := vpp.Stats().Writes
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	assert.Equal(t, before, vpp.Stats().Writes, "readback only")

	// Change: backends (add .14, drop .11, reweight .13), pods becomes
	// inside+outside, the static mapping goes.
	lb2 := &vppmodel.Nat44LbStaticMapping{Protocol: vppmodel.Nat44Protocol_UDP, ExternalIp: "192.0.2.30", ExternalPort: 53,
		Affinity: 10800, Out2InOnly: true, SelfTwiceNat: true, Backends: []*vppmodel.Nat44Backend{
			{Ip: "10.1.1.12", Port: 5353, Probability: 33}, {Ip: "10.1.1.13", Port: 5353, Probability: 40},
			{Ip: "10.1.1.14", Port: 5353, Probability: 27}}}
	changes := kv(t, lb2, &vppmodel.Nat44Interface{Interface: "pods", Inside: true, Outside: true})
	skey, _ := vppmodel.KeyOf(static)
	changes[skey] = nil
	commit(t, d, controller.CommitUpdate, changes)
	waitConfigured(t, d, len(state)-1)
	assert.ElementsMatch(t, []string{"10.1.1.12:5353", "10.1.1.13:5353", "10.1.1.14:5353"}, lbBackends(t, vpp))
	for _, m := range dump(t, vpp, &nat44_ed.Nat44LbStaticMappingDump{}) {
		for _, l := range m.(*nat44_ed.Nat44LbStaticMappingDetails).Locals {
			if l.Addr == [4]byte{10, 1, 1, 13} {
				assert.Equal(t, uint8(40), l.Probability, "reweighted")
			}
		}
	}
	assert.Equal(t, nat_types.NAT_IS_INSIDE|nat_types.NAT_IS_OUTSIDE, natIfaces(t, vpp)[pods.SwIfIndex])
	assert.Empty(t, dump(t, vpp, &nat44_ed.Nat44StaticMappingDump{}))

	// Foreign and stale mappings: the stale one (our tag) goes.
	foreign(t, vpp,
		&nat44_ed.Nat44AddDelStaticMappingV2{IsAdd: true, Flags: nat_types.NAT_IS_ADDR_ONLY, LocalIPAddress: [4]byte{10, 1, 1, 50},
			ExternalIPAddress: [4]byte{192, 0, 2, 50}, ExternalSwIfIndex: interface_types.InterfaceIndex(^uint32(0)), Tag: "other"},
		&nat44_ed.Nat44AddDelStaticMappingV2{IsAdd: true, Flags: nat_types.NAT_IS_ADDR_ONLY, LocalIPAddress: [4]byte{10, 1, 1, 51},
			ExternalIPAddress: [4]byte{192, 0, 2, 51}, ExternalSwIfIndex: interface_types.InterfaceIndex(^uint32(0)), Tag: "vsk:"},
	)
	cur := kv(t)
	for k, v := range state {
		cur[k] = v
	}
	delete(cur, skey)
	for k, v := range changes {
		if v != nil {
			cur[k] = v
		}
	}
	commit(t, d, controller.CommitResync, cur)
	waitConfigured(t, d, len(cur))
	sm = dump(t, vpp, &nat44_ed.Nat44StaticMappingDump{})
	require.Len(t, sm, 1)
	assert.Equal(t, "other", sm[0].(*nat44_ed.Nat44StaticMappingDetails).Tag)

	// Without the global key everything NAT goes and the plugin is disabled.
	commit(t, d, controller.CommitResync, kv(t, loop("uplink", true, 0, "192.0.2.1/24"), loop("pods", true, 0, "10.1.1.1/24")))
	waitConfigured(t, d, 2)
	var cfg *nat44_ed.Nat44ShowRunningConfigReply
	reps := foreign(t, vpp, &nat44_ed.Nat44ShowRunningConfig{})
	cfg = reps[0].(*nat44_ed.Nat44ShowRunningConfigReply)
	assert.Zero(t, cfg.Sessions, "plugin disabled")
}

// TestNat44ServiceFeatures: forwarding, the output feature (post-routing
// NAT) and interface-address pools are applied, read back and changed in
// place where VPP allows it; switching an interface between the output
// feature and inside/outside re-creates its features (VPP refuses both).
func TestNat44ServiceFeatures(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	d := startDriver(t, vpp, testCfg())
	state := kv(t,
		loop("uplink", true, 0, "192.0.2.1/24"),
		loop("pods", true, 0, "10.1.1.1/24"),
		&vppmodel.Nat44Global{Forwarding: true},
		&vppmodel.Nat44Interface{Interface: "uplink", OutputFeature: true},
		&vppmodel.Nat44Interface{Interface: "pods", Outside: true},
		&vppmodel.Nat44AddressPool{Interface: "uplink"},
		&vppmodel.Nat44AddressPool{FirstIp: "172.30.1.254", Vrf: ^uint32(0), TwiceNat: true},
	)
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	snap := vpp.Snapshot()
	up, _ := ifaceByTag(snap, "vsk:uplink")
	pods, _ := ifaceByTag(snap, "vsk:pods")
	running := func() *nat44_ed.Nat44ShowRunningConfigReply {
		return foreign(t, vpp, &nat44_ed.Nat44ShowRunningConfig{})[0].(*nat44_ed.Nat44ShowRunningConfigReply)
	}
	assert.True(t, running().ForwardingEnabled)
	outputs := func() []uint32 {
		var out []uint32
		for _, m := range dump(t, vpp, &nat44_ed.Nat44EdOutputInterfaceGet{}) {
			if r, ok := m.(*nat44_ed.Nat44EdOutputInterfaceDetails); ok {
				out = append(out, uint32(r.SwIfIndex))
			}
		}
		return out
	}
	assert.Equal(t, []uint32{up.SwIfIndex}, outputs())
	assert.Equal(t, map[uint32]nat_types.NatConfigFlags{pods.SwIfIndex: nat_types.NAT_IS_OUTSIDE}, natIfaces(t, vpp))
	var pool []string
	for _, m := range dump(t, vpp, &nat44_ed.Nat44AddressDump{}) {
		r := m.(*nat44_ed.Nat44AddressDetails)
		pool = append(pool, fmt.Sprintf("%s twice=%v", netip.AddrFrom4(r.IPAddress), r.Flags&nat_types.NAT_IS_TWICE_NAT != 0))
	}
	assert.Equal(t, []string{"192.0.2.1 twice=false", "172.30.1.254 twice=true"}, pool, "the uplink's address is the pool")

	// A resync of the same state finds everything in place.
	before := vpp.Stats().Writes
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	assert.Equal(t, before, vpp.Stats().Writes, "readback only")

	// Forwarding off: one request, nothing re-created.
	before = vpp.Stats().Writes
	commit(t, d, controller.CommitUpdate, kv(t, &vppmodel.Nat44Global{}))
	waitConfigured(t, d, len(state))
	assert.Equal(t, before+1, vpp.Stats().Writes)
	assert.False(t, running().ForwardingEnabled)
	assert.Equal(t, []uint32{up.SwIfIndex}, outputs(), "the rest of NAT stays")

	// The uplink becomes a pre-routing outside interface and back.
	commit(t, d, controller.CommitUpdate, kv(t, &vppmodel.Nat44Interface{Interface: "uplink", Outside: true}))
	waitConfigured(t, d, len(state))
	assert.Empty(t, outputs())
	assert.Equal(t, nat_types.NAT_IS_OUTSIDE, natIfaces(t, vpp)[up.SwIfIndex])
	commit(t, d, controller.CommitUpdate, kv(t, &vppmodel.Nat44Interface{Interface: "uplink", OutputFeature: true}))
	waitConfigured(t, d, len(state))
	assert.Equal(t, []uint32{up.SwIfIndex}, outputs())
	assert.NotContains(t, natIfaces(t, vpp), up.SwIfIndex)

	// Deletes.
	changes := controller.KeyValuePairs{vppmodel.Nat44InterfaceKey("uplink"): nil, vppmodel.Nat44InterfaceAddressPoolKey("uplink", false): nil}
	commit(t, d, controller.CommitUpdate, changes)
	waitConfigured(t, d, len(state)-2)
	assert.Empty(t, outputs())
	assert.Empty(t, dump(t, vpp, &nat44_ed.Nat44InterfaceAddrDump{}))
}

// TestNat44LbBackendChanges: a backend added to or removed from a
// load-balanced mapping costs one VPP request; a change VPP cannot make in
// place (it keeps at least two backends) re-creates the mapping.
func TestNat44LbBackendChanges(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	d := startDriver(t, vpp, testCfg())
	backend := func(last byte, prob uint32) *vppmodel.Nat44Backend {
		return &vppmodel.Nat44Backend{Ip: netip.AddrFrom4([4]byte{10, 1, 1, last}).String(), Port: 8080, Probability: prob}
	}
	lb := func(bs ...*vppmodel.Nat44Backend) *vppmodel.Nat44LbStaticMapping {
		return &vppmodel.Nat44LbStaticMapping{Protocol: vppmodel.Nat44Protocol_TCP, ExternalIp: "10.96.0.10", ExternalPort: 80,
			Out2InOnly: true, SelfTwiceNat: true, Backends: bs}
	}
	commit(t, d, controller.CommitResync, kv(t, &vppmodel.Nat44Global{}, lb(backend(1, 2), backend(2, 2), backend(3, 2))))
	waitConfigured(t, d, 2)
	for _, tc := range []struct {
		name     string
		lb       *vppmodel.Nat44LbStaticMapping
		requests uint64
		want     []string
	}{
		{"remove one of three", lb(backend(1, 2), backend(2, 2)), 1, []string{"10.1.1.1:8080", "10.1.1.2:8080"}},
		{"add one", lb(backend(1, 2), backend(2, 2), backend(4, 2)), 1, []string{"10.1.1.1:8080", "10.1.1.2:8080", "10.1.1.4:8080"}},
		{"replace one", lb(backend(1, 2), backend(2, 2), backend(5, 2)), 2, []string{"10.1.1.1:8080", "10.1.1.2:8080", "10.1.1.5:8080"}},
		{"reweight one", lb(backend(1, 2), backend(2, 2), backend(5, 4)), 2, []string{"10.1.1.1:8080", "10.1.1.2:8080", "10.1.1.5:8080"}},
		{"remove one of three again", lb(backend(1, 2), backend(2, 2)), 1, []string{"10.1.1.1:8080", "10.1.1.2:8080"}},
		// Reweighting both of two would leave one backend: delete + add.
		{"reweight both of two", lb(backend(1, 4), backend(2, 4)), 2, []string{"10.1.1.1:8080", "10.1.1.2:8080"}},
		{"replace both of two", lb(backend(6, 4), backend(7, 4)), 2, []string{"10.1.1.6:8080", "10.1.1.7:8080"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := vpp.Stats().Writes
			commit(t, d, controller.CommitUpdate, kv(t, tc.lb))
			waitConfigured(t, d, 2)
			assert.Equal(t, tc.requests, vpp.Stats().Writes-before, "VPP requests")
			assert.ElementsMatch(t, tc.want, lbBackends(t, vpp))
			for _, m := range dump(t, vpp, &nat44_ed.Nat44LbStaticMappingDump{}) {
				for _, l := range m.(*nat44_ed.Nat44LbStaticMappingDetails).Locals {
					for _, b := range tc.lb.GetBackends() {
						if b.GetIp() == netip.AddrFrom4(l.Addr).String() {
							assert.Equal(t, b.GetProbability(), uint32(l.Probability))
						}
					}
				}
			}
		})
	}
}

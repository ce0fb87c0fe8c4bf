package vppdriver_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

func tunnel(name, src, dst string, vni, encapVrf uint32, addrs ...string) *vppmodel.Interface {
	return &vppmodel.Interface{Name: name, Type: vppmodel.Interface_VXLAN_TUNNEL, Enabled: true, IpAddresses: addrs,
		Vxlan: &vppmodel.VxlanLink{SrcAddress: src, DstAddress: dst, Vni: vni, EncapVrf: encapVrf}}
}

// TestVxlanTunnel: a routed tunnel over an underlay VRF, with a route
// through it; decap-next is ip4-input; changing the VNI re-creates it.
func TestVxlanTunnel(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	d := startDriver(t, vpp, testCfg())
	state := kv(t,
		&vppmodel.VrfTable{Id: 5},
		loop("underlay", true, 5, "10.20.0.1/24"),
		tunnel("vx1", "10.20.0.1", "10.20.0.2", 10, 5, "192.168.40.1/30"),
		route(0, "10.9.0.0/16", via("vx1", "192.168.40.2")),
	)
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	s := vpp.Snapshot()
	vx, ok := ifaceByTag(s, "vsk:vx1")
	require.True(t, ok)
	require.NotNil(t, vx.Vxlan)
	assert.Equal(t, vppsim.VxlanTunnel{Src: netip.MustParseAddr("10.20.0.1"), Dst: netip.MustParseAddr("10.20.0.2"),
		Vni: 10, EncapVrf: 5, DecapNext: 2, L3: true}, *vx.Vxlan)
	assert.Equal(t, pfxs("192.168.40.1/30"), vx.Addresses)
	r, ok := routeIn(s, 0, "10.9.0.0/16")
	require.True(t, ok)
	assert.Equal(t, vx.SwIfIndex, r.Paths[0].SwIfIndex)

	// Resync reads the tunnel back as configured: no change.
	before := vpp.Stats().Writes
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	assert.Equal(t, before, vpp.Stats().Writes, "readback only")
	assert.Equal(t, s, vpp.Snapshot())

	commit(t, d, controller.CommitUpdate, kv(t, tunnel("vx1", "10.20.0.1", "10.20.0.2", 11, 5, "192.168.40.1/30")))
	waitConfigured(t, d, len(state))
	s = vpp.Snapshot()
	vx, _ = ifaceByTag(s, "vsk:vx1")
	assert.Equal(t, uint32(11), vx.Vxlan.Vni)
	_, ok = routeIn(s, 0, "10.9.0.0/16")
	assert.True(t, ok, "route re-added after the tunnel was re-created")
}

// TestVxlanUnavailable: a VPP without the VXLAN plugin fails only tunnels.
func TestVxlanUnavailable(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{Hide: []string{"vxlan_add_del_tunnel_v3"}})
	d := startDriver(t, vpp, testCfg())
	require.Eventually(t, d.Connected, 10*time.Second, time.Millisecond)
	err := commitErr(t, d, controller.CommitResync, kv(t, loop("u", true, 0, "10.20.0.1/24"),
		tunnel("vx1", "10.20.0.1", "10.20.0.2", 10, 0)))
	require.ErrorIs(t, err, vppdriver.ErrIncompatible)
	assert.True(t, controller.IsPermanent(err), "reported, not healed: %v", err)
	assert.Empty(t, controller.KeyErrors(err))
	require.Eventually(t, func() bool {
		s, _ := d.Status(vppmodel.InterfaceKey("u"))
		return s.State == vppdriver.StateConfigured
	}, 10*time.Second, 5*time.Millisecond)
	s, _ := d.Status(vppmodel.InterfaceKey("vx1"))
	assert.Equal(t, vppdriver.StateFailed, s.State)
	assert.ErrorIs(t, s.Err, vppdriver.ErrIncompatible)
	assert.Contains(t, s.Err.Error(), "vxlan_add_del_tunnel_v3_0072b037")
	assert.ErrorIs(t, d.Compatibility(), vppdriver.ErrIncompatible)
}

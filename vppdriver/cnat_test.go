package vppdriver_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/internal/binapi/cnat"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// cnatTr returns a TCP translation of vip:port to the backends (addr:port).
func cnatTr(vip string, port uint32, backends ...string) *vppmodel.CnatTranslation {
	m := &vppmodel.CnatTranslation{Vip: vip, Port: port, Protocol: vppmodel.ProtoTCP}
	for _, b := range backends {
		ap := netip.MustParseAddrPort(b)
		m.Paths = append(m.Paths, &vppmodel.CnatPath{DstIp: ap.Addr().String(), DstPort: uint32(ap.Port())})
	}
	return m
}

func cnatTrKey(m *vppmodel.CnatTranslation) string {
	return vppmodel.CnatTranslationKey(m.Protocol, netip.MustParseAddr(m.Vip), m.Port)
}

// trByVIP returns the translation of the snapshot with the VIP.
func trByVIP(s vppsim.Snapshot, vip string, port uint16) (vppsim.CnatTranslation, bool) {
	for _, tr := range s.Cnat.Translations {
		if tr.VIP.Addr == netip.MustParseAddr(vip) && tr.VIP.Port == port {
			return tr, true
		}
	}
	return vppsim.CnatTranslation{}, false
}

func backendsOf(tr vppsim.CnatTranslation) []string {
	var out []string
	for _, p := range tr.Paths {
		out = append(out, netip.AddrPortFrom(p.Dst.Addr, p.Dst.Port).String())
	}
	return out
}

// TestCnat: translations of both families (default and maglev, flags,
// a source rewrite), the SNAT entry with excluded prefixes and the k8s
// policy, cnat on interfaces; in-place changes, a re-created translation
// for another lb type, readback (a resync and a new driver write
// nothing), deletions in a safe order, a VPP restart.
func TestCnat(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	sent := &vppdrivertest.RequestRecorder{}
	d := newRecordedDriver(t, vpp, sent)
	web := cnatTr("10.96.0.10", 80, "10.1.1.11:8080", "10.1.1.12:8080")
	dns6 := &vppmodel.CnatTranslation{Vip: "fd00:96::10", Port: 53, Protocol: vppmodel.ProtoUDP, LbType: vppmodel.CnatTranslation_MAGLEV,
		Paths: []*vppmodel.CnatPath{{DstIp: "fd00:1::11", DstPort: 5353}, {DstIp: "fd00:1::12", DstPort: 5353, SrcIp: "fd00:ff::1"}}}
	nodePort := cnatTr("192.0.2.1", 30080, "10.1.1.11:8080")
	nodePort.RealIp, nodePort.AllocPort = true, true
	snat := &vppmodel.CnatSnat{Ip4: "192.0.2.1", Ip6: "2001:db8:ff::1", ExcludedPrefixes: []string{"10.1.0.0/16", "10.96.0.0/12", "fd00::/8"},
		Policy: vppmodel.CnatSnat_K8S}
	state := kv(t, loop("uplink", true, 0, "192.0.2.1/24", "2001:db8:ff::1/64"), loop("pod", true, 0, "10.1.1.1/24"),
		web, dns6, nodePort, snat,
		&vppmodel.CnatInterface{Interface: "uplink", Feature: true, SnatHost: true},
		&vppmodel.CnatInterface{Interface: "pod", Feature: true, SnatPod: true})
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	assert.Zero(t, d.Stats().FailedAttempts)

	s := vpp.Snapshot()
	require.Len(t, s.Cnat.Translations, 3)
	tr, ok := trByVIP(s, "10.96.0.10", 80)
	require.True(t, ok)
	assert.Equal(t, []string{"10.1.1.11:8080", "10.1.1.12:8080"}, backendsOf(tr))
	assert.Equal(t, uint8(vppmodel.ProtoTCP), tr.Proto)
	assert.False(t, tr.IsRealIP)
	webID := tr.ID
	tr, _ = trByVIP(s, "fd00:96::10", 53)
	assert.Equal(t, uint8(1), tr.LBType, "maglev")
	assert.Equal(t, netip.MustParseAddr("fd00:ff::1"), tr.Paths[1].Src.Addr)
	tr, _ = trByVIP(s, "192.0.2.1", 30080)
	assert.True(t, tr.IsRealIP)
	assert.Equal(t, uint8(cnat.CNAT_TRANSLATION_ALLOC_PORT), tr.Flags)
	require.Len(t, s.Cnat.SNAT, 1)
	sn := s.Cnat.SNAT[0]
	assert.Equal(t, netip.MustParseAddr("192.0.2.1"), sn.IP4)
	assert.Equal(t, netip.MustParseAddr("2001:db8:ff::1"), sn.IP6)
	assert.Equal(t, pfxs("10.1.0.0/16", "10.96.0.0/12", "fd00::/8"), sn.ExcludedPrefixes)
	assert.Equal(t, uint8(cnat.CNAT_POLICY_K8S), sn.Policy)
	up, _ := ifaceByTag(s, "vsk:uplink")
	pod, _ := ifaceByTag(s, "vsk:pod")
	assert.Equal(t, []uint32{pod.SwIfIndex}, sn.Interfaces[cnat.CNAT_POLICY_POD])
	assert.Equal(t, []uint32{up.SwIfIndex}, sn.Interfaces[cnat.CNAT_POLICY_HOST])
	assert.ElementsMatch(t, []vppsim.CnatFeature{{SwIfIndex: up.SwIfIndex, Count: 1}, {SwIfIndex: pod.SwIfIndex, Count: 1}}, s.Cnat.Features)

	t.Run("a resync and a new driver write nothing", func(t *testing.T) {
		sent.Take()
		commit(t, d, controller.CommitResync, state)
		waitConfigured(t, d, len(state))
		assert.Empty(t, vppdrivertest.Writes(sent.Take()))
		d2 := newRecordedDriver(t, vpp, sent)
		commit(t, d2, controller.CommitResync, state)
		waitConfigured(t, d2, len(state))
		require.Eventually(t, d2.Idle, 10*time.Second, time.Millisecond)
		assert.Empty(t, vppdrivertest.Writes(sent.Take()))
	})

	t.Run("paths change in place", func(t *testing.T) {
		web = cnatTr("10.96.0.10", 80, "10.1.1.11:8080", "10.1.1.13:8080")
		state[cnatTrKey(web)] = web
		sent.Take()
		commit(t, d, controller.CommitUpdate, kv(t, web))
		waitConfigured(t, d, len(state))
		assert.Equal(t, []string{"cnat_translation_update"}, vppdrivertest.Writes(sent.Take()))
		tr, _ := trByVIP(vpp.Snapshot(), "10.96.0.10", 80)
		assert.Equal(t, webID, tr.ID)
		assert.Equal(t, []string{"10.1.1.11:8080", "10.1.1.13:8080"}, backendsOf(tr))
	})

	t.Run("another lb type re-creates", func(t *testing.T) {
		web = cnatTr("10.96.0.10", 80, "10.1.1.11:8080", "10.1.1.13:8080")
		web.LbType = vppmodel.CnatTranslation_MAGLEV
		state[cnatTrKey(web)] = web
		sent.Take()
		commit(t, d, controller.CommitUpdate, kv(t, web))
		waitConfigured(t, d, len(state))
		assert.Equal(t, []string{"cnat_translation_del", "cnat_translation_update"}, vppdrivertest.Writes(sent.Take()))
		tr, _ := trByVIP(vpp.Snapshot(), "10.96.0.10", 80)
		assert.Equal(t, uint8(1), tr.LBType)
	})

	t.Run("the SNAT policy changes in place", func(t *testing.T) {
		snat = &vppmodel.CnatSnat{Ip4: "192.0.2.1", Ip6: "2001:db8:ff::1", ExcludedPrefixes: []string{"10.1.0.0/16", "10.96.0.0/12", "10.2.0.0/16"},
			Policy: vppmodel.CnatSnat_K8S}
		state[vppmodel.CnatSnatKey] = snat
		sent.Take()
		commit(t, d, controller.CommitUpdate, kv(t, snat))
		waitConfigured(t, d, len(state))
		// The addresses again first: an excluded prefix without the entry
		// would kill VPP 26.06.
		assert.Equal(t, []string{"cnat_set_snat_addresses", "cnat_snat_policy_add_del_exclude_pfx", "cnat_snat_policy_add_del_exclude_pfx"},
			vppdrivertest.Writes(sent.Take()))
		assert.Equal(t, pfxs("10.1.0.0/16", "10.2.0.0/16", "10.96.0.0/12"), vpp.Snapshot().Cnat.SNAT[0].ExcludedPrefixes)
	})

	t.Run("an interface deleted with its cnat feature", func(t *testing.T) {
		// The pod's feature goes with it; its SNAT table membership is
		// removed first (VPP would keep it for the next interface).
		gone := controller.KeyValuePairs{vppmodel.InterfaceKey("pod"): nil, vppmodel.CnatInterfaceKey("pod"): nil}
		delete(state, vppmodel.InterfaceKey("pod"))
		delete(state, vppmodel.CnatInterfaceKey("pod"))
		sent.Take()
		commit(t, d, controller.CommitUpdate, gone)
		waitConfigured(t, d, len(state))
		assert.Equal(t, []string{"feature_cnat_enable_disable", "cnat_snat_policy_add_del_if", "delete_loopback"}, vppdrivertest.Writes(sent.Take()))
		assert.Empty(t, vpp.Snapshot().Cnat.SNAT[0].Interfaces[cnat.CNAT_POLICY_POD])

		commit(t, d, controller.CommitUpdate, kv(t, loop("pod2", true, 0), &vppmodel.CnatInterface{Interface: "pod2", Feature: true}))
		waitConfigured(t, d, len(state)+2)
		sent.Take()
		commit(t, d, controller.CommitUpdate, controller.KeyValuePairs{vppmodel.InterfaceKey("pod2"): nil, vppmodel.CnatInterfaceKey("pod2"): nil})
		waitConfigured(t, d, len(state))
		assert.Equal(t, []string{"delete_loopback"}, vppdrivertest.Writes(sent.Take()))
	})

	t.Run("a VPP restart", func(t *testing.T) {
		connects := d.Stats().Connects
		vpp.Restart()
		require.Eventually(t, func() bool { return d.Stats().Connects > connects }, 10*time.Second, time.Millisecond)
		waitConfigured(t, d, len(state))
		s := vpp.Snapshot()
		assert.Len(t, s.Cnat.Translations, 3)
		require.Len(t, s.Cnat.SNAT, 1)
		assert.Len(t, s.Cnat.SNAT[0].ExcludedPrefixes, 3)
		up, _ := ifaceByTag(s, "vsk:uplink")
		assert.Equal(t, []vppsim.CnatFeature{{SwIfIndex: up.SwIfIndex, Count: 1}}, s.Cnat.Features)
	})

	t.Run("the SNAT entry goes after a translation of its address (VPP 26.06 would die)", func(t *testing.T) {
		before := d.Stats().FailedAttempts
		// The node port's VIP is the SNAT address: they share a cnat
		// client, which the translation's deletion takes along.
		sent.Take()
		commit(t, d, controller.CommitUpdate, controller.KeyValuePairs{cnatTrKey(nodePort): nil})
		delete(state, cnatTrKey(nodePort))
		waitConfigured(t, d, len(state))
		require.Eventually(t, d.Idle, 10*time.Second, time.Millisecond)
		assert.Equal(t, []string{"cnat_translation_del", "cnat_set_snat_addresses"}, vppdrivertest.Writes(sent.Take()),
			"the SNAT addresses set again: their client went with the translation")
		commit(t, d, controller.CommitResync, controller.KeyValuePairs{})
		waitConfigured(t, d, 0)
		assert.Equal(t, before, d.Stats().FailedAttempts, "no request failed (the stand-in refuses the one that kills VPP)")
		s := vpp.Snapshot()
		assert.Empty(t, s.Cnat.Translations)
		assert.Empty(t, s.Cnat.SNAT)
		assert.Empty(t, s.Cnat.Features)
		require.NoError(t, d.CheckInvariants())
	})
}

// TestCnatOrder: the SNAT entry is set before its excluded prefixes, its
// policy and the interface tables (VPP 26.06 dies on the first two
// without an entry), in one pass; the tables wait for it; and when the
// translation of the SNAT address and the entry go in one pass, the
// entry's addresses are set again before it is deleted.
func TestCnatOrder(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	sent := &vppdrivertest.RequestRecorder{}
	d := newRecordedDriver(t, vpp, sent)
	require.Eventually(t, func() bool { return d.Stats().Connected }, 10*time.Second, time.Millisecond)
	commit(t, d, controller.CommitUpdate, kv(t, loop("pod", true, 0, "10.1.1.1/24"), &vppmodel.CnatInterface{Interface: "pod", SnatPod: true}))
	st, _ := d.Status(vppmodel.CnatInterfaceKey("pod"))
	assert.Equal(t, []string{vppmodel.CnatSnatKey}, st.PendingOn)

	snat := &vppmodel.CnatSnat{Ip4: "192.0.2.1", ExcludedPrefixes: []string{"10.0.0.0/8"}, Policy: vppmodel.CnatSnat_K8S}
	np := cnatTr("192.0.2.1", 30080, "10.1.1.11:8080")
	np.RealIp = true
	sent.Take()
	commit(t, d, controller.CommitUpdate, kv(t, snat, np))
	waitConfigured(t, d, 4)
	assert.Equal(t, []string{"cnat_set_snat_addresses", "cnat_snat_policy_add_del_exclude_pfx", "cnat_set_snat_policy",
		"cnat_translation_update", "cnat_snat_policy_add_del_if"}, vppdrivertest.Writes(sent.Take()))

	commit(t, d, controller.CommitUpdate, controller.KeyValuePairs{vppmodel.CnatSnatKey: nil, cnatTrKey(np): nil})
	require.Eventually(t, d.Idle, 10*time.Second, time.Millisecond)
	assert.Equal(t, []string{"cnat_snat_policy_add_del_if", "cnat_translation_del", "cnat_set_snat_addresses", "cnat_set_snat_addresses"},
		vppdrivertest.Writes(sent.Take()))
	st, _ = d.Status(vppmodel.CnatInterfaceKey("pod"))
	assert.Equal(t, vppdriver.StatePending, st.State)
	assert.Empty(t, vpp.Snapshot().Cnat.SNAT)
	assert.Zero(t, d.Stats().FailedAttempts)
	require.NoError(t, d.CheckInvariants())
}

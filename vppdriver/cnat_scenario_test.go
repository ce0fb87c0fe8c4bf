package vppdriver_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/core"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/internal/binapi/cnat"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// cnatState is what the cnat dumps of a VPP say: translations by VIP
// ("tcp 10.96.0.10:80": its id, lb type and backends) and the default
// SNAT entry's addresses ("" if there is none).
type cnatState struct {
	translations map[string]dumpedTr
	snat         string
}

type dumpedTr struct {
	id       uint32
	lbType   uint8
	backends []string
}

func (s *scenarioDriver) cnat() cnatState {
	s.t.Helper()
	out := cnatState{translations: map[string]dumpedTr{}}
	for _, m := range s.dump(&cnat.CnatTranslationDump{}) {
		t := m.(*cnat.CnatTranslationDetails).Translation
		vip := netip.AddrPortFrom(vppconv.AddrOf(t.Vip.Addr), t.Vip.Port)
		tr := dumpedTr{id: t.ID, lbType: uint8(t.LbType)}
		for _, p := range t.Paths {
			tr.backends = append(tr.backends, netip.AddrPortFrom(vppconv.AddrOf(p.DstEp.Addr), p.DstEp.Port).String())
		}
		out.translations[fmt.Sprint(vppmodel.CnatProtocolName(uint32(t.IPProto)), " ", vip)] = tr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reps := callOn(s.t, ctx, s.env, &cnat.CnatGetSnatAddresses{})
	if r := reps[0].(*cnat.CnatGetSnatAddressesReply); r.Retval == 0 {
		out.snat = fmt.Sprint(netip.AddrFrom4(r.SnatIP4), " ", netip.AddrFrom16(r.SnatIP6))
	}
	return out
}

// callOn sends requests on a connection of its own to env's VPP and
// returns the replies.
func callOn(t *testing.T, ctx context.Context, env scenarioVPP, reqs ...api.Message) []api.Message {
	t.Helper()
	conn, err := core.Connect(env.newAdapter())
	require.NoError(t, err)
	defer conn.Disconnect()
	var out []api.Message
	for _, r := range reqs {
		st, err := conn.NewStream(ctx)
		require.NoError(t, err)
		require.NoError(t, st.SendMsg(r))
		rep, err := st.RecvMsg()
		require.NoError(t, err)
		_ = st.Close()
		out = append(out, rep)
	}
	return out
}

// bigTr returns a translation with n paths.
func bigTr(n int) *vppmodel.CnatTranslation {
	m := &vppmodel.CnatTranslation{Vip: "10.96.0.99", Port: 80, Protocol: vppmodel.ProtoTCP}
	for i := range n {
		m.Paths = append(m.Paths, &vppmodel.CnatPath{DstIp: fmt.Sprintf("10.2.%d.%d", i/250, 1+i%250), DstPort: 8080})
	}
	return m
}

// TestCnatScenario runs the driver's cnat work on the stand-in and on a
// real VPP 26.06 (with VPP_SH, as root) and checks that both get the same
// requests, and that the real VPP survives every step (the requests that
// kill it are refused by the stand-in, so the same requests mean none of
// them): translations of both families (one of 10000 paths), the SNAT entry
// with its prefixes and the k8s policy, cnat on two interfaces; a resync
// and a new driver write nothing; paths change in place; another lb type
// re-creates; prefixes change in place; a pod interface leaves the SNAT
// table before it is deleted; a translation of the SNAT address is
// deleted (the addresses are set again), a VPP restart, and a cleanup
// that deletes a translation of the SNAT address and the entry in one
// pass (crash trace part H).
func TestCnatScenario(t *testing.T) {
	runScenario(t, testCnatScenario)
}

func testCnatScenario(t *testing.T, env scenarioVPP) []string {
	s := newScenarioDriver(t, env)
	web := cnatTr("10.96.0.10", 80, "10.1.1.11:8080", "10.1.1.12:8080")
	dns6 := &vppmodel.CnatTranslation{Vip: "fd00:96::10", Port: 53, Protocol: vppmodel.ProtoUDP, LbType: vppmodel.CnatTranslation_MAGLEV,
		Paths: []*vppmodel.CnatPath{{DstIp: "fd00:1::11", DstPort: 5353}, {DstIp: "fd00:1::12", DstPort: 5353, SrcIp: "fd00:ff::1"}}}
	nodePort := cnatTr("192.0.2.1", 30080, "10.1.1.11:8080")
	nodePort.RealIp, nodePort.AllocPort = true, true
	big := bigTr(10000)
	snat := &vppmodel.CnatSnat{Ip4: "192.0.2.1", Ip6: "2001:db8:ff::1", ExcludedPrefixes: []string{"10.1.0.0/16", "10.96.0.0/12", "fd00::/8"},
		Policy: vppmodel.CnatSnat_K8S}
	state := kv(t, loop("uplink", true, 0, "192.0.2.1/24", "2001:db8:ff::1/64"), loop("pod", true, 0, "10.1.1.1/24", "fd00:1::1/64"),
		web, dns6, nodePort, big, snat,
		&vppmodel.CnatInterface{Interface: "uplink", Feature: true, SnatHost: true},
		&vppmodel.CnatInterface{Interface: "pod", Feature: true, SnatPod: true, SnatV4: true, SnatV6: true})
	s.step("create", controller.CommitResync, state, len(state))
	c := s.cnat()
	require.Len(t, c.translations, 4)
	assert.Len(t, c.translations["tcp 10.96.0.99:80"].backends, 10000)
	assert.Equal(t, []string{"10.1.1.11:8080", "10.1.1.12:8080"}, c.translations["tcp 10.96.0.10:80"].backends)
	assert.Equal(t, uint8(1), c.translations["udp [fd00:96::10]:53"].lbType)
	assert.Equal(t, "192.0.2.1 2001:db8:ff::1", c.snat)
	webID := c.translations["tcp 10.96.0.10:80"].id

	assert.Empty(t, s.step("resync", controller.CommitResync, state, len(state)), "a resync of an unchanged VPP")
	s.stop()
	s.start()
	assert.Empty(t, s.step("new driver", controller.CommitResync, state, len(state)), "a new driver on a populated VPP")

	web = cnatTr("10.96.0.10", 80, "10.1.1.11:8080", "10.1.1.13:8080")
	state[cnatTrKey(web)] = web
	assert.Equal(t, []string{"cnat_translation_update"}, s.step("paths", controller.CommitUpdate, kv(t, web), len(state)))
	c = s.cnat()
	assert.Equal(t, webID, c.translations["tcp 10.96.0.10:80"].id, "the same id")
	assert.Equal(t, []string{"10.1.1.11:8080", "10.1.1.13:8080"}, c.translations["tcp 10.96.0.10:80"].backends)

	web = cnatTr("10.96.0.10", 80, "10.1.1.11:8080", "10.1.1.13:8080")
	web.LbType = vppmodel.CnatTranslation_MAGLEV
	state[cnatTrKey(web)] = web
	assert.Equal(t, []string{"cnat_translation_del", "cnat_translation_update"}, s.step("lb type", controller.CommitUpdate, kv(t, web), len(state)))
	assert.Equal(t, uint8(1), s.cnat().translations["tcp 10.96.0.10:80"].lbType)

	web = cnatTr("10.96.0.10", 80, "10.1.1.11:8080", "10.1.1.13:8080")
	web.LbType, web.FlowHashConfig = vppmodel.CnatTranslation_MAGLEV, vppmodel.CnatFlowHashSrcIP
	state[cnatTrKey(web)] = web
	assert.Equal(t, []string{"cnat_translation_del", "cnat_translation_update"}, s.step("flow hash", controller.CommitUpdate, kv(t, web), len(state)),
		"VPP keeps the flow hash a translation was made with")
	assert.Empty(t, s.step("resync after the flow hash", controller.CommitResync, state, len(state)))

	snat = &vppmodel.CnatSnat{Ip4: "192.0.2.1", Ip6: "2001:db8:ff::1", ExcludedPrefixes: []string{"10.1.0.0/16", "10.96.0.0/12", "10.2.0.0/16"},
		Policy: vppmodel.CnatSnat_K8S}
	state[vppmodel.CnatSnatKey] = snat
	assert.Equal(t, []string{"cnat_set_snat_addresses", "cnat_snat_policy_add_del_exclude_pfx", "cnat_snat_policy_add_del_exclude_pfx"},
		s.step("prefixes", controller.CommitUpdate, kv(t, snat), len(state)), "the addresses (again) always first")

	gone := controller.KeyValuePairs{vppmodel.InterfaceKey("pod"): nil, vppmodel.CnatInterfaceKey("pod"): nil}
	delete(state, vppmodel.InterfaceKey("pod"))
	delete(state, vppmodel.CnatInterfaceKey("pod"))
	assert.Equal(t, []string{"feature_cnat_enable_disable", "cnat_snat_policy_add_del_if", "cnat_snat_policy_add_del_if",
		"cnat_snat_policy_add_del_if", "delete_loopback"},
		s.step("pod deleted", controller.CommitUpdate, gone, len(state)), "the SNAT tables are left before the interface goes")

	delete(state, cnatTrKey(nodePort))
	assert.Equal(t, []string{"cnat_translation_del", "cnat_set_snat_addresses"},
		s.step("node port deleted", controller.CommitUpdate, controller.KeyValuePairs{cnatTrKey(nodePort): nil}, len(state)))
	assert.Equal(t, "192.0.2.1 2001:db8:ff::1", s.cnat().snat)

	s.restart(len(state))
	c = s.cnat()
	assert.Len(t, c.translations, 3)
	assert.Equal(t, "192.0.2.1 2001:db8:ff::1", c.snat)

	// A translation of the SNAT address and the entry, deleted in one
	// pass: the VPP that answers the dumps after it is alive.
	state[cnatTrKey(nodePort)] = nodePort
	s.step("node port again", controller.CommitUpdate, kv(t, nodePort), len(state))
	snat = &vppmodel.CnatSnat{Ip4: "192.0.2.1", Ip6: "2001:db8:ff::1", ExcludedPrefixes: []string{"10.1.0.0/16", "10.96.0.0/12", "10.2.0.0/16"},
		Policy: vppmodel.CnatSnat_K8S, NoClient: true}
	state[vppmodel.CnatSnatKey] = snat
	got := s.step("no client", controller.CommitUpdate, kv(t, snat), len(state))
	slices.Sort(got)
	assert.Equal(t, []string{"cnat_set_snat_addresses", "cnat_set_snat_addresses", "cnat_set_snat_addresses_v2", "cnat_set_snat_policy",
		"cnat_snat_policy_add_del_exclude_pfx", "cnat_snat_policy_add_del_exclude_pfx", "cnat_snat_policy_add_del_exclude_pfx",
		"cnat_snat_policy_add_del_if", "cnat_snat_policy_add_del_if", "feature_cnat_enable_disable", "feature_cnat_enable_disable"}, got,
		"VPP keeps the flags of the first set: the entry is made again (the addresses set first, then deleted), and the uplink's cnat with it")
	assert.Equal(t, "192.0.2.1 2001:db8:ff::1", s.cnat().snat)
	assert.Empty(t, s.step("resync without clients", controller.CommitResync, state, len(state)))

	connects := s.d.Stats().Connects
	s.step("cleanup", controller.CommitResync, controller.KeyValuePairs{}, 0)
	assert.Equal(t, connects, s.d.Stats().Connects, "VPP did not die: no reconnect")
	c = s.cnat()
	assert.Empty(t, c.translations)
	assert.Empty(t, c.snat)
	require.NoError(t, s.d.CheckInvariants())
	return s.transcript
}

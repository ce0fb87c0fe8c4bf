package vppdriver_test

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/adapter/socketclient"
	"go.fd.io/govpp/api"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/nat44_ed"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// Tests against a real VPP: see package vppdrivertest for the environment
// (VPP_SH, VPP_API_SOCKET); without it they skip.

// realDriver runs a driver against the VPP at sock until the test ends. It
// uses its own tag prefix, so that it owns nothing another user of a shared
// VPP made. The returned recorder sees the requests the driver sends.
func realDriver(t *testing.T, sock string) (*vppdriver.Driver, *vppdrivertest.RequestRecorder) {
	t.Helper()
	cfg := testCfg()
	cfg.TagPrefix = "vsk-it:"
	rec := &vppdrivertest.RequestRecorder{}
	d, err := vppdriver.New(func() adapter.VppAPI { return rec.Wrap(socketclient.NewVppClient(sock)) }, cfg)
	require.NoError(t, err)
	runDriver(t, d)
	require.Eventually(t, d.Connected, 15*time.Second, 10*time.Millisecond)
	require.NoError(t, d.Compatibility())
	return d, rec
}

// realDump runs one dump over a separate connection to the VPP at sock.
func realDump(t *testing.T, sock string, req api.Message) []api.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := vppdrivertest.Dump(ctx, socketclient.NewVppClient(sock), req)
	require.NoError(t, err)
	return out
}

// ownedTags lists the interface tags with the prefix.
func ownedTags(t *testing.T, sock, prefix string) []string {
	t.Helper()
	var tags []string
	for _, m := range realDump(t, sock, &interfaces.SwInterfaceDump{SwIfIndex: interface_types.InterfaceIndex(^uint32(0))}) {
		if d := m.(*interfaces.SwInterfaceDetails); strings.HasPrefix(d.Tag, prefix) {
			tags = append(tags, d.Tag)
		}
	}
	return tags
}

// TestIntegrationRealVPP runs the apply / change / resync scenario against
// a real VPP and removes what it created.
func TestIntegrationRealVPP(t *testing.T) {
	sock := vppdrivertest.RealVPPSocket(t)
	d, _ := realDriver(t, sock)

	state := kv(t,
		&vppmodel.VrfTable{Id: 4242, Label: "it"},
		loop("it-up", true, 0, "192.0.2.1/24"),
		loop("it-vrf", true, 4242, "198.51.100.1/24"),
		route(0, "203.0.113.0/24", via("it-up", "192.0.2.2"), via("it-up", "192.0.2.3")),
		route(4242, "203.0.113.128/25", via("it-vrf", "198.51.100.2")),
	)
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	assert.ElementsMatch(t, []string{"vsk-it:it-up", "vsk-it:it-vrf"}, ownedTags(t, sock, "vsk-it:"))

	// Change, then resync to a smaller state, then to nothing (cleanup).
	commit(t, d, controller.CommitUpdate, kv(t, loop("it-up", false, 0, "192.0.2.9/24"),
		route(0, "203.0.113.0/24", via("it-up", "192.0.2.3"))))
	waitConfigured(t, d, len(state))
	small := kv(t, loop("it-up", true, 0, "192.0.2.1/24"))
	commit(t, d, controller.CommitResync, small)
	waitConfigured(t, d, 1)
	assert.Equal(t, []string{"vsk-it:it-up"}, ownedTags(t, sock, "vsk-it:"))
	commit(t, d, controller.CommitResync, controller.KeyValuePairs{})
	assert.Empty(t, ownedTags(t, sock, "vsk-it:"))
}

// TestRealVPPStatusWhileDown: while a real VPP is down (stopped, then
// started again: a restart with a slow start), no key is reported
// configured; after the restart the driver reconnects, reads the empty VPP
// back and applies everything again.
func TestRealVPPStatusWhileDown(t *testing.T) {
	vpp := vppdrivertest.StartRealVPP(t)
	d, _ := realDriver(t, vpp.APISocket())
	state := kv(t,
		&vppmodel.VrfTable{Id: 7},
		loop("a", true, 7, "10.0.0.1/24"),
		route(7, "10.8.0.0/16", via("a", "10.0.0.2")),
	)
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))

	vpp.Stop()
	require.Eventually(t, func() bool { return !d.Connected() }, 15*time.Second, 10*time.Millisecond)
	st := d.Statuses()
	require.Len(t, st, len(state))
	for k, s := range st {
		assert.Equal(t, vppdriver.StatePending, s.State, "%s: %v", k, s)
		s1, _ := d.Status(k)
		assert.Equal(t, vppdriver.StatePending, s1.State, "%s: %v", k, s1)
	}
	stats := d.Stats()
	assert.False(t, stats.Connected)
	assert.Zero(t, stats.Configured)
	assert.Equal(t, len(state), stats.Pending)

	vpp.Start()
	waitConfigured(t, d, len(state))
	assert.Equal(t, []string{"vsk-it:a"}, ownedTags(t, vpp.APISocket(), "vsk-it:"))
	assert.Contains(t, vpp.CLI("show", "ip", "fib", "table", "7"), "10.8.0.0/16")
	assert.True(t, d.Stats().Connected)
	assert.GreaterOrEqual(t, d.Stats().Connects, uint64(2))
}

// TestRealVPPNat44: NAT44-ED with a load-balanced mapping whose backends
// change in place, an identity mapping on an interface, an invalid value
// next to valid ones, and a VRF label change, against a real VPP.
func TestRealVPPNat44(t *testing.T) {
	vpp := vppdrivertest.StartRealVPP(t)
	sock := vpp.APISocket()
	d, sent := realDriver(t, sock)
	lb := func(backends ...string) *vppmodel.Nat44LbStaticMapping {
		m := &vppmodel.Nat44LbStaticMapping{Protocol: vppmodel.Nat44Protocol_TCP, ExternalIp: "192.0.2.30", ExternalPort: 80,
			Out2InOnly: true, Affinity: 300}
		for _, b := range backends {
			m.Backends = append(m.Backends, &vppmodel.Nat44Backend{Ip: b, Port: 8080, Probability: 50})
		}
		return m
	}
	state := kv(t,
		&vppmodel.VrfTable{Id: 5, Label: "old"},
		loop("uplink", true, 0, "192.0.2.1/24"),
		loop("pods", true, 5, "10.1.1.1/24"),
		&vppmodel.Nat44Global{},
		&vppmodel.Nat44Interface{Interface: "uplink", Outside: true},
		&vppmodel.Nat44Interface{Interface: "pods", Inside: true},
		&vppmodel.Nat44IdentityMapping{Protocol: vppmodel.Nat44Protocol_UDP, Interface: "uplink", Port: 4789},
		lb("10.1.1.11", "10.1.1.12"),
	)
	values := controller.KeyValuePairs{}
	for k, v := range state {
		values[k] = v
	}
	values[vppmodel.RouteKey(0, netip.MustParsePrefix("10.9.0.0/16"))] = route(0, "10.9.0.0/16", via("uplink", "10.9.0.300"))
	err := commitErr(t, d, controller.CommitResync, values)
	require.Len(t, controller.KeyErrors(err), 1, "%v", err)
	waitState(t, d, len(state), 1)

	backends := func() []string {
		var out []string
		for _, m := range realDump(t, sock, &nat44_ed.Nat44LbStaticMappingDump{}) {
			for _, l := range m.(*nat44_ed.Nat44LbStaticMappingDetails).Locals {
				out = append(out, netip.AddrPortFrom(netip.AddrFrom4(l.Addr), l.Port).String())
			}
		}
		return out
	}
	assert.ElementsMatch(t, []string{"10.1.1.11:8080", "10.1.1.12:8080"}, backends())
	commit(t, d, controller.CommitUpdate, kv(t, lb("10.1.1.12", "10.1.1.13")))
	waitState(t, d, len(state), 1)
	assert.ElementsMatch(t, []string{"10.1.1.12:8080", "10.1.1.13:8080"}, backends())

	// A resync of the same state reads everything back as it is: VPP's
	// answers match the driver's view of every object, nothing is written.
	values[vppmodel.Nat44LbStaticMappingKey(vppmodel.Nat44Protocol_TCP, netip.MustParseAddr("192.0.2.30"), 80)] = lb("10.1.1.12", "10.1.1.13")
	sent.Take()
	_ = commitErr(t, d, controller.CommitResync, values)
	waitState(t, d, len(state), 1)
	assert.Empty(t, vppdrivertest.Writes(sent.Take()))

	commit(t, d, controller.CommitUpdate, kv(t, &vppmodel.VrfTable{Id: 5, Label: "new"}))
	waitState(t, d, len(state), 1)
	assert.Contains(t, vpp.CLI("show", "ip", "table"), "vsk-it:new")

	commit(t, d, controller.CommitResync, controller.KeyValuePairs{})
	waitConfigured(t, d, 0)
	assert.Empty(t, ownedTags(t, sock, "vsk-it:"))
	assert.Empty(t, realDump(t, sock, &nat44_ed.Nat44LbStaticMappingDump{}))
}

// waitState waits until configured keys are configured and failed ones
// failed (no key pending).
func waitState(t *testing.T, d *vppdriver.Driver, configured, failed int) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n := map[vppdriver.State]int{}
		for _, s := range d.Statuses() {
			n[s.State]++
		}
		require.Equal(c, configured, n[vppdriver.StateConfigured])
		require.Equal(c, failed, n[vppdriver.StateFailed])
		require.Zero(c, n[vppdriver.StatePending])
	}, 20*time.Second, 5*time.Millisecond)
}

// TestRealVPPHostInterfaces: af_packet on a veth pair the test makes (the
// peer in a network namespace of its own) and memif interfaces, against a
// real VPP: applied, read back unchanged by a resync, re-created on a
// change of a creation-time field, removed.
func TestRealVPPHostInterfaces(t *testing.T) {
	vpp := vppdrivertest.StartRealVPP(t)
	sock := vpp.APISocket()
	host, peer, ns := "vskit"+strconv.Itoa(os.Getpid()%100000), "vskip"+strconv.Itoa(os.Getpid()%100000), "vsk-it-"+strconv.Itoa(os.Getpid())
	ipCmd(t, "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	ipCmd(t, "link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	ipCmd(t, "link", "set", host, "up")

	d, sent := realDriver(t, sock)
	memifSock := filepath.Join(vpp.Dir(), "memif-it.sock")
	state := kv(t,
		&vppmodel.Interface{Name: "pod1", Type: vppmodel.Interface_AF_PACKET, Enabled: true, MacAddress: "02:00:00:00:10:01",
			AfPacket: &vppmodel.AfPacketLink{HostIfName: host}, IpAddresses: []string{"10.1.5.1/24"}},
		memifIf("m1", true, 1, memifSock, 0),
		memifIf("m2", true, 2, memifSock, 2048),
		memifIf("m3", false, 1, filepath.Join(vpp.Dir(), "memif-it-slave.sock"), 0),
		route(0, "10.2.0.0/16", via("pod1", "10.1.5.2")),
	)
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	assert.ElementsMatch(t, []string{"vsk-it:pod1", "vsk-it:m1", "vsk-it:m2", "vsk-it:m3"}, ownedTags(t, sock, "vsk-it:"))
	assert.Contains(t, vpp.CLI("show", "interface", "addr"), "10.1.5.1/24")

	sent.Take()
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	assert.Empty(t, vppdrivertest.Writes(sent.Take()), "read back unchanged")

	commit(t, d, controller.CommitUpdate, kv(t, memifIf("m1", true, 1, memifSock, 4096)))
	waitConfigured(t, d, len(state))
	assert.Subset(t, vppdrivertest.Writes(sent.Take()), []string{"memif_delete", "memif_create_v2"})

	commit(t, d, controller.CommitResync, controller.KeyValuePairs{})
	waitConfigured(t, d, 0)
	assert.Empty(t, ownedTags(t, sock, "vsk-it:"))
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	require.NoError(t, err, "ip %v: %s", args, out)
}

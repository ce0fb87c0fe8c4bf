package vppdriver_test

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/adapter/socketclient"
	"go.fd.io/govpp/api"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip"
	"go.fd.io/govpp/binapi/ip_neighbor"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/binapi/vxlan"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// l3VPP is a VPP (the stand-in or a real one) for TestL3Attachments, with
// what the test needs from outside: an af_packet host interface for the
// pod, and an interface that exists before the driver (a NIC) to adopt.
type l3VPP struct {
	newAdapter func() adapter.VppAPI
	hostIf     string // a host interface af_packet can attach to
	nic        string // VPP's name of an interface the driver adopts
}

func simL3VPP() l3VPP {
	vpp := vppsim.New(vppsim.Config{HostInterfaces: []string{"veth-pod1"}, NICs: []string{"GigabitEthernet0/8/0"}})
	return l3VPP{newAdapter: func() adapter.VppAPI { return vpp.NewAdapter() }, hostIf: "veth-pod1", nic: "GigabitEthernet0/8/0"}
}

// realL3VPP starts a real VPP with a veth pair for the pod and an
// af_packet interface made by the VPP CLI (not by the driver) standing in
// for a NIC.
func realL3VPP(t *testing.T) l3VPP {
	vpp := vppdrivertest.StartRealVPP(t)
	id := strconv.Itoa(os.Getpid() % 100000)
	pod, nic := "vskl3p"+id, "vskl3n"+id
	for _, name := range []string{pod, nic} {
		ipCmd(t, "link", "add", name, "type", "veth", "peer", "name", name+"x")
		t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
		ipCmd(t, "link", "set", name, "up")
	}
	vpp.CLI("create", "host-interface", "name", nic)
	sock := vpp.APISocket()
	return l3VPP{newAdapter: func() adapter.VppAPI { return socketclient.NewVppClient(sock) }, hostIf: pod, nic: "host-" + nic}
}

// TestL3Attachments: what the node and pod handlers build, through the
// driver, on the stand-in and (with VPP_SH) on a real VPP, checked in VPP's
// own dumps: a pod interface unnumbered to a gateway loopback with static
// neighbors and host routes (IPv4 and IPv6), an adopted NIC, routed VXLAN
// tunnels carrying IPv4 and IPv6 (unnumbered, with a static neighbor as
// next hop of the routes through them). A resync and a new driver on the
// populated VPP write nothing; an unnumbered source and a neighbor MAC
// change in place; removing everything leaves the adopted NIC, without
// what the driver configured on it.
func TestL3Attachments(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) l3VPP
	}{
		{"stand-in", func(*testing.T) l3VPP { return simL3VPP() }},
		{"real VPP", realL3VPP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testL3Attachments(t, tc.start(t))
		})
	}
}

func testL3Attachments(t *testing.T, env l3VPP) {
	rec := &vppdrivertest.RequestRecorder{}
	// start runs a new driver (a new agent process) until stop or the end
	// of the test.
	start := func() (*vppdriver.Driver, func()) {
		d, err := vppdriver.New(func() adapter.VppAPI { return rec.Wrap(env.newAdapter()) }, testCfg())
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = d.Run(ctx) }()
		stop := func() { cancel(); <-done }
		t.Cleanup(stop)
		return d, stop
	}
	d, stop := start()

	const podMAC, gwMAC = "02:00:00:00:01:02", "02:fe:00:00:01:01"
	state := kv(t,
		&vppmodel.Interface{Name: "uplink", Type: vppmodel.Interface_EXISTING, Enabled: true,
			Existing: &vppmodel.ExistingLink{VppName: env.nic}, IpAddresses: []string{"192.168.16.1/24"}},
		&vppmodel.Interface{Name: "pod-gw", Type: vppmodel.Interface_LOOPBACK, Enabled: true,
			IpAddresses: []string{"10.1.1.1/32", "fd00:1:1::1/128"}},
		&vppmodel.Interface{Name: "pod-gw2", Type: vppmodel.Interface_LOOPBACK, Enabled: true, IpAddresses: []string{"10.1.9.1/32"}},
		&vppmodel.Interface{Name: "pod1", Type: vppmodel.Interface_AF_PACKET, Enabled: true, MacAddress: gwMAC,
			AfPacket: &vppmodel.AfPacketLink{HostIfName: env.hostIf}, Unnumbered: "pod-gw"},
		&vppmodel.IPNeighbor{Interface: "pod1", IpAddress: "10.1.1.2", MacAddress: podMAC},
		&vppmodel.IPNeighbor{Interface: "pod1", IpAddress: "fd00:1:1::2", MacAddress: podMAC},
		route(0, "10.1.1.2/32", via("pod1", "")),
		route(0, "fd00:1:1::2/128", via("pod1", "")),
		&vppmodel.Interface{Name: "vxlan", Type: vppmodel.Interface_LOOPBACK, Enabled: true, IpAddresses: []string{"192.168.30.1/32"}},
		&vppmodel.Interface{Name: "vxlan-2", Type: vppmodel.Interface_VXLAN_TUNNEL, Enabled: true, Unnumbered: "vxlan",
			Vxlan: &vppmodel.VxlanLink{SrcAddress: "192.168.16.1", DstAddress: "192.168.16.2", Vni: 10}},
		&vppmodel.Interface{Name: "vxlan6-2", Type: vppmodel.Interface_VXLAN_TUNNEL, Enabled: true, Unnumbered: "vxlan",
			Vxlan: &vppmodel.VxlanLink{SrcAddress: "192.168.16.1", DstAddress: "192.168.16.2", Vni: 11, Payload: vppmodel.VxlanLink_PAYLOAD_IPV6}},
		&vppmodel.IPNeighbor{Interface: "vxlan-2", IpAddress: "192.168.30.2", MacAddress: "02:00:00:00:00:02"},
		&vppmodel.IPNeighbor{Interface: "vxlan6-2", IpAddress: "fe80::2", MacAddress: "02:00:00:00:00:02"},
		route(0, "10.1.2.0/24", via("vxlan-2", "192.168.30.2")),
		route(0, "fd00:1:2::/64", via("vxlan6-2", "fe80::2")),
	)
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))

	v := dumpVPP(t, env.newAdapter)
	nic, ok := v.byName(env.nic)
	require.True(t, ok, "the NIC is adopted, not created")
	assert.True(t, nic.up)
	assert.ElementsMatch(t, []string{"192.168.16.1/24"}, v.addrs[nic.sw])
	gw, _ := v.byTag("vsk:pod-gw")
	pod, ok := v.byTag("vsk:pod1")
	require.True(t, ok)
	assert.Equal(t, gwMAC, pod.mac)
	assert.Equal(t, gw.sw, v.unnumbered[pod.sw], "the pod interface borrows the gateway's addresses")
	assert.Empty(t, v.addrs[pod.sw])
	assert.Equal(t, podMAC, v.neighbors[neighborOf(pod.sw, "10.1.1.2")])
	assert.Equal(t, podMAC, v.neighbors[neighborOf(pod.sw, "fd00:1:1::2")])
	assert.Equal(t, []string{"via " + strconv.Itoa(int(pod.sw)) + " 10.1.1.2"}, v.routes["10.1.1.2/32"], "an attached host route, as VPP reports it")
	vx, _ := v.byTag("vsk:vxlan")
	t4, _ := v.byTag("vsk:vxlan-2")
	t6, _ := v.byTag("vsk:vxlan6-2")
	assert.Equal(t, vx.sw, v.unnumbered[t4.sw])
	assert.Equal(t, vx.sw, v.unnumbered[t6.sw])
	assert.NotEqual(t, v.tunnels[t4.sw].DecapNextIndex, v.tunnels[t6.sw].DecapNextIndex, "ip4-input and ip6-input")
	assert.Equal(t, []string{"via " + strconv.Itoa(int(t4.sw)) + " 192.168.30.2"}, v.routes["10.1.2.0/24"])
	assert.Equal(t, []string{"via " + strconv.Itoa(int(t6.sw)) + " fe80::2"}, v.routes["fd00:1:2::/64"])

	// A resync finds VPP as desired: nothing is written.
	rec.Take()
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	assert.Empty(t, vppdrivertest.Writes(rec.Take()), "a resync of an unchanged VPP")

	// An agent restart: a new driver on the populated VPP writes nothing.
	stop()
	d, _ = start()
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	// The connect resync and the commit are done, nothing is queued or
	// scheduled: every request the new driver will send unprompted is
	// recorded.
	require.Eventually(t, d.Idle, 20*time.Second, time.Millisecond)
	assert.Empty(t, vppdrivertest.Writes(rec.Take()), "a new driver on a populated VPP")

	// In-place changes: another unnumbered source, another neighbor MAC.
	upd := kv(t,
		&vppmodel.Interface{Name: "pod1", Type: vppmodel.Interface_AF_PACKET, Enabled: true, MacAddress: gwMAC,
			AfPacket: &vppmodel.AfPacketLink{HostIfName: env.hostIf}, Unnumbered: "pod-gw2"},
		&vppmodel.IPNeighbor{Interface: "pod1", IpAddress: "10.1.1.2", MacAddress: "02:00:00:00:01:03"})
	commit(t, d, controller.CommitUpdate, upd)
	waitConfigured(t, d, len(state))
	assert.ElementsMatch(t, []string{"sw_interface_set_unnumbered", "ip_neighbor_add_del"}, vppdrivertest.Writes(rec.Take()))
	v = dumpVPP(t, env.newAdapter)
	gw2, _ := v.byTag("vsk:pod-gw2")
	assert.Equal(t, gw2.sw, v.unnumbered[pod.sw])
	assert.Equal(t, "02:00:00:00:01:03", v.neighbors[neighborOf(pod.sw, "10.1.1.2")])

	// Everything goes; the adopted NIC stays, without what the driver set.
	commit(t, d, controller.CommitResync, controller.KeyValuePairs{})
	waitConfigured(t, d, 0)
	v = dumpVPP(t, env.newAdapter)
	nic, ok = v.byName(env.nic)
	require.True(t, ok, "an adopted interface is never deleted")
	assert.False(t, nic.up)
	assert.Empty(t, nic.tag)
	assert.Empty(t, v.addrs[nic.sw])
	for _, i := range v.ifaces {
		assert.False(t, strings.HasPrefix(i.tag, "vsk:"), "left behind: %s", i.name)
	}
	assert.Empty(t, v.neighbors)
	assert.Empty(t, v.unnumbered)
	for dst := range v.routes {
		assert.False(t, slices.Contains([]string{"10.1.1.2/32", "fd00:1:1::2/128", "10.1.2.0/24", "fd00:1:2::/64"}, dst), dst)
	}
}

type dumpedIf struct {
	sw        uint32
	name, tag string
	mac       string
	up        bool
}

// vppView is what a set of dumps of a VPP shows.
type vppView struct {
	ifaces     []dumpedIf
	addrs      map[uint32][]string
	unnumbered map[uint32]uint32
	neighbors  map[string]string // "sw/ip" -> MAC (static ones)
	routes     map[string][]string
	tunnels    map[uint32]*vxlan.VxlanTunnelV2Details
}

func neighborOf(sw uint32, ip string) string { return strconv.Itoa(int(sw)) + "/" + ip }

func (v vppView) byTag(tag string) (dumpedIf, bool) {
	for _, i := range v.ifaces {
		if i.tag == tag {
			return i, true
		}
	}
	return dumpedIf{}, false
}

func (v vppView) byName(name string) (dumpedIf, bool) {
	for _, i := range v.ifaces {
		if i.name == name {
			return i, true
		}
	}
	return dumpedIf{}, false
}

// dumpVPP reads the VPP's tables over a connection of its own.
func dumpVPP(t *testing.T, newAdapter func() adapter.VppAPI) vppView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := vppdrivertest.NewDumper(ctx, newAdapter())
	require.NoError(t, err)
	defer d.Close()
	dump := func(req api.Message) []api.Message {
		out, err := d.Dump(req)
		require.NoError(t, err)
		return out
	}
	all := interface_types.InterfaceIndex(^uint32(0))
	v := vppView{addrs: map[uint32][]string{}, unnumbered: map[uint32]uint32{}, neighbors: map[string]string{},
		routes: map[string][]string{}, tunnels: map[uint32]*vxlan.VxlanTunnelV2Details{}}
	for _, m := range dump(&interfaces.SwInterfaceDump{SwIfIndex: all}) {
		r := m.(*interfaces.SwInterfaceDetails)
		sw := uint32(r.SwIfIndex)
		v.ifaces = append(v.ifaces, dumpedIf{sw: sw, name: r.InterfaceName, tag: r.Tag, mac: r.L2Address.String(),
			up: r.Flags&interface_types.IF_STATUS_API_FLAG_ADMIN_UP != 0})
		for _, v6 := range []bool{false, true} {
			for _, a := range dump(&ip.IPAddressDump{SwIfIndex: r.SwIfIndex, IsIPv6: v6}) {
				v.addrs[sw] = append(v.addrs[sw], vppconv.PrefixOf(ip_types.Prefix(a.(*ip.IPAddressDetails).Prefix)).String())
			}
		}
	}
	for _, m := range dump(&ip.IPUnnumberedDump{SwIfIndex: all}) {
		r := m.(*ip.IPUnnumberedDetails)
		v.unnumbered[uint32(r.SwIfIndex)] = uint32(r.IPSwIfIndex)
	}
	for _, af := range []ip_types.AddressFamily{ip_types.ADDRESS_IP4, ip_types.ADDRESS_IP6} {
		for _, m := range dump(&ip_neighbor.IPNeighborDump{SwIfIndex: all, Af: af}) {
			n := m.(*ip_neighbor.IPNeighborDetails).Neighbor
			if n.Flags&ip_neighbor.IP_API_NEIGHBOR_FLAG_STATIC != 0 {
				v.neighbors[neighborOf(uint32(n.SwIfIndex), vppconv.AddrOf(n.IPAddress).String())] = n.MacAddress.String()
			}
		}
	}
	for _, v6 := range []bool{false, true} {
		for _, m := range dump(&ip.IPRouteDump{Table: ip.IPTable{IsIP6: v6}}) {
			r := m.(*ip.IPRouteDetails).Route
			p := vppconv.PrefixOf(r.Prefix)
			for _, fp := range r.Paths {
				if fp.SwIfIndex == ^uint32(0) || fp.Type != 0 {
					continue
				}
				nh := vppconv.UnionAddr(fp.Nh.Address, v6)
				v.routes[p.String()] = append(v.routes[p.String()], "via "+strconv.Itoa(int(fp.SwIfIndex))+" "+nh.String())
			}
		}
	}
	for _, m := range dump(&vxlan.VxlanTunnelV2Dump{SwIfIndex: all}) {
		r := m.(*vxlan.VxlanTunnelV2Details)
		v.tunnels[uint32(r.SwIfIndex)] = r
	}
	return v
}

// TestConnectBeforeFirstCommit: a driver (a restarted agent) that connects
// to a populated VPP before its first commit deletes nothing it finds
// there: until a resync commit gives the whole desired state, it only
// reads VPP back (checked after ten health probes, in fake time). The
// resync commit of the same state then writes nothing, and one without a
// key removes it.
func TestConnectBeforeFirstCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := simL3VPP()
		state := kv(t,
			&vppmodel.Interface{Name: "pod-gw", Type: vppmodel.Interface_LOOPBACK, Enabled: true, IpAddresses: []string{"10.1.1.1/32"}},
			&vppmodel.Interface{Name: "pod1", Type: vppmodel.Interface_AF_PACKET, Enabled: true, MacAddress: "02:fe:00:00:01:01",
				AfPacket: &vppmodel.AfPacketLink{HostIfName: env.hostIf}, Unnumbered: "pod-gw"},
			&vppmodel.IPNeighbor{Interface: "pod1", IpAddress: "10.1.1.2", MacAddress: "02:00:00:00:01:02"},
			route(0, "10.1.1.2/32", via("pod1", "")),
		)
		first, err := vppdriver.New(env.newAdapter, testCfg())
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = first.Run(ctx) }()
		commit(t, first, controller.CommitResync, state)
		waitConfigured(t, first, len(state))
		cancel()
		<-done
		before := dumpVPP(t, env.newAdapter)

		rec := &vppdrivertest.RequestRecorder{}
		cfg := testCfg()
		d, err := vppdriver.New(func() adapter.VppAPI { return rec.Wrap(env.newAdapter()) }, cfg)
		require.NoError(t, err)
		runDriver(t, d)
		synctest.Wait()
		require.True(t, d.Connected())
		time.Sleep(10 * cfg.HealthInterval) // health probes (and any retry) run; nothing may be deleted
		synctest.Wait()
		assert.True(t, d.Idle())
		assert.Empty(t, vppdrivertest.Writes(rec.Take()), "connected without a commit")
		assert.Equal(t, before, dumpVPP(t, env.newAdapter))

		commit(t, d, controller.CommitResync, state)
		waitConfigured(t, d, len(state))
		assert.Empty(t, vppdrivertest.Writes(rec.Take()), "the same state")

		delete(state, vppmodel.IPNeighborKey("pod1", netip.MustParseAddr("10.1.1.2")))
		commit(t, d, controller.CommitResync, state)
		waitConfigured(t, d, len(state))
		assert.Equal(t, []string{"ip_neighbor_add_del"}, vppdrivertest.Writes(rec.Take()))
	})
}

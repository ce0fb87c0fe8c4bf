package nodeconn_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/adapter/socketclient"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/nat44_ed"
	"go.fd.io/govpp/binapi/nat_types"
	"go.uber.org/goleak"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	"github.com/vswitchkit/vswitchkit/render/internal/rendertest"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// simNode is one node's VPP stand-in, with the host interfaces that the
// uplink and the VPP-host interconnect attach to.
func simNode() (*vppsim.VPP, func() adapter.VppAPI) {
	vpp := vppsim.New(vppsim.Config{HostInterfaces: []string{"eth1", "vpp1"}})
	return vpp, func() adapter.VppAPI { return vpp.NewAdapter() }
}

var meshCfg = nodeconn.Config{
	Uplink:           nodeconn.Uplink{AfPacketHostIf: "eth1"},
	HostInterconnect: nodeconn.HostInterconnect{AfPacketHostIf: "vpp1"},
}

// peers returns the IDs of the nodes the tables hold tunnels to.
func peers(tables map[string]string) []string {
	var out []string
	for k := range tables {
		if id, ok := strings.CutPrefix(k, "interface vxlan-"); ok {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// checkPeer checks, in VPP's tables of node self, the mesh to node id at
// underlay address dst with the default IPAM layout: the tunnel (unnumbered
// to the VXLAN loopback), the neighbor for the next hop, the routes to the
// node's pod and VPP-host subnets.
func checkPeer(c assert.TestingT, tables map[string]string, self, id int, dst string) {
	tun := tables[fmt.Sprintf("interface vxlan-%d", id)]
	assert.Contains(c, tun, fmt.Sprintf("vxlan=192.168.16.%d>%s/10/", self, dst), "tunnel to node %d", id)
	assert.Contains(c, tun, "unnumbered=vxlan")
	nh := fmt.Sprintf("192.168.30.%d", id)
	assert.Contains(c, tables, fmt.Sprintf("neighbor vxlan-%d %s", id, nh))
	via := fmt.Sprintf("via vxlan-%d %s", id, nh)
	assert.Equal(c, via, tables[fmt.Sprintf("route 10.1.%d.0/24", id)], "pod subnet of node %d", id)
	assert.Equal(c, via, tables[fmt.Sprintf("route 172.30.%d.0/24", id)], "VPP-host subnet of node %d", id)
}

// meshNode is one node's VPP for TestMesh, with the host interfaces its
// uplink and VPP-host interconnect attach to.
type meshNode struct {
	newAdapter func() adapter.VppAPI
	cfg        nodeconn.Config
	restart    func() // a VPP restart: all state lost
	rec        *vppdrivertest.RequestRecorder
}

func simMesh(*testing.T, int) meshNode {
	vpp, _ := simNode()
	rec := &vppdrivertest.RequestRecorder{}
	return meshNode{newAdapter: func() adapter.VppAPI { return rec.Wrap(vpp.NewAdapter()) }, cfg: meshCfg, restart: vpp.Restart, rec: rec}
}

// realMesh starts a real VPP for node i with veth pairs for its uplink
// and VPP-host interconnect (not connected to anything: enough for VPP).
func realMesh(t *testing.T, i int) meshNode {
	vpp := vppdrivertest.StartRealVPP(t)
	id := strconv.Itoa(os.Getpid() % 10000)
	up, host := fmt.Sprintf("vskmu%d-%s", i, id), fmt.Sprintf("vskmh%d-%s", i, id)
	for _, name := range []string{up, host} {
		vppdrivertest.NeedNetns(t)
		_ = exec.Command("ip", "link", "del", name).Run()
		vppdrivertest.IP(t, "link", "add", name, "type", "veth", "peer", "name", name+"x")
		t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
		vppdrivertest.IP(t, "link", "set", name, "up")
	}
	sock := vpp.APISocket()
	rec := &vppdrivertest.RequestRecorder{}
	return meshNode{newAdapter: func() adapter.VppAPI { return rec.Wrap(socketclient.NewVppClient(sock)) },
		cfg:     nodeconn.Config{Uplink: nodeconn.Uplink{AfPacketHostIf: up}, HostInterconnect: nodeconn.HostInterconnect{AfPacketHostIf: host}},
		restart: vpp.Restart, rec: rec}
}

// TestMesh: three nodes join, each with its own VPP (the stand-in, and a
// real VPP with VPP_SH): every
// VPP holds a tunnel, a neighbor and the routes to the two others, plus
// its uplink, VPP-host interconnect and VXLAN loopback. One leaves (its
// agent stops, its ID is released): the others remove its tunnel and
// routes. A VPP restart brings every table back; an agent restart
// writes nothing. One changes its node IP (its agent restarts with another
// address): on the others only its tunnel changes, in VPP and in the
// transactions (one key).
func TestMesh(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(*testing.T, int) meshNode
	}{{"stand-in", simMesh}, {"real VPP", realMesh}} {
		t.Run(tc.name, func(t *testing.T) { testMesh(t, tc.start) })
	}
}

func testMesh(t *testing.T, start func(*testing.T, int) meshNode) {
	db := nodesynctest.NewMemDB()
	var vpps []func() adapter.VppAPI
	var cfgs []nodeconn.Config
	var mns []meshNode
	var agents []*rendertest.Agent
	var nodes []*rendertest.Node
	rec1 := &controllertest.Southbound{}
	for i := 1; i <= 3; i++ {
		mn := start(t, i)
		mns = append(mns, mn)
		na := mn.newAdapter
		cfgs = append(cfgs, mn.cfg)
		n := &rendertest.Node{}
		o := rendertest.Options{Name: fmt.Sprintf("node-%d", i), DB: db, NewAdapter: na, Node: n, NodeConn: mn.cfg}
		if i == 1 {
			o.Record = rec1
		}
		vpps, nodes, agents = append(vpps, na), append(nodes, n), append(agents, rendertest.Start(t, o))
		require.Equal(t, uint32(i), agents[i-1].Nodes.GetNodeID())
	}
	for i := range agents {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			tables := rendertest.Tables(c, vpps[i])
			var want []string
			for j := 1; j <= 3; j++ {
				if j != i+1 {
					want = append(want, fmt.Sprint(j))
					checkPeer(c, tables, i+1, j, fmt.Sprintf("192.168.16.%d", j))
				}
			}
			assert.Equal(c, want, peers(tables))
			assert.Contains(c, tables["interface uplink"], fmt.Sprintf("af-packet up=true mac=06:00:00:00:00:%02x addrs=[192.168.16.%d/24]", i+1, i+1))
			assert.Contains(c, tables["interface vpp-host"], fmt.Sprintf("addrs=[172.30.%d.1/24]", i+1))
			assert.Contains(c, tables["interface vxlan"], fmt.Sprintf("addrs=[192.168.30.%d/32]", i+1))
		}, 10*time.Second, 20*time.Millisecond, "node %d", i+1)
		agents[i].WaitConfigured(t)
	}
	assert.Equal(t, []string{"node-1", "node-2", "node-3"}, agents[0].Nodes.GetAllNodes().Names())
	assert.Equal(t, []string{"vxlan-2"}, agents[0].Conn.Tunnels("node-2"))

	// Node 1's VPP restarts: its agent restores every table. Then node 1's
	// agent restarts: it finds VPP as it wants it and writes nothing.
	agents[0].Sync(t)
	tables1 := rendertest.Tables(t, vpps[0])
	mns[0].restart()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, tables1, rendertest.Tables(c, vpps[0]))
	}, 30*time.Second, 50*time.Millisecond, "VPP restart")
	agents[0].WaitConfigured(t)
	agents[0].Stop()
	mns[0].rec.Take()
	agents[0] = rendertest.Start(t, rendertest.Options{Name: "node-1", DB: db, NewAdapter: vpps[0], Node: nodes[0], NodeConn: cfgs[0],
		Record: rec1})
	agents[0].WaitConfigured(t)
	agents[0].Sync(t)
	assert.Empty(t, vppdrivertest.Writes(mns[0].rec.Take()), "agent restart")
	assert.Equal(t, tables1, rendertest.Tables(t, vpps[0]))

	// Node 3 leaves.
	agents[2].Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := nodesync.ReleaseNode(ctx, db, "", "node-3")
	require.NoError(t, err)
	for i := range 2 {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			tables := rendertest.Tables(c, vpps[i])
			assert.Equal(c, []string{fmt.Sprint(2 - i)}, peers(tables))
			for k := range tables {
				assert.NotContains(c, k, "vxlan-3")
				assert.NotContains(c, k, ".3.0/24")
			}
		}, 10*time.Second, 20*time.Millisecond, "node %d", i+1)
	}

	// Node 2 changes its node IP: its agent restarts with another address.
	agents[0].Sync(t)
	before := rendertest.Tables(t, vpps[0])
	commits := len(rec1.Commits())
	agents[1].Stop()
	cfg2 := cfgs[1]
	cfg2.Uplink.Address = netip.MustParsePrefix("192.168.16.22/24")
	agents[1] = rendertest.Start(t, rendertest.Options{Name: "node-2", DB: db, NewAdapter: vpps[1], Node: nodes[1], NodeConn: cfg2})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		checkPeer(c, rendertest.Tables(c, vpps[0]), 1, 2, "192.168.16.22")
	}, 10*time.Second, 20*time.Millisecond)
	agents[0].Sync(t)
	agents[0].WaitConfigured(t)
	after := rendertest.Tables(t, vpps[0])
	// VPP tracks a tunnel's destination with a host entry in the underlay
	// (192.168.16.2/32, now .22/32): not part of the comparison.
	underlay := func(k string) bool { return strings.HasPrefix(k, "route 192.168.16.") }
	for k, v := range before {
		if k != "interface vxlan-2" && !underlay(k) {
			assert.Equal(t, v, after[k], k)
		}
	}
	for k := range after {
		if !underlay(k) {
			assert.Contains(t, before, k)
		}
	}
	assert.NotEqual(t, before["interface vxlan-2"], after["interface vxlan-2"])
	var changed []string
	for _, c := range rec1.Commits()[commits:] {
		for k := range c.Values {
			if strings.HasPrefix(k, vppmodel.KeyRoot) {
				changed = append(changed, k)
			}
		}
	}
	assert.Equal(t, []string{vppmodel.InterfaceKey("vxlan-2")}, changed, "only node 2's tunnel is in node 1's transactions")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		checkPeer(c, rendertest.Tables(c, vpps[1]), 22, 1, "192.168.16.1")
	}, 10*time.Second, 20*time.Millisecond)
}

// TestMeshFamilies: routed tunnels carry one family: other nodes' IPv6
// pod subnets (an IPv6 IPAM pod range, or dual-stack pod CIDRs from the
// Kubernetes node objects) go through a second tunnel per node, with its
// own VNI and decap-next, and an IPv6 link-local next hop.
func TestMeshFamilies(t *testing.T) {
	kube := controller.NewKubeStateData()
	kube[kubemodel.NodeResource] = controller.KeyValuePairs{}
	for i := 1; i <= 2; i++ {
		name := fmt.Sprintf("node-%d", i)
		kube[kubemodel.NodeResource][kubemodel.NodeKey(name)] = &kubemodel.Node{Name: name,
			PodCidrs: []string{fmt.Sprintf("10.244.%d.0/24", i), fmt.Sprintf("fd00:244:%d::/64", i)}}
	}
	for _, tc := range []struct {
		name   string
		ipam   ipam.Config
		cfg    nodeconn.Config
		routes map[string]string // on node 1
	}{
		{"IPv6 pod range", ipam.Config{PodSubnetCIDR: netip.MustParsePrefix("fd00:1::/56"), PodSubnetOneNodePrefixLen: 64}, meshCfg,
			map[string]string{"route fd00:1:0:2::/64": "via vxlan6-2 fe80::2", "route 172.30.2.0/24": "via vxlan-2 192.168.30.2"}},
		{"dual-stack pod CIDRs", ipam.Config{}, nodeconn.Config{Uplink: meshCfg.Uplink, PodCIDRsFromKubernetes: true},
			map[string]string{"route 10.244.2.0/24": "via vxlan-2 192.168.30.2", "route fd00:244:2::/64": "via vxlan6-2 fe80::2",
				"route 172.30.2.0/24": "via vxlan-2 192.168.30.2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := nodesynctest.NewMemDB()
			var vpp1 func() adapter.VppAPI
			for i := 1; i <= 2; i++ {
				_, na := simNode()
				if i == 1 {
					vpp1 = na
				}
				rendertest.Start(t, rendertest.Options{Name: fmt.Sprintf("node-%d", i), DB: db, NewAdapter: na,
					IPAM: tc.ipam, NodeConn: tc.cfg, KubeState: kube})
			}
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				tables := rendertest.Tables(c, vpp1)
				for k, v := range tc.routes {
					assert.Equal(c, v, tables[k], k)
				}
				assert.Contains(c, tables["interface vxlan6-2"], "vxlan=192.168.16.1>192.168.16.2/11/")
				assert.Contains(c, tables, "neighbor vxlan6-2 fe80::2")
				assert.Contains(c, tables["interface vxlan-2"], "vxlan=192.168.16.1>192.168.16.2/10/")
				assert.NotEqual(c, decap(tables["interface vxlan-2"]), decap(tables["interface vxlan6-2"]))
			}, 10*time.Second, 20*time.Millisecond)
		})
	}
}

func decap(iface string) string {
	_, d, _ := strings.Cut(iface, "/decap")
	return d
}

// TestNAT44IdentityMapping: with NAT44 on the uplink the handler adds the
// identity mapping for VXLAN (UDP 4789) on the node IP; VPP holds it once
// the NAT44 plugin is enabled (here by external configuration, as the
// service renderer would).
func TestNAT44IdentityMapping(t *testing.T) {
	db := nodesynctest.NewMemDB()
	cfg := meshCfg
	cfg.NAT44 = true
	var agents []*rendertest.Agent
	var adapters []func() adapter.VppAPI
	for i := 1; i <= 2; i++ {
		_, na := simNode()
		a := rendertest.Start(t, rendertest.Options{Name: fmt.Sprintf("node-%d", i), DB: db, NewAdapter: na, NodeConn: cfg})
		ev := controller.NewExternalConfigChange("test", true)
		ev.UpdatedKVs[vppmodel.Nat44GlobalKey] = &vppmodel.Nat44Global{}
		ev.UpdatedKVs[vppmodel.Nat44InterfaceKey("uplink")] = &vppmodel.Nat44Interface{Interface: "uplink", Outside: true}
		require.NoError(t, a.Loop.PushEvent(ev))
		require.NoError(t, ev.Wait())
		agents, adapters = append(agents, a), append(adapters, na)
	}
	na := adapters[0]
	require.Eventually(t, func() bool { return len(agents[0].Conn.Tunnels("node-2")) == 1 }, 10*time.Second, 10*time.Millisecond)
	agents[0].Sync(t)
	agents[0].WaitConfigured(t)
	var got []string
	for _, m := range rendertest.Dump(t, na, &nat44_ed.Nat44IdentityMappingDump{}) {
		d := m.(*nat44_ed.Nat44IdentityMappingDetails)
		got = append(got, fmt.Sprintf("%d %s:%d", d.Protocol, d.IPAddress, d.Port))
	}
	assert.Equal(t, []string{"17 192.168.16.1:4789"}, got)

	// The tunnel to node 2 is NAT44 inside and outside, so that replies
	// of a service backend on node 2 are translated back on node 1.
	names := map[uint32]string{}
	for _, m := range rendertest.Dump(t, na, &interfaces.SwInterfaceDump{SwIfIndex: ^interface_types.InterfaceIndex(0)}) {
		d := m.(*interfaces.SwInterfaceDetails)
		names[uint32(d.SwIfIndex)] = d.Tag
	}
	features := map[string]nat_types.NatConfigFlags{}
	for _, m := range rendertest.Dump(t, na, &nat44_ed.Nat44InterfaceDump{}) {
		d := m.(*nat44_ed.Nat44InterfaceDetails)
		features[names[uint32(d.SwIfIndex)]] = d.Flags
	}
	assert.Equal(t, nat_types.NAT_IS_INSIDE|nat_types.NAT_IS_OUTSIDE, features["vsk:vxlan-2"], "%v", features)
	assert.Equal(t, nat_types.NAT_IS_OUTSIDE, features["vsk:uplink"], "%v", features)
}

// ipv6Plan is an IPv6 address plan: node n has pod subnet fd00:1:0:n::/64,
// VPP-host subnet fd00:30::n00/120, node IP fd00:16::n and VXLAN IP
// fd00:31::n.
var ipv6Plan = ipam.Config{
	PodSubnetCIDR: netip.MustParsePrefix("fd00:1::/48"), PodSubnetOneNodePrefixLen: 64,
	VPPHostSubnetCIDR:    netip.MustParsePrefix("fd00:30::/112"),
	NodeInterconnectCIDR: netip.MustParsePrefix("fd00:16::/64"),
	VXLANCIDR:            netip.MustParsePrefix("fd00:31::/64"),
	ServiceCIDR:          netip.MustParsePrefix("fd00:96::/108"),
}

// TestMeshDualStackAndIPv6: with a second family's IPAM (dual-stack) the
// uplink, the host interconnect and the VXLAN loopback hold both
// families' addresses, both node IPs are published, and the other nodes'
// subnets of the second family go through the tunnel that carries it,
// over the first family's underlay, to the node's VXLAN address of that
// family. An IPv6-only address plan builds the mesh over IPv6 node IPs.
// With Cnat every tunnel gets cnat's feature.
func TestMeshDualStackAndIPv6(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ipam      ipam.Config
		dual      *ipam.Config
		cfg       nodeconn.Config
		want      map[string]string // on node 1
		absent    []string
		published []string
	}{
		{"dual-stack IPAMs", ipam.Config{}, &ipv6Plan, meshCfg, map[string]string{
			"route 10.1.2.0/24":            "via vxlan-2 192.168.30.2",
			"route fd00:1:0:2::/64":        "via vxlan6-2 fd00:31::2",
			"route fd00:30::200/120":       "via vxlan6-2 fd00:31::2",
			"route 172.30.2.0/24":          "via vxlan-2 192.168.30.2",
			"interface uplink":             "addrs=[192.168.16.1/24 fd00:16::1/64]",
			"interface vpp-host":           "addrs=[172.30.1.1/24 fd00:30::101/120]",
			"interface vxlan":              "addrs=[192.168.30.1/32 fd00:31::1/128]",
			"interface vxlan6-2":           "vxlan=192.168.16.1>192.168.16.2/11/",
			"neighbor vxlan6-2 fd00:31::2": "02:00:00:00:00:02",
		}, nil, []string{"192.168.16.1", "fd00:16::1"}},
		{"IPv6 only", ipv6Plan, nil, func() nodeconn.Config { c := meshCfg; c.Cnat = true; return c }(), map[string]string{
			"route fd00:1:0:2::/64":  "via vxlan6-2 fd00:31::2",
			"route fd00:30::200/120": "via vxlan6-2 fd00:31::2",
			"interface uplink":       "addrs=[fd00:16::1/64]",
			"interface vxlan6-2":     "vxlan=fd00:16::1>fd00:16::2/11/",
		}, []string{"interface vxlan-2"}, []string{"fd00:16::1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := nodesynctest.NewMemDB()
			var vpp1 func() adapter.VppAPI
			var agents []*rendertest.Agent
			for i := 1; i <= 2; i++ {
				_, na := simNode()
				if i == 1 {
					vpp1 = na
				}
				agents = append(agents, rendertest.Start(t, rendertest.Options{Name: fmt.Sprintf("node-%d", i), DB: db, NewAdapter: na,
					IPAM: tc.ipam, DualStack: tc.dual, NodeConn: tc.cfg}))
			}
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				tables := rendertest.Tables(c, vpp1)
				for k, v := range tc.want {
					assert.Contains(c, tables[k], v, k)
				}
				for _, k := range tc.absent {
					assert.NotContains(c, tables, k)
				}
			}, 10*time.Second, 20*time.Millisecond)
			var published []string
			for _, a := range agents[1].Nodes.GetAllNodes()["node-1"].VppIPAddresses {
				published = append(published, a.Address.String())
			}
			assert.ElementsMatch(t, tc.published, published)
			if tc.cfg.Cnat {
				// The POD table needs the SNAT entry (the service
				// renderer's).
				ev := controller.NewExternalConfigChange("svccnat-stand-in", true)
				ev.UpdatedKVs[vppmodel.CnatSnatKey] = &vppmodel.CnatSnat{Ip6: "fd00:16::1", NoClient: true}
				require.NoError(t, agents[0].Loop.PushEvent(ev))
				require.NoError(t, ev.Wait())
				require.Eventually(t, func() bool {
					return agents[0].Driver.Statuses()[vppmodel.CnatInterfaceKey("vxlan6-2")].State == vppdriver.StateConfigured
				}, 10*time.Second, 10*time.Millisecond, "the tunnel has cnat's feature")
			}
		})
	}
}

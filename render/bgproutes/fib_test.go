package bgproutes_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/adapter/socketclient"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	"github.com/vswitchkit/vswitchkit/render/bgproutes"
	"github.com/vswitchkit/vswitchkit/render/internal/rendertest"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

const waitFor = 30 * time.Second

// lateLoop forwards PushEvent to a loop set later (rendertest.Start makes
// the loop after the handlers).
type lateLoop struct {
	p atomic.Pointer[controller.Loop]
}

func (l *lateLoop) PushEvent(ev controller.Event) error {
	if lp := l.p.Load(); lp != nil {
		return lp.PushEvent(ev)
	}
	return fmt.Errorf("no loop yet")
}

// fibVPP is the VPP of the test's node: the stand-in, or a real VPP with a
// veth pair for its uplink.
type fibVPP struct {
	newAdapter func() adapter.VppAPI
	uplink     string // host interface of the uplink
}

func simVPP(*testing.T) fibVPP {
	vpp := vppsim.New(vppsim.Config{HostInterfaces: []string{"eth1"}})
	return fibVPP{newAdapter: func() adapter.VppAPI { return vpp.NewAdapter() }, uplink: "eth1"}
}

func realVPP(t *testing.T) fibVPP {
	vpp := vppdrivertest.StartRealVPP(t)
	vppdrivertest.NeedNetns(t)
	up := "vskbr-" + strconv.Itoa(os.Getpid()%100000)
	_ = exec.Command("ip", "link", "del", up).Run()
	vppdrivertest.IP(t, "link", "add", up, "type", "veth", "peer", "name", up+"x")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", up).Run() })
	vppdrivertest.IP(t, "link", "set", up, "up")
	sock := vpp.APISocket()
	return fibVPP{newAdapter: func() adapter.VppAPI { return socketclient.NewVppClient(sock) }, uplink: up}
}

// fibPeer is the router that announces a default route with next hop
// 192.168.16.254 (on the node's uplink subnet): announce and withdraw it,
// and the peer of the node's spec.
type fibPeer struct {
	peer     bgp.Peer
	withdraw func(t *testing.T)
}

// gobgpPeer is a GoBGP peer (internal: the next hop passes unchanged).
func gobgpPeer(t *testing.T, local netip.Addr) fibPeer {
	p := gobgptest.StartPeer(t, gobgptest.PeerConfig{Address: netip.MustParseAddr("127.0.0.82"), ASN: 65081})
	p.AddNeighbor(t, gobgptest.Neighbor{Address: local, ASN: 65081, Families: []bgp.Family{bgp.IPv4Unicast}})
	p.AddPath(t, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("192.168.16.254"))
	p.AddPath(t, netip.MustParsePrefix("10.82.0.0/16"), netip.MustParseAddr("192.168.16.254"))
	return fibPeer{peer: peerOf(p.NeighborFor(local)), withdraw: func(t *testing.T) {
		p.DeletePath(t, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("192.168.16.254"))
	}}
}

// birdPeer is BIRD announcing a static default route (and another route
// the import list does not accept) with the next hop set by its export
// filter.
func birdPeer(t *testing.T, local netip.Addr) fibPeer {
	b := gobgptest.StartBIRD(t, gobgptest.BIRDConfig{Address: netip.MustParseAddr("127.0.0.83"), Neighbor: local, NeighborASN: 65081,
		Extra:  "protocol static defroute { ipv4; route 0.0.0.0/0 blackhole; route 10.83.0.0/16 blackhole; }",
		Export: `filter { if proto = "defroute" then { bgp_next_hop = 192.168.16.254; accept; } reject; }`})
	n := bgp.Neighbor{PeerAddress: b.Address(), PeerPort: uint16(b.Port()), PeerASN: b.ASN(), LocalAddress: local, EBGPMultihopTTL: 2,
		ConnectRetryTime: 2 * time.Second, HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second}
	return fibPeer{peer: peerOf(n), withdraw: func(t *testing.T) {
		assert.Contains(t, b.C("disable", "defroute"), "disabled")
	}}
}

// peerOf is a peer whose IPv4 family imports the default route only.
func peerOf(n bgp.Neighbor) bgp.Peer {
	n.Families = []bgp.Family{bgp.IPv4Unicast}
	n = (&bgp.PeeringPolicy{VirtualRouters: []bgp.VirtualRouter{{LocalASN: 1, Neighbors: []bgp.Neighbor{n}}}}).WithDefaults().VirtualRouters[0].Neighbors[0]
	return bgp.Peer{Name: "upstream", Neighbor: n, PeerFamilies: []bgp.PeerFamily{{Family: bgp.IPv4Unicast,
		Import: []bgp.PrefixMatch{{Prefix: netip.MustParsePrefix("0.0.0.0/0")}}}}}
}

// TestLearnedDefaultRouteInFIB: a default route a peer announces (GoBGP,
// and BIRD where installed) is accepted by the import list, installed
// into the node's VPP (the stand-in, and a real VPP with VPP_SH) via the
// uplink with the announced next hop, and removed when the peer withdraws
// it; the route the list does not accept never gets there.
func TestLearnedDefaultRouteInFIB(t *testing.T) {
	for _, vppCase := range []struct {
		name  string
		start func(*testing.T) fibVPP
	}{{"stand-in", simVPP}, {"real VPP", realVPP}} {
		for _, peerCase := range []struct {
			name  string
			start func(*testing.T, netip.Addr) fibPeer
		}{{"GoBGP", gobgpPeer}, {"BIRD", birdPeer}} {
			t.Run(vppCase.name+"/"+peerCase.name, func(t *testing.T) {
				testLearnedDefaultRoute(t, vppCase.start, peerCase.start)
			})
		}
	}
}

func testLearnedDefaultRoute(t *testing.T, startVPP func(*testing.T) fibVPP, startPeer func(*testing.T, netip.Addr) fibPeer) {
	local := netip.MustParseAddr("127.0.0.81")
	vpp := startVPP(t)
	peer := startPeer(t, local)

	sig := bgp.NewSignaler()
	mgr, err := gobgp.New(gobgp.Config{LearnedRoutes: sig})
	require.NoError(t, err)
	var loop lateLoop
	h, err := bgproutes.New(mgr, sig, &loop, bgproutes.Config{Uplink: nodeconn.DefaultUplinkName,
		Reserved: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}})
	require.NoError(t, err)
	agent := rendertest.Start(t, rendertest.Options{Name: "node-1", DB: nodesynctest.NewMemDB(), NewAdapter: vpp.newAdapter,
		NodeConn: nodeconn.Config{Uplink: nodeconn.Uplink{AfPacketHostIf: vpp.uplink}}, After: []controller.EventHandler{h}})
	loop.p.Store(agent.Loop)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = mgr.Run(ctx) })
	wg.Go(func() { _ = h.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	spec := &bgp.NodeSpec{Source: "test", Instances: []bgp.Instance{{Name: "main", LocalASN: 65081, Peers: []bgp.Peer{peer.peer}}}}
	state := &bgp.ControlPlaneState{Node: &kubemodel.Node{Name: "node-1"}, IPv4: local.AsSlice()}
	require.Eventually(t, func() bool { return mgr.ApplySpec(ctx, spec, state) == nil }, waitFor, 10*time.Millisecond)

	route := "route 0.0.0.0/0"
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		tables := rendertest.Tables(c, vpp.newAdapter)
		assert.Equal(c, "via "+nodeconn.DefaultUplinkName+" 192.168.16.254", tables[route], "%v", tables)
	}, waitFor, 50*time.Millisecond, "the learned default route in VPP's FIB")
	tables := rendertest.Tables(t, vpp.newAdapter)
	for k := range tables {
		assert.NotContains(t, k, "10.8", "a route the import list does not accept")
	}
	assert.Equal(t, 1, h.Stats().Installed)

	peer.withdraw(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, ok := rendertest.Tables(c, vpp.newAdapter)[route]
		assert.False(c, ok)
	}, waitFor, 50*time.Millisecond, "withdrawn by the peer: gone from VPP")
	agent.WaitConfigured(t)
}

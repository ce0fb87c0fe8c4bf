package nodeconn_test

import (
	"context"
	"errors"
	"fmt"

	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

func TestConfig(t *testing.T) {
	addrs := resyncedIPAM(t, 1)
	for _, tc := range []struct {
		name string
		cfg  nodeconn.Config
		ok   bool
	}{
		{"zero value", nodeconn.Config{}, true},
		{"af_packet uplink", nodeconn.Config{Uplink: nodeconn.Uplink{AfPacketHostIf: "eth1", MACAddress: "02:00:00:00:00:01"}}, true},
		{"both uplinks", nodeconn.Config{Uplink: nodeconn.Uplink{AfPacketHostIf: "eth1", VPPName: "GigabitEthernet0/8/0"}}, false},
		{"both interconnects", nodeconn.Config{HostInterconnect: nodeconn.HostInterconnect{AfPacketHostIf: "a", TapHostIfName: "b"}}, false},
		{"same names", nodeconn.Config{Uplink: nodeconn.Uplink{Name: "x"}, VxlanLoopbackName: "x"}, false},
		{"bad name", nodeconn.Config{Uplink: nodeconn.Uplink{Name: "a b"}}, false},
		{"same VNIs", nodeconn.Config{VNI: 7, IPv6VNI: 7}, false},
		{"VNI too big", nodeconn.Config{VNI: 1 << 24}, false},
		{"long tap name", nodeconn.Config{HostInterconnect: nodeconn.HostInterconnect{TapHostIfName: "0123456789abcdef"}}, false},
		{"bad MAC", nodeconn.Config{Uplink: nodeconn.Uplink{MACAddress: "x"}}, false},
		{"bad address", nodeconn.Config{Uplink: nodeconn.Uplink{Address: netip.PrefixFrom(netip.MustParseAddr("10.0.0.1"), 40)}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := nodeconn.New(cluster{}, nil, addrs, tc.cfg)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
	_, err := nodeconn.New(nil, nil, addrs, nodeconn.Config{})
	require.Error(t, err)
}

// resyncedIPAM returns an IPAM that has computed the addresses of node id.
func resyncedIPAM(t testing.TB, id uint32) *ipam.IPAM {
	addrs, err := ipam.New(ipamtest.NewNodeID(id), ipam.Config{})
	require.NoError(t, err)
	require.NoError(t, addrs.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, controllertest.NewTxn()))
	return addrs
}

func node(id uint32, ip string) *nodesync.Node {
	n := &nodesync.Node{ID: id, Name: fmt.Sprintf("node-%d", id)}
	if ip != "" {
		a := netip.MustParseAddr(ip)
		n.VppIPAddresses = nodesync.IPsWithNetworks{{Address: a, Network: netip.PrefixFrom(a, 24).Masked()}}
	}
	return n
}

// recorder records what the handler publishes.
type recorder struct{ published []string }

func (r *recorder) PublishNodeIPs(a nodesync.IPsWithNetworks, v nodesync.IPVersion) error {
	r.published = append(r.published, fmt.Sprintf("%v %v", v, a))
	return nil
}

func keys(t *controllertest.Txn) []string {
	var out []string
	for k, v := range t.Values() {
		if v == nil {
			k = "-" + k
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestUpdates: the handler's answers to NodeUpdates, one at a time: what
// it puts and deletes.
func TestUpdates(t *testing.T) {
	nodes := cluster{id: 1, nodes: nodesync.Nodes{"node-1": node(1, "192.168.16.1")}}
	pub := &recorder{}
	h, err := nodeconn.New(nodes, pub, resyncedIPAM(t, 1), nodeconn.Config{})
	require.NoError(t, err)
	txn := controllertest.NewTxn()
	require.NoError(t, h.Resync(controller.NewDBResync(), nil, 1, txn))
	assert.Equal(t, []string{vppmodel.InterfaceKey("vxlan")}, keys(txn), "no uplink configured, no other node")
	assert.Equal(t, []string{"IPv4 [192.168.16.1 (192.168.16.0/24)]", "IPv6 []"}, pub.published)

	update := func(name string, prev, next *nodesync.Node) []string {
		txn := controllertest.NewTxn()
		_, err := h.Update(&nodesync.NodeUpdate{NodeName: name, PrevState: prev, NewState: next}, txn)
		require.NoError(t, err)
		return keys(txn)
	}
	n2 := []string{vppmodel.InterfaceKey("vxlan-2"), "vpp/neighbor/vxlan-2/192.168.30.2", "vpp/route/0/10.1.2.0/24", "vpp/route/0/172.30.2.0/24"}
	slices.Sort(n2)
	assert.Empty(t, h.ExitInterfaces(), "no uplink configured, no other node")
	assert.Equal(t, n2, update("node-2", nil, node(2, "192.168.16.2")), "join")
	assert.Equal(t, []string{"vxlan-2"}, h.ExitInterfaces(), "the tunnel of the node that joined")
	assert.Equal(t, []string{vppmodel.InterfaceKey("vxlan-2")}, update("node-2", node(2, "192.168.16.2"), node(2, "192.168.16.20")), "new address")
	assert.Equal(t, []string{"vxlan-2"}, h.ExitInterfaces(), "the tunnel moved, its name stays")
	held := h.ExitInterfaces()
	update("node-6", nil, node(6, "192.168.16.6"))
	assert.Equal(t, []string{"vxlan-2", "vxlan-6"}, h.ExitInterfaces(), "kept up to date as nodes join")
	assert.Equal(t, []string{"vxlan-2"}, held, "a slice handed out is not changed")
	update("node-6", node(6, "192.168.16.6"), nil)
	assert.Empty(t, update("node-2", node(2, "192.168.16.20"), node(2, "192.168.16.20")), "nothing changed")
	assert.Equal(t, []string{"vxlan-2"}, h.Tunnels("node-2"))
	assert.Empty(t, update("node-1", node(1, "192.168.16.1"), node(1, "192.168.16.1")), "this node")
	assert.Empty(t, update("node-3", nil, node(3, "")), "no address yet")
	assert.Empty(t, update("node-4", nil, &nodesync.Node{Name: "node-4"}), "no ID yet (Kubernetes only)")
	assert.Empty(t, update("node-5", nil, node(5, "fd00::5")), "no address of the underlay's family")
	var gone []string
	for _, k := range n2 {
		gone = append(gone, "-"+k)
	}
	assert.Equal(t, gone, update("node-2", node(2, "192.168.16.20"), nil), "leave")
	assert.Empty(t, h.Tunnels("node-2"))
	assert.Empty(t, h.ExitInterfaces(), "its tunnel gone with it (the cached answer follows the peers)")
}

type failingIPAM struct{ nodeconn.IPAM }

var errNoIP = errors.New("no node IP")

func (failingIPAM) NodeAddr(uint32) (netip.Prefix, error) { return netip.Prefix{}, errNoIP }

// TestResyncKeepsOnError: when this node's addresses cannot be computed, a
// resync keeps what was configured (the commit of a resync removes what is
// not put) and reports the error.
func TestResyncKeepsOnError(t *testing.T) {
	nodes := cluster{id: 1, nodes: nodesync.Nodes{"node-1": node(1, "192.168.16.1"), "node-2": node(2, "192.168.16.2")}}
	addrs := &switchIPAM{IPAM: resyncedIPAM(t, 1)}
	h, err := nodeconn.New(nodes, nil, addrs, nodeconn.Config{})
	require.NoError(t, err)
	first := controllertest.NewTxn()
	require.NoError(t, h.Resync(controller.NewDBResync(), nil, 1, first))
	addrs.fail = true
	second := controllertest.NewTxn()
	require.ErrorIs(t, h.Resync(controller.NewDBResync(), nil, 2, second), errNoIP)
	assert.Equal(t, keys(first), keys(second))
	assert.Len(t, keys(first), 5)

	h2, err := nodeconn.New(cluster{}, nil, addrs, nodeconn.Config{})
	require.NoError(t, err)
	require.ErrorIs(t, h2.Resync(controller.NewDBResync(), nil, 1, controllertest.NewTxn()), nodeconn.ErrNotReady, "no node ID")
}

type switchIPAM struct {
	nodeconn.IPAM
	fail bool
}

func (s *switchIPAM) NodeAddr(id uint32) (netip.Prefix, error) {
	if s.fail {
		return failingIPAM{}.NodeAddr(id)
	}
	return s.IPAM.NodeAddr(id)
}

// nodesync and IPAM are what the handler takes nodes and addresses from.
var (
	_ nodeconn.Nodes     = (*nodesync.NodeSync)(nil)
	_ nodeconn.Publisher = (*nodesync.NodeSync)(nil)
	_ nodeconn.IPAM      = (*ipam.IPAM)(nil)
)

// ctxRecorder is a Publisher with PublishNodeIPsContext: it records the
// value of ctxKey of each call's context.
type ctxRecorder struct {
	recorder
	ctxs []string
}

type ctxKey struct{}

func (r *ctxRecorder) PublishNodeIPsContext(ctx context.Context, a nodesync.IPsWithNetworks, v nodesync.IPVersion) error {
	s, _ := ctx.Value(ctxKey{}).(string)
	r.ctxs = append(r.ctxs, s)
	return r.PublishNodeIPs(a, v)
}

// ctxTxn is a transaction that carries an event's context, as the loop's
// do (see controller.ContextOf).
type ctxTxn struct {
	*controllertest.Txn
	ctx context.Context
}

func (t ctxTxn) Context() context.Context { return t.ctx }

// TestPublishUsesTheEventContext: a Publisher that takes a context gets
// the resync's (CONTRIBUTING R6).
func TestPublishUsesTheEventContext(t *testing.T) {
	nodes := cluster{id: 1, nodes: nodesync.Nodes{"node-1": node(1, "192.168.16.1")}}
	pub := &ctxRecorder{}
	h, err := nodeconn.New(nodes, pub, resyncedIPAM(t, 1), nodeconn.Config{})
	require.NoError(t, err)
	txn := ctxTxn{controllertest.NewTxn(), context.WithValue(context.Background(), ctxKey{}, "resync")}
	require.NoError(t, h.Resync(controller.NewDBResync(), nil, 1, txn))
	assert.Equal(t, []string{"resync", "resync"}, pub.ctxs)
	assert.Equal(t, []string{"IPv4 [192.168.16.1 (192.168.16.0/24)]", "IPv6 []"}, pub.published)
}

// TestNodeIPs: what the handler publishes for an ID, for
// nodesync.Config.InitialNodeIPs: IPAM's node-interconnect address, or
// the uplink's configured one.
func TestNodeIPs(t *testing.T) {
	addrs, err := ipam.New(ipamtest.NewNodeID(1), ipam.Config{})
	require.NoError(t, err)
	h, err := nodeconn.New(cluster{}, nil, addrs, nodeconn.Config{})
	require.NoError(t, err)
	got, err := h.NodeIPs(5)
	require.NoError(t, err)
	require.Equal(t, nodesync.IPsWithNetworks{{Address: netip.MustParseAddr("192.168.16.5"), Network: netip.MustParsePrefix("192.168.16.0/24")}}, got)

	fixed := netip.MustParsePrefix("10.0.0.7/16")
	h, err = nodeconn.New(cluster{}, nil, addrs, nodeconn.Config{Uplink: nodeconn.Uplink{AfPacketHostIf: "eth1", Address: fixed}})
	require.NoError(t, err)
	got, err = h.NodeIPs(5)
	require.NoError(t, err)
	require.Equal(t, nodesync.IPsWithNetworks{{Address: fixed.Addr(), Network: fixed.Masked()}}, got)
}

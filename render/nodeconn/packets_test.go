package nodeconn_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/adapter/socketclient"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	"github.com/vswitchkit/vswitchkit/render/internal/rendertest"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

func ping(ns *vppdrivertest.Netns, dst netip.Addr, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := ns.Ping(ctx, dst)
	return err
}

// meshPod is a node of TestMeshPackets: a real VPP, the agent's config
// and one pod.
type meshPod struct {
	newAdapter func() adapter.VppAPI
	cfg        nodeconn.Config
	node       *rendertest.Node
	ns         *vppdrivertest.Netns
	host       string // the pod's veth end in the host
	agent      *rendertest.Agent
	ip         netip.Addr
}

// TestMeshPackets sends real packets between two real VPPs, two nodes
// joined by a veth pair as their uplinks (af_packet on each end): a pod on
// node 1 reaches a pod on node 2 through the routed VXLAN tunnel, both
// ways. With NAT44-ED on the uplinks (outside), VXLAN is dropped unless
// the identity mapping for UDP 4789 is there (Config.NAT44); with it,
// traffic flows. Node 2 leaving removes the path.
func TestMeshPackets(t *testing.T) {
	id := strconv.Itoa(os.Getpid() % 10000)
	up1, up2 := "vskmp1-"+id, "vskmp2-"+id
	vppdrivertest.NeedNetns(t)
	var nodes []*meshPod
	for i := 1; i <= 2; i++ {
		vpp := vppdrivertest.StartRealVPP(t)
		sock := vpp.APISocket()
		ns := vppdrivertest.NewNetns(t, fmt.Sprintf("vsk-mp%d-%s", i, id))
		host := fmt.Sprintf("vskmpp%d-%s", i, id)
		vppdrivertest.Veth(t, host, ns, "eth0")
		nodes = append(nodes, &meshPod{newAdapter: func() adapter.VppAPI { return socketclient.NewVppClient(sock) },
			node: &rendertest.Node{}, ns: ns, host: host})
	}
	// The uplinks: one veth pair, an end for each VPP.
	vppdrivertest.IP(t, "link", "add", up1, "type", "veth", "peer", "name", up2)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", up1).Run() })
	vppdrivertest.IP(t, "link", "set", up1, "up")
	vppdrivertest.IP(t, "link", "set", up2, "up")
	nodes[0].cfg.Uplink.AfPacketHostIf, nodes[1].cfg.Uplink.AfPacketHostIf = up1, up2

	db := nodesynctest.NewMemDB()
	start := func(n *meshPod, i int, nat bool) {
		cfg := n.cfg
		cfg.NAT44 = nat
		n.agent = rendertest.Start(t, rendertest.Options{Name: fmt.Sprintf("node-%d", i+1), DB: db, NewAdapter: n.newAdapter,
			Node: n.node, NodeConn: cfg})
	}
	for i, n := range nodes {
		start(n, i, false)
		ev := controller.NewAddPodEvent(kubemodel.PodID{Namespace: "default", Name: fmt.Sprintf("pod-%d", i+1)}, "c1", n.ns.Path())
		ev.HostIfName = n.host
		require.NoError(t, n.agent.AddPod(t, ev))
		rendertest.ConfigurePod(t, n.ns, ev)
		var ok bool
		n.ip, ok = n.agent.IPAM.PodAddr(ev.Pod)
		require.True(t, ok)
	}
	for _, n := range nodes {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Len(c, peers(rendertest.Tables(c, n.newAdapter)), 1)
		}, 10*time.Second, 20*time.Millisecond)
		n.agent.WaitConfigured(t)
	}
	require.NoError(t, ping(nodes[0].ns, nodes[1].ip, 5*time.Second), "pod on node 1 -> pod on node 2")
	require.NoError(t, ping(nodes[1].ns, nodes[0].ip, 5*time.Second), "pod on node 2 -> pod on node 1")

	t.Run("NAT44 on the uplinks", func(t *testing.T) {
		for _, n := range nodes {
			ev := controller.NewExternalConfigChange("svcnat-stand-in", true)
			ev.UpdatedKVs[vppmodel.Nat44GlobalKey] = &vppmodel.Nat44Global{}
			ev.UpdatedKVs[vppmodel.Nat44InterfaceKey(nodeconn.DefaultUplinkName)] = &vppmodel.Nat44Interface{
				Interface: nodeconn.DefaultUplinkName, Outside: true}
			require.NoError(t, n.agent.Loop.PushEvent(ev))
			require.NoError(t, ev.Wait())
			n.agent.WaitConfigured(t)
		}
		require.Error(t, ping(nodes[0].ns, nodes[1].ip, time.Second), "NAT44-ED drops VXLAN without the identity mapping")
		for i, n := range nodes { // agents restart with Config.NAT44
			n.agent.Stop()
			start(n, i, true)
			ev := controller.NewExternalConfigChange("svcnat-stand-in", true)
			ev.UpdatedKVs[vppmodel.Nat44GlobalKey] = &vppmodel.Nat44Global{}
			ev.UpdatedKVs[vppmodel.Nat44InterfaceKey(nodeconn.DefaultUplinkName)] = &vppmodel.Nat44Interface{
				Interface: nodeconn.DefaultUplinkName, Outside: true}
			require.NoError(t, n.agent.Loop.PushEvent(ev))
			require.NoError(t, ev.Wait())
			n.agent.WaitConfigured(t)
		}
		require.NoError(t, ping(nodes[0].ns, nodes[1].ip, 5*time.Second), "with the identity mapping")
		require.NoError(t, ping(nodes[1].ns, nodes[0].ip, 5*time.Second))
	})

	// Node 2 leaves: its agent stops, its ID is released.
	nodes[1].agent.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := nodesync.ReleaseNode(ctx, db, "", "node-2")
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for k := range rendertest.Tables(c, nodes[0].newAdapter) {
			assert.False(c, strings.Contains(k, "vxlan-2") || strings.Contains(k, "10.1.2.0/24"), k)
		}
	}, 10*time.Second, 20*time.Millisecond)
	require.Error(t, ping(nodes[0].ns, nodes[1].ip, 500*time.Millisecond), "no path to a node that left")
}

package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.fd.io/govpp/adapter"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller/cniserver"
	"github.com/vswitchkit/vswitchkit/controller/cniserver/cniplugin"
	"github.com/vswitchkit/vswitchkit/controller/cniserver/cniservertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd"
	"github.com/vswitchkit/vswitchkit/examples/internal/agent"
	"github.com/vswitchkit/vswitchkit/vppdriver/nodeconn"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// simNode is one simulated node: an agent on its own VPP stand-in and
// simulated Linux.
type simNode struct {
	name   string
	vpp    *vppsim.VPP
	linux  *cniservertest.FakeLinux
	agent  *agent.Agent
	socket string
	done   chan error
}

func startNode(t *testing.T, cli *clientv3.Client, name string) *simNode {
	t.Helper()
	n := &simNode{name: name, linux: cniservertest.NewFakeLinux(), done: make(chan error, 1)}
	n.vpp = vppsim.New(vppsim.Config{HostInterfaces: []string{"eth1", "vpp1"}, HostInterfaceExists: func(host string) bool {
		return slices.ContainsFunc(n.linux.Links(""), func(l cniserver.LinkState) bool { return l.Name == host })
	}})
	dir, err := os.MkdirTemp("", "vskagent") // short: the socket path must fit sun_path
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	n.socket = filepath.Join(dir, "cni.sock")
	a, err := agent.Open(agent.Config{
		NodeName: name, StateDir: dir, CNISocket: n.socket,
		Uplink:             nodeconn.Uplink{AfPacketHostIf: "eth1"},
		HostInterconnect:   nodeconn.HostInterconnect{AfPacketHostIf: "vpp1"},
		BGP:                agent.BGPConfig{Disabled: true},
		LocalFallbackDelay: time.Second,
	}, agent.Deps{Etcd: cli, VPP: func() adapter.VppAPI { return n.vpp.NewAdapter() }, Linux: n.linux})
	require.NoError(t, err)
	n.agent = a
	ctx, cancel := context.WithCancel(context.Background())
	go func() { n.done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-n.done, "Run of %s", name)
	})
	require.Eventually(t, func() bool { return a.Ready() == nil }, time.Minute, 10*time.Millisecond, "%s ready", name)
	// Ready turns nil when the loop starts the start-up resync, in which
	// nodesync may still wait for the node ID.
	require.Eventually(t, func() bool { return a.NodeSync.GetNodeID() != 0 }, time.Minute, 10*time.Millisecond, "%s has a node ID", name)
	return n
}

func put(t *testing.T, cli *clientv3.Client, key string, value proto.Message) {
	t.Helper()
	raw, err := proto.Marshal(value)
	require.NoError(t, err)
	_, err = cli.Put(context.Background(), kubemodel.EtcdKey("", key), string(raw))
	require.NoError(t, err)
}

// addPod adds a pod through the node's pod server, as the CNI plugin does,
// and returns its address.
func (n *simNode) addPod(t *testing.T, name string) netip.Addr {
	t.Helper()
	netns := "/run/netns/" + name
	require.NoError(t, n.linux.AddNetns(netns))
	out, err := cniplugin.Call(context.Background(), n.socket, "ADD", &skel.CmdArgs{
		ContainerID: "c-" + name, Netns: netns, IfName: "eth0",
		Args:      "K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + name,
		StdinData: []byte(`{"cniVersion":"1.1.0","name":"vswitchkit","type":"vswitchkit-cni"}`),
	})
	require.NoError(t, err)
	var res struct{ IPs []struct{ Address string } }
	require.NoError(t, json.Unmarshal(out, &res))
	require.Len(t, res.IPs, 1)
	p, err := netip.ParsePrefix(res.IPs[0].Address)
	require.NoError(t, err)
	return p.Addr()
}

func (n *simNode) hasRoute(dst string) bool {
	return slices.ContainsFunc(n.vpp.Snapshot().Routes, func(r vppsim.Route) bool { return r.Prefix.String() == dst })
}

func (n *simNode) hasInterface(tag string) bool {
	return slices.ContainsFunc(n.vpp.Snapshot().Interfaces, func(i vppsim.Interface) bool { return i.Tag == "vsk:"+tag })
}

func (n *simNode) nat(t *testing.T) vppdrivertest.NAT44 {
	t.Helper()
	nat, err := vppdrivertest.ReadNAT44(context.Background(), n.vpp.NewAdapter(), "vsk:")
	require.NoError(t, err)
	return nat
}

// TestTwoNodes wires two complete agents against one etcd: they get node
// IDs 1 and 2 and a VXLAN tunnel to each other; a pod added through node
// 1's pod server gets an address of node 1's subnet and its VPP interface;
// a service backed by it is rendered on both nodes.
func TestTwoNodes(t *testing.T) {
	ctx := context.Background()
	etcd, err := embedetcd.Start(ctx, embedetcd.Config{UnsafeNoFsync: true})
	require.NoError(t, err)
	defer etcd.Close()
	cli, err := etcd.Client()
	require.NoError(t, err)
	defer cli.Close()
	for i, name := range []string{"node-1", "node-2"} {
		put(t, cli, kubemodel.NodeKey(name), &kubemodel.Node{Name: name, Addresses: []*kubemodel.NodeAddress{
			{Type: kubemodel.NodeAddress_INTERNAL_IP, Address: fmt.Sprintf("192.168.0.%d", i+1)}}})
	}
	n1 := startNode(t, cli, "node-1")
	n2 := startNode(t, cli, "node-2")
	require.Equal(t, uint32(1), n1.agent.NodeSync.GetNodeID())
	require.Equal(t, uint32(2), n2.agent.NodeSync.GetNodeID())
	require.Eventually(t, func() bool {
		return n1.hasInterface("vxlan-2") && n2.hasInterface("vxlan-1") && n1.hasRoute("10.1.2.0/24") && n2.hasRoute("10.1.1.0/24")
	}, time.Minute, 10*time.Millisecond, "the mesh")

	web := n1.addPod(t, "web")
	assert.True(t, netip.MustParsePrefix("10.1.1.0/24").Contains(web), "%v in node 1's pod subnet", web)
	assert.True(t, n1.hasRoute(web.String()+"/32"), "host route to the pod")
	assert.NotEmpty(t, n1.linux.Links("/run/netns/web"), "the pod side")

	put(t, cli, kubemodel.ServiceKey("default", "web"), &kubemodel.Service{Name: "web", Namespace: "default",
		ClusterIps: []string{"10.96.0.10"}, Ports: []*kubemodel.ServicePort{{Name: "http", Port: 80, TargetPortNumber: 8080}}})
	put(t, cli, kubemodel.EndpointsKey("default", "web"), &kubemodel.Endpoints{Name: "web", Namespace: "default",
		Subsets: []*kubemodel.EndpointSubset{{
			Addresses: []*kubemodel.EndpointAddress{{Ip: web.String(), NodeName: "node-1",
				TargetRef: &kubemodel.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}}},
			Ports: []*kubemodel.EndpointPort{{Name: "http", Port: 8080}},
		}}})
	// One backend: a static mapping (a load-balanced one needs two).
	want := "tcp 10.96.0.10:80 -> " + web.String() + ":8080"
	for _, n := range []*simNode{n1, n2} {
		require.Eventually(t, func() bool {
			return slices.ContainsFunc(n.nat(t).Static, func(s string) bool { return strings.HasPrefix(s, want) })
		}, time.Minute, 10*time.Millisecond, "service on %s: %v", n.name, n.nat(t).Static)
	}
}

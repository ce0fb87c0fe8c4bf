package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.fd.io/govpp/adapter"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/cniserver/cniplugin"
	"github.com/vswitchkit/vswitchkit/cniserver/cniservertest"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

func TestMain(m *testing.M) {
	gobgptest.Main() // the BGP tests run GoBGP peers in child processes
	// GoBGP's best-path watch drains on a goroutine of its own for a
	// moment after it is cancelled (see bgp/gobgp: Concurrency).
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/eapache/channels.(*InfiniteChannel).infiniteBuffer"))
}

// simNode is one simulated node: an agent on its own VPP stand-in and
// simulated Linux.
type simNode struct {
	name   string
	vpp    *vppsim.VPP
	linux  *cniservertest.FakeLinux
	agent  *agent.Agent
	socket string
	done   chan error
	// stop ends the agent's Run and returns its result (once; later calls
	// return the same).
	stop func() error
}

func startNode(t *testing.T, cli *clientv3.Client, name string, edit ...func(*agent.Config)) *simNode {
	t.Helper()
	return startNodeWith(t, cli, name, nil, edit...)
}

// startNodeWith is startNode with a function called between Open and Run.
func startNodeWith(t *testing.T, cli *clientv3.Client, name string, beforeRun func(*agent.Agent), edit ...func(*agent.Config)) *simNode {
	t.Helper()
	return startNodeLogged(t, cli, name, nil, beforeRun, edit...)
}

// startNodeLogged is startNodeWith with the agent's logger.
func startNodeLogged(t *testing.T, cli *clientv3.Client, name string, log *slog.Logger, beforeRun func(*agent.Agent), edit ...func(*agent.Config)) *simNode {
	t.Helper()
	n := &simNode{name: name, linux: cniservertest.NewFakeLinux(), done: make(chan error, 1)}
	n.vpp = vppsim.New(vppsim.Config{HostInterfaces: []string{"eth1", "vpp1"}, HostInterfaceExists: func(host string) bool {
		return slices.ContainsFunc(n.linux.Links(""), func(l cniserver.LinkState) bool { return l.Name == host })
	}})
	dir, err := os.MkdirTemp("", "vskagent") // short: the socket path must fit sun_path
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	n.socket = filepath.Join(dir, "cni.sock")
	cfg := agent.Config{
		NodeName: name, StateDir: dir, CNISocket: n.socket,
		Uplink:             nodeconn.Uplink{AfPacketHostIf: "eth1"},
		HostInterconnect:   nodeconn.HostInterconnect{AfPacketHostIf: "vpp1"},
		BGP:                agent.BGPConfig{Disabled: true},
		LocalFallbackDelay: time.Second,
	}
	for _, e := range edit {
		e(&cfg)
	}
	a, err := agent.Open(cfg, agent.Deps{Etcd: cli, VPP: func() adapter.VppAPI { return n.vpp.NewAdapter() }, Linux: n.linux, Logger: log})
	require.NoError(t, err)
	n.agent = a
	if beforeRun != nil {
		beforeRun(a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { n.done <- a.Run(ctx) }()
	var once sync.Once
	var runErr error
	n.stop = func() error {
		once.Do(func() {
			cancel()
			if runErr = <-n.done; errors.Is(runErr, context.Canceled) {
				runErr = nil // stopped as asked
			}
		})
		return runErr
	}
	t.Cleanup(func() { assert.NoError(t, n.stop(), "Run of %s", name) })
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	require.NoError(t, a.WaitReady(wctx), "%s ready", name)
	require.NotZero(t, a.NodeSync.GetNodeID(), "%s has a node ID", name)
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

	// NodePorts are exposed on this node's addresses: its uplink address
	// (which nodeconn publishes during the start-up resync) and its
	// InternalIP.
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("192.168.0.1"), netip.MustParseAddr("192.168.16.1")}, n1.agent.NodeIPs.NodeIPs())

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

// startEtcd starts an in-process etcd with one node object per name.
func startEtcd(t *testing.T, nodes ...string) *clientv3.Client {
	t.Helper()
	etcd, err := embedetcd.Start(context.Background(), embedetcd.Config{UnsafeNoFsync: true})
	require.NoError(t, err)
	t.Cleanup(func() { etcd.Close() })
	cli, err := etcd.Client()
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	for i, name := range nodes {
		put(t, cli, kubemodel.NodeKey(name), &kubemodel.Node{Name: name, Addresses: []*kubemodel.NodeAddress{
			{Type: kubemodel.NodeAddress_INTERNAL_IP, Address: fmt.Sprintf("192.168.0.%d", i+1)}}})
	}
	return cli
}

// TestShutdownFinishesPodRequests: a pod ADD in progress when the agent is
// told to stop completes (the pod server stops accepting requests first
// and the loop still answers the ADD's event), and the agent leaves VPP
// configured: the pod's interface and route stay for the next agent.
func TestShutdownFinishesPodRequests(t *testing.T) {
	cli := startEtcd(t, "node-1")
	n := startNode(t, cli, "node-1")
	entered, gate := make(chan struct{}), make(chan struct{})
	n.linux.SetFuncs(cniservertest.LinuxFuncs{EnsureVeth: func(context.Context, cniserver.Veth) error {
		close(entered)
		<-gate
		return nil
	}})
	require.NoError(t, n.linux.AddNetns("/run/netns/web"))
	type result struct {
		out []byte
		err error
	}
	added := make(chan result, 1)
	go func() {
		out, err := cniplugin.Call(context.Background(), n.socket, "ADD", &skel.CmdArgs{
			ContainerID: "c-web", Netns: "/run/netns/web", IfName: "eth0",
			Args:      "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web",
			StdinData: []byte(`{"cniVersion":"1.1.0","name":"vswitchkit","type":"vswitchkit-cni"}`),
		})
		added <- result{out, err}
	}()
	<-entered

	stopped := make(chan error, 1)
	go func() { stopped <- n.stop() }()
	<-n.agent.Stopping()
	require.Eventually(t, func() bool {
		c, err := net.Dial("unix", n.socket)
		if err == nil {
			c.Close()
		}
		return err != nil
	}, time.Minute, 10*time.Millisecond, "the pod server stops accepting requests")
	select {
	case err := <-stopped:
		t.Fatalf("Run returned while a pod request was in progress: %v", err)
	default:
	}

	close(gate)
	res := <-added
	require.NoError(t, res.err, "the ADD in progress completes")
	assert.Contains(t, string(res.out), "10.1.1.")
	require.NoError(t, <-stopped)
	_, err := os.Stat(n.socket)
	assert.ErrorIs(t, err, os.ErrNotExist, "the socket is removed")

	// VPP stays configured: the pod, its host route, the uplink.
	host := cniserver.HostIfName("c-web", "eth0")
	assert.True(t, slices.ContainsFunc(n.vpp.Snapshot().Interfaces, func(i vppsim.Interface) bool { return i.HostIfName == host }),
		"the pod's interface is left in VPP: %v", n.vpp.Snapshot().Interfaces)
	assert.True(t, n.hasInterface("uplink"), "the uplink is left in VPP")
	assert.True(t, slices.ContainsFunc(n.vpp.Snapshot().Routes, func(r vppsim.Route) bool {
		return r.Prefix.Bits() == 32 && netip.MustParsePrefix("10.1.1.0/24").Contains(r.Prefix.Addr())
	}), "the pod's route is left in VPP")
}

// TestValidate: every bad field is reported by its JSON name, the IPAM
// plan's included.
func TestValidate(t *testing.T) {
	good := agent.Config{NodeName: "node-1"}
	require.NoError(t, good.Validate())
	for _, c := range []agent.Config{
		{NodeName: "node-1", Services: agent.ServicesCnat, IPFamily: agent.IPv6},
		{NodeName: "node-1", Services: agent.ServicesCnat, IPFamily: agent.DualStack},
		{NodeName: "node-1", Services: agent.ServicesNAT44, IPFamily: agent.DualStack}, // IPv6 services unsupported
		{NodeName: "node-1", Services: agent.ServicesNone, IPFamily: agent.IPv6},
	} {
		require.NoError(t, c.Validate(), "%s %s", c.Services, c.IPFamily)
	}
	for _, tc := range []struct {
		name string
		edit func(*agent.Config)
		want []string
	}{
		{"node name", func(c *agent.Config) { c.NodeName = "Node_1" }, []string{"nodeName:"}},
		{"relative state dir", func(c *agent.Config) { c.StateDir = "state" }, []string{`stateDir: "state" is not an absolute path`}},
		{"ipam store", func(c *agent.Config) { c.IPAMStore = "zk" }, []string{"ipamStore:"}},
		{"pod interface type", func(c *agent.Config) { c.PodInterfaceType = "veth" }, []string{"podInterfaceType:"}},
		{"negative stop timeout", func(c *agent.Config) { c.StopTimeout = -time.Second }, []string{"stopTimeout: -1s is negative"}},
		{"negative healing delays", func(c *agent.Config) { c.HealingDelay, c.MaxHealingDelay = -time.Second, -time.Minute },
			[]string{"healingDelay: -1s is negative", "maxHealingDelay: -1m0s is negative"}},
		{"ipam prefix with host bits", func(c *agent.Config) { c.IPAM.PodSubnetCIDR = netip.MustParsePrefix("10.1.0.1/16") },
			[]string{"ipam.podSubnetCIDR: 10.1.0.1/16: has host bits set"}},
		{"unknown services", func(c *agent.Config) { c.Services = "ipvs" }, []string{`services: "ipvs" is none of "nat44", "cnat" and "none"`}},
		{"unknown ip family", func(c *agent.Config) { c.IPFamily = "ipv5" }, []string{`ipFamily: "ipv5" is none of "ipv4", "ipv6" and "dual"`}},
		{"nat44 in an ipv6 cluster", func(c *agent.Config) { c.IPFamily = agent.IPv6 },
			[]string{`services: "nat44" translates IPv4 only: an "ipv6" cluster needs "cnat" (or "none")`}},
		{"ipv6 plan with an ipv4 range", func(c *agent.Config) {
			c.IPFamily, c.Services = agent.IPv6, agent.ServicesCnat
			c.IPAM.PodSubnetCIDR = netip.MustParsePrefix("10.1.0.0/16")
		}, []string{"ipam.podSubnetCIDR: 10.1.0.0/16 is not IPv6"}},
		{"dual-stack with an ipv4 second plan", func(c *agent.Config) {
			c.IPFamily, c.Services = agent.DualStack, agent.ServicesCnat
			c.IPAM6.ServiceCIDR = netip.MustParsePrefix("10.96.0.0/12")
		}, []string{"ipam6.serviceCIDR: 10.96.0.0/12 is not IPv6"}},
		{"dual-stack with a bad second plan", func(c *agent.Config) {
			c.IPFamily, c.Services = agent.DualStack, agent.ServicesCnat
			c.IPAM6 = agent.DefaultIPv6Plan()
			c.IPAM6.ServiceCIDR = netip.MustParsePrefix("fd00:96::1/108")
		}, []string{"ipam6.serviceCIDR: fd00:96::1/108"}},
		{"ipv6 pod subnets per node too wide for cnat's hairpin", func(c *agent.Config) {
			c.IPFamily, c.Services = agent.DualStack, agent.ServicesCnat
			c.IPAM6 = agent.DefaultIPv6Plan()
			c.IPAM6.PodSubnetCIDR, c.IPAM6.PodSubnetOneNodePrefixLen = netip.MustParsePrefix("fd00:1::/48"), 64
		}, []string{"ipam6.podSubnetOneNodePrefixLen: 64 is below 96"}},
		{"several", func(c *agent.Config) {
			c.CNISocket = "cni.sock"
			c.IPAM.StoreTimeout = -time.Second
			c.IPAM.ServiceCIDR = netip.MustParsePrefix("10.96.0.1/12")
		}, []string{"cniSocket:", "ipam.storeTimeout: -1s: must not be negative", "ipam.serviceCIDR: 10.96.0.1/12"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			err := c.Validate()
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			_, err = agent.Open(c, agent.Deps{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want[0], "Open validates the same way")
		})
	}
}

// TestShutdownStopTimeout: a pod request stuck in the pod server does not
// hold the rest of the shutdown: after StopTimeout the next stages stop
// (the loop too), and Run returns once the request gave up.
func TestShutdownStopTimeout(t *testing.T) {
	cli := startEtcd(t, "node-1")
	n := startNode(t, cli, "node-1", func(c *agent.Config) { c.StopTimeout = 100 * time.Millisecond })
	entered, gate := make(chan struct{}), make(chan struct{})
	n.linux.SetFuncs(cniservertest.LinuxFuncs{EnsureVeth: func(context.Context, cniserver.Veth) error {
		close(entered)
		<-gate
		return nil
	}})
	require.NoError(t, n.linux.AddNetns("/run/netns/web"))
	added := make(chan error, 1)
	go func() {
		_, err := cniplugin.Call(context.Background(), n.socket, "ADD", &skel.CmdArgs{
			ContainerID: "c-web", Netns: "/run/netns/web", IfName: "eth0",
			Args:      "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web",
			StdinData: []byte(`{"cniVersion":"1.1.0","name":"vswitchkit","type":"vswitchkit-cni"}`),
		})
		added <- err
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- n.stop() }()
	require.Eventually(t, func() bool {
		return errors.Is(n.agent.Loop.PushEvent(controller.NewDBResync()), controller.ErrStopped)
	}, time.Minute, 10*time.Millisecond, "the loop stops while the pod request is stuck")
	close(gate)
	assert.Error(t, <-added, "the request gets the stopped loop's answer")
	require.NoError(t, <-stopped)
}

package cniserver_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/cniserver/linuxpod"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// This file builds the agent of the integration tests: a real
// controller.Loop with the real IPAM handler (node ID 5: pod subnet
// 10.1.5.0/24, gateway 10.1.5.1), the pod handler, a handler after it that
// fails AddPod of pods named "fail-*", the real vppdriver on the VPP
// stand-in, and the server with the netlink implementation and a bbolt
// store in the agent's state directory.
//
// The pod handler is made by newPodHandler: today testPods below, which
// plays the VPP pod handler. When the real one exists, newPodHandler
// returns it instead (and vppSide reads what it puts into VPP).

// podHandlerDeps is what a pod handler gets from the agent.
type podHandlerDeps struct {
	ipam *ipam.IPAM
	// attachments lists the server's attachments, for the handler's Resync.
	attachments func(ctx context.Context) ([]cniserver.Attachment, error)
}

var newPodHandler = func(d podHandlerDeps) controller.EventHandler { return newTestPods(d) }

// vppIfName is the logical name of the pod's af_packet interface in the
// vppdriver model, and vppMAC the MAC the handler gives it (so that
// GatewayMAC is known before VPP creates it).
func vppIfName(hostIfName string) string { return "pod-" + hostIfName }

func vppMAC(containerID string) string {
	s := sha256.Sum256([]byte(containerID))
	return fmt.Sprintf("02:fe:%02x:%02x:%02x:%02x", s[0], s[1], s[2], s[3])
}

// testPods is a pod handler that fills AddPod's results the way the
// contract says (af_packet, the pod IP from IPAM with the pod subnet
// mask, gateway IPAM.PodGatewayIP, GatewayMAC = the MAC of VPP's
// af_packet interface) and puts the VPP side into the transaction: the
// af_packet interface on the veth's host end and a /32 route to the pod.
type testPods struct {
	d podHandlerDeps

	mu   sync.Mutex
	pods map[string][]string // container ID -> keys it put; guarded by mu
}

func newTestPods(d podHandlerDeps) *testPods { return &testPods{d: d, pods: map[string][]string{}} }

func (p *testPods) String() string { return "test-pods" }

func (p *testPods) HandlesEvent(ev controller.Event) bool {
	switch ev.(type) {
	case *controller.AddPod, *controller.DeletePod:
		return true
	}
	m := ev.Method()
	return m == controller.FullResync || m == controller.UpstreamResync
}

// vppValues returns the VPP side of one pod.
func (p *testPods) vppValues(containerID, hostIfName string, podIP netip.Addr) controller.KeyValuePairs {
	name := vppIfName(hostIfName)
	iface := &vppmodel.Interface{Name: name, Type: vppmodel.Interface_AF_PACKET, Enabled: true, MacAddress: vppMAC(containerID),
		AfPacket: &vppmodel.AfPacketLink{HostIfName: hostIfName}}
	route := &vppmodel.Route{DstNetwork: netip.PrefixFrom(podIP, 32).String(),
		Paths: []*vppmodel.Path{{OutgoingInterface: name, NextHop: podIP.String()}}}
	return controller.KeyValuePairs{
		vppmodel.InterfaceKey(name):                                   iface,
		vppmodel.RouteKey(0, netip.PrefixFrom(podIP, podIP.BitLen())): route,
	}
}

// Resync rebuilds the VPP side of every connected pod from the server's
// attachments and IPAM (registered before, so already resynced).
func (p *testPods) Resync(_ controller.Event, _ controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
	atts, err := p.d.attachments(context.Background())
	if err != nil {
		return err
	}
	pods := map[string][]string{}
	for _, a := range atts {
		if !a.Ready || a.Type != podiface.AfPacket {
			continue
		}
		ip, ok := p.d.ipam.PodAddr(a.Pod)
		if !ok {
			continue
		}
		vals := p.vppValues(a.ID.ContainerID, a.HostIfName, ip)
		controller.PutAll(txn, vals)
		for k := range vals {
			pods[a.ID.ContainerID] = append(pods[a.ID.ContainerID], k)
		}
	}
	p.mu.Lock()
	p.pods = pods
	p.mu.Unlock()
	return nil
}

func (p *testPods) Update(event controller.Event, txn controller.UpdateOperations) (string, error) {
	switch ev := event.(type) {
	case *controller.AddPod:
		if ev.InterfaceType != podiface.AfPacket {
			return "", fmt.Errorf("test pod handler: interface type %q not supported", ev.InterfaceType)
		}
		ipNet := p.d.ipam.GetPodIP(ev.Pod)
		if ipNet == nil {
			return "", fmt.Errorf("test pod handler: IPAM has no address for %s", ev.Pod)
		}
		ip, _ := netip.AddrFromSlice(ipNet.IP)
		ip = ip.Unmap()
		vals := p.vppValues(ev.ContainerID, ev.HostIfName, ip)
		controller.PutAll(txn, vals)
		keys := make([]string, 0, len(vals))
		for k := range vals {
			keys = append(keys, k)
		}
		p.mu.Lock()
		p.pods[ev.ContainerID] = keys
		p.mu.Unlock()
		ev.Interfaces = []podiface.Interface{{
			HostName: ev.IfName, Type: podiface.AfPacket,
			IPAddresses: []string{ipNet.String()}, GatewayMAC: vppMAC(ev.ContainerID),
		}}
		ev.Routes = []podiface.Route{{Network: "0.0.0.0/0", Gateway: p.d.ipam.PodGatewayIP().String()}}
		return "connected " + ev.Pod.String(), nil
	case *controller.DeletePod:
		p.mu.Lock()
		keys := p.pods[ev.ContainerID]
		delete(p.pods, ev.ContainerID)
		p.mu.Unlock()
		for _, k := range keys {
			txn.Delete(k)
		}
		return fmt.Sprintf("disconnected %s (%d keys)", ev.Pod, len(keys)), nil
	}
	return "", nil
}

func (p *testPods) Revert(event controller.Event) error {
	if ev, ok := event.(*controller.AddPod); ok {
		p.mu.Lock()
		delete(p.pods, ev.ContainerID)
		p.mu.Unlock()
	}
	return nil
}

// failLater fails AddPod of pods named "fail-*", after the pod handler.
var failLater = &controller.HandlerFuncs{
	Name: "fail-later",
	Handles: func(ev controller.Event) bool {
		a, ok := ev.(*controller.AddPod)
		return ok && len(a.Pod.Name) > 5 && a.Pod.Name[:5] == "fail-"
	},
	UpdateFunc: func(ev controller.Event, _ controller.UpdateOperations) (string, error) {
		return "", errors.New("a later handler refuses the pod")
	},
}

// badMAC gives pods named "badmac-*" a multicast MAC, which the kernel
// refuses: the configuration of the namespace fails after the commit.
var badMAC = &controller.HandlerFuncs{
	Name: "bad-mac",
	Handles: func(ev controller.Event) bool {
		a, ok := ev.(*controller.AddPod)
		return ok && strings.HasPrefix(a.Pod.Name, "badmac-")
	},
	UpdateFunc: func(ev controller.Event, _ controller.UpdateOperations) (string, error) {
		add := ev.(*controller.AddPod)
		for i := range add.Interfaces {
			add.Interfaces[i].MAC = "01:00:5e:00:00:01"
		}
		return "", nil
	},
}

// ---- the node: VPP, IPAM records and the agent's state dir survive agent restarts ----

// node is what outlives an agent: the VPP stand-in (a separate process in
// production), the IPAM records (etcd in production) and the state
// directory; plus the pods of the test, each with its namespace.
type node struct {
	t        testing.TB
	runID    string
	vpp      *vppsim.VPP
	ipamRecs *ipamtest.MemStore
	stateDir string
	socket   string
	pods     []*pod
}

type pod struct {
	name, container, netnsName, netns string
	hostIf                            string
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test creates network namespaces (ip netns add) and veth pairs")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs the ip command (iproute2)")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newNode prepares n pods (container IDs, namespaces created by pod.create)
// and a VPP stand-in that can attach to their veths.
func newNode(t testing.TB, n int, names ...string) *node {
	requireRoot(t)
	nd := &node{t: t, runID: randHex(4), ipamRecs: &ipamtest.MemStore{}, stateDir: shortTempDir(t)}
	nd.socket = filepath.Join(nd.stateDir, "cni.sock")
	var hosts []string
	for i := range n {
		name := fmt.Sprintf("pod-%03d", i)
		if i < len(names) {
			name = names[i]
		}
		p := &pod{name: name, container: fmt.Sprintf("%s%04d", nd.runID, i), netnsName: fmt.Sprintf("vskit-%s-%d", nd.runID, i)}
		p.netns = "/run/netns/" + p.netnsName
		p.hostIf = cniserver.HostIfName(p.container, "eth0")
		hosts = append(hosts, p.hostIf)
		nd.pods = append(nd.pods, p)
	}
	nd.vpp = vppsim.New(vppsim.Config{HostInterfaces: hosts})
	return nd
}

// createNetns creates the pod's namespace; the namespace and the veth are
// removed at the end of the test, also on failure.
func (nd *node) createNetns(p *pod) {
	t := nd.t
	out, err := exec.Command("ip", "netns", "add", p.netnsName).CombinedOutput()
	require.NoError(t, err, "ip netns add: %s", out)
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", p.hostIf).Run()
		_ = exec.Command("ip", "netns", "del", p.netnsName).Run()
	})
}

// ---- the agent ----

type agent struct {
	loop   *controller.Loop
	ipam   *ipam.IPAM
	driver *vppdriver.Driver
	srv    *cniserver.Server
	store  *cniserver.BoltStore
	// cancel ends the agent's context; stop also waits for it to end.
	cancel func()
	stop   func()
}

func driverConfig() vppdriver.Config {
	return vppdriver.Config{RequestTimeout: 5 * time.Second, RetryInitial: 10 * time.Millisecond,
		RetryMax: 200 * time.Millisecond, ReconnectInterval: 20 * time.Millisecond, HealthInterval: 200 * time.Millisecond}
}

// startAgent starts an agent over the node's state; it is stopped at the
// end of the test if not before.
func (nd *node) startAgent(cfg cniserver.Config) *agent {
	t := nd.t
	a := &agent{}
	var err error
	a.driver, err = vppdriver.New(func() adapter.VppAPI { return nd.vpp.NewAdapter() }, driverConfig())
	require.NoError(t, err)
	a.loop, err = controller.New(nil, a.driver, controller.Config{HealingDelay: 100 * time.Millisecond})
	require.NoError(t, err)
	a.ipam, err = ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: nd.ipamRecs})
	require.NoError(t, err)
	a.store, err = cniserver.OpenBoltStore(filepath.Join(nd.stateDir, "cni.db"))
	require.NoError(t, err)
	if cfg.SocketPath == "" {
		cfg.SocketPath = nd.socket
	}
	if cfg.InterfaceType == "" {
		cfg.InterfaceType = podiface.AfPacket
	}
	a.srv, err = cniserver.New(a.loop, linuxpod.New(), a.store, cfg)
	require.NoError(t, err)
	pods := newPodHandler(podHandlerDeps{ipam: a.ipam, attachments: a.srv.Attachments})
	require.NoError(t, a.loop.Register(a.ipam, pods, failLater, badMAC, gateHandler))

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	run := func(name string, f func(context.Context) error) {
		wg.Go(func() {
			if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	run("driver", a.driver.Run)
	run("loop", a.loop.Run)
	run("server", a.srv.Run)
	require.NoError(t, a.loop.PushEvent(controller.NewDBResync()))
	waitDial(t, cfg.SocketPath)
	a.cancel = cancel
	var once sync.Once
	a.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			require.NoError(t, a.store.Close())
		})
	}
	t.Cleanup(a.stop)
	return a
}

func waitDial(t testing.TB, path string) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, err := net.Dial("unix", path)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, 10*time.Second, time.Millisecond, "socket %s", path)
}

// ---- the runtime: libcni with the real plugin binary ----

type runtime struct {
	cni  *libcni.CNIConfig
	list *libcni.NetworkConfigList
}

const cniNetwork = "vswitchkit"

func confList(socket, timeout string) string {
	return fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"plugins":[{"type":"vswitchkit-cni","agentSocket":%q,"agentTimeout":%q,"dns":{"nameservers":["10.96.0.10"]}}]}`,
		cniNetwork, socket, timeout)
}

// newRuntime returns a libcni runtime with its own result cache that runs
// the plugin built by TestMain.
func newRuntime(t testing.TB, conf string) *runtime {
	t.Helper()
	list, err := libcni.ConfListFromBytes([]byte(conf))
	require.NoError(t, err)
	// An explicit Exec: libcni sets its default lazily, which races when
	// a CNIConfig is first used from several goroutines.
	exec := &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}
	return &runtime{cni: libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, shortTempDir(t), exec), list: list}
}

func (p *pod) rt() *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: p.container, NetNS: p.netns, IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", p.name}}}
}

func (p *pod) id() kubemodel.PodID { return kubemodel.PodID{Namespace: "default", Name: p.name} }

func cniCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ---- what the pod, VPP and IPAM have ----

// nsView is what `ip` shows in a pod's namespace (read independently of
// the code under test).
type nsView struct {
	links  []string          // link names, without lo
	addrs  []string          // eth0's IPv4 addresses with prefix
	routes []string          // "dst via gw" of the main table
	neighs map[string]string // eth0's PERMANENT neighbors: IP -> MAC
	mac    string            // eth0's MAC
	up     bool              // eth0 is administratively up
}

func ipJSON(t testing.TB, v any, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-j"}, args...)...).Output()
	require.NoError(t, err, "ip %v", args)
	if len(out) == 0 {
		out = []byte("[]")
	}
	require.NoError(t, json.Unmarshal(out, v), "ip %v: %s", args, out)
}

func viewNetns(t testing.TB, netnsName string) nsView {
	t.Helper()
	var v nsView
	var links []struct {
		Name    string   `json:"ifname"`
		Address string   `json:"address"`
		Flags   []string `json:"flags"`
		Addrs   []struct {
			Family string `json:"family"`
			Local  string `json:"local"`
			Len    int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	ipJSON(t, &links, "-n", netnsName, "addr", "show")
	for _, l := range links {
		if l.Name == "lo" {
			continue
		}
		v.links = append(v.links, l.Name)
		if l.Name != "eth0" {
			continue
		}
		v.mac, v.up = l.Address, slices.Contains(l.Flags, "UP")
		for _, a := range l.Addrs {
			if a.Family == "inet" {
				v.addrs = append(v.addrs, fmt.Sprintf("%s/%d", a.Local, a.Len))
			}
		}
	}
	var routes []struct {
		Dst     string `json:"dst"`
		Gateway string `json:"gateway"`
	}
	ipJSON(t, &routes, "-n", netnsName, "-4", "route", "show")
	for _, r := range routes {
		if r.Gateway != "" {
			v.routes = append(v.routes, r.Dst+" via "+r.Gateway)
		}
	}
	var neighs []struct {
		Dst    string   `json:"dst"`
		LLAddr string   `json:"lladdr"`
		State  []string `json:"state"`
	}
	v.neighs = map[string]string{}
	if slices.Contains(v.links, "eth0") {
		ipJSON(t, &neighs, "-n", netnsName, "neigh", "show", "dev", "eth0")
		for _, n := range neighs {
			if slices.Contains(n.State, "PERMANENT") {
				v.neighs[n.Dst] = n.LLAddr
			}
		}
	}
	return v
}

// hostLinkExists tells whether the host namespace has the link.
func hostLinkExists(name string) bool {
	return exec.Command("ip", "link", "show", "dev", name).Run() == nil
}

// vppSide returns the VPP stand-in's af_packet interface on the pod's veth
// and whether VPP has the /32 route to addr.
func vppSide(vpp *vppsim.VPP, p *pod, addr string) (iface *vppsim.Interface, route bool) {
	snap := vpp.Snapshot()
	for i := range snap.Interfaces {
		if snap.Interfaces[i].HostIfName == p.hostIf {
			iface = &snap.Interfaces[i]
		}
	}
	for _, r := range snap.Routes {
		if addr != "" && r.Prefix.String() == addr+"/32" {
			route = true
		}
	}
	return iface, route
}

// waitConfigured waits until the driver wants n keys and applied them.
func waitConfigured(t testing.TB, d *vppdriver.Driver, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		st := d.Statuses()
		if len(st) != n {
			return false
		}
		for _, s := range st {
			if s.State != vppdriver.StateConfigured {
				return false
			}
		}
		return d.Connected()
	}, 10*time.Second, 5*time.Millisecond)
}

// afPacketCount counts the af_packet interfaces of the stand-in.
func afPacketCount(vpp *vppsim.VPP) int {
	n := 0
	for _, i := range vpp.Snapshot().Interfaces {
		if i.HostIfName != "" {
			n++
		}
	}
	return n
}

// gate is an event that keeps the loop busy until release is closed.
type gate struct {
	started, release chan struct{}
}

func newGate() *gate { return &gate{started: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) GetName() string                                   { return "gate" }
func (g *gate) String() string                                    { return "gate" }
func (g *gate) Method() controller.EventMethodType                { return controller.Update }
func (g *gate) TransactionType() controller.UpdateTransactionType { return controller.BestEffort }
func (g *gate) Direction() controller.UpdateDirectionType         { return controller.Forward }
func (g *gate) IsBlocking() bool                                  { return false }
func (g *gate) Done(error)                                        {}

var gateHandler = &controller.HandlerFuncs{
	Name:    "gate",
	Handles: func(ev controller.Event) bool { _, ok := ev.(*gate); return ok },
	UpdateFunc: func(ev controller.Event, _ controller.UpdateOperations) (string, error) {
		g := ev.(*gate)
		close(g.started)
		<-g.release
		return "", nil
	},
}

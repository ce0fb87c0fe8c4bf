package svcnat_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/adapter/socketclient"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/render/svcnat"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// The node of these tests: node ID 1 with IPAM's defaults, so pods get
// 10.1.1.x, the VPP-host link is 172.30.1.1 (VPP) / 172.30.1.2 (host)
// and the NAT loopback 172.30.1.254. The uplink holds the node IP.
const (
	nodeName   = "node-1"
	nodeIP     = "192.168.16.1"
	otherNode  = "192.168.16.2" // another node's address: no node ports here
	uplink     = "uplink"
	hostIC     = "host-ic"
	extGateway = "192.168.16.100"
)

// testVPP is the VPP an agent programs: the stand-in or a real VPP.
type testVPP struct {
	sim  *vppsim.VPP
	real *vppdrivertest.RealVPP
}

func simVPP(hostIfs ...string) *testVPP {
	return &testVPP{sim: vppsim.New(vppsim.Config{HostInterfaces: hostIfs})}
}

// realVPP starts a real VPP for the test, or skips it (see
// vppdrivertest.StartRealVPP).
func realVPP(t *testing.T) *testVPP { return &testVPP{real: vppdrivertest.StartRealVPP(t)} }

func (v *testVPP) adapter() adapter.VppAPI {
	if v.sim != nil {
		return v.sim.NewAdapter()
	}
	return socketclient.NewVppClient(v.real.APISocket())
}

// restart restarts VPP: all its state is lost.
func (v *testVPP) restart() {
	if v.sim != nil {
		v.sim.Restart()
		return
	}
	v.real.Restart()
}

// nat returns VPP's NAT44 tables, from VPP's own dumps.
func (v *testVPP) nat(t *testing.T) vppdrivertest.NAT44 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := vppdrivertest.ReadNAT44(ctx, v.adapter(), "vsk:")
	require.NoError(t, err)
	return n
}

// agentConfig configures the test agent.
type agentConfig struct {
	// hostIf, when set, makes pod, uplink and host-interconnect interfaces
	// af_packet interfaces on the host veths it names (created by the
	// test); otherwise they are loopbacks.
	hostIf func(vppIf string) string
	// nat tweaks the renderer's configuration.
	nat func(*svcnat.Config)
}

// agent is the part of a vswitch agent that renders services: the event
// loop with IPAM, a small stand-in for the node and pod handlers (node
// interfaces, one interface and a /32 route per pod), the service
// processor with the NAT44 renderer, and the driver.
type agent struct {
	t      *testing.T
	loop   *controller.Loop
	driver *vppdriver.Driver
	ipam   *ipam.IPAM
	sp     *svcprocessor.ServiceProcessor
	nat    *svcnat.Renderer
	node   *nodeHandler
	state  *kubeState
	// requests counts what the driver sent to VPP, by message.
	requests *vppdrivertest.RequestRecorder

	cancel context.CancelFunc
	wg     sync.WaitGroup
	runErr []error
	mu     sync.Mutex
}

// kubeState is the Kubernetes state the test keeps, as a reflector would
// in etcd: what an agent (re)starting gets in its DBResync.
type kubeState struct {
	mu   sync.Mutex
	data controller.KubeStateData
}

func newKubeState() *kubeState { return &kubeState{data: controller.NewKubeStateData()} }

func (s *kubeState) set(resource, key string, v proto.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data[resource] == nil {
		s.data[resource] = controller.KeyValuePairs{}
	}
	if v == nil {
		delete(s.data[resource], key)
		return
	}
	s.data[resource][key] = v
}

func (s *kubeState) snapshot() controller.KubeStateData {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.data.CopyWithoutValues()
	return out
}

func startAgent(t *testing.T, vpp *testVPP, state *kubeState, cfg agentConfig) *agent {
	t.Helper()
	requests := &vppdrivertest.RequestRecorder{}
	driver, err := vppdriver.New(func() adapter.VppAPI { return requests.Wrap(vpp.adapter()) }, vppdriver.Config{
		RequestTimeout: 5 * time.Second, RetryInitial: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		ReconnectInterval: 20 * time.Millisecond, HealthInterval: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	loop, err := controller.New(nil, driver, controller.Config{})
	require.NoError(t, err)
	pods, err := ipam.New(ipam.NodeIDFunc(func() uint32 { return 1 }), ipam.Config{NodeName: nodeName})
	require.NoError(t, err)
	node := &nodeHandler{ipam: pods, hostIf: cfg.hostIf, pods: map[kubemodel.PodID]netip.Addr{}}
	// The processor gets every node's addresses; the renderer this node's.
	allNodes := svcprocessor.NodeIPsFunc(func() []netip.Addr {
		return []netip.Addr{netip.MustParseAddr(nodeIP), netip.MustParseAddr(otherNode)}
	})
	sp, err := svcprocessor.New(svcprocessor.SubnetsFromIPNet(pods), allNodes, node,
		svcprocessor.Config{NodeName: nodeName, FrontendInterfaces: []string{uplink, hostIC}})
	require.NoError(t, err)
	ncfg := svcnat.Config{Uplink: uplink, InterconnectInterfaces: []string{hostIC}}
	if cfg.nat != nil {
		cfg.nat(&ncfg)
	}
	thisNode := svcnat.NodeIPsFunc(func() []netip.Addr { return []netip.Addr{netip.MustParseAddr(nodeIP)} })
	nat, err := svcnat.New(thisNode, pods, ncfg)
	require.NoError(t, err)
	require.NoError(t, sp.RegisterRenderer(nat))
	require.NoError(t, loop.Register(pods, node, sp.Handler()))

	a := &agent{t: t, loop: loop, driver: driver, ipam: pods, sp: sp, nat: nat, node: node, state: state, requests: requests}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	for _, run := range []func(context.Context) error{driver.Run, loop.Run} {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				a.mu.Lock()
				a.runErr = append(a.runErr, err)
				a.mu.Unlock()
			}
		}()
	}
	t.Cleanup(a.stop)
	ev := controller.NewDBResync()
	ev.KubeState = state.snapshot()
	a.push(ev)
	return a
}

// stop stops the agent (VPP keeps its configuration).
func (a *agent) stop() {
	a.cancel()
	a.wg.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, err := range a.runErr {
		a.t.Errorf("agent: %v", err)
	}
	a.runErr = nil
}

// push processes ev and waits until the loop has processed it and every
// key of the driver is configured.
func (a *agent) push(ev controller.Event) {
	a.t.Helper()
	before := a.loop.Stats().Processed
	require.NoError(a.t, a.loop.PushEvent(ev))
	a.settle(before + 1)
}

func (a *agent) settle(processed uint64) {
	a.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ls, ds := a.loop.Stats(), a.driver.Stats()
		if ls.Processed >= processed && ls.Queued == 0 && ds.Connected && ds.Keys == ds.Configured {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("not settled: loop %+v, driver %+v, not configured: %v", ls, ds, a.notConfigured())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (a *agent) notConfigured() []string {
	var out []string
	for _, s := range a.driver.Statuses() {
		if s.State != vppdriver.StateConfigured {
			out = append(out, s.String())
		}
	}
	return out
}

// addPod connects a pod (as the CNI server would) and returns its IP.
func (a *agent) addPod(name string) netip.Addr {
	a.t.Helper()
	id := kubemodel.PodID{Namespace: "default", Name: name}
	ev := controller.NewAddPodEvent(id, "c-"+name, "/var/run/netns/"+name)
	before := a.loop.Stats().Processed
	require.NoError(a.t, a.loop.PushEvent(ev))
	require.NoError(a.t, ev.Wait(), "AddPod %s", name)
	a.settle(before + 1)
	ip, ok := a.ipam.PodAddr(id)
	require.True(a.t, ok)
	a.state.set(kubemodel.PodResource, kubemodel.PodKey(id.Namespace, id.Name),
		&kubemodel.Pod{Name: name, Namespace: "default", IpAddress: ip.String(), NodeName: nodeName})
	return ip
}

// kube applies a change of the Kubernetes state (v nil: deleted).
func (a *agent) kube(resource, key string, v proto.Message) {
	a.t.Helper()
	a.state.mu.Lock()
	prev := a.state.data[resource][key]
	a.state.mu.Unlock()
	a.state.set(resource, key, v)
	ev := &controller.KubeStateChange{Resource: resource, Key: key, PrevValue: prev, NewValue: v}
	if v == nil {
		ev.NewValue = nil
	}
	a.push(ev)
}

func (a *agent) setService(s *kubemodel.Service) {
	a.t.Helper()
	a.kube(kubemodel.ServiceResource, kubemodel.ServiceKey(s.Namespace, s.Name), s)
}

func (a *agent) setEndpoints(e *kubemodel.Endpoints) {
	a.t.Helper()
	a.kube(kubemodel.EndpointsResource, kubemodel.EndpointsKey(e.Namespace, e.Name), e)
}

// nodeHandler stands in for the node and pod connectivity handlers: the
// uplink with the node IP, the VPP end of the VPP-host interconnect, and
// for each pod an interface named pod-<name> holding a /32 gateway
// address 169.254.1.<last byte of the pod IP> and a /32 route to the pod.
// Names and addresses derive from the pod, so an agent restart re-creates
// nothing. It is the svcprocessor's PodInterfaces.
type nodeHandler struct {
	ipam   *ipam.IPAM
	hostIf func(string) string // nil: loopbacks

	mu   sync.Mutex
	pods map[kubemodel.PodID]netip.Addr
}

func podIfName(pod kubemodel.PodID) string { return "pod-" + pod.Name }

// gatewayOf is the address of the VPP end of a pod's interface.
func gatewayOf(pod netip.Addr) string { return "169.254.1." + strconv.Itoa(int(pod.As4()[3])) }

func (h *nodeHandler) String() string { return "test-node" }

func (h *nodeHandler) HandlesEvent(ev controller.Event) bool {
	switch ev.(type) {
	case *controller.AddPod, *controller.DeletePod:
		return true
	}
	return ev.Method() == controller.FullResync || ev.Method() == controller.UpstreamResync
}

func (h *nodeHandler) iface(name string, addrs ...string) *vppmodel.Interface {
	i := &vppmodel.Interface{Name: name, Type: vppmodel.Interface_LOOPBACK, Enabled: true, IpAddresses: addrs}
	if h.hostIf != nil {
		i.Type, i.AfPacket = vppmodel.Interface_AF_PACKET, &vppmodel.AfPacketLink{HostIfName: h.hostIf(name)}
	}
	return i
}

func (h *nodeHandler) putPod(txn controller.ResyncOperations, pod kubemodel.PodID, ip netip.Addr) {
	name := podIfName(pod)
	txn.Put(vppmodel.InterfaceKey(name), h.iface(name, gatewayOf(ip)+"/32"))
	dst := netip.PrefixFrom(ip, 32)
	txn.Put(vppmodel.RouteKey(0, dst), &vppmodel.Route{DstNetwork: dst.String(), Paths: []*vppmodel.Path{{OutgoingInterface: name}}})
}

func (h *nodeHandler) Resync(_ controller.Event, ksd controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
	txn.Put(vppmodel.InterfaceKey(uplink), h.iface(uplink, nodeIP+"/24"))
	txn.Put(vppmodel.InterfaceKey(hostIC), h.iface(hostIC, "172.30.1.1/24"))
	if h.hostIf != nil {
		txn.Put(vppmodel.RouteKey(0, netip.MustParsePrefix("0.0.0.0/0")), &vppmodel.Route{DstNetwork: "0.0.0.0/0",
			Paths: []*vppmodel.Path{{OutgoingInterface: uplink, NextHop: extGateway}}})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, v := range ksd[kubemodel.PodResource] {
		p := v.(*kubemodel.Pod)
		if ip, err := netip.ParseAddr(p.GetIpAddress()); err == nil && p.GetNodeName() == nodeName {
			h.pods[p.ID()] = ip
		}
	}
	for pod, ip := range h.pods {
		h.putPod(txn, pod, ip)
	}
	return nil
}

func (h *nodeHandler) Update(ev controller.Event, txn controller.UpdateOperations) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch ev := ev.(type) {
	case *controller.AddPod:
		ip, ok := h.ipam.PodAddr(ev.Pod)
		if !ok {
			return "", fmt.Errorf("pod %s has no IP", ev.Pod)
		}
		h.pods[ev.Pod] = ip
		h.putPod(txn, ev.Pod, ip)
		return "pod interface", nil
	case *controller.DeletePod:
		ip, ok := h.pods[ev.Pod]
		if !ok {
			return "", nil
		}
		delete(h.pods, ev.Pod)
		txn.Delete(vppmodel.InterfaceKey(podIfName(ev.Pod)))
		txn.Delete(vppmodel.RouteKey(0, netip.PrefixFrom(ip, 32)))
		return "pod interface removed", nil
	}
	return "", nil
}

func (h *nodeHandler) Revert(ev controller.Event) error {
	if ev, ok := ev.(*controller.AddPod); ok {
		h.mu.Lock()
		delete(h.pods, ev.Pod)
		h.mu.Unlock()
	}
	return nil
}

// PodInterface implements svcprocessor.PodInterfaces.
func (h *nodeHandler) PodInterface(pod kubemodel.PodID) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.pods[pod]; !ok {
		return "", false
	}
	return podIfName(pod), true
}

// Kubernetes objects.

type port struct {
	name     string
	proto    kubemodel.Protocol
	port     int32
	target   int32
	nodePort int32
}

func service(name string, clusterIP string, ports ...port) *kubemodel.Service {
	s := &kubemodel.Service{Name: name, Namespace: "default", ClusterIps: []string{clusterIP}}
	for _, p := range ports {
		s.Ports = append(s.Ports, &kubemodel.ServicePort{Name: p.name, Protocol: p.proto, Port: p.port,
			TargetPortNumber: p.target, NodePort: p.nodePort})
		if p.nodePort != 0 {
			s.Type = kubemodel.Service_NODE_PORT
		}
	}
	return s
}

// ep is one endpoint address: a pod of this node (pod set) or a remote
// address.
type ep struct {
	ip  netip.Addr
	pod string
}

func endpoints(name string, ports []port, addrs ...ep) *kubemodel.Endpoints {
	sub := &kubemodel.EndpointSubset{}
	for _, a := range addrs {
		ea := &kubemodel.EndpointAddress{Ip: a.ip.String(), NodeName: "node-2"}
		if a.pod != "" {
			ea.NodeName = nodeName
			ea.TargetRef = &kubemodel.ObjectReference{Kind: "Pod", Namespace: "default", Name: a.pod}
		}
		sub.Addresses = append(sub.Addresses, ea)
	}
	for _, p := range ports {
		sub.Ports = append(sub.Ports, &kubemodel.EndpointPort{Name: p.name, Port: p.target, Protocol: p.proto})
	}
	return &kubemodel.Endpoints{Name: name, Namespace: "default", Subsets: []*kubemodel.EndpointSubset{sub}}
}

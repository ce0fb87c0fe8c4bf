package svccnat_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/testseed"
	"github.com/vswitchkit/vswitchkit/render/svccnat"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/svcprocessor/svcprocessortest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// The node of these tests: pods 10.1.1.x and fd00:1:0:1::x, this node's
// addresses 192.168.16.1 and fd00:16::1 (also its source-NAT addresses),
// another node 192.168.16.2.
const (
	nodeName  = "node-1"
	nodeIP    = "192.168.16.1"
	nodeIP6   = "fd00:16::1"
	otherNode = "192.168.16.2"
	uplink    = "uplink"
	hostIC    = "vpp-host"
)

var excluded = []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("10.96.0.0/12"),
	netip.MustParsePrefix("fd00:1::/48"), netip.MustParsePrefix("fd00:96::/108"), netip.MustParsePrefix("192.168.16.0/24")}

// rig is a service processor with the renderer, driven the way the event
// loop drives them (the processor's handler, then the renderer's, with
// transactions), and the desired state the transactions add up to.
type rig struct {
	t       testing.TB
	sp      *svcprocessor.ServiceProcessor
	cn      *svccnat.Renderer
	pods    *svcprocessortest.Pods
	nodeIPs *svcprocessortest.NodeIPs // every node's (the processor's)
	thisIPs *svcprocessortest.NodeIPs // this node's (the renderer's)
	snat    *svcprocessortest.NodeIPs // the source-NAT addresses
	ksd     controller.KubeStateData
	applied controller.KeyValuePairs
	logs    *bytes.Buffer
}

func baseConfig() svccnat.Config {
	return svccnat.Config{NodeName: nodeName, Uplink: uplink, InterconnectInterfaces: []string{hostIC}, ExcludedPrefixes: excluded}
}

func newRig(t testing.TB, cfg svccnat.Config) *rig {
	t.Helper()
	this := []netip.Addr{netip.MustParseAddr(nodeIP), netip.MustParseAddr(nodeIP6)}
	r := &rig{t: t, pods: svcprocessortest.NewPods(), ksd: controller.NewKubeStateData(), applied: controller.KeyValuePairs{},
		logs:    &bytes.Buffer{},
		nodeIPs: svcprocessortest.NewNodeIPs(append(slices.Clone(this), netip.MustParseAddr(otherNode))...),
		thisIPs: svcprocessortest.NewNodeIPs(this...),
		snat:    svcprocessortest.NewNodeIPs(this...)}
	subnets := svcprocessortest.NewSubnets(netip.MustParsePrefix("10.1.1.0/24"), netip.MustParsePrefix("10.1.0.0/16"))
	sp, err := svcprocessor.New(subnets, r.nodeIPs, r.pods, svcprocessor.Config{NodeName: nodeName, FrontendInterfaces: []string{uplink, hostIC}})
	require.NoError(t, err)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	cn, err := svccnat.New(r.thisIPs, svccnat.SNATAddrsFunc(r.snat.NodeIPs), cfg)
	require.NoError(t, err)
	require.NoError(t, sp.RegisterRenderer(cn))
	r.sp, r.cn = sp, cn
	r.resync()
	return r
}

// resync runs a resync and replaces the applied state with its output.
func (r *rig) resync() controller.KeyValuePairs {
	r.t.Helper()
	txn := controllertest.NewTxn()
	ev := controller.NewDBResync()
	require.NoError(r.t, r.sp.Handler().Resync(ev, r.ksd, 1, txn))
	require.NoError(r.t, r.cn.Resync(ev, r.ksd, 1, txn))
	r.applied = txn.Values()
	return r.applied
}

// update runs one event through both handlers and applies its
// transaction; it returns the keys the transaction wrote (nil value:
// deleted).
func (r *rig) update(ev controller.Event) controller.KeyValuePairs {
	r.t.Helper()
	txn := controllertest.NewTxn()
	_, err := r.sp.Handler().Update(ev, txn)
	require.NoError(r.t, err)
	if r.cn.HandlesEvent(ev) {
		_, err = r.cn.Update(ev, txn)
		require.NoError(r.t, err)
	}
	out := txn.Values()
	for k, v := range out {
		if v == nil {
			delete(r.applied, k)
		} else {
			r.applied[k] = v
		}
	}
	return out
}

func (r *rig) kube(resource, key string, v proto.Message) controller.KeyValuePairs {
	r.t.Helper()
	prev := r.ksd[resource][key]
	if r.ksd[resource] == nil {
		r.ksd[resource] = controller.KeyValuePairs{}
	}
	if v == nil {
		delete(r.ksd[resource], key)
	} else {
		r.ksd[resource][key] = v
	}
	ev := &controller.KubeStateChange{Resource: resource, Key: key, PrevValue: prev, NewValue: v}
	if v == nil {
		ev.NewValue = nil
	}
	return r.update(ev)
}

func (r *rig) service(s *kubemodel.Service) controller.KeyValuePairs {
	return r.kube(kubemodel.ServiceResource, kubemodel.ServiceKey(s.Namespace, s.Name), s)
}

func (r *rig) endpoints(e *kubemodel.Endpoints) controller.KeyValuePairs {
	return r.kube(kubemodel.EndpointsResource, kubemodel.EndpointsKey(e.Namespace, e.Name), e)
}

// podState sets a pod's Kubernetes state (nil: deleted).
func (r *rig) podState(name string, p *kubemodel.Pod) controller.KeyValuePairs {
	return r.kube(kubemodel.PodResource, kubemodel.PodKey("default", name), p)
}

// addPod connects a pod (AddPod).
func (r *rig) addPod(name string) controller.KeyValuePairs {
	id := kubemodel.PodID{Namespace: "default", Name: name}
	r.pods.Connect(id, "pod-"+name)
	if r.ksd[kubemodel.PodResource] == nil {
		r.ksd[kubemodel.PodResource] = controller.KeyValuePairs{}
	}
	r.ksd[kubemodel.PodResource][kubemodel.PodKey(id.Namespace, id.Name)] = &kubemodel.Pod{Namespace: id.Namespace, Name: id.Name, NodeName: nodeName}
	return r.update(controller.NewAddPodEvent(id, "c", "/ns"))
}

func (r *rig) deletePod(name string) controller.KeyValuePairs {
	id := kubemodel.PodID{Namespace: "default", Name: name}
	out := r.update(&controller.DeletePod{Pod: id})
	r.pods.Disconnect(id)
	delete(r.ksd[kubemodel.PodResource], kubemodel.PodKey(id.Namespace, id.Name))
	return out
}

// nodeIPsChanged sets this node's and every node's addresses and tells the
// processor.
func (r *rig) nodeIPsChanged(this []netip.Addr, others ...netip.Addr) controller.KeyValuePairs {
	r.thisIPs.Set(this...)
	r.snat.Set(this...)
	r.nodeIPs.Set(append(slices.Clone(this), others...)...)
	return r.update(&controller.KubeStateChange{Resource: kubemodel.NodeResource, Key: kubemodel.NodeKey("n")})
}

// fresh renders the current Kubernetes state with a new processor and
// renderer: what a resync of an agent restarted now would produce.
func (r *rig) fresh(cfg svccnat.Config) (controller.KeyValuePairs, svccnat.Stats, []svccnat.Problem) {
	r.t.Helper()
	o := newRig(r.t, cfg)
	o.ksd = r.ksd
	o.thisIPs.Set(r.thisIPs.NodeIPs()...)
	o.snat.Set(r.snat.NodeIPs()...)
	o.nodeIPs.Set(r.nodeIPs.NodeIPs()...)
	for pod, ifName := range r.connected() {
		o.pods.Connect(pod, ifName)
	}
	return o.resync(), o.cn.Stats(), o.cn.Problems()
}

func (r *rig) connected() map[kubemodel.PodID]string {
	out := map[kubemodel.PodID]string{}
	for _, name := range []string{"p2", "p3", "p4", "p5", "client"} {
		id := kubemodel.PodID{Namespace: "default", Name: name}
		if ifName, ok := r.pods.PodInterface(id); ok {
			out[id] = ifName
		}
	}
	return out
}

// equalState compares desired states value by value.
func equalState(t testing.TB, want, got controller.KeyValuePairs, msgAndArgs ...any) {
	t.Helper()
	text := func(kv controller.KeyValuePairs) []string {
		var out []string
		for k, v := range kv {
			out = append(out, k+" = "+fmt.Sprint(v))
		}
		slices.Sort(out)
		return out
	}
	assert.Equal(t, text(want), text(got), msgAndArgs...)
}

// changed lists the keys of a transaction, "+key" for puts and "-key" for
// deletes, sorted.
func changed(kv controller.KeyValuePairs) []string {
	var out []string
	for k, v := range kv {
		if v == nil {
			out = append(out, "-"+k)
		} else {
			out = append(out, "+"+k)
		}
	}
	slices.Sort(out)
	return out
}

// translations describes the translations of a state, one line each:
// "tcp 10.96.0.10:80 -> 10.1.1.2:8080 10.1.1.3:8080" with " maglev",
// " real" and " affinity" when set.
func translations(kv controller.KeyValuePairs) []string {
	var out []string
	for k, v := range kv {
		if !strings.HasPrefix(k, vppmodel.CnatTranslationKeyPrefix) {
			continue
		}
		m := v.(*vppmodel.CnatTranslation)
		line := fmt.Sprint(vppmodel.CnatProtocolName(m.Protocol), " ", netip.AddrPortFrom(netip.MustParseAddr(m.Vip), uint16(m.Port)), " ->")
		for _, p := range m.Paths {
			line += " " + netip.AddrPortFrom(netip.MustParseAddr(p.DstIp), uint16(p.DstPort)).String()
		}
		if m.LbType == vppmodel.CnatTranslation_MAGLEV {
			line += " maglev"
		}
		if m.RealIp {
			line += " real"
		}
		if m.FlowHashConfig == vppmodel.CnatFlowHashSrcIP {
			line += " affinity"
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return out
}

type port struct {
	name     string
	proto    kubemodel.Protocol
	port     int32
	target   int32
	nodePort int32
}

func service(name string, clusterIPs []string, ports ...port) *kubemodel.Service {
	s := &kubemodel.Service{Name: name, Namespace: "default", ClusterIps: clusterIPs}
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
	ip  string
	pod string
}

func endpoints(name string, ports []port, addrs ...ep) *kubemodel.Endpoints {
	sub := &kubemodel.EndpointSubset{}
	for _, a := range addrs {
		ea := &kubemodel.EndpointAddress{Ip: a.ip, NodeName: "node-2"}
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

// hostPortPod is a pod of this node with its addresses and one container
// with the given ports.
func hostPortPod(name string, ips []string, ports ...*kubemodel.ContainerPort) *kubemodel.Pod {
	p := &kubemodel.Pod{Name: name, Namespace: "default", NodeName: nodeName, IpAddresses: ips,
		Containers: []*kubemodel.Container{{Name: "c", Ports: ports}}}
	if len(ips) > 0 {
		p.IpAddress = ips[0]
	}
	return p
}

// TestIncrementalEqualsResync: after any sequence of service, endpoint,
// pod (interfaces and hostPorts) and node address changes, the state the
// renderer's update transactions add up to is exactly what a resync
// renders from the same Kubernetes state, and so are the Stats and the
// problems (a model test with a random oracle: the resync is the naive
// reference).
func TestIncrementalEqualsResync(t *testing.T) {
	clusterIPs := [][]string{{"10.96.0.1"}, {"10.96.0.2", "fd00:96::2"}, {"fd00:96::3"}, {"10.96.0.3"}}
	externalIPs := []string{"203.0.113.1", "2001:db8::1", "10.96.0.3", nodeIP, "fd00:96::3"}
	ports := []*kubemodel.ServicePort{
		{Name: "http", Protocol: kubemodel.Protocol_TCP, Port: 80, TargetPortNumber: 8080},
		{Name: "dns", Protocol: kubemodel.Protocol_UDP, Port: 53, TargetPortNumber: 5353},
		{Name: "dnstcp", Protocol: kubemodel.Protocol_TCP, Port: 53, TargetPortNumber: 5353},
		{Name: "sctp", Protocol: kubemodel.Protocol_SCTP, Port: 9, TargetPortNumber: 9},
	}
	backends := []ep{
		{"10.1.1.2", "p2"}, {"fd00:1:0:1::2", "p2"}, {"10.1.1.3", "p3"}, {"10.1.1.4", "p4"}, {"fd00:1:0:1::5", "p5"},
		{ip: "10.1.2.7"}, {ip: "fd00:1:0:2::8"},
	}
	lbs := []string{"", svccnat.LBECMP, svccnat.LBMaglev, "round-robin"}
	for seed := range testseed.Range(t, 30) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 1))
			cfg := baseConfig()
			cfg.DisableSNAT = seed%4 == 3
			r := newRig(t, cfg)
			pick := func(n int) int { return rnd.IntN(n) }
			for step := range 150 {
				name := fmt.Sprint("s", pick(5))
				switch op := pick(12); {
				case op < 4:
					s := &kubemodel.Service{Name: name, Namespace: "default", ClusterIps: clusterIPs[pick(len(clusterIPs))]}
					if pick(3) == 0 {
						s.ExternalIps = []string{externalIPs[pick(len(externalIPs))]}
					}
					if pick(4) == 0 {
						s.LbIngressIps = []string{externalIPs[pick(len(externalIPs))]}
					}
					for _, p := range ports {
						if pick(2) == 0 {
							p = proto.Clone(p).(*kubemodel.ServicePort)
							if pick(3) == 0 {
								p.NodePort = 30000 + int32(pick(3))
								s.Type = kubemodel.Service_NODE_PORT
							}
							s.Ports = append(s.Ports, p)
						}
					}
					if pick(3) == 0 {
						s.ExternalTrafficPolicy = kubemodel.Service_LOCAL
					}
					if pick(4) == 0 {
						s.InternalTrafficPolicy = kubemodel.Service_LOCAL
					}
					if pick(3) == 0 {
						s.SessionAffinity = kubemodel.Service_CLIENT_IP
					}
					if lb := lbs[pick(len(lbs))]; lb != "" {
						s.Annotations = map[string]string{svccnat.LBAnnotation: lb}
					}
					r.service(s)
				case op < 7:
					var addrs []ep
					for _, b := range backends {
						if pick(2) == 0 {
							addrs = append(addrs, b)
						}
					}
					var eps []port
					for _, p := range ports {
						eps = append(eps, port{name: p.Name, proto: p.Protocol, target: p.TargetPortNumber + int32(pick(2))})
					}
					r.endpoints(endpoints(name, eps, addrs...))
				case op < 8:
					if pick(2) == 0 {
						r.kube(kubemodel.ServiceResource, kubemodel.ServiceKey("default", name), nil)
					} else {
						r.kube(kubemodel.EndpointsResource, kubemodel.EndpointsKey("default", name), nil)
					}
				case op < 9:
					pod := fmt.Sprint("p", 2+pick(4))
					if _, ok := r.connected()[kubemodel.PodID{Namespace: "default", Name: pod}]; ok {
						r.deletePod(pod)
					} else {
						r.addPod(pod)
					}
				case op < 11:
					pod := fmt.Sprint("h", pick(3))
					if pick(4) == 0 {
						r.podState(pod, nil)
						break
					}
					ips := [][]string{{"10.1.1.20"}, {"10.1.1.21", "fd00:1:0:1::21"}, {"fd00:1:0:1::22"}, nil}[pick(4)]
					var cps []*kubemodel.ContainerPort
					for range pick(3) {
						cps = append(cps, &kubemodel.ContainerPort{HostPort: 30000 + int32(pick(3)), ContainerPort: 80,
							Protocol: kubemodel.Protocol(pick(3)), HostIp: []string{"", "", nodeIP, "198.51.100.1", "::"}[pick(5)]})
					}
					r.podState(pod, hostPortPod(pod, ips, cps...))
				default:
					ips := [][]netip.Addr{
						{netip.MustParseAddr(nodeIP), netip.MustParseAddr(nodeIP6)},
						{netip.MustParseAddr("192.168.16.9")},
						{netip.MustParseAddr(nodeIP6)},
						nil,
					}
					r.nodeIPsChanged(ips[pick(len(ips))], netip.MustParseAddr(otherNode))
				}
				if step%50 == 49 {
					want, wantStats, wantProblems := r.fresh(cfg)
					equalState(t, want, r.applied, "step %d", step)
					got := r.cn.Stats()
					wantStats.Renders, wantStats.Resyncs = got.Renders, got.Resyncs
					assert.Equal(t, wantStats, got, "step %d", step)
					assert.Equal(t, wantProblems, r.cn.Problems(), "step %d", step)
				}
			}
		})
	}
}

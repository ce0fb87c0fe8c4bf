package svcnat_test

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
	"github.com/vswitchkit/vswitchkit/render/svcnat"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/svcprocessor/svcprocessortest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// rig is a service processor with the renderer, driven the way the event
// loop drives them (through the processor's handler, with transactions),
// and the desired state the renderer's transactions add up to.
type rig struct {
	t       testing.TB
	sp      *svcprocessor.ServiceProcessor
	nat     *svcnat.Renderer
	pods    *svcprocessortest.Pods
	nodeIPs *svcprocessortest.NodeIPs // every node's (the processor's)
	thisIPs *svcprocessortest.NodeIPs // this node's (the renderer's)
	ksd     controller.KubeStateData
	applied controller.KeyValuePairs
	logs    *bytes.Buffer
}

func newRig(t testing.TB, cfg svcnat.Config) *rig {
	t.Helper()
	r := &rig{t: t, pods: svcprocessortest.NewPods(), ksd: controller.NewKubeStateData(), applied: controller.KeyValuePairs{},
		logs:    &bytes.Buffer{},
		nodeIPs: svcprocessortest.NewNodeIPs(netip.MustParseAddr(nodeIP), netip.MustParseAddr(otherNode)),
		thisIPs: svcprocessortest.NewNodeIPs(netip.MustParseAddr(nodeIP))}
	subnets := svcprocessortest.NewSubnets(netip.MustParsePrefix("10.1.1.0/24"), netip.MustParsePrefix("10.1.0.0/16"))
	sp, err := svcprocessor.New(subnets, r.nodeIPs, r.pods, svcprocessor.Config{FrontendInterfaces: []string{uplink, hostIC}})
	require.NoError(t, err)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	nat, err := svcnat.New(r.thisIPs, svcnat.NATLoopbackFunc(func() netip.Addr { return netip.MustParseAddr("172.30.1.254") }), cfg)
	require.NoError(t, err)
	require.NoError(t, sp.RegisterRenderer(nat))
	r.sp, r.nat = sp, nat
	r.resync()
	return r
}

// resync runs a resync and replaces the applied state with its output.
func (r *rig) resync() controller.KeyValuePairs {
	r.t.Helper()
	txn := controllertest.NewTxn()
	require.NoError(r.t, r.sp.Handler().Resync(controller.NewDBResync(), r.ksd, 1, txn))
	r.applied = txn.Values()
	return r.applied
}

// update runs one event and applies its transaction; it returns the keys
// the transaction wrote (nil value: deleted).
func (r *rig) update(ev controller.Event) controller.KeyValuePairs {
	r.t.Helper()
	txn := controllertest.NewTxn()
	_, err := r.sp.Handler().Update(ev, txn)
	require.NoError(r.t, err)
	out := txn.Values()
	for k, v := range out {
		if v == nil {
			// A key put and deleted again within one transaction (a
			// frontend handed between conflicting services while both
			// change) is deleted without being applied: a no-op.
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
	return r.update(&controller.KubeStateChange{Resource: resource, Key: key, PrevValue: prev, NewValue: v})
}

func (r *rig) service(s *kubemodel.Service) controller.KeyValuePairs {
	return r.kube(kubemodel.ServiceResource, kubemodel.ServiceKey(s.Namespace, s.Name), s)
}

func (r *rig) endpoints(e *kubemodel.Endpoints) controller.KeyValuePairs {
	return r.kube(kubemodel.EndpointsResource, kubemodel.EndpointsKey(e.Namespace, e.Name), e)
}

func (r *rig) addPod(name string) controller.KeyValuePairs {
	id := kubemodel.PodID{Namespace: "default", Name: name}
	r.pods.Connect(id, "pod-"+name)
	if r.ksd[kubemodel.PodResource] == nil {
		r.ksd[kubemodel.PodResource] = controller.KeyValuePairs{}
	}
	r.ksd[kubemodel.PodResource][kubemodel.PodKey(id.Namespace, id.Name)] = &kubemodel.Pod{Namespace: id.Namespace, Name: id.Name}
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
	r.nodeIPs.Set(append(slices.Clone(this), others...)...)
	return r.update(&controller.KubeStateChange{Resource: kubemodel.NodeResource, Key: kubemodel.NodeKey("n")})
}

// fresh renders the current Kubernetes state with a new processor and
// renderer: what a resync of an agent restarted now would produce.
func (r *rig) fresh(cfg svcnat.Config) (controller.KeyValuePairs, svcnat.Stats) {
	r.t.Helper()
	o := newRig(r.t, cfg)
	o.ksd = r.ksd
	o.thisIPs.Set(r.thisIPs.NodeIPs()...)
	o.nodeIPs.Set(r.nodeIPs.NodeIPs()...)
	for pod, ifName := range r.connected() {
		o.pods.Connect(pod, ifName)
	}
	return o.resync(), o.nat.Stats()
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
			out = append(out, k+" = "+prototextString(v))
		}
		slices.Sort(out)
		return out
	}
	assert.Equal(t, text(want), text(got), msgAndArgs...)
}

func prototextString(m proto.Message) string {
	if m == nil {
		return "<nil>"
	}
	return fmt.Sprint(m)
}

func keysOf(kv controller.KeyValuePairs) []string {
	var out []string
	for k, v := range kv {
		if v == nil {
			k = "-" + k
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestIncrementalEqualsResync: after any sequence of service, endpoint,
// pod and node address changes, the state the renderer's update
// transactions add up to is exactly what a resync renders from the same
// Kubernetes state, and so are the Stats (a model test with a random
// oracle: the resync is the naive reference).
func TestIncrementalEqualsResync(t *testing.T) {
	clusterIPs := []string{"10.96.0.1", "10.96.0.2", "10.96.0.3", "fd00:96::1"}
	externalIPs := []string{"203.0.113.1", "203.0.113.2", "10.96.0.3", "fd00:113::1"}
	ports := []*kubemodel.ServicePort{
		{Name: "http", Protocol: kubemodel.Protocol_TCP, Port: 80, TargetPortNumber: 8080},
		{Name: "dns", Protocol: kubemodel.Protocol_UDP, Port: 53, TargetPortNumber: 5353},
		{Name: "dnstcp", Protocol: kubemodel.Protocol_TCP, Port: 53, TargetPortNumber: 5353},
		{Name: "sctp", Protocol: kubemodel.Protocol_SCTP, Port: 9, TargetPortNumber: 9},
	}
	backends := []ep{
		{netip.MustParseAddr("10.1.1.2"), "p2"}, {netip.MustParseAddr("10.1.1.3"), "p3"},
		{netip.MustParseAddr("10.1.1.4"), "p4"}, {netip.MustParseAddr("10.1.1.5"), "p5"},
		{ip: netip.MustParseAddr("10.1.2.7")}, {ip: netip.MustParseAddr("10.1.2.8")},
	}
	for seed := range testseed.Range(t, 30) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 1))
			cfg := svcnat.Config{Uplink: uplink, InterconnectInterfaces: []string{hostIC}, LocalBackendWeight: 1 + uint32(seed%3)}
			r := newRig(t, cfg)
			pick := func(n int) int { return rnd.IntN(n) }
			for step := range 150 {
				name := fmt.Sprint("s", pick(5))
				switch op := pick(10); {
				case op < 4:
					s := &kubemodel.Service{Name: name, Namespace: "default", ClusterIps: []string{clusterIPs[pick(len(clusterIPs))]}}
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
						s.SessionAffinityTimeout = int32(pick(2) * 600)
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
				default:
					ips := [][]netip.Addr{{netip.MustParseAddr(nodeIP)}, {netip.MustParseAddr("192.168.16.9"), netip.MustParseAddr("fd00::16")}, nil}
					r.nodeIPsChanged(ips[pick(len(ips))], netip.MustParseAddr(otherNode))
				}
				if step%50 == 49 {
					want, wantStats := r.fresh(cfg)
					equalState(t, want, r.applied, "step %d", step)
					got := r.nat.Stats()
					wantStats.Renders, wantStats.Resyncs = got.Renders, got.Resyncs
					assert.Equal(t, wantStats, got, "step %d", step)
				}
			}
		})
	}
}

// TestRenderer checks single behaviours on the transactions.
func TestRenderer(t *testing.T) {
	cfg := svcnat.Config{Uplink: uplink, InterconnectInterfaces: []string{hostIC}}
	http := port{name: "http", proto: kubemodel.Protocol_TCP, port: 80, target: 8080}
	lbKey := vppmodel.Nat44LbStaticMappingKey(vppmodel.Nat44Protocol_TCP, netip.MustParseAddr("10.96.0.10"), 80)
	staticKey := vppmodel.Nat44StaticMappingKey(vppmodel.Nat44Protocol_TCP, netip.MustParseAddr("10.96.0.10"), 80)
	p2, p3, p4 := ep{netip.MustParseAddr("10.1.1.2"), "p2"}, ep{netip.MustParseAddr("10.1.1.3"), "p3"}, ep{netip.MustParseAddr("10.1.1.4"), "p4"}
	remote := ep{ip: netip.MustParseAddr("10.1.2.7")}

	t.Run("resync: plugin, pools, uplink, interconnect", func(t *testing.T) {
		r := newRig(t, cfg)
		equalState(t, controller.KeyValuePairs{
			vppmodel.Nat44GlobalKey: &vppmodel.Nat44Global{Forwarding: true},
			vppmodel.Nat44AddressPoolKey(netip.MustParseAddr("172.30.1.254"), netip.MustParseAddr("172.30.1.254"), true): &vppmodel.Nat44AddressPool{
				FirstIp: "172.30.1.254", Vrf: ^uint32(0), TwiceNat: true},
			vppmodel.Nat44InterfaceAddressPoolKey(uplink, false): &vppmodel.Nat44AddressPool{Interface: uplink},
			vppmodel.Nat44InterfaceKey(uplink):                   &vppmodel.Nat44Interface{Interface: uplink, OutputFeature: true},
			vppmodel.Nat44InterfaceKey(hostIC):                   &vppmodel.Nat44Interface{Interface: hostIC, Inside: true, Outside: true},
		}, r.applied)
		noSNAT := cfg
		noSNAT.DisableSNAT, noSNAT.MaxSessions = true, 1000
		r = newRig(t, noSNAT)
		assert.NotContains(t, r.applied, vppmodel.Nat44InterfaceAddressPoolKey(uplink, false))
		assert.Equal(t, uint32(1000), r.applied[vppmodel.Nat44GlobalKey].(*vppmodel.Nat44Global).GetSessions())
	})

	t.Run("one backend: static mapping; two: load-balanced; weights; affinity", func(t *testing.T) {
		w := cfg
		w.LocalBackendWeight = 3
		r := newRig(t, w)
		s := service("web", "10.96.0.10", http)
		s.SessionAffinity, s.SessionAffinityTimeout = kubemodel.Service_CLIENT_IP, 600
		r.service(s)
		assert.Equal(t, []string{"+" + staticKey}, changed(r.endpoints(endpoints("web", []port{http}, p2))))
		equalState(t, controller.KeyValuePairs{staticKey: &vppmodel.Nat44StaticMapping{Protocol: vppmodel.Nat44Protocol_TCP,
			LocalIp: "10.1.1.2", LocalPort: 8080, ExternalIp: "10.96.0.10", ExternalPort: 80, Out2InOnly: true, SelfTwiceNat: true}},
			mappings(r.applied))
		assert.Equal(t, []string{"+" + lbKey, "-" + staticKey}, changed(r.endpoints(endpoints("web", []port{http}, p2, remote))))
		equalState(t, controller.KeyValuePairs{lbKey: &vppmodel.Nat44LbStaticMapping{Protocol: vppmodel.Nat44Protocol_TCP,
			ExternalIp: "10.96.0.10", ExternalPort: 80, Affinity: 600, Out2InOnly: true, SelfTwiceNat: true,
			Backends: []*vppmodel.Nat44Backend{{Ip: "10.1.1.2", Port: 8080, Probability: 6}, {Ip: "10.1.2.7", Port: 8080, Probability: 2}}}},
			mappings(r.applied))
		assert.Equal(t, []string{"+" + lbKey}, changed(r.endpoints(endpoints("web", []port{http}, p2, p3, remote))), "one backend more: one key")
		assert.Equal(t, []string{"+" + staticKey, "-" + lbKey}, changed(r.endpoints(endpoints("web", []port{http}, p3))))
		assert.Equal(t, []string{"-" + staticKey}, changed(r.endpoints(endpoints("web", []port{http}))), "no backend: no mapping")
	})

	t.Run("unchanged service: nothing written", func(t *testing.T) {
		r := newRig(t, cfg)
		r.service(service("web", "10.96.0.10", http))
		r.endpoints(endpoints("web", []port{http}, p2, p3))
		s := service("web", "10.96.0.10", http)
		s.Labels = map[string]string{"a": "b"} // not part of the view
		assert.Empty(t, r.service(s))
	})

	t.Run("SCTP is reported, not rendered", func(t *testing.T) {
		r := newRig(t, cfg)
		sctp := port{name: "sctp", proto: kubemodel.Protocol_SCTP, port: 9, target: 9}
		r.service(service("mixed", "10.96.0.10", http, sctp))
		r.endpoints(endpoints("mixed", []port{http, sctp}, p2, p3))
		assert.Equal(t, []string{lbKey}, keysOf(mappings(r.applied)), "the TCP port only, no UDP stand-in")
		assert.Equal(t, 1, r.nat.Stats().UnsupportedPorts)
		assert.Contains(t, r.logs.String(), "cannot translate")
		assert.Contains(t, r.logs.String(), "default/mixed")
		// Logged once, when it appears: not again for a change of the
		// service's backends, nor at a resync (CONTRIBUTING R10).
		r.endpoints(endpoints("mixed", []port{http, sctp}, p2))
		r.resync()
		assert.Equal(t, 1, strings.Count(r.logs.String(), "cannot translate"), r.logs.String())
		assert.Equal(t, 1, r.nat.Stats().UnsupportedPorts)
		r.kube(kubemodel.ServiceResource, kubemodel.ServiceKey("default", "mixed"), nil)
		assert.Zero(t, r.nat.Stats().UnsupportedPorts)
	})

	t.Run("IPv6 addresses are counted, not rendered", func(t *testing.T) {
		r := newRig(t, cfg)
		s := service("dual", "10.96.0.10", http)
		s.ClusterIps = append(s.ClusterIps, "fd00:96::10")
		r.service(s)
		r.endpoints(endpoints("dual", []port{http}, p2, p3))
		assert.Equal(t, []string{lbKey}, keysOf(mappings(r.applied)))
		assert.Equal(t, 1, r.nat.Stats().IPv6Frontends)
	})

	t.Run("conflicting services: the first by name has the frontend", func(t *testing.T) {
		r := newRig(t, cfg)
		r.service(service("b", "10.96.0.10", http))
		r.endpoints(endpoints("b", []port{http}, p2, p3))
		assert.Empty(t, r.service(service("a", "10.96.0.10", http)), "a has no backends: it wants no mapping")
		assert.Zero(t, r.nat.Stats().Conflicts)
		// a (one backend) takes it from b: its static mapping replaces b's
		// load-balanced one.
		assert.Equal(t, []string{"+" + staticKey, "-" + lbKey}, changed(r.endpoints(endpoints("a", []port{http}, p4))))
		assert.Equal(t, 1, r.nat.Stats().Conflicts)
		assert.Contains(t, r.logs.String(), "same NAT44 frontend")
		assert.Equal(t, "10.1.1.4", r.applied[staticKey].(*vppmodel.Nat44StaticMapping).GetLocalIp())
		// Logged once, when it appears: not again at a resync.
		r.resync()
		assert.Equal(t, 1, strings.Count(r.logs.String(), "same NAT44 frontend"), r.logs.String())
		assert.Equal(t, 1, r.nat.Stats().Conflicts)
		assert.Equal(t, "10.1.1.4", r.applied[staticKey].(*vppmodel.Nat44StaticMapping).GetLocalIp())
		assert.Equal(t, []string{"+" + lbKey, "-" + staticKey}, changed(r.kube(kubemodel.ServiceResource, kubemodel.ServiceKey("default", "a"), nil)),
			"a goes: b gets it back")
		assert.Zero(t, r.nat.Stats().Conflicts)
	})

	t.Run("interfaces follow the processor's sets", func(t *testing.T) {
		r := newRig(t, cfg)
		r.service(service("web", "10.96.0.10", http))
		assert.Equal(t, []string{"+" + vppmodel.Nat44InterfaceKey("pod-p2")}, changed(r.addPod("p2")))
		protoEqual(t, &vppmodel.Nat44Interface{Interface: "pod-p2", Outside: true}, r.applied[vppmodel.Nat44InterfaceKey("pod-p2")])
		got := changed(r.endpoints(endpoints("web", []port{http}, p2)))
		assert.Equal(t, []string{"+" + vppmodel.Nat44InterfaceKey("pod-p2"), "+" + staticKey}, got)
		protoEqual(t, &vppmodel.Nat44Interface{Interface: "pod-p2", Inside: true, Outside: true}, r.applied[vppmodel.Nat44InterfaceKey("pod-p2")])
		assert.Equal(t, []string{"-" + vppmodel.Nat44InterfaceKey("pod-p2")}, changed(r.deletePod("p2")))
		assert.Equal(t, 0, r.nat.Stats().Interfaces)
	})

	t.Run("node ports follow this node's addresses", func(t *testing.T) {
		r := newRig(t, cfg)
		np := http
		np.nodePort = 30080
		r.service(service("web", "10.96.0.10", np))
		r.endpoints(endpoints("web", []port{np}, p2, p3))
		at := func(ip string) string {
			return vppmodel.Nat44LbStaticMappingKey(vppmodel.Nat44Protocol_TCP, netip.MustParseAddr(ip), 30080)
		}
		assert.Equal(t, []string{lbKey, at(nodeIP)}, keysOf(mappings(r.applied)), "not on the other node's address")
		assert.Equal(t, []string{"+" + at("192.168.16.9"), "-" + at(nodeIP)},
			changed(r.nodeIPsChanged([]netip.Addr{netip.MustParseAddr("192.168.16.9")}, netip.MustParseAddr(otherNode))))
		assert.Empty(t, r.nodeIPsChanged([]netip.Addr{netip.MustParseAddr("192.168.16.9")}, netip.MustParseAddr("192.168.16.3")),
			"another node changes: nothing here")
	})

	t.Run("without a transaction the record follows", func(t *testing.T) {
		r := newRig(t, cfg)
		r.service(service("web", "10.96.0.10", http))
		r.endpoints(endpoints("web", []port{http}, p2, p3))
		// A failed AddPod is reverted without a transaction: the processor
		// removes the interface again, and so does the renderer's record.
		id := kubemodel.PodID{Namespace: "default", Name: "p4"}
		r.pods.Connect(id, "pod-p4")
		add := controller.NewAddPodEvent(id, "c", "/ns")
		txn := controllertest.NewTxn()
		_, err := r.sp.Handler().Update(add, txn)
		require.NoError(t, err)
		assert.Contains(t, txn.Values(), vppmodel.Nat44InterfaceKey("pod-p4"))
		require.NoError(t, r.sp.Handler().Revert(add)) // the loop drops txn
		r.pods.Disconnect(id)
		assert.Equal(t, 0, r.nat.Stats().Interfaces)
		want, _ := r.fresh(cfg)
		equalState(t, want, r.applied)
	})
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

// mappings returns the static and load-balanced mappings of a state.
func mappings(kv controller.KeyValuePairs) controller.KeyValuePairs {
	out := controller.KeyValuePairs{}
	for k, v := range kv {
		if strings.HasPrefix(k, vppmodel.Nat44StaticMappingKeyPrefix) || strings.HasPrefix(k, vppmodel.Nat44LbStaticMappingKeyPrefix) {
			out[k] = v
		}
	}
	return out
}

func protoEqual(t testing.TB, want, got proto.Message) {
	t.Helper()
	assert.True(t, proto.Equal(want, got), "want %v, got %v", want, got)
}

// TestNATLoopbackProblemLoggedOnce: a NAT loopback address that is not
// known yet is logged at Warn at the first resync only, and its arrival
// at Info (CONTRIBUTING R10).
func TestNATLoopbackProblemLoggedOnce(t *testing.T) {
	var logs bytes.Buffer
	var loopback netip.Addr
	nat, err := svcnat.New(svcprocessortest.NewNodeIPs(netip.MustParseAddr(nodeIP)),
		svcnat.NATLoopbackFunc(func() netip.Addr { return loopback }),
		svcnat.Config{Uplink: uplink, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	resync := func() {
		t.Helper()
		require.NoError(t, nat.Render(svcprocessor.RenderEvent{Kind: svcprocessor.Resync, Snapshot: &svcprocessor.Snapshot{},
			ResyncTxn: controllertest.NewTxn()}))
	}
	resync()
	resync()
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
	assert.False(t, nat.Stats().TwiceNATPool, "what is not rendered is in Stats too")
	loopback = netip.MustParseAddr("172.30.1.254")
	resync()
	resync()
	assert.True(t, nat.Stats().TwiceNATPool)
	assert.Equal(t, 1, strings.Count(logs.String(), "twice-NAT pool rendered"), logs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"))
}

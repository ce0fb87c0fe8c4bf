package bgpsource_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/testseed"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/render/bgpsource"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
)

func k8sNode(labels map[string]string, podCIDRs ...string) *kubemodel.Node {
	return &kubemodel.Node{Name: "n1", Labels: labels, PodCidrs: podCIDRs,
		Annotations: map[string]string{bgp.AnnotationPrefix + "65001": "local-port=1790"},
		Addresses:   []*kubemodel.NodeAddress{{Type: kubemodel.NodeAddress_INTERNAL_IP, Address: "10.0.0.1"}}}
}

func resync(t *testing.T, s *bgpsource.Source, kv map[string]controller.KeyValuePairs) {
	t.Helper()
	ks := controller.NewKubeStateData()
	for r, pairs := range kv {
		ks[r] = pairs
	}
	require.NoError(t, s.Resync(controller.NewDBResync(), ks, 1, controllertest.NewTxn()))
}

func drained(sig bgp.Signaler) bool {
	select {
	case <-sig.Sig:
		return true
	default:
		return false
	}
}

func TestNew(t *testing.T) {
	_, err := bgpsource.New("bad name!", bgp.Signaler{}, bgpsource.Config{PodSubnets: []bgpsource.PodSubnets{nil},
		IPv4: netip.MustParseAddr("fd00::1"), IPv6: netip.MustParseAddr("10.0.0.1")})
	require.Error(t, err)
	for _, want := range []string{"Signaler", "PodSubnets[0]", "Config.IPv4", "Config.IPv6", "node name"} {
		assert.ErrorContains(t, err, want)
	}
	s, err := bgpsource.New("n1", bgp.NewSignaler(), bgpsource.Config{})
	require.NoError(t, err)
	assert.Equal(t, "bgpsource", s.String())
	assert.Nil(t, s.Node(), "unknown before the first resync")
	assert.Empty(t, s.ListServices())
}

func TestHandlesEvent(t *testing.T) {
	s, err := bgpsource.New("n1", bgp.NewSignaler(), bgpsource.Config{})
	require.NoError(t, err)
	tests := []struct {
		ev   controller.Event
		want bool
	}{
		{controller.NewDBResync(), true},
		{&ipam.PodCIDRChange{}, true},
		{&controller.KubeStateChange{Resource: kubemodel.NodeResource, Key: kubemodel.NodeKey("n1")}, true},
		{&controller.KubeStateChange{Resource: bgpmodel.PolicyResourceName, Key: bgpmodel.PolicyKey("p")}, true},
		{&controller.KubeStateChange{Resource: kubemodel.ServiceResource, Key: kubemodel.ServiceKey("a", "b")}, true},
		{&controller.KubeStateChange{Resource: kubemodel.PodResource, Key: kubemodel.PodKey("a", "b")}, false},
		{&controller.KubeStateChange{Resource: kubemodel.EndpointsResource, Key: kubemodel.EndpointsKey("a", "b")}, false},
		{&nodesync.NodeUpdate{NodeName: "n1"}, true},
		{&nodesync.NodeUpdate{NodeName: "n2"}, false},
		{controller.NewAddPodEvent(kubemodel.PodID{Namespace: "a", Name: "b"}, "c", "/ns"), false},
	}
	for _, tt := range tests {
		t.Run(tt.ev.String(), func(t *testing.T) {
			assert.Equal(t, tt.want, s.HandlesEvent(tt.ev))
		})
	}
}

// TestNodeComposition: labels and annotations from the node object, pod
// CIDRs from IPAM, addresses from the config, node sync or the object.
func TestNodeComposition(t *testing.T) {
	v4 := netip.MustParsePrefix("10.1.5.0/24")
	var v6 netip.Prefix // not known yet
	nodes := nodesync.Nodes{"n1": {Name: "n1", VppIPAddresses: nodesync.IPsWithNetworks{
		{Address: netip.MustParseAddr("fd00:16::5"), Network: netip.MustParsePrefix("fd00:16::/64")},
		{Address: netip.MustParseAddr("192.168.16.5"), Network: netip.MustParsePrefix("192.168.16.0/24")},
		{Address: netip.MustParseAddr("192.168.16.6"), Network: netip.MustParsePrefix("192.168.16.0/24")},
	}}}
	sig := bgp.NewSignaler()
	s, err := bgpsource.New("n1", sig, bgpsource.Config{
		PodSubnets: []bgpsource.PodSubnets{bgpsource.PodSubnetsFunc(func() netip.Prefix { return v4 }), bgpsource.PodSubnetsFunc(func() netip.Prefix { return v6 })},
		Nodes:      bgpsource.NodeListerFunc(func() nodesync.Nodes { return nodes }),
	})
	require.NoError(t, err)
	resync(t, s, map[string]controller.KeyValuePairs{kubemodel.NodeResource: {kubemodel.NodeKey("n1"): k8sNode(map[string]string{"rack": "r1"}, "10.244.0.0/24")}})
	assert.True(t, drained(sig), "resync signals")

	n := s.Node()
	require.NotNil(t, n)
	assert.Equal(t, map[string]string{"rack": "r1"}, n.GetLabels())
	assert.Equal(t, "local-port=1790", n.GetAnnotations()[bgp.AnnotationPrefix+"65001"])
	assert.Equal(t, []string{"10.1.5.0/24"}, n.GetPodCidrs(), "IPAM's pod CIDR replaces spec.podCIDRs")
	state := controllerState(t, n)
	assert.Equal(t, "192.168.16.5", state.v4, "node sync's first VPP IPv4 address")
	assert.Equal(t, "fd00:16::5", state.v6)

	v6 = netip.MustParsePrefix("fd00:10:244:5::/120")
	assert.Equal(t, []string{"10.1.5.0/24", "fd00:10:244:5::/120"}, s.Node().GetPodCidrs(), "read when asked")

	// NodeUpdate of this node: new VPP addresses.
	_, err = s.Update(&nodesync.NodeUpdate{NodeName: "n1", NewState: &nodesync.Node{Name: "n1", VppIPAddresses: nodesync.IPsWithNetworks{
		{Address: netip.MustParseAddr("192.168.16.9"), Network: netip.MustParsePrefix("192.168.16.0/24")}}}}, controllertest.NewTxn())
	require.NoError(t, err)
	assert.True(t, drained(sig))
	state = controllerState(t, s.Node())
	assert.Equal(t, "192.168.16.9", state.v4)
	assert.Equal(t, "", state.v6, "no VPP IPv6 address any more, none on the node object")
	_, err = s.Update(&nodesync.NodeUpdate{NodeName: "n1", NewState: &nodesync.Node{Name: "n1", VppIPAddresses: nodesync.IPsWithNetworks{
		{Address: netip.MustParseAddr("192.168.16.9"), Network: netip.MustParsePrefix("192.168.16.0/24")}}}}, controllertest.NewTxn())
	require.NoError(t, err)
	assert.False(t, drained(sig), "no change, no signal")

	// A label change of the node object signals.
	_, err = s.Update(&controller.KubeStateChange{Resource: kubemodel.NodeResource, Key: kubemodel.NodeKey("n1"),
		NewValue: k8sNode(map[string]string{"rack": "r2"}, "10.244.0.0/24")}, controllertest.NewTxn())
	require.NoError(t, err)
	assert.True(t, drained(sig))
	assert.Equal(t, "r2", s.Node().GetLabels()["rack"])

	// Static addresses win; without IPAM the object's pod CIDRs count.
	s2, err := bgpsource.New("n1", sig, bgpsource.Config{IPv4: netip.MustParseAddr("203.0.113.1"),
		Nodes: bgpsource.NodeListerFunc(func() nodesync.Nodes { return nodes })})
	require.NoError(t, err)
	resync(t, s2, map[string]controller.KeyValuePairs{kubemodel.NodeResource: {kubemodel.NodeKey("n1"): k8sNode(nil, "10.244.0.0/24")}})
	state = controllerState(t, s2.Node())
	assert.Equal(t, "203.0.113.1", state.v4)
	assert.Equal(t, "fd00:16::5", state.v6)
	assert.Equal(t, []string{"10.244.0.0/24"}, s2.Node().GetPodCidrs())

	// Without node sync or config: the object's InternalIP.
	s3, err := bgpsource.New("n1", sig, bgpsource.Config{})
	require.NoError(t, err)
	resync(t, s3, map[string]controller.KeyValuePairs{kubemodel.NodeResource: {kubemodel.NodeKey("n1"): k8sNode(nil)}})
	assert.Equal(t, "10.0.0.1", controllerState(t, s3.Node()).v4)
}

type addrs struct{ v4, v6 string }

// controllerState runs a bgp.Controller over the node and returns the
// addresses it derives.
func controllerState(t *testing.T, n *kubemodel.Node) addrs {
	t.Helper()
	var got addrs
	mgr := bgp.ConfigurePeersFunc(func(_ context.Context, _ *bgp.PeeringPolicy, st *bgp.ControlPlaneState) error {
		if st.IPv4 != nil {
			got.v4 = st.IPv4.String()
		}
		if st.IPv6 != nil {
			got.v6 = st.IPv6.String()
		}
		return nil
	})
	p := &bgp.PeeringPolicy{Name: "p", VirtualRouters: []bgp.VirtualRouter{{LocalASN: 65001,
		Neighbors: []bgp.Neighbor{{PeerAddress: netip.MustParseAddr("10.0.0.254"), PeerASN: 65000}}}}}
	c, err := bgp.NewController(mgr, bgp.NodeSourceFunc(func() *kubemodel.Node { return n }),
		bgp.PolicySourceFunc(func() []*bgp.PeeringPolicy { return []*bgp.PeeringPolicy{p} }), bgp.ControllerConfig{})
	require.NoError(t, err)
	require.NoError(t, c.Reconcile(context.Background()))
	return got
}

func lbService(ns, name string, ip string, mut ...func(*kubemodel.Service)) *kubemodel.Service {
	s := &kubemodel.Service{Namespace: ns, Name: name, Type: kubemodel.Service_LOAD_BALANCER, Labels: map[string]string{"app": name},
		ClusterIps: []string{"10.96.0.1"}, LbIngressIps: []string{ip}}
	for _, m := range mut {
		m(s)
	}
	return s
}

func contiv(id kubemodel.ServiceID, backends ...svcprocessor.ServiceBackend) *svcprocessor.ContivService {
	return &svcprocessor.ContivService{ID: id, Ports: []svcprocessor.ServicePort{{Name: "http", Port: 80, Backends: backends}}}
}

func sorted(svcs []bgp.Service) []bgp.Service {
	slices.SortFunc(svcs, func(a, b bgp.Service) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return svcs
}

// ranged collects what RangeServices yields.
func ranged(s *bgpsource.Source) []bgp.Service {
	var out []bgp.Service
	for svc := range s.RangeServices {
		out = append(out, *svc)
	}
	return out
}

func TestServices(t *testing.T) {
	sig := bgp.NewSignaler()
	s, err := bgpsource.New("n1", sig, bgpsource.Config{})
	require.NoError(t, err)
	web := kubemodel.ServiceID{Namespace: "prod", Name: "web"}
	resync(t, s, map[string]controller.KeyValuePairs{kubemodel.ServiceResource: {
		kubemodel.ServiceKey("prod", "web"): lbService("prod", "web", "192.0.2.1", func(s *kubemodel.Service) {
			s.ExternalTrafficPolicy = kubemodel.Service_LOCAL
		}),
		kubemodel.ServiceKey("prod", "db"): lbService("", "", "192.0.2.2"), // names from the key
	}})
	drained(sig)
	got := sorted(s.ListServices())
	require.Len(t, got, 2)
	assert.Equal(t, "db", got[0].Name)
	assert.Equal(t, "prod", got[0].Namespace)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("192.0.2.1")}, got[1].LoadBalancerIPs)
	assert.True(t, got[1].ExternalTrafficPolicyLocal)
	assert.False(t, got[1].HasLocalBackend)

	local := svcprocessor.ServiceBackend{IP: netip.MustParseAddr("10.1.1.5"), Port: 8080, Local: true, Ready: true}
	remote := svcprocessor.ServiceBackend{IP: netip.MustParseAddr("10.1.2.5"), Port: 8080, Ready: true}
	terminating := local
	terminating.Terminating = true
	steps := []struct {
		name   string
		ev     svcprocessor.RenderEvent
		local  bool
		signal bool
	}{
		{"remote backend only", svcprocessor.RenderEvent{Kind: svcprocessor.ServiceAdded, NewService: contiv(web, remote)}, false, false},
		{"local ready backend", svcprocessor.RenderEvent{Kind: svcprocessor.ServiceUpdated, NewService: contiv(web, remote, local)}, true, true},
		{"same again", svcprocessor.RenderEvent{Kind: svcprocessor.ServiceUpdated, NewService: contiv(web, local)}, true, false},
		{"local backend terminating", svcprocessor.RenderEvent{Kind: svcprocessor.ServiceUpdated, NewService: contiv(web, remote, terminating)}, false, true},
		{"resync with a local backend", svcprocessor.RenderEvent{Kind: svcprocessor.Resync, Snapshot: &svcprocessor.Snapshot{
			Services: []*svcprocessor.ContivService{contiv(web, local)}}}, true, true},
		{"node IPs do not matter", svcprocessor.RenderEvent{Kind: svcprocessor.NodeIPsChanged}, true, false},
		{"deleted", svcprocessor.RenderEvent{Kind: svcprocessor.ServiceDeleted, OldService: contiv(web, local)}, false, true},
	}
	for _, st := range steps {
		require.NoError(t, s.Render(st.ev), st.name)
		got := sorted(s.ListServices())
		assert.Equal(t, got, sorted(ranged(s)), "RangeServices and ListServices: %s", st.name)
		assert.Equal(t, st.local, got[1].HasLocalBackend, st.name)
		assert.Equal(t, st.signal, drained(sig), st.name)
	}

	n := 0
	s.RangeServices(func(*bgp.Service) bool { n++; return false })
	assert.Equal(t, 1, n, "RangeServices stops when yield returns false (of 2 services)")

	// Service changes through the loop.
	update := func(key string, v *kubemodel.Service) string {
		ev := &controller.KubeStateChange{Resource: kubemodel.ServiceResource, Key: key, NewValue: v}
		if v == nil {
			ev.NewValue = nil
		}
		desc, err := s.Update(ev, controllertest.NewTxn())
		require.NoError(t, err)
		return desc
	}
	update(kubemodel.ServiceKey("prod", "web"), lbService("prod", "web", "192.0.2.11"))
	assert.True(t, drained(sig))
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("192.0.2.11")}, sorted(s.ListServices())[1].LoadBalancerIPs)
	noop := lbService("prod", "web", "192.0.2.11")
	noop.Annotations = map[string]string{"a": "b"}
	noop.Ports = []*kubemodel.ServicePort{{Name: "http", Port: 80}}
	assert.Empty(t, update(kubemodel.ServiceKey("prod", "web"), noop))
	assert.False(t, drained(sig), "ports and annotations do not matter to BGP")
	update(kubemodel.ServiceKey("prod", "db"), nil)
	assert.True(t, drained(sig))
	assert.Len(t, s.ListServices(), 1)
	assert.Empty(t, update(kubemodel.ServiceKey("prod", "gone"), nil), "deleting an unknown service is no change")
	assert.Empty(t, update("k8s/service/bad key", lbService("a", "b", "192.0.2.9")), "malformed keys are ignored")

	assert.Equal(t, sorted(s.ListServices()), sorted(ranged(s)))

	// ListServices returns a new slice each time.
	l := s.ListServices()
	l[0].Name = "changed"
	assert.Equal(t, "web", s.ListServices()[0].Name)
}

// TestServicesModel applies random service changes and local-backend
// renders incrementally and compares the result with a fresh resync of the
// final state.
func TestServicesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Fixed(t, 1), 2))
	sig := bgp.NewSignaler()
	s, err := bgpsource.New("n1", sig, bgpsource.Config{})
	require.NoError(t, err)
	resync(t, s, nil)
	state := make(controller.KeyValuePairs)
	local := make(map[kubemodel.ServiceID]bool)
	for step := range 3000 {
		i := rng.IntN(40)
		id := kubemodel.ServiceID{Namespace: fmt.Sprintf("ns%d", i%3), Name: fmt.Sprintf("svc%d", i)}
		key := kubemodel.ServiceKey(id.Namespace, id.Name)
		switch rng.IntN(4) {
		case 0:
			delete(state, key)
			_, err = s.Update(&controller.KubeStateChange{Resource: kubemodel.ServiceResource, Key: key}, controllertest.NewTxn())
		case 1:
			v := lbService(id.Namespace, id.Name, fmt.Sprintf("192.0.2.%d", rng.IntN(250)))
			state[key] = v
			_, err = s.Update(&controller.KubeStateChange{Resource: kubemodel.ServiceResource, Key: key, NewValue: v}, controllertest.NewTxn())
		default:
			l := rng.IntN(2) == 0
			b := svcprocessor.ServiceBackend{IP: netip.MustParseAddr("10.1.1.1"), Ready: true, Local: l}
			if l {
				local[id] = true
			} else {
				delete(local, id)
			}
			err = s.Render(svcprocessor.RenderEvent{Kind: svcprocessor.ServiceUpdated, NewService: contiv(id, b)})
		}
		require.NoError(t, err, "step %d", step)
	}
	fresh, err := bgpsource.New("n1", bgp.NewSignaler(), bgpsource.Config{})
	require.NoError(t, err)
	var snap []*svcprocessor.ContivService
	for id := range local {
		snap = append(snap, contiv(id, svcprocessor.ServiceBackend{IP: netip.MustParseAddr("10.1.1.1"), Ready: true, Local: true}))
	}
	require.NoError(t, fresh.Render(svcprocessor.RenderEvent{Kind: svcprocessor.Resync, Snapshot: &svcprocessor.Snapshot{Services: snap}}))
	resync(t, fresh, map[string]controller.KeyValuePairs{kubemodel.ServiceResource: state})
	assert.Equal(t, sorted(fresh.ListServices()), sorted(s.ListServices()))
	assert.Len(t, s.ListServices(), len(state))
}

// BenchmarkReconcileServices10k is what a BGP reconcile does with the
// services of a large cluster (10000, one in fifty a LoadBalancer service):
// compute a virtual router's service prefixes from the source, through a
// copy (ListServices, what a manager did before bgp.ServiceRanger) or in
// place (RangeServices).
func BenchmarkReconcileServices10k(b *testing.B) {
	s, err := bgpsource.New("n1", bgp.NewSignaler(), bgpsource.Config{})
	require.NoError(b, err)
	svcs := controller.KeyValuePairs{}
	for i := range 10000 {
		m := &kubemodel.Service{Namespace: "ns", Name: fmt.Sprintf("svc-%d", i), Labels: map[string]string{"app": "web"},
			ClusterIps: []string{fmt.Sprintf("10.96.%d.%d", i>>8, i&255)}}
		if i%50 == 1 {
			m.Type, m.Labels["bgp"], m.LbIngressIps = kubemodel.Service_LOAD_BALANCER, "on", []string{fmt.Sprintf("198.18.%d.%d", i>>8, i&255)}
		}
		svcs[kubemodel.ServiceKey(m.Namespace, m.Name)] = m
	}
	require.NoError(b, s.Resync(controller.NewDBResync(), controller.KubeStateData{kubemodel.ServiceResource: svcs}, 1, controllertest.NewTxn()))
	p := &bgp.PeeringPolicy{VirtualRouters: []bgp.VirtualRouter{{LocalASN: 1,
		ServiceSelector: &bgp.LabelSelector{MatchLabels: map[string]string{"bgp": "on"}}}}}
	vr := p.WithDefaults().VirtualRouters[0]
	for _, tc := range []struct {
		name string
		get  func() ([]netip.Prefix, error)
	}{
		{"ListServices", func() ([]netip.Prefix, error) { return vr.ServicePrefixes(s.ListServices()) }},
		{"RangeServices", func() ([]netip.Prefix, error) { return vr.ServicePrefixesOf(s.RangeServices) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got, err := tc.get(); err != nil || len(got) != 200 {
					b.Fatal(len(got), err)
				}
			}
		})
	}
}

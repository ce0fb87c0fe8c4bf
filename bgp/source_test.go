package bgp_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgptest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

func TestStore(t *testing.T) {
	sig := bgp.NewSignaler()
	s := bgp.NewStore(sig)
	assert.Nil(t, s.Node())

	n := node(map[string]string{"a": "b"})
	s.SetNode(n)
	require.Len(t, sig.Sig, 1)
	<-sig.Sig
	s.SetNode(node(map[string]string{"a": "b"}))
	assert.Empty(t, sig.Sig, "an identical node is not a change")
	got := s.Node()
	got.Labels["a"] = "changed"
	assert.Equal(t, "b", s.Node().Labels["a"], "Node returns a copy")

	s.SetPolicy(policyFor("b", nil))
	s.SetPolicy(policyFor("a", nil))
	<-sig.Sig
	ps := s.Policies()
	require.Len(t, ps, 2)
	assert.Equal(t, "a", ps[0].Name)
	ps[0].VirtualRouters[0].LocalASN = 1
	assert.Equal(t, uint32(65001), s.Policies()[0].VirtualRouters[0].LocalASN, "Policies returns copies")
	s.DeletePolicy("missing")
	assert.Empty(t, sig.Sig)
	s.DeletePolicy("a")
	assert.Len(t, sig.Sig, 1)
	<-sig.Sig
	s.ReplacePolicies([]*bgp.PeeringPolicy{policyFor("c", nil)})
	assert.Equal(t, "c", s.Policies()[0].Name)
	<-sig.Sig

	svc := bgp.Service{Namespace: "ns", Name: "web", Labels: map[string]string{"a": "b"}, LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}
	s.SetService(svc)
	svc.Labels["a"] = "changed"
	svc.LoadBalancerIPs[0] = netip.MustParseAddr("192.0.2.2")
	svcs := s.ListServices()
	require.Len(t, svcs, 1)
	assert.Equal(t, "b", svcs[0].Labels["a"], "SetService copies")
	assert.Equal(t, netip.MustParseAddr("192.0.2.1"), svcs[0].LoadBalancerIPs[0], "SetService copies")
	s.DeleteService("ns", "web")
	assert.Empty(t, s.ListServices())
}

func TestServiceFromModel(t *testing.T) {
	svc := bgp.ServiceFromModel(&kubemodel.Service{Namespace: "ns", Name: "lb", Type: kubemodel.Service_LOAD_BALANCER,
		Labels: map[string]string{"x": "y"}, LbIngressIps: []string{"192.0.2.7", "bad", "2001:db8::7"},
		ClusterIps: []string{"10.96.0.7", "fd00:96::7"}, ExternalIps: []string{"198.51.100.7", "::ffff:198.51.100.8"},
		LoadBalancerClass: "example.com/lb", ExternalTrafficPolicy: kubemodel.Service_LOCAL})
	want := bgp.Service{Namespace: "ns", Name: "lb", Labels: map[string]string{"x": "y"},
		ClusterIPs:                 []netip.Addr{netip.MustParseAddr("10.96.0.7"), netip.MustParseAddr("fd00:96::7")},
		ExternalIPs:                []netip.Addr{netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("198.51.100.8")},
		LoadBalancerIPs:            []netip.Addr{netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("2001:db8::7")},
		LoadBalancerClass:          "example.com/lb",
		ExternalTrafficPolicyLocal: true,
	}
	assert.Equal(t, want, svc)
	headless := bgp.ServiceFromModel(&kubemodel.Service{Type: kubemodel.Service_CLUSTER_IP, ClusterIps: []string{"None"},
		LbIngressIps: []string{"192.0.2.9"}, InternalTrafficPolicy: kubemodel.Service_LOCAL})
	assert.Empty(t, headless.ClusterIPs, "headless: no cluster IP")
	assert.Empty(t, headless.LoadBalancerIPs, "ingress IPs count only for LoadBalancer services")
	assert.True(t, headless.InternalTrafficPolicyLocal)
}

func TestFakeManagerDetectsConcurrentCalls(t *testing.T) {
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(2)
	mgr := &bgptest.FakeManager{ConfigurePeersFunc: func(context.Context, *bgp.PeeringPolicy, *bgp.ControlPlaneState) error {
		entered.Done()
		<-release
		return nil
	}}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { _ = mgr.ConfigurePeers(context.Background(), nil, nil) })
	}
	entered.Wait()
	close(release)
	wg.Wait()
	assert.True(t, mgr.Concurrent())
	assert.Len(t, mgr.Calls(), 2)
}

package gobgp

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// TestServiceAdvertisements applies each service advertisement option to a
// real peer and checks what it receives.
func TestServiceAdvertisements(t *testing.T) {
	ctx := context.Background()
	local := netip.MustParseAddr("127.0.0.41")
	peer := startTestPeer(t, "127.0.0.42", 65042, peerOpts{neighbor: local, asn: 65041})
	store := bgp.NewStore(bgp.Signaler{})
	m := runManager(t, Config{Services: store})
	state := testState(testNode())
	state.IPv4 = local.AsSlice()

	svc := func(name string, m *kubemodel.Service) {
		m.Namespace, m.Name = "prod", name
		s := bgp.ServiceFromModel(m)
		s.HasLocalBackend = name == "local-backend"
		store.SetService(s)
	}
	lb := kubemodel.Service_LOAD_BALANCER
	svc("web", &kubemodel.Service{Type: lb, Labels: map[string]string{"bgp": "on"},
		ClusterIps: []string{"10.96.0.1", "fd00:96::1"}, ExternalIps: []string{"198.51.100.1"}, LbIngressIps: []string{"192.0.2.1", "2001:db8::1"}})
	svc("unlabelled", &kubemodel.Service{Type: lb, ClusterIps: []string{"10.96.0.2"}, LbIngressIps: []string{"192.0.2.2"}})
	svc("other-class", &kubemodel.Service{Type: lb, Labels: map[string]string{"bgp": "on"}, LoadBalancerClass: "metallb.io/x",
		ClusterIps: []string{"10.96.0.3"}, LbIngressIps: []string{"192.0.2.3"}})
	svc("our-class", &kubemodel.Service{Type: lb, Labels: map[string]string{"bgp": "on"}, LoadBalancerClass: bgp.DefaultLoadBalancerClass,
		LbIngressIps: []string{"192.0.2.4"}})
	svc("etp-local", &kubemodel.Service{Type: lb, Labels: map[string]string{"bgp": "on"}, ExternalTrafficPolicy: kubemodel.Service_LOCAL,
		ClusterIps: []string{"10.96.0.5"}, ExternalIps: []string{"198.51.100.5"}, LbIngressIps: []string{"192.0.2.5"}})
	svc("local-backend", &kubemodel.Service{Type: lb, Labels: map[string]string{"bgp": "on"}, ExternalTrafficPolicy: kubemodel.Service_LOCAL,
		InternalTrafficPolicy: kubemodel.Service_LOCAL, ClusterIps: []string{"10.96.0.6"}, LbIngressIps: []string{"192.0.2.6"}})
	svc("itp-local", &kubemodel.Service{Type: kubemodel.Service_CLUSTER_IP, Labels: map[string]string{"bgp": "on"},
		InternalTrafficPolicy: kubemodel.Service_LOCAL, ClusterIps: []string{"10.96.0.7"}})

	on := &bgp.LabelSelector{MatchLabels: map[string]string{"bgp": "on"}}
	tests := []struct {
		name     string
		selector *bgp.LabelSelector
		types    []bgp.ServiceAddressType
		classes  []string
		want4    []string
		want6    []string
	}{
		{name: "no selector, no service", selector: nil},
		{name: "default: load-balancer IPs of our class or none, eTP Local only with a local backend", selector: on,
			want4: []string{"192.0.2.1/32", "192.0.2.4/32", "192.0.2.6/32"}, want6: []string{"2001:db8::1/128"}},
		{name: "cluster IPs, iTP Local only with a local backend", selector: on, types: []bgp.ServiceAddressType{bgp.ClusterIPAddresses},
			want4: []string{"10.96.0.1/32", "10.96.0.3/32", "10.96.0.5/32", "10.96.0.6/32"}, want6: []string{"fd00:96::1/128"}},
		{name: "external IPs, eTP Local only with a local backend", selector: on, types: []bgp.ServiceAddressType{bgp.ExternalIPAddresses},
			want4: []string{"198.51.100.1/32"}},
		{name: "another load-balancer class", selector: on, classes: []string{"metallb.io/x"},
			want4: []string{"192.0.2.1/32", "192.0.2.3/32", "192.0.2.6/32"}, want6: []string{"2001:db8::1/128"}},
		{name: "selected by name label", selector: &bgp.LabelSelector{MatchLabels: map[string]string{bgp.ServiceNameLabel: "unlabelled"}},
			types: []bgp.ServiceAddressType{bgp.LoadBalancerIPAddresses, bgp.ClusterIPAddresses}, want4: []string{"10.96.0.2/32", "192.0.2.2/32"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPolicy(65041, neighborOf(peer, "127.0.0.41"))
			p.VirtualRouters[0].ExportPodCIDR = false
			p.VirtualRouters[0].ServiceSelector = tt.selector
			p.VirtualRouters[0].ServiceAdvertisements = tt.types
			p.VirtualRouters[0].LoadBalancerClasses = tt.classes
			require.NoError(t, m.ConfigurePeers(ctx, p, state))
			var got4, got6 []string
			require.Eventually(t, func() bool {
				got4 = prefixStrings(peer.received(t, "v4"))
				got6 = prefixStrings(peer.received(t, "v6"))
				return slices.Equal(got4, tt.want4) && slices.Equal(got6, tt.want6)
			}, waitFor, 20*time.Millisecond, "peer has %v %v", got4, got6)
		})
	}
}

func prefixStrings(m map[netip.Prefix]netip.Addr) []string {
	var out []string
	for _, p := range slices.SortedFunc(maps.Keys(m), func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) }) {
		out = append(out, p.String())
	}
	return out
}

// rangerOnly is a lister whose services must be read in place: its
// ListServices fails the test.
type rangerOnly struct {
	t        *testing.T
	services []bgp.Service
	ranges   atomic.Int32
}

func (r *rangerOnly) ListServices() []bgp.Service {
	r.t.Error("ListServices called on a bgp.ServiceRanger")
	return nil
}

func (r *rangerOnly) RangeServices(yield func(*bgp.Service) bool) {
	r.ranges.Add(1)
	for i := range r.services {
		if !yield(&r.services[i]) {
			return
		}
	}
}

// TestServiceRangerReadInPlace: a lister that is a bgp.ServiceRanger is
// read with RangeServices, never copied with ListServices, and its
// services are advertised.
func TestServiceRangerReadInPlace(t *testing.T) {
	ctx := context.Background()
	local := netip.MustParseAddr("127.0.0.43")
	peer := startTestPeer(t, "127.0.0.44", 65044, peerOpts{neighbor: local, asn: 65043})
	lister := &rangerOnly{t: t}
	for i, ip := range []string{"192.0.2.1", "192.0.2.2"} {
		s := bgp.ServiceFromModel(&kubemodel.Service{Type: kubemodel.Service_LOAD_BALANCER, Labels: map[string]string{"bgp": "on"},
			LbIngressIps: []string{ip}})
		s.Namespace, s.Name = "prod", []string{"a", "b"}[i]
		lister.services = append(lister.services, s)
	}
	m := runManager(t, Config{Services: lister})
	state := testState(testNode())
	state.IPv4 = local.AsSlice()
	p := testPolicy(65043, neighborOf(peer, "127.0.0.43"))
	p.VirtualRouters[0].ExportPodCIDR = false
	p.VirtualRouters[0].ServiceSelector = &bgp.LabelSelector{MatchLabels: map[string]string{"bgp": "on"}}
	require.NoError(t, m.ConfigurePeers(ctx, p, state))
	require.Eventually(t, func() bool {
		return slices.Equal(prefixStrings(peer.received(t, "v4")), []string{"192.0.2.1/32", "192.0.2.2/32"})
	}, waitFor, 20*time.Millisecond)
	require.Equal(t, int32(1), lister.ranges.Load())
}

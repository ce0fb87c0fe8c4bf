package bgp_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestServicePrefixes(t *testing.T) {
	web := bgp.Service{Namespace: "prod", Name: "web", Labels: map[string]string{"bgp": "on"},
		ClusterIPs: addrs("10.96.0.10", "fd00:96::10"), ExternalIPs: addrs("198.51.100.10"),
		LoadBalancerIPs: addrs("192.0.2.10", "2001:db8::10")}
	all := []bgp.ServiceAddressType{bgp.LoadBalancerIPAddresses, bgp.ClusterIPAddresses, bgp.ExternalIPAddresses}
	everything := &bgp.LabelSelector{}
	with := func(mut func(*bgp.Service)) bgp.Service {
		s := web
		mut(&s)
		return s
	}
	tests := []struct {
		name     string
		selector *bgp.LabelSelector
		types    []bgp.ServiceAddressType // nil: the default
		classes  []string                 // nil: the default
		services []bgp.Service
		want     []netip.Prefix
	}{
		{name: "nil selector advertises nothing", selector: nil, types: all, services: []bgp.Service{web}},
		{name: "default: load-balancer IPs only", selector: everything, services: []bgp.Service{web},
			want: prefixes("192.0.2.10/32", "2001:db8::10/128")},
		{name: "cluster IPs", selector: everything, types: []bgp.ServiceAddressType{bgp.ClusterIPAddresses}, services: []bgp.Service{web},
			want: prefixes("10.96.0.10/32", "fd00:96::10/128")},
		{name: "external IPs", selector: everything, types: []bgp.ServiceAddressType{bgp.ExternalIPAddresses}, services: []bgp.Service{web},
			want: prefixes("198.51.100.10/32")},
		{name: "all kinds, sorted", selector: everything, types: all, services: []bgp.Service{web},
			want: prefixes("10.96.0.10/32", "192.0.2.10/32", "198.51.100.10/32", "2001:db8::10/128", "fd00:96::10/128")},
		{name: "selector on labels", selector: &bgp.LabelSelector{MatchLabels: map[string]string{"bgp": "off"}}, types: all,
			services: []bgp.Service{web}},
		{name: "selector on namespace and name labels", types: []bgp.ServiceAddressType{bgp.ClusterIPAddresses},
			selector: &bgp.LabelSelector{MatchLabels: map[string]string{bgp.ServiceNamespaceLabel: "prod"},
				MatchExpressions: []bgp.LabelSelectorRequirement{{Key: bgp.ServiceNameLabel, Operator: bgp.SelectorOpIn, Values: []string{"web", "api"}}}},
			services: []bgp.Service{web, with(func(s *bgp.Service) { s.Namespace = "dev" }), with(func(s *bgp.Service) { s.Name = "db" })},
			want:     prefixes("10.96.0.10/32", "fd00:96::10/128")},
		{name: "synthetic labels win over service labels", types: []bgp.ServiceAddressType{bgp.ExternalIPAddresses},
			selector: &bgp.LabelSelector{MatchLabels: map[string]string{bgp.ServiceNameLabel: "fake"}},
			services: []bgp.Service{with(func(s *bgp.Service) { s.Labels = map[string]string{bgp.ServiceNameLabel: "fake"} })}},
		{name: "externalTrafficPolicy Local without a local backend", selector: everything, types: all,
			services: []bgp.Service{with(func(s *bgp.Service) { s.ExternalTrafficPolicyLocal = true })},
			want:     prefixes("10.96.0.10/32", "fd00:96::10/128")},
		{name: "externalTrafficPolicy Local with a local backend", selector: everything, types: all,
			services: []bgp.Service{with(func(s *bgp.Service) { s.ExternalTrafficPolicyLocal, s.HasLocalBackend = true, true })},
			want:     prefixes("10.96.0.10/32", "192.0.2.10/32", "198.51.100.10/32", "2001:db8::10/128", "fd00:96::10/128")},
		{name: "internalTrafficPolicy Local without a local backend", selector: everything, types: all,
			services: []bgp.Service{with(func(s *bgp.Service) { s.InternalTrafficPolicyLocal = true })},
			want:     prefixes("192.0.2.10/32", "198.51.100.10/32", "2001:db8::10/128")},
		{name: "foreign load-balancer class", selector: everything, types: all,
			services: []bgp.Service{with(func(s *bgp.Service) { s.LoadBalancerClass = "metallb.io/x" })},
			want:     prefixes("10.96.0.10/32", "198.51.100.10/32", "fd00:96::10/128")},
		{name: "default load-balancer class", selector: everything,
			services: []bgp.Service{with(func(s *bgp.Service) { s.LoadBalancerClass = bgp.DefaultLoadBalancerClass })},
			want:     prefixes("192.0.2.10/32", "2001:db8::10/128")},
		{name: "configured load-balancer classes replace the default", selector: everything, classes: []string{"example.com/a"},
			services: []bgp.Service{
				with(func(s *bgp.Service) { s.LoadBalancerClass = bgp.DefaultLoadBalancerClass }),
				with(func(s *bgp.Service) {
					s.Name, s.LoadBalancerClass, s.LoadBalancerIPs = "a", "example.com/a", addrs("192.0.2.20")
				}),
				with(func(s *bgp.Service) { s.Name, s.LoadBalancerClass, s.LoadBalancerIPs = "none", "", addrs("192.0.2.30") }),
			},
			want: prefixes("192.0.2.20/32", "192.0.2.30/32")},
		{name: "duplicates, mapped, invalid and unspecified addresses", selector: everything, types: all,
			services: []bgp.Service{{Name: "a", ClusterIPs: addrs("::ffff:10.96.0.1", "0.0.0.0"), ExternalIPs: []netip.Addr{{}, netip.MustParseAddr("10.96.0.1")}},
				{Name: "b", LoadBalancerIPs: addrs("10.96.0.1", "::")}},
			want: prefixes("10.96.0.1/32")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &bgp.PeeringPolicy{VirtualRouters: []bgp.VirtualRouter{{LocalASN: 1, ServiceSelector: tt.selector,
				ServiceAdvertisements: tt.types, LoadBalancerClasses: tt.classes}}}
			vr := p.WithDefaults().VirtualRouters[0]
			got, err := vr.ServicePrefixes(tt.services)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			var seq []*bgp.Service
			for i := range tt.services {
				seq = append(seq, &tt.services[i])
			}
			got, err = vr.ServicePrefixesOf(slices.Values(seq))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got, "ServicePrefixesOf")
		})
	}
	vr := bgp.VirtualRouter{LocalASN: 7, ServiceSelector: &bgp.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}}
	_, err := vr.ServicePrefixes([]bgp.Service{web})
	require.ErrorContains(t, err, "virtual router 7: service selector")
}

func BenchmarkServicePrefixes10k(b *testing.B) {
	services := make([]bgp.Service, 10000)
	for i := range services {
		services[i] = bgp.Service{Namespace: "ns", Name: "svc", Labels: map[string]string{"app": "web", "bgp": "on"},
			LoadBalancerIPs: []netip.Addr{netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)})}}
	}
	p := &bgp.PeeringPolicy{VirtualRouters: []bgp.VirtualRouter{{LocalASN: 1,
		ServiceSelector: &bgp.LabelSelector{MatchLabels: map[string]string{"bgp": "on"}}}}}
	vr := p.WithDefaults().VirtualRouters[0]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := vr.ServicePrefixes(services); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServicePrefixes10kMostlyClusterIP is the mix of a large cluster:
// of 10000 services one in fifty is a LoadBalancer service, the others have
// cluster IPs only, and the virtual router advertises LoadBalancer IPs
// (the default).
func BenchmarkServicePrefixes10kMostlyClusterIP(b *testing.B) {
	services := make([]bgp.Service, 10000)
	for i := range services {
		services[i] = bgp.Service{Namespace: "ns", Name: fmt.Sprintf("svc-%d", i), Labels: map[string]string{"app": "web"},
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})}}
		if i%50 == 1 {
			services[i].Labels = map[string]string{"app": "web", "bgp": "on"}
			services[i].LoadBalancerIPs = []netip.Addr{netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)})}
		}
	}
	p := &bgp.PeeringPolicy{VirtualRouters: []bgp.VirtualRouter{{LocalASN: 1,
		ServiceSelector: &bgp.LabelSelector{MatchExpressions: []bgp.LabelSelectorRequirement{{Key: "bgp", Operator: bgp.SelectorOpIn, Values: []string{"on"}}}}}}}
	vr := p.WithDefaults().VirtualRouters[0]
	b.ReportAllocs()
	for b.Loop() {
		got, err := vr.ServicePrefixes(services)
		if err != nil || len(got) != 200 {
			b.Fatal(len(got), err)
		}
	}
}

func TestServicePrefixesOfNil(t *testing.T) {
	p := &bgp.PeeringPolicy{VirtualRouters: []bgp.VirtualRouter{{LocalASN: 1, ServiceSelector: &bgp.LabelSelector{}}}}
	got, err := p.WithDefaults().VirtualRouters[0].ServicePrefixesOf(nil)
	require.NoError(t, err)
	assert.Empty(t, got)
}

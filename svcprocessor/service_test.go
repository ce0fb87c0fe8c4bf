package svcprocessor_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
)

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestServiceView(t *testing.T) {
	f := newFixture(t, svcprocessor.Config{})
	tcp, udp, sctp := kubemodel.Protocol_TCP, kubemodel.Protocol_UDP, kubemodel.Protocol_SCTP

	tests := []struct {
		name      string
		svc       *kubemodel.Service
		eps       *kubemodel.Endpoints
		want      *svcprocessor.ContivService // ID is filled in
		wantLocal []kubemodel.PodID
	}{
		{
			name: "ports matched by name and protocol",
			svc: mkService("ns", "s", func(s *kubemodel.Service) {
				s.Ports = []*kubemodel.ServicePort{
					{Name: "https", Protocol: tcp, Port: 443},
					{Name: "http", Protocol: tcp, Port: 80},
					{Name: "dns", Protocol: udp, Port: 53},
					{Name: "sig", Protocol: sctp, Port: 3868},
				}
			}),
			eps: mkEndpoints("ns", "s", &kubemodel.EndpointSubset{
				Addresses: []*kubemodel.EndpointAddress{mkAddr("10.1.2.7", "", "")},
				Ports: []*kubemodel.EndpointPort{
					{Name: "http", Port: 8080, Protocol: tcp},
					{Name: "https", Port: 8443, Protocol: tcp},
					{Name: "dns", Port: 5353, Protocol: tcp}, // same name, other protocol: no match
					{Name: "sig", Port: 3869, Protocol: sctp},
					{Name: "metrics", Port: 9090, Protocol: tcp}, // not a service port
				},
			}),
			want: &svcprocessor.ContivService{
				ClusterIPs: []netip.Addr{ip("10.96.0.10")},
				Ports: []svcprocessor.ServicePort{
					{Name: "dns", Protocol: udp, Port: 53},
					{Name: "http", Protocol: tcp, Port: 80, Backends: []svcprocessor.ServiceBackend{{IP: ip("10.1.2.7"), Port: 8080, Ready: true}}},
					{Name: "https", Protocol: tcp, Port: 443, Backends: []svcprocessor.ServiceBackend{{IP: ip("10.1.2.7"), Port: 8443, Ready: true}}},
					{Name: "sig", Protocol: sctp, Port: 3868, Backends: []svcprocessor.ServiceBackend{{IP: ip("10.1.2.7"), Port: 3869, Ready: true}}},
				},
			},
		},
		{
			name: "not-ready addresses excluded from ready backends",
			svc:  mkService("ns", "s", nil),
			eps: mkEndpoints("ns", "s", &kubemodel.EndpointSubset{
				Addresses: []*kubemodel.EndpointAddress{mkAddr("10.1.2.9", "", ""), mkAddr("10.1.2.8", "", "")},
				NotReadyAddresses: []*kubemodel.EndpointAddress{
					mkAddr("10.1.2.20", "", ""),
					{Ip: "10.1.2.21", Terminating: true},
				},
				Ports: []*kubemodel.EndpointPort{{Name: "http", Port: 8080}},
			}),
			want: &svcprocessor.ContivService{
				ClusterIPs: []netip.Addr{ip("10.96.0.10")},
				Ports: []svcprocessor.ServicePort{{
					Name: "http", Port: 80,
					Backends: []svcprocessor.ServiceBackend{
						{IP: ip("10.1.2.8"), Port: 8080, Ready: true},
						{IP: ip("10.1.2.9"), Port: 8080, Ready: true},
					},
					NotReadyBackends: []svcprocessor.ServiceBackend{
						{IP: ip("10.1.2.20"), Port: 8080},
						{IP: ip("10.1.2.21"), Port: 8080, Terminating: true},
					},
				}},
			},
		},
		{
			name: "local, remote and host-network backends",
			svc:  mkService("ns", "s", nil),
			eps: mkEndpoints("ns", "s", httpSubset(
				mkAddr("10.1.1.5", "local-pod", thisNode),
				mkAddr("10.1.2.5", "remote-pod", "node2"),
				mkAddr("192.168.16.2", "remote-hostnet", "node2"),
				mkAddr("192.168.16.1", "local-hostnet", thisNode),
				mkAddr("10.1.1.6", "", ""), // local by subnet, no pod reference
			)),
			want: &svcprocessor.ContivService{
				ClusterIPs: []netip.Addr{ip("10.96.0.10")},
				Ports: []svcprocessor.ServicePort{{
					Name: "http", Port: 80,
					Backends: []svcprocessor.ServiceBackend{
						{IP: ip("10.1.1.5"), Port: 8080, Pod: pid("ns", "local-pod"), Local: true, Ready: true},
						{IP: ip("10.1.1.6"), Port: 8080, Local: true, Ready: true},
						{IP: ip("10.1.2.5"), Port: 8080, Pod: pid("ns", "remote-pod"), Ready: true},
						{IP: ip("192.168.16.1"), Port: 8080, Pod: pid("ns", "local-hostnet"), Local: true, HostNetwork: true, Ready: true},
						{IP: ip("192.168.16.2"), Port: 8080, Pod: pid("ns", "remote-hostnet"), HostNetwork: true, Ready: true},
					},
				}},
			},
			wantLocal: []kubemodel.PodID{pid("ns", "local-pod")},
		},
		{
			name: "NodePort service with external traffic policy Local",
			svc: mkService("ns", "s", func(s *kubemodel.Service) {
				s.Type = kubemodel.Service_NODE_PORT
				s.Ports[0].NodePort = 30080
				s.ExternalTrafficPolicy = kubemodel.Service_LOCAL
			}),
			want: &svcprocessor.ContivService{
				Type:                  kubemodel.Service_NODE_PORT,
				ClusterIPs:            []netip.Addr{ip("10.96.0.10")},
				Ports:                 []svcprocessor.ServicePort{{Name: "http", Port: 80, NodePort: 30080}},
				ExternalTrafficPolicy: svcprocessor.LocalTrafficPolicy,
			},
		},
		{
			name: "session affinity with default timeout",
			svc: mkService("ns", "s", func(s *kubemodel.Service) {
				s.SessionAffinity = kubemodel.Service_CLIENT_IP
			}),
			want: &svcprocessor.ContivService{
				ClusterIPs:             []netip.Addr{ip("10.96.0.10")},
				Ports:                  []svcprocessor.ServicePort{{Name: "http", Port: 80}},
				SessionAffinityTimeout: svcprocessor.DefaultSessionAffinityTimeout,
			},
		},
		{
			name: "session affinity with explicit timeout",
			svc: mkService("ns", "s", func(s *kubemodel.Service) {
				s.SessionAffinity = kubemodel.Service_CLIENT_IP
				s.SessionAffinityTimeout = 60
			}),
			want: &svcprocessor.ContivService{
				ClusterIPs:             []netip.Addr{ip("10.96.0.10")},
				Ports:                  []svcprocessor.ServicePort{{Name: "http", Port: 80}},
				SessionAffinityTimeout: 60,
			},
		},
		{
			name: "no session affinity ignores the timeout",
			svc: mkService("ns", "s", func(s *kubemodel.Service) {
				s.SessionAffinityTimeout = 60
			}),
			want: &svcprocessor.ContivService{
				ClusterIPs: []netip.Addr{ip("10.96.0.10")},
				Ports:      []svcprocessor.ServicePort{{Name: "http", Port: 80}},
			},
		},
		{
			name: "dual-stack LoadBalancer with external and ingress IPs",
			svc: mkService("ns", "s", func(s *kubemodel.Service) {
				s.Type = kubemodel.Service_LOAD_BALANCER
				s.ClusterIps = []string{"fd00::10", "10.96.0.10"}
				s.ExternalIps = []string{"203.0.113.5", "bogus"}
				s.LoadBalancerIp = "203.0.113.9"
				s.LbIngressIps = []string{"203.0.113.9", "2001:db8::9"}
			}),
			want: &svcprocessor.ContivService{
				Type:        kubemodel.Service_LOAD_BALANCER,
				ClusterIPs:  []netip.Addr{ip("10.96.0.10"), ip("fd00::10")},
				ExternalIPs: []netip.Addr{ip("203.0.113.5"), ip("203.0.113.9"), ip("2001:db8::9")},
				Ports:       []svcprocessor.ServicePort{{Name: "http", Port: 80}},
			},
		},
		{
			name: "headless service has no cluster IP",
			svc: mkService("ns", "s", func(s *kubemodel.Service) {
				s.ClusterIps = []string{"None"}
			}),
			want: &svcprocessor.ContivService{
				Ports: []svcprocessor.ServicePort{{Name: "http", Port: 80}},
			},
		},
		{
			name: "endpoints without service give no view",
			eps:  mkEndpoints("ns", "s", httpSubset(mkAddr("10.1.1.5", "p", ""))),
		},
		{
			name: "ExternalName service gives no view",
			svc: mkService("ns", "s", func(s *kubemodel.Service) {
				s.Type = kubemodel.Service_EXTERNAL_NAME
			}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := svcprocessor.NewService(f.sp)
			s.SetMetadata(tc.svc)
			s.SetEndpoints(tc.eps)
			got := s.GetContivService()
			if tc.want == nil {
				assert.Nil(t, got)
				assert.Empty(t, s.GetLocalBackends())
				return
			}
			tc.want.ID = sid("ns", "s")
			require.NotNil(t, got)
			assert.Equal(t, tc.want, got)
			assert.True(t, tc.want.Equal(got), "Equal must agree with deep equality")
			assert.Equal(t, tc.wantLocal, s.GetLocalBackends())
		})
	}
}

func TestContivServiceEqual(t *testing.T) {
	base := func() *svcprocessor.ContivService {
		return &svcprocessor.ContivService{
			ID:         sid("a", "b"),
			ClusterIPs: []netip.Addr{ip("10.96.0.1")},
			Ports: []svcprocessor.ServicePort{{Name: "p", Port: 80,
				Backends: []svcprocessor.ServiceBackend{{IP: ip("10.1.1.1"), Port: 8080, Ready: true}}}},
		}
	}
	mods := map[string]func(s *svcprocessor.ContivService){
		"id":         func(s *svcprocessor.ContivService) { s.ID.Name = "c" },
		"cluster IP": func(s *svcprocessor.ContivService) { s.ClusterIPs[0] = ip("10.96.0.2") },
		"external":   func(s *svcprocessor.ContivService) { s.ExternalIPs = []netip.Addr{ip("1.2.3.4")} },
		"policy":     func(s *svcprocessor.ContivService) { s.ExternalTrafficPolicy = svcprocessor.LocalTrafficPolicy },
		"affinity":   func(s *svcprocessor.ContivService) { s.SessionAffinityTimeout = 5 },
		"node port":  func(s *svcprocessor.ContivService) { s.Ports[0].NodePort = 30000 },
		"protocol":   func(s *svcprocessor.ContivService) { s.Ports[0].Protocol = kubemodel.Protocol_SCTP },
		"backend":    func(s *svcprocessor.ContivService) { s.Ports[0].Backends[0].Local = true },
		"not ready":  func(s *svcprocessor.ContivService) { s.Ports[0].NotReadyBackends = s.Ports[0].Backends },
		"no ports":   func(s *svcprocessor.ContivService) { s.Ports = nil },
	}
	require.True(t, base().Equal(base()))
	for name, mod := range mods {
		t.Run(name, func(t *testing.T) {
			b := base()
			mod(b)
			assert.False(t, base().Equal(b))
			assert.False(t, b.Equal(base()))
		})
	}
	var nilSvc *svcprocessor.ContivService
	assert.True(t, nilSvc.Equal(nil))
	assert.False(t, nilSvc.Equal(base()))
	assert.False(t, nilSvc.HasNodePort())
}

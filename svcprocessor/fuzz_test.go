package svcprocessor_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
)

// FuzzServiceView feeds arbitrary strings and numbers into the fields the
// processor parses (IPs, ports, names) and checks that the combined view is
// well formed: no panic, valid ports, sorted unique IPs and backends, and a
// deterministic result.
func FuzzServiceView(f *testing.F) {
	f.Add("10.96.0.1", "203.0.113.1", "10.1.1.5", "http", "http", int32(80), int32(8080), int32(30080), uint8(0))
	f.Add("None", "", "fd00::1", "", "", int32(0), int32(-1), int32(70000), uint8(2))
	f.Add("::ffff:10.96.0.1", "bogus", "10.1.1.5%eth0", "a", "b", int32(65535), int32(65536), int32(1), uint8(1))
	f.Fuzz(func(t *testing.T, clusterIP, extIP, epIP, svcPortName, epPortName string, port, targetPort, nodePort int32, proto uint8) {
		fx := newFixture(t, svcprocessor.Config{})
		svc := &kubemodel.Service{
			Namespace: "ns", Name: "s",
			ClusterIps:   []string{clusterIP, clusterIP},
			ExternalIps:  []string{extIP},
			LbIngressIps: []string{extIP, clusterIP},
			Ports:        []*kubemodel.ServicePort{{Name: svcPortName, Protocol: kubemodel.Protocol(proto % 3), Port: port, NodePort: nodePort}},
		}
		eps := &kubemodel.Endpoints{Namespace: "ns", Name: "s", Subsets: []*kubemodel.EndpointSubset{{
			Addresses:         []*kubemodel.EndpointAddress{{Ip: epIP}, {Ip: epIP}, {Ip: clusterIP}},
			NotReadyAddresses: []*kubemodel.EndpointAddress{{Ip: epIP, Terminating: true}},
			Ports:             []*kubemodel.EndpointPort{{Name: epPortName, Port: targetPort, Protocol: kubemodel.Protocol(proto % 3)}},
		}}}
		if err := fx.sp.Update(svcChange(nil, svc)); err != nil {
			t.Fatal(err)
		}
		if err := fx.sp.Update(epsChange(nil, eps)); err != nil {
			t.Fatal(err)
		}
		got := fx.sp.Service(sid("ns", "s"))
		if got == nil {
			t.Fatal("no view for a ClusterIP service")
		}
		if !slices.IsSortedFunc(got.ClusterIPs, func(a, b netip.Addr) int { return a.Compare(b) }) ||
			!slices.IsSortedFunc(got.ExternalIPs, func(a, b netip.Addr) int { return a.Compare(b) }) {
			t.Fatalf("IPs not sorted: %v %v", got.ClusterIPs, got.ExternalIPs)
		}
		if len(slices.Compact(slices.Clone(got.ClusterIPs))) != len(got.ClusterIPs) {
			t.Fatalf("duplicate cluster IPs: %v", got.ClusterIPs)
		}
		for _, p := range got.Ports {
			if p.Port == 0 {
				t.Fatalf("port 0 in view")
			}
			for _, b := range append(slices.Clone(p.Backends), p.NotReadyBackends...) {
				if !b.IP.IsValid() || b.Port == 0 || b.IP.Is4In6() {
					t.Fatalf("bad backend %+v", b)
				}
			}
			if len(p.Backends) > 2 || len(p.NotReadyBackends) > 1 {
				t.Fatalf("duplicates not removed: %+v", p)
			}
		}
		// Deterministic: recomputing from the same input gives an equal view.
		s := svcprocessor.NewService(fx.sp)
		s.SetMetadata(svc)
		s.SetEndpoints(eps)
		if !s.GetContivService().Equal(got) {
			t.Fatalf("recomputed view differs:\n%+v\n%+v", s.GetContivService(), got)
		}
	})
}

package svcprocessor_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/svcprocessor/svcprocessortest"
)

// benchState builds n services with eps endpoints each. Every 50th
// endpoint is a pod of this node.
func benchState(n, eps int) ([]*kubemodel.Service, []*kubemodel.Endpoints) {
	svcs := make([]*kubemodel.Service, 0, n)
	epss := make([]*kubemodel.Endpoints, 0, n)
	k := 0
	for i := range n {
		ns, name := fmt.Sprintf("ns%d", i%20), fmt.Sprintf("svc%d", i)
		svcs = append(svcs, &kubemodel.Service{
			Namespace:  ns,
			Name:       name,
			ClusterIps: []string{fmt.Sprintf("10.96.%d.%d", i/256, i%256)},
			Ports:      []*kubemodel.ServicePort{{Name: "http", Protocol: kubemodel.Protocol_TCP, Port: 80, TargetPortNumber: 8080}},
		})
		e := benchEndpoints(ns, name, eps, k, 0)
		k += eps
		epss = append(epss, e)
	}
	return svcs, epss
}

func benchEndpoints(ns, name string, n, first, variant int) *kubemodel.Endpoints {
	sub := &kubemodel.EndpointSubset{Ports: []*kubemodel.EndpointPort{{Name: "http", Port: 8080, Protocol: kubemodel.Protocol_TCP}}}
	for j := range n {
		k := first + j
		third := 2 + (k/250)%250
		if k%50 == 0 {
			third = 1 // this node's pod subnet
		}
		ip := fmt.Sprintf("10.1.%d.%d", third, 2+k%250)
		if j == 0 && variant == 1 {
			ip = "10.1.255.254"
		}
		sub.Addresses = append(sub.Addresses, &kubemodel.EndpointAddress{
			Ip: ip, TargetRef: &kubemodel.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("pod%d", k)},
		})
	}
	return &kubemodel.Endpoints{Namespace: ns, Name: name, Subsets: []*kubemodel.EndpointSubset{sub}}
}

func newBenchProcessor(tb testing.TB) *svcprocessor.ServiceProcessor {
	sp, err := svcprocessor.New(
		svcprocessortest.NewSubnets(thisSubnet, allSubnet),
		svcprocessortest.NewNodeIPs(node1IP, node2IP),
		svcprocessortest.NewPods(),
		svcprocessor.Config{NodeName: thisNode},
	)
	require.NoError(tb, err)
	require.NoError(tb, sp.RegisterRenderer(svcprocessor.RendererFunc(func(svcprocessor.RenderEvent) error { return nil })))
	return sp
}

// BenchmarkResync10kServices measures a full resync of 10000 services with
// 10 endpoints each into a fresh processor with one (no-op) renderer.
func BenchmarkResync10kServices(b *testing.B) {
	svcs, epss := benchState(10000, 10)
	ksd := kubeState(svcs, epss, nil)
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		sp := newBenchProcessor(b)
		if err := sp.Resync(ksd); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/resync")
	// CPU time of the process (all threads, GC included) per resync: on a
	// shared, overloaded machine wall-clock time includes waiting for a core.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1e3/float64(b.N), "cpu-ms/resync")
}

// BenchmarkEndpointUpdate measures one endpoint change of one service (one
// backend IP replaced, so every iteration is a real ServiceUpdated) with 100
// and with 10000 services in the processor.
func BenchmarkEndpointUpdate(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			sp := newBenchProcessor(b)
			svcs, epss := benchState(n, 10)
			require.NoError(b, sp.Resync(kubeState(svcs, epss, nil)))
			target := epss[n/2]
			evs := [2]*controller.KubeStateChange{
				epsChange(target, benchEndpoints(target.Namespace, target.Name, 10, (n/2)*10, 1)),
				epsChange(nil, target),
			}
			evs[1].PrevValue = evs[0].NewValue
			b.ReportAllocs()
			i := 0
			cpu0 := cpuTime()
			for b.Loop() {
				if err := sp.Update(evs[i&1]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// TestEndpointUpdateAllocs pins the allocations of one endpoint change: the
// recomputed view (one block for the struct, its cluster IPs and ports; one
// backing array for all backends) plus the local-backend list, independent
// of the number of services.
func TestEndpointUpdateAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 10000 services")
	}
	for _, n := range []int{100, 10000} {
		sp := newBenchProcessor(t)
		svcs, epss := benchState(n, 10)
		require.NoError(t, sp.Resync(kubeState(svcs, epss, nil)))
		target := epss[n/2]
		evs := [2]*controller.KubeStateChange{
			epsChange(target, benchEndpoints(target.Namespace, target.Name, 10, (n/2)*10, 1)),
			epsChange(nil, target),
		}
		i := 0
		allocs := testing.AllocsPerRun(200, func() {
			if err := sp.Update(evs[i&1]); err != nil {
				t.Fatal(err)
			}
			i++
		})
		require.LessOrEqual(t, allocs, 3.0, "services=%d", n)
		t.Logf("services=%d: %.1f allocs per endpoint update", n, allocs)
	}
}

// cpuTime returns the user+system CPU time used by the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

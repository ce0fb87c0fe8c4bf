package svccnat_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/render/svccnat"
	"github.com/vswitchkit/vswitchkit/render/svcnat"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// The benchmarks run both service renderers on the same input, in one
// run: "nat44" (render/svcnat onto NAT44-ED) and "cnat" (this package).
var benchRenderers = []string{"nat44", "cnat"}

// benchState returns n IPv4 services with a cluster IP and one TCP port,
// each with backends endpoints on other nodes' pods (no pod interfaces on
// this node: the translations are what is measured), as render/svcnat's
// benchmarks build them.
func benchState(n, backends int) controller.KubeStateData {
	ksd := controller.NewKubeStateData()
	ksd[kubemodel.ServiceResource] = make(controller.KeyValuePairs, n)
	ksd[kubemodel.EndpointsResource] = make(controller.KeyValuePairs, n)
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		ip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		ksd[kubemodel.ServiceResource][kubemodel.ServiceKey("default", name)] = &kubemodel.Service{Name: name, Namespace: "default",
			ClusterIps: []string{ip.String()}, Ports: []*kubemodel.ServicePort{{Name: "http", Port: 80, TargetPortNumber: 8080}}}
		ksd[kubemodel.EndpointsResource][kubemodel.EndpointsKey("default", name)] = benchEndpoints(name, i, backends)
	}
	return ksd
}

// benchEndpoints returns the endpoints of service number i: backends
// addresses from the pod subnets of nodes 4 and up, 10 per service number.
func benchEndpoints(name string, i, backends int) *kubemodel.Endpoints {
	sub := &kubemodel.EndpointSubset{Ports: []*kubemodel.EndpointPort{{Name: "http", Port: 8080}}}
	base := netip.MustParseAddr("10.1.4.0").As4()
	first := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8
	for j := range backends {
		a := first + uint32(i*10+j)
		ip := netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
		sub.Addresses = append(sub.Addresses, &kubemodel.EndpointAddress{Ip: ip.String(), NodeName: "other"})
	}
	return &kubemodel.Endpoints{Name: name, Namespace: "default", Subsets: []*kubemodel.EndpointSubset{sub}}
}

// benchAgent is the rendering part of an agent on the stand-in: the loop
// with IPAM, the service processor and one renderer, committing to the
// driver; committed signals every commit (the driver has applied it).
type benchAgent struct {
	loop      *controller.Loop
	requests  *vppdrivertest.RequestRecorder
	committed chan controller.CommitKind
	stop      func()
}

func newBenchAgent(b *testing.B, renderer string, vpp *vppsim.VPP) *benchAgent {
	b.Helper()
	requests := &vppdrivertest.RequestRecorder{}
	driver, err := vppdriver.New(func() adapter.VppAPI { return requests.Wrap(vpp.NewAdapter()) }, vppdriver.Config{})
	require.NoError(b, err)
	a := &benchAgent{requests: requests, committed: make(chan controller.CommitKind, 1)}
	sb := controller.SouthboundFunc(func(ctx context.Context, c *controller.Commit) (uint64, error) {
		seq, err := driver.Commit(ctx, c)
		a.committed <- c.Kind
		return seq, err
	})
	loop, err := controller.New(nil, sb, controller.Config{HistorySize: -1})
	require.NoError(b, err)
	pods, err := ipam.New(ipam.NodeIDFunc(func() uint32 { return 1 }), ipam.Config{})
	require.NoError(b, err)
	nodeIPs := []netip.Addr{netip.MustParseAddr("192.168.16.1")}
	sp, err := svcprocessor.New(svcprocessor.SubnetsFromIPNet(pods), svcprocessor.NodeIPsFunc(func() []netip.Addr { return nodeIPs }),
		svcprocessor.PodInterfacesFunc(func(kubemodel.PodID) (string, bool) { return "", false }), svcprocessor.Config{})
	require.NoError(b, err)
	handlers := []controller.EventHandler{pods, sp.Handler()}
	switch renderer {
	case "nat44":
		nat, err := svcnat.New(svcnat.NodeIPsFunc(func() []netip.Addr { return nodeIPs }), pods, svcnat.Config{})
		require.NoError(b, err)
		require.NoError(b, sp.RegisterRenderer(nat))
	case "cnat":
		cn, err := svccnat.New(svccnat.NodeIPsFunc(func() []netip.Addr { return nodeIPs }),
			svccnat.SNATAddrsFunc(func() []netip.Addr { return nodeIPs }), svccnat.Config{ExcludedPrefixes: svccnat.ExcludedPrefixes(pods)})
		require.NoError(b, err)
		require.NoError(b, sp.RegisterRenderer(cn))
		handlers = append(handlers, cn)
	}
	require.NoError(b, loop.Register(handlers...))
	a.loop = loop
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{driver.Run, loop.Run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				b.Errorf("run: %v", err)
			}
		}()
	}
	a.stop = func() { cancel(); wg.Wait() }
	require.Eventually(b, driver.Connected, 10*time.Second, time.Millisecond)
	return a
}

// resync processes a DBResync of ksd and waits for its commit.
func (a *benchAgent) resync(b *testing.B, ksd controller.KubeStateData) {
	ev := controller.NewDBResync()
	ev.KubeState = ksd
	require.NoError(b, a.loop.PushEvent(ev))
	for kind := range a.committed {
		if kind == controller.CommitResync {
			return
		}
	}
}

// change processes one Kubernetes state change and waits for its commit.
func (a *benchAgent) change(b *testing.B, ev *controller.KubeStateChange) {
	require.NoError(b, a.loop.PushEvent(ev))
	select {
	case <-a.committed:
	case <-time.After(time.Minute):
		b.Fatalf("no commit for %s %s; loop stats %+v", ev.Resource, ev.Key, a.loop.Stats())
	}
}

// BenchmarkRenderers runs both renderers (nat44, cnat) on the same
// services through a real controller loop, the service processor, the
// renderer and the driver on the stand-in, and reports the VPP requests
// that change VPP per operation:
//
//   - resync/empty VPP: a full resync of 10k services × 10 backends into a
//     VPP without configuration (everything created);
//   - resync/VPP already right: an agent restarted on a VPP that holds it
//     all (read back, compared, nothing sent);
//   - endpoint change: one backend of one service added or removed,
//     alternately, with the 10k services installed (one request).
func BenchmarkRenderers(b *testing.B) {
	const n, backends = 10000, 10
	ksd := benchState(n, backends)
	for _, r := range benchRenderers {
		b.Run(r+"/resync/empty VPP", func(b *testing.B) {
			var writes uint64
			for b.Loop() {
				b.StopTimer()
				a := newBenchAgent(b, r, vppsim.New(vppsim.Config{}))
				b.StartTimer()
				a.resync(b, ksd)
				b.StopTimer()
				writes += a.requests.WriteCount()
				a.stop()
				b.StartTimer()
			}
			b.ReportMetric(float64(writes)/float64(b.N), "VPP-writes/op")
		})
		b.Run(r+"/resync/VPP already right", func(b *testing.B) {
			vpp := vppsim.New(vppsim.Config{})
			first := newBenchAgent(b, r, vpp)
			first.resync(b, ksd)
			first.stop()
			var writes uint64
			for b.Loop() {
				b.StopTimer()
				a := newBenchAgent(b, r, vpp)
				b.StartTimer()
				a.resync(b, ksd)
				b.StopTimer()
				writes += a.requests.WriteCount()
				a.stop()
				b.StartTimer()
			}
			b.ReportMetric(float64(writes)/float64(b.N), "VPP-writes/op")
		})
		b.Run(r+"/endpoint change", func(b *testing.B) {
			a := newBenchAgent(b, r, vppsim.New(vppsim.Config{}))
			defer a.stop()
			// A state of its own: the loop applies the changes to the
			// state its resync was given.
			a.resync(b, benchState(n, backends))
			name := fmt.Sprintf("svc-%d", n/2)
			key := kubemodel.EndpointsKey("default", name)
			eps := []*kubemodel.Endpoints{benchEndpoints(name, n/2, backends), benchEndpoints(name, n/2, backends+1)}
			before := a.requests.WriteCount()
			i := 0
			for b.Loop() {
				i++
				a.change(b, &controller.KubeStateChange{Resource: kubemodel.EndpointsResource, Key: key,
					PrevValue: eps[(i+1)%2], NewValue: eps[i%2]})
			}
			b.ReportMetric(float64(a.requests.WriteCount()-before)/float64(b.N), "VPP-writes/op")
		})
	}
}

package svcnat_test

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
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/render/svcnat"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/svcprocessor/svcprocessortest"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// clusterState returns n services with a cluster IP and one TCP port,
// each with backends endpoints on other nodes' pods (no pod interfaces on
// this node: the mappings are what is measured).
func clusterState(n, backends int) controller.KubeStateData {
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
// addresses from the pod subnets of nodes 4 and up (and beyond the pod
// range for the last of 10k services), 10 per service number (an 11th is
// the first of the next service's).
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
// with IPAM, the test node handler, the service processor and the
// renderer, committing to the driver; committed signals every commit.
type benchAgent struct {
	loop      *controller.Loop
	driver    *vppdriver.Driver
	requests  *vppdrivertest.RequestRecorder
	committed chan controller.CommitKind
	stop      func()
}

func newBenchAgent(b *testing.B, vpp *vppsim.VPP) *benchAgent {
	b.Helper()
	requests := &vppdrivertest.RequestRecorder{}
	driver, err := vppdriver.New(func() adapter.VppAPI { return requests.Wrap(vpp.NewAdapter()) }, vppdriver.Config{})
	require.NoError(b, err)
	a := &benchAgent{driver: driver, requests: requests, committed: make(chan controller.CommitKind, 1)}
	sb := controller.SouthboundFunc(func(ctx context.Context, c *controller.Commit) (uint64, error) {
		seq, err := driver.Commit(ctx, c)
		a.committed <- c.Kind
		return seq, err
	})
	loop, err := controller.New(nil, sb, controller.Config{HistorySize: -1})
	require.NoError(b, err)
	pods, err := ipam.New(ipam.NodeIDFunc(func() uint32 { return 1 }), ipam.Config{})
	require.NoError(b, err)
	node := &nodeHandler{ipam: pods, pods: map[kubemodel.PodID]netip.Addr{}}
	sp, err := svcprocessor.New(svcprocessor.SubnetsFromIPNet(pods), svcprocessor.NodeIPsFunc(func() []netip.Addr { return nil }), node,
		svcprocessor.Config{FrontendInterfaces: []string{uplink, hostIC}})
	require.NoError(b, err)
	nat, err := svcnat.New(svcnat.NodeIPsFunc(func() []netip.Addr { return []netip.Addr{netip.MustParseAddr(nodeIP)} }), pods,
		svcnat.Config{Uplink: uplink, InterconnectInterfaces: []string{hostIC}})
	require.NoError(b, err)
	require.NoError(b, sp.RegisterRenderer(nat))
	require.NoError(b, loop.Register(pods, node, sp.Handler()))
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
	require.Eventually(b, func() bool { return driver.Connected() }, 10*time.Second, time.Millisecond)
	return a
}

// resync processes a DBResync of ksd and waits for its commit; the driver
// has then applied it to the stand-in.
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
	<-a.committed
}

// BenchmarkResync renders n services with 10 backends each through the
// loop, the renderer and the driver into the stand-in: "empty VPP" starts
// from a VPP without configuration (everything is created), "VPP already
// right" resyncs an agent restarted on a VPP that holds it all (read back
// and compared, nothing sent).
func BenchmarkResync(b *testing.B) {
	for _, n := range []int{100, 10000} {
		ksd := clusterState(n, 10)
		b.Run(fmt.Sprintf("services=%d/empty VPP", n), func(b *testing.B) {
			var writes uint64
			for b.Loop() {
				b.StopTimer()
				vpp := vppsim.New(vppsim.Config{})
				a := newBenchAgent(b, vpp)
				b.StartTimer()
				a.resync(b, ksd)
				b.StopTimer()
				writes += a.requests.WriteCount()
				a.stop()
				b.StartTimer()
			}
			b.ReportMetric(float64(writes)/float64(b.N), "VPP-writes/op")
		})
		b.Run(fmt.Sprintf("services=%d/VPP already right", n), func(b *testing.B) {
			vpp := vppsim.New(vppsim.Config{})
			first := newBenchAgent(b, vpp)
			first.resync(b, ksd)
			first.stop()
			var writes uint64
			for b.Loop() {
				b.StopTimer()
				a := newBenchAgent(b, vpp)
				b.StartTimer()
				a.resync(b, ksd)
				b.StopTimer()
				writes += a.requests.WriteCount()
				a.stop()
				b.StartTimer()
			}
			b.ReportMetric(float64(writes)/float64(b.N), "VPP-writes/op")
		})
	}
}

// BenchmarkEndpointChange changes the backends of one service (one backend
// replaced by a new one, alternately added and removed) with n services of
// 10 backends installed, through the loop, the renderer and the driver into
// the stand-in; it reports the VPP requests per change. The last case
// changes a service at the Kubernetes maximum of 250 endpoints per slice.
func BenchmarkEndpointChange(b *testing.B) {
	for _, c := range []struct{ services, backends int }{{100, 10}, {10000, 10}, {10000, 250}} {
		n := c.services
		b.Run(fmt.Sprintf("services=%d/backends=%d", n, c.backends), func(b *testing.B) {
			vpp := vppsim.New(vppsim.Config{})
			a := newBenchAgent(b, vpp)
			defer a.stop()
			a.resync(b, clusterState(n, 10))
			name := fmt.Sprintf("svc-%d", n/2)
			key := kubemodel.EndpointsKey("default", name)
			// Two versions, one backend apart: each change adds or
			// removes one backend.
			eps := []*kubemodel.Endpoints{benchEndpoints(name, n/2, c.backends), benchEndpoints(name, n/2, c.backends+1)}
			if c.backends != 10 { // the resync installed 10
				a.change(b, &controller.KubeStateChange{Resource: kubemodel.EndpointsResource, Key: key,
					PrevValue: benchEndpoints(name, n/2, 10), NewValue: eps[0]})
			}
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

// BenchmarkRender measures the renderer with the service processor alone
// (no loop, no driver): a resync of n services with 10 backends, and one
// endpoint change with n services installed.
func BenchmarkRender(b *testing.B) {
	for _, n := range []int{100, 10000} {
		ksd := clusterState(n, 10)
		newRig := func() *svcprocessor.ServiceProcessor {
			nat, err := svcnat.New(svcnat.NodeIPsFunc(func() []netip.Addr { return nil }),
				svcnat.NATLoopbackFunc(func() netip.Addr { return netip.MustParseAddr("172.30.1.254") }), svcnat.Config{Uplink: uplink})
			require.NoError(b, err)
			sp, err := svcprocessor.New(svcprocessortest.NewSubnets(netip.MustParsePrefix("10.1.1.0/24"), netip.MustParsePrefix("10.1.0.0/16")), svcprocessor.NodeIPsFunc(func() []netip.Addr { return nil }),
				svcprocessor.PodInterfacesFunc(func(kubemodel.PodID) (string, bool) { return "", false }), svcprocessor.Config{})
			require.NoError(b, err)
			require.NoError(b, sp.RegisterRenderer(nat))
			return sp
		}
		b.Run(fmt.Sprintf("resync/services=%d", n), func(b *testing.B) {
			sp := newRig()
			b.ReportAllocs()
			for b.Loop() {
				txn := controllertest.NewTxn()
				require.NoError(b, sp.Handler().Resync(controller.NewDBResync(), ksd, 1, txn))
			}
		})
		b.Run(fmt.Sprintf("endpoint change/services=%d", n), func(b *testing.B) {
			sp := newRig()
			require.NoError(b, sp.Handler().Resync(controller.NewDBResync(), ksd, 1, controllertest.NewTxn()))
			name := fmt.Sprintf("svc-%d", n/2)
			key := kubemodel.EndpointsKey("default", name)
			eps := []*kubemodel.Endpoints{benchEndpoints(name, n/2, 10), benchEndpoints(name, n/2, 11)}
			txn := controllertest.NewTxn()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				txn.Reset()
				if _, err := sp.Handler().Update(&controller.KubeStateChange{Resource: kubemodel.EndpointsResource, Key: key,
					PrevValue: eps[(i+1)%2], NewValue: eps[i%2]}, txn); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package svcprocessor_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/svcprocessor/svcprocessortest"
)

const thisNode = "node1"

var (
	thisSubnet = netip.MustParsePrefix("10.1.1.0/24")
	allSubnet  = netip.MustParsePrefix("10.1.0.0/16")
	node1IP    = netip.MustParseAddr("192.168.16.1")
	node2IP    = netip.MustParseAddr("192.168.16.2")
	node3IP    = netip.MustParseAddr("192.168.16.3")
)

// fixture is a processor wired to fakes and one recording renderer.
type fixture struct {
	sp      *svcprocessor.ServiceProcessor
	subnets *svcprocessortest.Subnets
	nodes   *svcprocessortest.NodeIPs
	pods    *svcprocessortest.Pods
	rec     *svcprocessortest.Recorder
}

func newFixture(t testing.TB, cfg svcprocessor.Config) *fixture {
	t.Helper()
	f := &fixture{
		subnets: svcprocessortest.NewSubnets(thisSubnet, allSubnet),
		nodes:   svcprocessortest.NewNodeIPs(node1IP, node2IP),
		pods:    svcprocessortest.NewPods(),
		rec:     &svcprocessortest.Recorder{},
	}
	if cfg.NodeName == "" {
		cfg.NodeName = thisNode
	}
	sp, err := svcprocessor.New(f.subnets, f.nodes, f.pods, cfg)
	require.NoError(t, err)
	require.NoError(t, sp.RegisterRenderer(f.rec))
	f.sp = sp
	t.Cleanup(func() { _ = sp.Close() })
	return f
}

func sid(ns, name string) kubemodel.ServiceID { return kubemodel.ServiceID{Namespace: ns, Name: name} }
func pid(ns, name string) kubemodel.PodID     { return kubemodel.PodID{Namespace: ns, Name: name} }

func mkService(ns, name string, mod func(s *kubemodel.Service)) *kubemodel.Service {
	s := &kubemodel.Service{
		Namespace:  ns,
		Name:       name,
		ClusterIps: []string{"10.96.0.10"},
		Ports:      []*kubemodel.ServicePort{{Name: "http", Protocol: kubemodel.Protocol_TCP, Port: 80, TargetPortNumber: 8080}},
	}
	if mod != nil {
		mod(s)
	}
	return s
}

func mkAddr(ip, pod, node string) *kubemodel.EndpointAddress {
	a := &kubemodel.EndpointAddress{Ip: ip, NodeName: node}
	if pod != "" {
		a.TargetRef = &kubemodel.ObjectReference{Kind: "Pod", Name: pod}
	}
	return a
}

func mkEndpoints(ns, name string, subsets ...*kubemodel.EndpointSubset) *kubemodel.Endpoints {
	return &kubemodel.Endpoints{Namespace: ns, Name: name, Subsets: subsets}
}

func httpSubset(addrs ...*kubemodel.EndpointAddress) *kubemodel.EndpointSubset {
	return &kubemodel.EndpointSubset{
		Addresses: addrs,
		Ports:     []*kubemodel.EndpointPort{{Name: "http", Port: 8080, Protocol: kubemodel.Protocol_TCP}},
	}
}

func svcChange(prev, cur *kubemodel.Service) *controller.KubeStateChange {
	ev := &controller.KubeStateChange{Resource: kubemodel.ServiceResource}
	v := cur
	if v == nil {
		v = prev
	}
	ev.Key = kubemodel.ServiceKey(v.GetNamespace(), v.GetName())
	if prev != nil {
		ev.PrevValue = prev
	}
	if cur != nil {
		ev.NewValue = cur
	}
	return ev
}

func epsChange(prev, cur *kubemodel.Endpoints) *controller.KubeStateChange {
	ev := &controller.KubeStateChange{Resource: kubemodel.EndpointsResource}
	v := cur
	if v == nil {
		v = prev
	}
	ev.Key = kubemodel.EndpointsKey(v.GetNamespace(), v.GetName())
	if prev != nil {
		ev.PrevValue = prev
	}
	if cur != nil {
		ev.NewValue = cur
	}
	return ev
}

func kubeState(svcs []*kubemodel.Service, epss []*kubemodel.Endpoints, pods []*kubemodel.Pod) controller.KubeStateData {
	ksd := controller.NewKubeStateData()
	s := make(controller.KeyValuePairs)
	for _, v := range svcs {
		s[kubemodel.ServiceKey(v.Namespace, v.Name)] = v
	}
	e := make(controller.KeyValuePairs)
	for _, v := range epss {
		e[kubemodel.EndpointsKey(v.Namespace, v.Name)] = v
	}
	p := make(controller.KeyValuePairs)
	for _, v := range pods {
		p[kubemodel.PodKey(v.Namespace, v.Name)] = v
	}
	ksd[kubemodel.ServiceResource] = s
	ksd[kubemodel.EndpointsResource] = e
	ksd[kubemodel.PodResource] = p
	return ksd
}

// normSnap makes empty and nil slices compare equal.
func normSnap(s *svcprocessor.Snapshot) svcprocessor.Snapshot {
	out := *s
	if len(out.Services) == 0 {
		out.Services = nil
	}
	if len(out.NodeIPs) == 0 {
		out.NodeIPs = nil
	}
	if len(out.Frontends) == 0 {
		out.Frontends = nil
	}
	if len(out.Backends) == 0 {
		out.Backends = nil
	}
	return out
}

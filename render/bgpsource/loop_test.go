package bgpsource_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
	"github.com/vswitchkit/vswitchkit/render/bgpsource"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
)

const waitFor = 20 * time.Second

// agent is the BGP part of an agent: a controller loop with IPAM (external
// mode: the pod CIDR comes from the node object), the service processor
// and the BGP source, feeding a bgp.Controller over a GoBGP manager.
type agent struct {
	loop *controller.Loop
	ctrl *bgp.Controller
	mgr  *gobgp.Manager
}

func startAgent(t *testing.T, nodeName string, ipv4 netip.Addr) *agent {
	t.Helper()
	loop, err := controller.New(nil, &controllertest.Southbound{}, controller.Config{})
	require.NoError(t, err)
	im, err := ipam.New(ipamtest.NewNodeID(1), ipam.Config{
		PodSubnetCIDR: netip.MustParsePrefix("10.244.0.0/16"), ExternalIPAM: true, NodeName: nodeName, EventLoop: loop,
	})
	require.NoError(t, err)
	sp, err := svcprocessor.New(svcprocessor.SubnetsFromIPNet(im), svcprocessor.NodeIPsFunc(func() []netip.Addr { return nil }),
		svcprocessor.PodInterfacesFunc(func(kubemodel.PodID) (string, bool) { return "", false }), svcprocessor.Config{NodeName: nodeName})
	require.NoError(t, err)
	sig := bgp.NewSignaler()
	src, err := bgpsource.New(nodeName, sig, bgpsource.Config{PodSubnets: []bgpsource.PodSubnets{im}, IPv4: ipv4})
	require.NoError(t, err)
	require.NoError(t, sp.RegisterRenderer(src))
	require.NoError(t, loop.Register(im, sp.Handler(), src))
	mgr, err := gobgp.New(gobgp.Config{Services: src})
	require.NoError(t, err)
	ctrl, err := bgp.NewController(mgr, src, src, bgp.ControllerConfig{Signaler: sig, RetryInterval: 100 * time.Millisecond})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{loop.Run, mgr.Run, ctrl.Run} {
		wg.Go(func() { _ = run(ctx) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return &agent{loop: loop, ctrl: ctrl, mgr: mgr}
}

func (a *agent) push(t *testing.T, ev controller.Event) {
	t.Helper()
	require.NoError(t, a.loop.PushEvent(ev))
}

func node(name string, labels map[string]string, podCIDR string) *kubemodel.Node {
	return &kubemodel.Node{Name: name, Labels: labels, PodCidrs: []string{podCIDR}}
}

// TestSourceUnderControllerLoop drives the source with a real controller loop:
// a pod CIDR change (IPAM's PodCIDRChange), a node label change (policy
// selection) and service and endpoint changes (the service processor's
// local backends) reach a GoBGP peer on loopback.
func TestSourceUnderControllerLoop(t *testing.T) {
	const nodeName = "worker-1"
	local := netip.MustParseAddr("127.0.0.61")
	peer := gobgptest.StartPeer(t, gobgptest.PeerConfig{Address: netip.MustParseAddr("127.0.0.62"), ASN: 65062})
	peer.AddNeighbor(t, gobgptest.Neighbor{Address: local, ASN: 65061, Families: []bgp.Family{bgp.IPv4Unicast}})
	a := startAgent(t, nodeName, local)

	policy := &bgpmodel.PeeringPolicy{
		Name:         "bgp-nodes",
		NodeSelector: &bgpmodel.LabelSelector{MatchLabels: map[string]string{"bgp": "on"}},
		VirtualRouters: []*bgpmodel.VirtualRouter{{
			LocalAsn: 65061, ExportPodCidr: true,
			ServiceSelector: &bgpmodel.LabelSelector{MatchLabels: map[string]string{"announce": "yes"}},
			Neighbors: []*bgpmodel.Neighbor{{
				PeerAddress: peer.Address().String(), PeerPort: uint32(peer.Port()), PeerAsn: 65062,
				LocalAddress: local.String(), ConnectRetryTimeSeconds: 2, HoldTimeSeconds: 9, KeepaliveTimeSeconds: 3,
				Families: []string{string(bgp.IPv4Unicast)},
			}},
		}},
	}
	svc := &kubemodel.Service{Namespace: "prod", Name: "web", Labels: map[string]string{"announce": "yes"},
		Type: kubemodel.Service_LOAD_BALANCER, ExternalTrafficPolicy: kubemodel.Service_LOCAL,
		ClusterIps: []string{"10.96.0.10"}, LbIngressIps: []string{"192.0.2.10"},
		Ports: []*kubemodel.ServicePort{{Name: "http", Port: 80, TargetPortNumber: 8080}}}
	endpoints := func(ip string) *kubemodel.Endpoints {
		return &kubemodel.Endpoints{Namespace: "prod", Name: "web", Subsets: []*kubemodel.EndpointSubset{{
			Addresses: []*kubemodel.EndpointAddress{{Ip: ip}},
			Ports:     []*kubemodel.EndpointPort{{Name: "http", Port: 8080}},
		}}}
	}

	db := controller.NewDBResync()
	db.KubeState[kubemodel.NodeResource] = controller.KeyValuePairs{
		kubemodel.NodeKey(nodeName): node(nodeName, map[string]string{"bgp": "on"}, "10.244.1.0/24")}
	db.KubeState[bgpmodel.PolicyResourceName] = controller.KeyValuePairs{bgpmodel.PolicyKey("bgp-nodes"): policy}
	db.KubeState[kubemodel.ServiceResource] = controller.KeyValuePairs{kubemodel.ServiceKey("prod", "web"): svc}
	db.KubeState[kubemodel.EndpointsResource] = controller.KeyValuePairs{
		kubemodel.EndpointsKey("prod", "web"): endpoints("10.244.9.7")} // on another node
	a.push(t, db)

	pod1, pod2 := netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("10.244.2.0/24")
	lbIP := netip.MustParsePrefix("192.0.2.10/32")
	peer.WaitPrefix(t, pod1, true)
	require.Equal(t, map[netip.Prefix]gobgptest.Route{pod1: {NextHop: local}}, peer.Routes(t, bgp.IPv4Unicast),
		"the pod CIDR, not the eTP-Local service without a local backend")

	// Pod CIDR change: the node object changes, IPAM pushes a PodCIDRChange.
	a.push(t, &controller.KubeStateChange{Resource: kubemodel.NodeResource, Key: kubemodel.NodeKey(nodeName),
		PrevValue: db.KubeState[kubemodel.NodeResource][kubemodel.NodeKey(nodeName)],
		NewValue:  node(nodeName, map[string]string{"bgp": "on"}, "10.244.2.0/24")})
	peer.WaitPrefix(t, pod2, true)
	peer.WaitPrefix(t, pod1, false)

	// A local ready backend: the eTP-Local service is advertised.
	a.push(t, &controller.KubeStateChange{Resource: kubemodel.EndpointsResource, Key: kubemodel.EndpointsKey("prod", "web"),
		PrevValue: endpoints("10.244.9.7"), NewValue: endpoints("10.244.2.5")})
	peer.WaitPrefix(t, lbIP, true)

	// Service change: a new ingress IP replaces the old one.
	svc2 := proto.Clone(svc).(*kubemodel.Service)
	svc2.LbIngressIps = []string{"192.0.2.20"}
	a.push(t, &controller.KubeStateChange{Resource: kubemodel.ServiceResource, Key: kubemodel.ServiceKey("prod", "web"),
		PrevValue: svc, NewValue: svc2})
	peer.WaitPrefix(t, netip.MustParsePrefix("192.0.2.20/32"), true)
	peer.WaitPrefix(t, lbIP, false)

	// Node label change: the policy no longer selects the node; then again.
	a.push(t, &controller.KubeStateChange{Resource: kubemodel.NodeResource, Key: kubemodel.NodeKey(nodeName),
		NewValue: node(nodeName, map[string]string{"bgp": "off"}, "10.244.2.0/24")})
	peer.WaitCount(t, bgp.IPv4Unicast, 0)
	// The peer sees the withdrawal before the controller records the
	// reconcile that made it.
	require.Eventually(t, func() bool { return a.ctrl.Status().Policy == "" }, waitFor, 10*time.Millisecond)
	a.push(t, &controller.KubeStateChange{Resource: kubemodel.NodeResource, Key: kubemodel.NodeKey(nodeName),
		NewValue: node(nodeName, map[string]string{"bgp": "on"}, "10.244.2.0/24")})
	peer.WaitCount(t, bgp.IPv4Unicast, 2)
	require.Eventually(t, func() bool { return a.ctrl.Status().Policy == "bgp-nodes" }, waitFor, 10*time.Millisecond)
	require.NoError(t, a.ctrl.Status().LastError)
}

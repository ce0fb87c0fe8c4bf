package demo

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vswitchkit/vswitchkit/bgp/bgpreflector"
)

// The cluster's fixed parameters.
const (
	namespace = "default"
	// asn is the ASN of the nodes and the route reflector (iBGP).
	asn = 64512
	// bgpLabel selects the nodes of the BGP cluster config; the demo sets
	// it node by node (see the package documentation).
	bgpLabel = "vswitchkit.io/bgp"
	// configName is the BGP cluster config's name.
	configName = "demo"
	// The communities of the routes the route reflector receives: pod
	// subnets and the services' aggregates.
	podCommunity     = "64512:100"
	serviceCommunity = "64512:200"
	// serviceAggregate is the length of the aggregates of the services'
	// load-balancer and external IPs (services with externalTrafficPolicy
	// Local stay exact, from the nodes with a backend).
	serviceAggregate = 24
	// servicePort and targetPort are every service's port and its pods'.
	servicePort = 80
	targetPort  = 8080
)

// Service kinds, in the order --services cycles through them.
const (
	KindClusterIP    = "ClusterIP"
	KindNodePort     = "NodePort"
	KindLoadBalancer = "LoadBalancer"
	KindExternalIP   = "ExternalIP"   // a ClusterIP service with spec.externalIPs
	KindLocal        = "LocalTraffic" // a LoadBalancer with externalTrafficPolicy Local
)

var kinds = []string{KindClusterIP, KindNodePort, KindLoadBalancer, KindExternalIP, KindLocal}
var kindNames = []string{"web", "api", "shop", "legacy", "edge"}

// service is a service of the demo cluster (the intent; the Kubernetes
// object is built from it).
type service struct {
	name, kind string
	clusterIP  netip.Addr
	clusterIP6 netip.Addr // dual-stack: the IPv6 cluster IP; else invalid
	nodePort   uint16     // 0: none
	externalIP netip.Addr // invalid: none
	lbIP       netip.Addr // invalid: none
	local      bool       // externalTrafficPolicy Local
}

// newService returns the i-th (0-based) service.
func newService(i int) *service {
	k := i % len(kinds)
	s := &service{name: kindNames[k], kind: kinds[k], clusterIP: netip.AddrFrom4([4]byte{10, 96, 0, byte(10 + i)})}
	if i >= len(kinds) {
		s.name += "-" + strconv.Itoa(i/len(kinds)+1)
	}
	switch s.kind {
	case KindNodePort:
		s.nodePort = uint16(30080 + i)
	case KindLoadBalancer, KindLocal:
		s.nodePort = uint16(30080 + i)
		s.lbIP = netip.AddrFrom4([4]byte{198, 51, 100, byte(10 + i)})
		s.local = s.kind == KindLocal
	case KindExternalIP:
		s.externalIP = netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)})
	}
	return s
}

// serviceIPv6 returns the IPv6 cluster IP of the i-th service in a
// dual-stack cluster: fd00:96::<10+i> (agent.DefaultIPv6Plan's range).
func serviceIPv6(i int) netip.Addr {
	a := netip.MustParseAddr("fd00:96::").As16()
	a[14], a[15] = byte((10+i)>>8), byte(10+i)
	return netip.AddrFrom16(a)
}

// pod is a pod of the demo cluster.
type pod struct {
	name, node, service string
	uid                 types.UID
	containerID         string
	ip                  netip.Addr // from the CNI result; invalid until then
	ip6                 netip.Addr // dual-stack: the IPv6 address from the CNI result
}

func (p *pod) netns() string { return "/var/run/netns/cni-" + p.containerID[:12] }

// nodeObject is the Kubernetes node of simulated node i (1-based). Its
// speaker's router ID and listening port are in its BGP override
// (bgpObjects).
func nodeObject(name string, i int, internalIP netip.Addr) *corev1.Node {
	zones := []string{"zone-a", "zone-b", "zone-c"}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			UID:  types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i)),
			Labels: map[string]string{
				"kubernetes.io/hostname":      name,
				"kubernetes.io/os":            "linux",
				"topology.kubernetes.io/zone": zones[(i-1)%len(zones)],
			},
		},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: internalIP.String()},
				{Type: corev1.NodeHostName, Address: name},
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

// podObject is a scheduled pod whose sandbox is not up yet.
func podObject(p *pod) *corev1.Pod {
	labels := map[string]string{}
	if p.service != "" {
		labels["app"] = p.service
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: namespace, UID: p.uid, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName: p.node,
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: targetPort, Protocol: corev1.ProtocolTCP}},
			}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

// runningStatus is the status kubelet reports once the sandbox has its
// address.
func runningStatus(p *pod, hostIP netip.Addr) corev1.PodStatus {
	return corev1.PodStatus{
		Phase:   corev1.PodRunning,
		PodIP:   p.ip.String(),
		PodIPs:  podIPs(p),
		HostIP:  hostIP.String(),
		HostIPs: []corev1.HostIP{{IP: hostIP.String()}},
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
		},
	}
}

// podIPs are the pod's addresses in its status: IPv4, then IPv6.
func podIPs(p *pod) []corev1.PodIP {
	out := []corev1.PodIP{{IP: p.ip.String()}}
	if p.ip6.IsValid() {
		out = append(out, corev1.PodIP{IP: p.ip6.String()})
	}
	return out
}

// serviceObject is the Kubernetes service of s.
func serviceObject(s *service) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: namespace, Labels: map[string]string{"app": s.name}},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			Selector:   map[string]string{"app": s.name},
			ClusterIP:  s.clusterIP.String(),
			ClusterIPs: []string{s.clusterIP.String()},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, Port: servicePort,
				TargetPort: intstr.FromInt32(targetPort), NodePort: int32(s.nodePort),
			}},
			SessionAffinity: corev1.ServiceAffinityNone,
		},
	}
	if s.clusterIP6.IsValid() {
		dual := corev1.IPFamilyPolicyRequireDualStack
		svc.Spec.IPFamilyPolicy = &dual
		svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, s.clusterIP6.String())
		svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, corev1.IPv6Protocol)
	}
	cluster := corev1.ServiceInternalTrafficPolicyCluster
	svc.Spec.InternalTrafficPolicy = &cluster
	if s.nodePort != 0 {
		svc.Spec.Type = corev1.ServiceTypeNodePort
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if s.externalIP.IsValid() {
		svc.Spec.ExternalIPs = []string{s.externalIP.String()}
	}
	if s.lbIP.IsValid() {
		svc.Spec.Type = corev1.ServiceTypeLoadBalancer
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: s.lbIP.String()}}
	}
	if s.local {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		svc.Spec.HealthCheckNodePort = int32(s.nodePort) + 2000
	}
	return svc
}

// sliceObjects are the EndpointSlices of s with the given ready pods, as
// the endpoint-slice controller maintains them: one of IPv4 addresses,
// and for a dual-stack service one of IPv6 addresses.
func sliceObjects(s *service, pods []*pod) []*discoveryv1.EndpointSlice {
	out := []*discoveryv1.EndpointSlice{sliceObject(s, pods)}
	if s.clusterIP6.IsValid() {
		es := sliceObject(s, pods)
		es.Name, es.AddressType = s.name+"-demo-v6", discoveryv1.AddressTypeIPv6
		for i, p := range pods {
			es.Endpoints[i].Addresses = []string{p.ip6.String()}
		}
		out = append(out, es)
	}
	return out
}

// sliceObject is the EndpointSlice of s with the given ready pods' IPv4
// addresses, as the endpoint-slice controller maintains it.
func sliceObject(s *service, pods []*pod) *discoveryv1.EndpointSlice {
	ready, serving, terminating := true, true, false
	portName, port, proto := "http", int32(targetPort), corev1.ProtocolTCP
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.name + "-demo", Namespace: namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: s.name,
				discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
		Endpoints:   []discoveryv1.Endpoint{},
	}
	for _, p := range pods {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{p.ip.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
			NodeName:   &p.node,
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: p.name, UID: p.uid},
		})
	}
	return es
}

// bgpObjects are the BGP configuration (v2, bgp.vswitchkit.io): the
// nodes labelled bgpLabel run one BGP instance with one peer, the route
// reflector, which opens the sessions (the peer config is passive); the
// peer's IPv4 family takes two advertisements: the pod CIDR with
// podCommunity, and the load-balancer and external IPs of every service,
// aggregated to /serviceAggregate, with serviceCommunity. Each node's
// override sets its router ID and its local port (the speaker listens on
// its own address).
func bgpObjects(rr netip.Addr, nodes []*simNode) []*unstructured.Unstructured {
	obj := func(kind, name string, labels map[string]any, spec map[string]any) *unstructured.Unstructured {
		meta := map[string]any{"name": name}
		if labels != nil {
			meta["labels"] = labels
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": bgpreflector.GroupV2 + "/" + bgpreflector.VersionV2, "kind": kind, "metadata": meta, "spec": spec,
		}}
	}
	out := []*unstructured.Unstructured{
		obj(bgpreflector.KindClusterConfig, configName, nil, map[string]any{
			"nodeSelector": map[string]any{"matchLabels": map[string]any{bgpLabel: "enabled"}},
			"bgpInstances": []any{map[string]any{
				"name": "demo", "localASN": int64(asn),
				"peers": []any{map[string]any{"name": "route-reflector", "peerAddress": rr.String(), "peerASN": int64(asn),
					"peerConfigRef": map[string]any{"name": "route-reflector"}}},
			}},
		}),
		obj(bgpreflector.KindPeerConfig, "route-reflector", nil, map[string]any{
			"transport": map[string]any{"passive": true},
			"families": []any{map[string]any{"afi": "ipv4", "safi": "unicast",
				"advertisements": map[string]any{"matchLabels": map[string]any{"advertise": "route-reflector"}}}},
		}),
		obj(bgpreflector.KindAdvertisement, "pod-cidrs", map[string]any{"advertise": "route-reflector"}, map[string]any{
			"advertisements": []any{map[string]any{"advertisementType": "PodCIDR",
				"attributes": map[string]any{"communities": map[string]any{"standard": []any{podCommunity}}}}},
		}),
		obj(bgpreflector.KindAdvertisement, "services", map[string]any{"advertise": "route-reflector"}, map[string]any{
			"advertisements": []any{map[string]any{"advertisementType": "Service",
				"service":    map[string]any{"addresses": []any{"LoadBalancerIP", "ExternalIP"}, "aggregationLengthIPv4": int64(serviceAggregate)},
				"selector":   map[string]any{"matchExpressions": []any{map[string]any{"key": "app", "operator": "Exists"}}},
				"attributes": map[string]any{"communities": map[string]any{"standard": []any{serviceCommunity}}}}},
		}),
	}
	for _, n := range nodes {
		out = append(out, obj(bgpreflector.KindNodeConfigOverride, n.name, nil, map[string]any{
			"bgpInstances": []any{map[string]any{"name": "demo", "routerID": n.bgpAddr.String(), "localPort": int64(n.bgpPort)}},
		}))
	}
	return out
}

// sortedPods returns the pods in name order.
func sortedPods(m map[string]*pod) []*pod {
	out := make([]*pod, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *pod) int { return comparePodNames(a.name, b.name) })
	return out
}

// comparePodNames orders "web-2" before "web-10".
func comparePodNames(a, b string) int {
	ai, bi := len(a), len(b)
	for ai > 0 && a[ai-1] >= '0' && a[ai-1] <= '9' {
		ai--
	}
	for bi > 0 && b[bi-1] >= '0' && b[bi-1] <= '9' {
		bi--
	}
	if a[:ai] != b[:bi] || ai == len(a) || bi == len(b) {
		if a < b {
			return -1
		} else if a > b {
			return 1
		}
		return 0
	}
	an, _ := strconv.Atoi(a[ai:])
	bn, _ := strconv.Atoi(b[bi:])
	return an - bn
}

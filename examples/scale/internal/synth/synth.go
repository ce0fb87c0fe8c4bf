// Package synth generates the synthetic cluster of the scale envelope:
// Kubernetes nodes, pods, services and their endpoints, the vswitch node
// records and node-ID claims of nodesync, and a BGP peering policy, as the
// protobuf values and etcd keys the reflector and nodesync write.
//
// Everything is a pure function of a [Spec]: the runner regenerates any
// object (say the endpoints of service 42, to change one address) without
// keeping the cluster in memory.
package synth

import (
	"fmt"
	"net/netip"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/nodesync"
	nsmodel "github.com/vswitchkit/vswitchkit/nodesync/nodesyncmodel"
)

// Address plan of the synthetic cluster, large enough for 16384 node IDs.
var (
	PodSubnetCIDR        = netip.MustParsePrefix("10.128.0.0/10") // /24 per node
	PodSubnetNodeLen     = 24
	VPPHostSubnetCIDR    = netip.MustParsePrefix("172.16.0.0/12") // /26 per node
	VPPHostSubnetNodeLen = 26
	NodeInterconnectCIDR = netip.MustParsePrefix("10.16.0.0/16")
	VXLANCIDR            = netip.MustParsePrefix("10.17.0.0/16")
	ServiceCIDR          = netip.MustParsePrefix("10.96.0.0/12")
	mgmtCIDR             = netip.MustParsePrefix("10.20.0.0/16")
	lbCIDR               = netip.MustParsePrefix("198.18.0.0/15")
)

// IPAMConfig is the agent's address plan for the synthetic cluster.
func IPAMConfig() ipam.Config {
	return ipam.Config{
		PodSubnetCIDR: PodSubnetCIDR, PodSubnetOneNodePrefixLen: PodSubnetNodeLen,
		VPPHostSubnetCIDR: VPPHostSubnetCIDR, VPPHostSubnetOneNodePrefixLen: VPPHostSubnetNodeLen,
		NodeInterconnectCIDR: NodeInterconnectCIDR,
		VXLANCIDR:            VXLANCIDR,
		ServiceCIDR:          ServiceCIDR,
	}
}

// Kubernetes limits and proportions.
const (
	// MaxEndpointsPerSlice is Kubernetes' maximum number of endpoints in
	// one EndpointSlice.
	MaxEndpointsPerSlice = 250
	// MeasuredNodeID is the node ID the measured agent gets: the other
	// nodes have 2..N.
	MeasuredNodeID = 1
	// ServicePort and TargetPort are the port of every service and of
	// its backends; every tenth service has a second port (443 → 8443).
	ServicePort, TargetPort = 80, 8080
	// PolicyName is the BGP peering policy's name; LocalASN its ASN.
	PolicyName = "scale"
	LocalASN   = 64512
)

// Spec describes a synthetic cluster. Build it with [New].
type Spec struct {
	// Nodes is the number of nodes, the measured one included.
	Nodes int
	// PodsPerNode is the number of pods on every other node.
	PodsPerNode int
	// LocalPods are the addresses of the pods on the measured node, in
	// the order of their names (local-0, local-1, ...), as the agent's
	// pod server gave them.
	LocalPods []netip.Addr
	// Services is the number of services.
	Services int
	// BigEvery: every BigEvery-th service has MaxEndpointsPerSlice
	// endpoints (one full slice); the others 5 to 10, so that the average
	// is about 10.
	BigEvery int
	// Namespaces is the number of namespaces the pods and services are
	// spread over.
	Namespaces int
	// NetworkPolicies: with it, every namespace (the measured node's
	// too) has the two NetworkPolicies of [Spec.Policies], and the
	// namespaces carry a team label; the agent's policy processor then
	// holds a peer index of every pod's peer record, as in a cluster that
	// uses NetworkPolicy.
	NetworkPolicies bool
	// Teams is the number of team labels of the namespaces (namespace k:
	// team t<k mod Teams>). Default: 10.
	Teams int
	// Layout is the key layout of the Kubernetes state
	// (kubemodel.LayoutFlat or kubemodel.LayoutNodePods); 0 means
	// kubemodel.CurrentLayout, the reflector's.
	Layout int
}

// layout returns the layout of s.
func (s Spec) layout() int {
	if s.Layout == 0 {
		return kubemodel.CurrentLayout
	}
	return s.Layout
}

// New returns the spec of a cluster of n nodes in Kubernetes' proportions
// at its limit (5000 nodes, 150k pods, 10k services): 30 pods per node
// and 2 services per node, 10 endpoints per service on average, one
// service in a hundred with a full slice of 250.
func New(n int, localPods []netip.Addr) Spec {
	return Spec{Nodes: n, PodsPerNode: 30, LocalPods: localPods, Services: 2 * n, BigEvery: 100, Namespaces: max(1, n/50)}
}

// teams returns the number of team labels of s.
func (s Spec) teams() int {
	if s.Teams <= 0 {
		return 10
	}
	return s.Teams
}

// Team returns the team label of namespace k (the measured node's
// namespace: k = -1) in s.
func (s Spec) Team(k int) string {
	if k < 0 {
		return "t0"
	}
	return fmt.Sprint("t", k%s.teams())
}

// namespaceObject returns namespace k (-1: the measured node's).
func (s Spec) namespaceObject(k int) KV {
	name := LocalPodNamespace
	if k >= 0 {
		name = Namespace(k)
	}
	ns := &kubemodel.Namespace{Name: name}
	if s.NetworkPolicies {
		ns.Labels = map[string]string{"team": s.Team(k), "kubernetes.io/metadata.name": name}
	}
	return kube(kubemodel.NamespaceKey(name), ns)
}

// Policies returns the NetworkPolicies of namespace k (-1: the measured
// node's) when s has them: a default deny of ingress to every pod of the
// namespace, and an allow of TCP "http" to every pod of it from the pods
// of the namespace and from those of the namespaces of the same team (at
// 5000 nodes: 1500 pods of its own and 15,000 of its team).
func (s Spec) Policies(k int) []KV {
	if !s.NetworkPolicies {
		return nil
	}
	ns := LocalPodNamespace
	if k >= 0 {
		ns = Namespace(k)
	}
	all := &kubemodel.LabelSelector{}
	return []KV{
		kube(kubemodel.NetworkPolicyKey(ns, "default-deny"), &kubemodel.NetworkPolicy{Namespace: ns, Name: "default-deny",
			PodSelector: all, PolicyTypes: []kubemodel.PolicyType{kubemodel.PolicyType_INGRESS}}),
		kube(kubemodel.NetworkPolicyKey(ns, "allow-team"), &kubemodel.NetworkPolicy{Namespace: ns, Name: "allow-team",
			PodSelector: all, PolicyTypes: []kubemodel.PolicyType{kubemodel.PolicyType_INGRESS},
			Ingress: []*kubemodel.NetworkPolicyIngressRule{{
				From: []*kubemodel.NetworkPolicyPeer{
					{PodSelector: &kubemodel.LabelSelector{}},
					{NamespaceSelector: &kubemodel.LabelSelector{MatchLabels: map[string]string{"team": s.Team(k)}}},
				},
				Ports: []*kubemodel.NetworkPolicyPort{{PortName: "http", Protocol: kubemodel.Protocol_TCP}},
			}}}),
	}
}

// NetworkPolicyCount is the number of NetworkPolicies of s.
func (s Spec) NetworkPolicyCount() int {
	if !s.NetworkPolicies {
		return 0
	}
	return 2 * (s.Namespaces + 1)
}

// MeasuredNode is the name of the measured agent's node.
const MeasuredNode = "node-00000"

// LocalPodNamespace is the namespace of the measured node's pods.
const LocalPodNamespace = "local"

// LocalPodName returns the name of the i-th pod on the measured node.
func LocalPodName(i int) string { return fmt.Sprintf("local-%d", i) }

// LocalContainerID returns the container ID of the i-th local pod.
func LocalContainerID(i int) string { return fmt.Sprintf("c-local-%d", i) }

// NodeName returns the name of node i (0 is the measured node).
func NodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// NodeID returns the node ID of node i.
func NodeID(i int) uint32 { return uint32(i) + MeasuredNodeID }

// Pods returns the number of pods in the cluster.
func (s Spec) Pods() int { return (s.Nodes-1)*s.PodsPerNode + len(s.LocalPods) }

// EndpointCount returns the number of endpoints of service i.
func (s Spec) EndpointCount(i int) int {
	if s.BigEvery > 0 && i%s.BigEvery == s.BigEvery-1 {
		return MaxEndpointsPerSlice
	}
	return 5 + i%6
}

// Endpoints returns the number of endpoints of all services.
func (s Spec) Endpoints() int {
	n := 0
	for i := range s.Services {
		n += s.EndpointCount(i)
	}
	return n
}

// nth returns the address n after the start of p.
func nth(p netip.Prefix, n uint64) netip.Addr {
	b := p.Masked().Addr().As4()
	v := uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
	v += n
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// slice returns slice number id of length bits of p (as IPAM computes a
// node's subnet from its ID).
func slice(p netip.Prefix, bits int, id uint32) netip.Prefix {
	return netip.PrefixFrom(nth(p, uint64(id)<<(32-bits)), bits)
}

// PodSubnet returns the pod subnet of node ID id.
func PodSubnet(id uint32) netip.Prefix { return slice(PodSubnetCIDR, PodSubnetNodeLen, id) }

// HostSubnet returns the VPP-host subnet of node ID id.
func HostSubnet(id uint32) netip.Prefix { return slice(VPPHostSubnetCIDR, VPPHostSubnetNodeLen, id) }

// NodeIP returns the node-interconnect (VPP) address of node ID id.
func NodeIP(id uint32) netip.Addr { return nth(NodeInterconnectCIDR, uint64(id)) }

// MgmtIP returns the management (Kubernetes InternalIP) address of node ID id.
func MgmtIP(id uint32) netip.Addr { return nth(mgmtCIDR, uint64(id)) }

// ClusterIP returns the cluster IP of service i.
func ClusterIP(i int) netip.Addr { return nth(ServiceCIDR, uint64(i)+1) }

// Namespace returns the name of namespace k.
func Namespace(k int) string { return fmt.Sprintf("ns-%03d", k) }

// PodIP returns the address of pod j on node i (i ≥ 1).
func PodIP(i, j int) netip.Addr { return nth(PodSubnet(NodeID(i)), uint64(j)+2) }

// podRef names a pod by node index and number; node 0 is the measured
// node, whose pods are the local ones.
type podRef struct{ node, j int }

// podAt returns the k-th pod in the interleaved order used for
// endpoints: pod 0 of every node, then pod 1 of every node, ... (so that
// the endpoints of a service are spread over many nodes).
func (s Spec) podAt(k int) podRef {
	k %= s.Pods()
	for j := 0; ; j++ {
		if j < len(s.LocalPods) {
			if k == 0 {
				return podRef{0, j}
			}
			k--
		}
		if j < s.PodsPerNode && s.Nodes > 1 {
			if k < s.Nodes-1 {
				return podRef{k + 1, j}
			}
			k -= s.Nodes - 1
		}
	}
}

func (s Spec) podIP(r podRef) netip.Addr {
	if r.node == 0 {
		return s.LocalPods[r.j]
	}
	return PodIP(r.node, r.j)
}

func (s Spec) podName(r podRef) (ns, name string) {
	if r.node == 0 {
		return LocalPodNamespace, LocalPodName(r.j)
	}
	return Namespace((r.node + r.j) % s.Namespaces), fmt.Sprintf("pod-%05d-%02d", r.node, r.j)
}

// KV is one etcd key and its value: Value encoded, or Raw as it is.
type KV struct {
	Key   string
	Value proto.Message
	Raw   []byte
}

// encode returns the value of kv as stored.
func (kv KV) encode() ([]byte, error) {
	if kv.Value == nil {
		return kv.Raw, nil
	}
	return proto.Marshal(kv.Value)
}

// kube returns the KV of a Kubernetes object under the default prefix.
func kube(key string, v proto.Message) KV { return KV{Key: kubemodel.EtcdKey("", key), Value: v} }

// MeasuredNodeObjects returns the Kubernetes node object of the measured
// node, the BGP peering policy and, in the per-node layout, the layout
// key: what the cluster holds before the measured agent first starts.
func (s Spec) MeasuredNodeObjects() []KV {
	out := []KV{kube(kubemodel.NodeKey(MeasuredNode), KubeNode(MeasuredNode, MeasuredNodeID)), s.Policy()}
	if s.layout() != kubemodel.LayoutFlat {
		out = append(out, KV{Key: kubemodel.EtcdKey("", kubemodel.LayoutKey), Raw: kubemodel.FormatLayout(s.layout())})
	}
	return out
}

// Policy returns the BGP peering policy: every node runs AS 64512, exports
// its pod CIDR and advertises the LoadBalancer services labelled
// bgp=advertise to a neighbor on loopback (that never answers: the speaker
// keeps its routes and retries the connection every minute).
func (s Spec) Policy() KV {
	return kube(bgpmodel.PolicyKey(PolicyName), &bgpmodel.PeeringPolicy{
		Name: PolicyName,
		VirtualRouters: []*bgpmodel.VirtualRouter{{
			LocalAsn: LocalASN, ExportPodCidr: true,
			ServiceSelector: &bgpmodel.LabelSelector{MatchLabels: map[string]string{"bgp": "advertise"}},
			Neighbors: []*bgpmodel.Neighbor{{PeerAddress: "127.0.0.2", PeerPort: 11179, PeerAsn: LocalASN + 1,
				ConnectRetryTimeSeconds: 60}},
		}},
	})
}

// KubeNode returns the Kubernetes node object of node name with node ID id
// (its management address is MgmtIP(id)).
func KubeNode(name string, id uint32) *kubemodel.Node {
	return &kubemodel.Node{
		Name: name,
		Labels: map[string]string{
			"kubernetes.io/hostname":      name,
			"kubernetes.io/os":            "linux",
			"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", id%3),
		},
		Addresses: []*kubemodel.NodeAddress{
			{Type: kubemodel.NodeAddress_INTERNAL_IP, Address: MgmtIP(id).String()},
			{Type: kubemodel.NodeAddress_HOSTNAME, Address: name},
		},
	}
}

// NodeKVs returns what a node that has joined holds in etcd: its
// Kubernetes node object, its vswitch record (with its node ID and VPP
// address) and the claim of its ID, under nodesync's default prefix.
func NodeKVs(name string, id uint32) []KV {
	return []KV{
		kube(kubemodel.NodeKey(name), KubeNode(name, id)),
		{Key: nodesync.DefaultPrefix + "id/" + fmt.Sprint(id), Value: &nsmodel.NodeIDClaim{Id: id, Name: name}},
		{Key: nodesync.DefaultPrefix + "node/" + name, Value: &nsmodel.VswitchNode{Id: id, Name: name,
			IpAddresses: []*nsmodel.IPWithNetwork{{Address: NodeIP(id).String(), Network: NodeInterconnectCIDR.String()}}}},
	}
}

// Cluster calls yield with every object of the cluster but the measured
// node's node object and the policy (see MeasuredNodeObjects): namespaces
// (with their NetworkPolicies, if any), the other nodes, all pods, services and endpoints. It stops when yield
// returns false.
func (s Spec) Cluster(yield func(KV) bool) {
	for k := -1; k < s.Namespaces; k++ {
		if !yield(s.namespaceObject(k)) {
			return
		}
		for _, kv := range s.Policies(k) {
			if !yield(kv) {
				return
			}
		}
	}
	for i := 1; i < s.Nodes; i++ {
		for _, kv := range NodeKVs(NodeName(i), NodeID(i)) {
			if !yield(kv) {
				return
			}
		}
	}
	for j := range s.LocalPods {
		for _, kv := range s.podKVs(podRef{0, j}) {
			if !yield(kv) {
				return
			}
		}
	}
	for i := 1; i < s.Nodes; i++ {
		for j := range s.PodsPerNode {
			for _, kv := range s.podKVs(podRef{i, j}) {
				if !yield(kv) {
					return
				}
			}
		}
	}
	for i := range s.Services {
		if !yield(kube(kubemodel.ServiceKey(s.serviceName(i)), s.Service(i))) {
			return
		}
		ns, name := s.serviceName(i)
		if !yield(kube(kubemodel.EndpointsKey(ns, name), s.EndpointsOf(i, nil))) {
			return
		}
	}
}

// podKVs returns a pod and its peer record as the reflector stores them
// in the layout of s.
func (s Spec) podKVs(r podRef) []KV {
	ns, name := s.podName(r)
	node, hostIP := MeasuredNode, MgmtIP(MeasuredNodeID)
	if r.node != 0 {
		node, hostIP = NodeName(r.node), MgmtIP(NodeID(r.node))
	}
	ip := s.podIP(r).String()
	labels := map[string]string{"app": fmt.Sprintf("app-%d", (r.node*s.PodsPerNode+r.j)%max(1, s.Services)), "pod-template-hash": "5d8f7c9b4"}
	key := kubemodel.PodKey(ns, name)
	if s.layout() != kubemodel.LayoutFlat {
		key = kubemodel.NodePodKey(node, ns, name)
	}
	return []KV{
		kube(key, &kubemodel.Pod{
			Name: name, Namespace: ns,
			Labels:        labels,
			IpAddress:     ip,
			IpAddresses:   []string{ip},
			HostIpAddress: hostIP.String(),
			NodeName:      node,
			Containers: []*kubemodel.Container{{Name: "app", Ports: []*kubemodel.ContainerPort{
				{Name: "http", ContainerPort: TargetPort, Protocol: kubemodel.Protocol_TCP}}}},
		}),
		kube(kubemodel.PodPeerKey(ns, name), &kubemodel.PodPeer{
			Name: name, Namespace: ns, IpAddresses: []string{ip}, Labels: labels, NodeName: node,
			Ports: []*kubemodel.NamedPort{{Name: "http", Port: TargetPort, Protocol: kubemodel.Protocol_TCP}},
		}),
	}
}

// ServiceName returns the namespace and name of service i.
func (s Spec) ServiceName(i int) (ns, name string) { return s.serviceName(i) }

func (s Spec) serviceName(i int) (string, string) {
	return Namespace(i % s.Namespaces), fmt.Sprintf("svc-%05d", i)
}

// ServiceKind tells what kind of service i is.
type ServiceKind int

// Kinds of services: one in twenty is a NodePort service, one in fifty
// a LoadBalancer service advertised over BGP, the others ClusterIP.
const (
	ClusterIPService ServiceKind = iota
	NodePortService
	LoadBalancerService
)

// Kind returns the kind of service i.
func Kind(i int) ServiceKind {
	switch {
	case i%20 == 0:
		return NodePortService
	case i%50 == 1:
		return LoadBalancerService
	}
	return ClusterIPService
}

// TwoPorts tells whether service i has a second port.
func TwoPorts(i int) bool { return i%10 == 0 }

// Service returns service i.
func (s Spec) Service(i int) *kubemodel.Service {
	ns, name := s.serviceName(i)
	return ServiceObject(ns, name, ClusterIP(i), Kind(i), TwoPorts(i), i)
}

// ServiceObject returns a service of the given kind with cluster IP ip;
// seq picks its NodePort and LoadBalancer address.
func ServiceObject(ns, name string, ip netip.Addr, kind ServiceKind, twoPorts bool, seq int) *kubemodel.Service {
	svc := &kubemodel.Service{
		Name: name, Namespace: ns,
		Labels:     map[string]string{"app": name},
		Selector:   map[string]string{"app": name},
		ClusterIps: []string{ip.String()},
		Ports:      []*kubemodel.ServicePort{{Name: "http", Protocol: kubemodel.Protocol_TCP, Port: ServicePort, TargetPortNumber: TargetPort}},
	}
	if twoPorts {
		svc.Ports = append(svc.Ports, &kubemodel.ServicePort{Name: "https", Protocol: kubemodel.Protocol_TCP, Port: 443, TargetPortNumber: 8443})
	}
	switch kind {
	case NodePortService:
		// Node ports 30000-31799 for NodePort services (one in twenty),
		// 31800-32759 for LoadBalancer services (one in fifty): unique up
		// to 18000 services.
		svc.Type = kubemodel.Service_NODE_PORT
		for k, p := range svc.Ports {
			p.NodePort = int32(30000 + (2*(seq/20)+k)%1800)
		}
	case LoadBalancerService:
		svc.Type = kubemodel.Service_LOAD_BALANCER
		svc.Labels["bgp"] = "advertise"
		svc.LbIngressIps = []string{nth(lbCIDR, uint64(seq)+1).String()}
		for k, p := range svc.Ports {
			p.NodePort = int32(31800 + (2*(seq/50)+k)%960)
		}
	}
	return svc
}

// firstEndpoint returns the index (in the interleaved pod order) of the
// first endpoint of service i.
func (s Spec) firstEndpoint(i int) int {
	// Services come in blocks of BigEvery with the same endpoint total.
	block := 0
	if s.BigEvery > 0 {
		for k := range s.BigEvery {
			block += s.EndpointCount(k)
		}
		n := (i / s.BigEvery) * block
		for k := i - i%s.BigEvery; k < i; k++ {
			n += s.EndpointCount(k)
		}
		return n
	}
	n := 0
	for k := range i {
		n += s.EndpointCount(k)
	}
	return n
}

// EndpointsOf returns the endpoints of service i, with the addresses in
// extra added (as pods of node 1).
func (s Spec) EndpointsOf(i int, extra []netip.Addr) *kubemodel.Endpoints {
	ns, name := s.serviceName(i)
	first := s.firstEndpoint(i)
	var addrs []EndpointAddress
	for k := range s.EndpointCount(i) {
		r := s.podAt(first + k)
		pns, pname := s.podName(r)
		node := MeasuredNode
		if r.node != 0 {
			node = NodeName(r.node)
		}
		addrs = append(addrs, EndpointAddress{IP: s.podIP(r), Node: node, PodNamespace: pns, PodName: pname})
	}
	for k, ip := range extra {
		addrs = append(addrs, EndpointAddress{IP: ip, Node: NodeName(1), PodNamespace: ns, PodName: fmt.Sprintf("extra-%d", k)})
	}
	return EndpointsObject(ns, name, TwoPorts(i), addrs)
}

// EndpointAddress is one backend of a service.
type EndpointAddress struct {
	IP                    netip.Addr
	Node                  string
	PodNamespace, PodName string
}

// EndpointsObject returns the endpoints of service ns/name with the given
// ready addresses, as the reflector merges a service's endpoint slices
// (at most MaxEndpointsPerSlice addresses each, all with the same ports):
// one subset, addresses sorted.
func EndpointsObject(ns, name string, twoPorts bool, addrs []EndpointAddress) *kubemodel.Endpoints {
	ports := []*kubemodel.EndpointPort{{Name: "http", Port: TargetPort, Protocol: kubemodel.Protocol_TCP}}
	if twoPorts {
		ports = append(ports, &kubemodel.EndpointPort{Name: "https", Port: 8443, Protocol: kubemodel.Protocol_TCP})
	}
	ep := &kubemodel.Endpoints{Name: name, Namespace: ns}
	if len(addrs) == 0 {
		return ep
	}
	addrs = slices.Clone(addrs)
	slices.SortFunc(addrs, func(a, b EndpointAddress) int { return a.IP.Compare(b.IP) })
	sub := &kubemodel.EndpointSubset{Ports: ports}
	for _, a := range addrs {
		sub.Addresses = append(sub.Addresses, &kubemodel.EndpointAddress{
			Ip: a.IP.String(), NodeName: a.Node,
			TargetRef: &kubemodel.ObjectReference{Kind: "Pod", Namespace: a.PodNamespace, Name: a.PodName},
		})
	}
	ep.Subsets = []*kubemodel.EndpointSubset{sub}
	return ep
}

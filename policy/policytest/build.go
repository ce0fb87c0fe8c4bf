package policytest

import (
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Small builders that keep the cases readable. Each returns a new value.

// policyBuilder builds a NetworkPolicy rule by rule.
type policyBuilder struct{ np *kubemodel.NetworkPolicy }

// newPolicy starts policy ns/name that selects pods (nil: the field
// missing, which selects every pod as the empty selector does).
func newPolicy(ns, name string, pods *kubemodel.LabelSelector) policyBuilder {
	return policyBuilder{&kubemodel.NetworkPolicy{Namespace: ns, Name: name, PodSelector: pods}}
}

// types sets policyTypes.
func (b policyBuilder) types(t ...kubemodel.PolicyType) policyBuilder {
	b.np.PolicyTypes = t
	return b
}

// ingress adds an ingress rule from peers (nil: every source) on ports
// (nil: every port).
func (b policyBuilder) ingress(from []*kubemodel.NetworkPolicyPeer, ports []*kubemodel.NetworkPolicyPort) policyBuilder {
	b.np.Ingress = append(b.np.Ingress, &kubemodel.NetworkPolicyIngressRule{From: from, Ports: ports})
	return b
}

// egress adds an egress rule to peers (nil: every destination) on ports
// (nil: every port).
func (b policyBuilder) egress(to []*kubemodel.NetworkPolicyPeer, ports []*kubemodel.NetworkPolicyPort) policyBuilder {
	b.np.Egress = append(b.np.Egress, &kubemodel.NetworkPolicyEgressRule{To: to, Ports: ports})
	return b
}

func (b policyBuilder) build() *kubemodel.NetworkPolicy { return b.np }

const (
	ingressType = kubemodel.PolicyType_INGRESS
	egressType  = kubemodel.PolicyType_EGRESS
	tcpProto    = kubemodel.Protocol_TCP
	udpProto    = kubemodel.Protocol_UDP
	sctpProto   = kubemodel.Protocol_SCTP
)

// pod returns the ID of pod ns/name.
func pod(ns, name string) kubemodel.PodID { return kubemodel.PodID{Namespace: ns, Name: name} }

// all returns the empty selector (selects everything).
func all() *kubemodel.LabelSelector { return &kubemodel.LabelSelector{} }

// match returns a selector with matchLabels k1=v1, k2=v2, ….
func match(kv ...string) *kubemodel.LabelSelector {
	s := &kubemodel.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

// expr returns a selector with the one requirement key op values.
func expr(key, op string, values ...string) *kubemodel.LabelSelector {
	return &kubemodel.LabelSelector{MatchExpressions: []*kubemodel.LabelSelectorRequirement{
		{Key: key, Operator: op, Values: values},
	}}
}

// nsName selects namespace name by its kubernetes.io/metadata.name label.
func nsName(name string) *kubemodel.LabelSelector { return match(NamespaceNameLabel, name) }

// peers returns its arguments as a peer list.
func peers(p ...*kubemodel.NetworkPolicyPeer) []*kubemodel.NetworkPolicyPeer { return p }

// pods is a peer with only a podSelector (the policy's namespace).
func pods(s *kubemodel.LabelSelector) *kubemodel.NetworkPolicyPeer {
	return &kubemodel.NetworkPolicyPeer{PodSelector: s}
}

// namespaces is a peer with only a namespaceSelector (every pod of them).
func namespaces(s *kubemodel.LabelSelector) *kubemodel.NetworkPolicyPeer {
	return &kubemodel.NetworkPolicyPeer{NamespaceSelector: s}
}

// podsIn is a peer with both selectors: the pods selected by p in the
// namespaces selected by ns.
func podsIn(p, ns *kubemodel.LabelSelector) *kubemodel.NetworkPolicyPeer {
	return &kubemodel.NetworkPolicyPeer{PodSelector: p, NamespaceSelector: ns}
}

// block is an ipBlock peer.
func block(cidr string, except ...string) *kubemodel.NetworkPolicyPeer {
	return &kubemodel.NetworkPolicyPeer{IpBlock: &kubemodel.IPBlock{Cidr: cidr, Except: except}}
}

// hostBlocks returns two ipBlock peers: the /32 and the /128 of model pod
// id, so that a case means the same in an IPv4 and a dual-stack model.
func hostBlocks(id kubemodel.PodID) []*kubemodel.NetworkPolicyPeer {
	return peers(
		block(ModelPodAddr(id, false).String()+"/32"),
		block(ModelPodAddr(id, true).String()+"/128"),
	)
}

// ports returns its arguments as a port list.
func ports(p ...*kubemodel.NetworkPolicyPort) []*kubemodel.NetworkPolicyPort { return p }

// num is port n of proto.
func num(proto kubemodel.Protocol, n int32) *kubemodel.NetworkPolicyPort {
	return &kubemodel.NetworkPolicyPort{Protocol: proto, Port: n}
}

// tcp is TCP port n.
func tcp(n int32) *kubemodel.NetworkPolicyPort { return num(kubemodel.Protocol_TCP, n) }

// udp is UDP port n.
func udp(n int32) *kubemodel.NetworkPolicyPort { return num(kubemodel.Protocol_UDP, n) }

// portRange is ports from..to of proto.
func portRange(proto kubemodel.Protocol, from, to int32) *kubemodel.NetworkPolicyPort {
	return &kubemodel.NetworkPolicyPort{Protocol: proto, Port: from, EndPort: to}
}

// anyPort is every port of proto.
func anyPort(proto kubemodel.Protocol) *kubemodel.NetworkPolicyPort {
	return &kubemodel.NetworkPolicyPort{Protocol: proto}
}

// named is the named port name with proto.
func named(proto kubemodel.Protocol, name string) *kubemodel.NetworkPolicyPort {
	return &kubemodel.NetworkPolicyPort{Protocol: proto, PortName: name}
}

// containerPort is a named container port.
func containerPort(name string, proto kubemodel.Protocol, n int32) *kubemodel.ContainerPort {
	return &kubemodel.ContainerPort{Name: name, Protocol: proto, ContainerPort: n}
}

package reflector

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// ConvertNetworkPolicy returns the model of a networking.k8s.io/v1
// NetworkPolicy: metadata (name, namespace), the pod selector, the policy
// types and every ingress and egress rule with its peers (pod and
// namespace selectors, ipBlocks) and ports (protocol, number or name,
// endPort). A missing selector stays missing and an empty one empty (they
// mean different things in a peer). It does not validate the semantics
// (operators, CIDRs: the API server has, and the policy processor reports
// what it cannot use); a name that breaks the key scheme, an unknown
// protocol or policy type is an error matching [ErrBadObject]. np is only
// read.
func ConvertNetworkPolicy(np *networkingv1.NetworkPolicy) (*kubemodel.NetworkPolicy, error) {
	pr := newProblems(kubemodel.NetworkPolicyResource, np.Namespace, np.Name)
	pr.names(np.Namespace, np.Name, true)
	m := &kubemodel.NetworkPolicy{
		Name:        np.Name,
		Namespace:   np.Namespace,
		PodSelector: convertSelector(&np.Spec.PodSelector),
	}
	for i, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			m.PolicyTypes = append(m.PolicyTypes, kubemodel.PolicyType_INGRESS)
		case networkingv1.PolicyTypeEgress:
			m.PolicyTypes = append(m.PolicyTypes, kubemodel.PolicyType_EGRESS)
		default:
			pr.add(fmt.Sprintf("spec.policyTypes[%d]", i), t, "unknown policy type")
		}
	}
	for i, r := range np.Spec.Ingress {
		f := fmt.Sprintf("spec.ingress[%d].", i)
		m.Ingress = append(m.Ingress, &kubemodel.NetworkPolicyIngressRule{
			From: convertPeers(r.From), Ports: pr.policyPorts(f+"ports", r.Ports)})
	}
	for i, r := range np.Spec.Egress {
		f := fmt.Sprintf("spec.egress[%d].", i)
		m.Egress = append(m.Egress, &kubemodel.NetworkPolicyEgressRule{
			To: convertPeers(r.To), Ports: pr.policyPorts(f+"ports", r.Ports)})
	}
	if err := pr.err(); err != nil {
		return nil, err
	}
	return m, nil
}

// convertSelector returns the model of a label selector; nil for nil.
func convertSelector(s *metav1.LabelSelector) *kubemodel.LabelSelector {
	if s == nil {
		return nil
	}
	m := &kubemodel.LabelSelector{MatchLabels: copyLabels(s.MatchLabels)}
	for _, e := range s.MatchExpressions {
		m.MatchExpressions = append(m.MatchExpressions, &kubemodel.LabelSelectorRequirement{
			Key: e.Key, Operator: string(e.Operator), Values: append([]string(nil), e.Values...)})
	}
	return m
}

func convertPeers(peers []networkingv1.NetworkPolicyPeer) []*kubemodel.NetworkPolicyPeer {
	var out []*kubemodel.NetworkPolicyPeer
	for _, p := range peers {
		mp := &kubemodel.NetworkPolicyPeer{
			PodSelector:       convertSelector(p.PodSelector),
			NamespaceSelector: convertSelector(p.NamespaceSelector),
		}
		if p.IPBlock != nil {
			mp.IpBlock = &kubemodel.IPBlock{Cidr: p.IPBlock.CIDR, Except: append([]string(nil), p.IPBlock.Except...)}
		}
		out = append(out, mp)
	}
	return out
}

func (p *problems) policyPorts(field string, ports []networkingv1.NetworkPolicyPort) []*kubemodel.NetworkPolicyPort {
	var out []*kubemodel.NetworkPolicyPort
	for i, pp := range ports {
		f := fmt.Sprintf("%s[%d].", field, i)
		mp := &kubemodel.NetworkPolicyPort{Protocol: kubemodel.Protocol_TCP}
		if pp.Protocol != nil {
			mp.Protocol = p.protocol(f+"protocol", *pp.Protocol)
		}
		if pp.Port != nil {
			switch pp.Port.Type {
			case intstr.Int:
				mp.Port = p.port(f+"port", pp.Port.IntVal, 1)
			case intstr.String:
				mp.PortName = pp.Port.StrVal
			}
		}
		if pp.EndPort != nil {
			mp.EndPort = p.port(f+"endPort", *pp.EndPort, 1)
		}
		out = append(out, mp)
	}
	return out
}

// ConvertPodPeer returns what other pods' policies need to know of a pod:
// its addresses (status.podIPs, else status.podIP), labels, named
// container ports and node. A pod on the host's network, or without an
// address yet, has no peer record (nil, nil): policies cannot name it.
// Errors are [ConvertPod]'s. p is only read.
func ConvertPodPeer(p *corev1.Pod) (*kubemodel.PodPeer, error) {
	if p.Spec.HostNetwork {
		return nil, nil
	}
	pr := newProblems(kubemodel.PodPeerResource, p.Namespace, p.Name)
	pr.names(p.Namespace, p.Name, true)
	m := &kubemodel.PodPeer{Name: p.Name, Namespace: p.Namespace, Labels: copyLabels(p.Labels), NodeName: p.Spec.NodeName}
	for i, ip := range p.Status.PodIPs {
		m.IpAddresses = append(m.IpAddresses, pr.ip(fmt.Sprintf("status.podIPs[%d].ip", i), ip.IP))
	}
	if len(m.IpAddresses) == 0 && p.Status.PodIP != "" {
		m.IpAddresses = []string{pr.ip("status.podIP", p.Status.PodIP)}
	}
	for i, c := range p.Spec.Containers {
		for j, cp := range c.Ports {
			if cp.Name == "" {
				continue
			}
			f := fmt.Sprintf("spec.containers[%d].ports[%d].", i, j)
			m.Ports = append(m.Ports, &kubemodel.NamedPort{Name: cp.Name,
				Protocol: pr.protocol(f+"protocol", cp.Protocol), Port: pr.port(f+"containerPort", cp.ContainerPort, 1)})
		}
	}
	if err := pr.err(); err != nil {
		return nil, err
	}
	if len(m.IpAddresses) == 0 {
		return nil, nil
	}
	return m, nil
}

package policytest

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Label selector operators (LabelSelectorRequirement.operator).
const (
	OpIn           = "In"
	OpNotIn        = "NotIn"
	OpExists       = "Exists"
	OpDoesNotExist = "DoesNotExist"
)

// Allowed reports whether a new connection from src to dst, with protocol
// proto to destination port port, is allowed: the egress of src and the
// ingress of dst both allow it. Replies of an allowed connection are
// allowed (see "Connections, not packets" in the package documentation).
// It panics when an endpoint names a pod that is not in c or an address
// that is not the pod's.
func (c *Cluster) Allowed(src, dst Endpoint, proto kubemodel.Protocol, port int) bool {
	return c.EgressAllowed(src, dst, proto, port) && c.IngressAllowed(src, dst, proto, port)
}

// IngressAllowed reports whether the ingress side of dst allows a new
// connection from src: dst is not a policy pod, or src is dst's own node,
// or dst is not isolated for ingress, or a rule of an ingress policy that
// selects dst matches src and the port.
func (c *Cluster) IngressAllowed(src, dst Endpoint, proto kubemodel.Protocol, port int) bool {
	target := c.policyPod(dst)
	if target == nil {
		return true // not a pod policies apply to
	}
	if node := c.nodeOf(src); node != "" && node == target.GetNodeName() {
		return true // traffic from the pod's own node
	}
	isolated := false
	for _, np := range c.Policies {
		if !c.applies(np, target, kubemodel.PolicyType_INGRESS) {
			continue
		}
		isolated = true
		for _, rule := range np.GetIngress() {
			if c.peersMatch(np.GetNamespace(), rule.GetFrom(), src) && portsMatch(rule.GetPorts(), target, proto, port) {
				return true
			}
		}
	}
	return !isolated
}

// EgressAllowed reports whether the egress side of src allows a new
// connection to dst: src is not a policy pod, or src is not isolated for
// egress, or a rule of an egress policy that selects src matches dst and
// the port (a named port resolved against dst).
func (c *Cluster) EgressAllowed(src, dst Endpoint, proto kubemodel.Protocol, port int) bool {
	source := c.policyPod(src)
	if source == nil {
		return true // not a pod policies apply to
	}
	destination := c.policyPod(dst) // nil: named ports match nothing
	isolated := false
	for _, np := range c.Policies {
		if !c.applies(np, source, kubemodel.PolicyType_EGRESS) {
			continue
		}
		isolated = true
		for _, rule := range np.GetEgress() {
			if c.peersMatch(np.GetNamespace(), rule.GetTo(), dst) && portsMatch(rule.GetPorts(), destination, proto, port) {
				return true
			}
		}
	}
	return !isolated
}

// Isolated reports whether a valid policy selects pod id for direction dir.
// Host-network pods and pods not in c are never isolated.
func (c *Cluster) Isolated(id kubemodel.PodID, dir kubemodel.PolicyType) bool {
	p := c.Pod(id)
	if p == nil || p.GetHostNetwork() {
		return false
	}
	for _, np := range c.Policies {
		if c.applies(np, p, dir) {
			return true
		}
	}
	return false
}

// applies reports whether np is valid, is in pod's namespace, selects pod
// and affects direction dir.
func (c *Cluster) applies(np *kubemodel.NetworkPolicy, pod *kubemodel.Pod, dir kubemodel.PolicyType) bool {
	return np.GetNamespace() == pod.GetNamespace() &&
		affects(np, dir) &&
		selectorMatches(np.GetPodSelector(), pod.GetLabels()) && // nil: empty, selects all
		Validate(np) == nil
}

// affects reports whether np affects direction dir: its policyTypes, or
// when it has none, Ingress always and Egress when it has egress rules.
func affects(np *kubemodel.NetworkPolicy, dir kubemodel.PolicyType) bool {
	if len(np.GetPolicyTypes()) == 0 {
		return dir == kubemodel.PolicyType_INGRESS || len(np.GetEgress()) > 0
	}
	return slices.Contains(np.GetPolicyTypes(), dir)
}

// peersMatch reports whether ep is one of peers of a rule of a policy in
// namespace ns; no peers means every endpoint.
func (c *Cluster) peersMatch(ns string, peers []*kubemodel.NetworkPolicyPeer, ep Endpoint) bool {
	if len(peers) == 0 {
		return true
	}
	for _, peer := range peers {
		if c.peerMatches(ns, peer, ep) {
			return true
		}
	}
	return false
}

func (c *Cluster) peerMatches(ns string, peer *kubemodel.NetworkPolicyPeer, ep Endpoint) bool {
	if peer.GetIpBlock() != nil {
		return ipBlockContains(peer.GetIpBlock(), ep.Addr)
	}
	pod := c.policyPod(ep)
	if pod == nil {
		return false // selectors select pods only
	}
	if peer.GetNamespaceSelector() == nil {
		if pod.GetNamespace() != ns {
			return false
		}
	} else if !selectorMatches(peer.GetNamespaceSelector(), c.Namespace(pod.GetNamespace()).GetLabels()) {
		return false
	}
	return peer.GetPodSelector() == nil || selectorMatches(peer.GetPodSelector(), pod.GetLabels())
}

// ipBlockContains reports whether addr is in the block's CIDR and in none
// of its except CIDRs. A CIDR that does not parse contains nothing (a
// policy with one is invalid and ignored anyway).
func ipBlockContains(b *kubemodel.IPBlock, addr netip.Addr) bool {
	if !prefixContains(b.GetCidr(), addr) {
		return false
	}
	for _, except := range b.GetExcept() {
		if prefixContains(except, addr) {
			return false
		}
	}
	return true
}

func prefixContains(cidr string, addr netip.Addr) bool {
	p, err := netip.ParsePrefix(cidr)
	return err == nil && p.Masked().Contains(addr)
}

// portsMatch reports whether a connection with protocol proto to port
// port of destination (nil when the destination is not a policy pod)
// matches one of ports; no ports means every port of every protocol.
func portsMatch(ports []*kubemodel.NetworkPolicyPort, destination *kubemodel.Pod, proto kubemodel.Protocol, port int) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if portMatches(p, destination, proto, port) {
			return true
		}
	}
	return false
}

func portMatches(p *kubemodel.NetworkPolicyPort, destination *kubemodel.Pod, proto kubemodel.Protocol, port int) bool {
	if p.GetProtocol() != proto {
		return false
	}
	switch {
	case p.GetPortName() != "":
		return hasNamedPort(destination, p.GetPortName(), proto, port)
	case p.GetPort() == 0:
		return true // every port of the protocol
	case p.GetEndPort() == 0:
		return port == int(p.GetPort())
	default:
		return int(p.GetPort()) <= port && port <= int(p.GetEndPort())
	}
}

// hasNamedPort reports whether pod declares a container port named name
// with protocol proto and number port.
func hasNamedPort(pod *kubemodel.Pod, name string, proto kubemodel.Protocol, port int) bool {
	for _, ctr := range pod.GetContainers() {
		for _, cp := range ctr.GetPorts() {
			if cp.GetName() == name && cp.GetProtocol() == proto && int(cp.GetContainerPort()) == port {
				return true
			}
		}
	}
	return false
}

// selectorMatches reports whether labels satisfy s: every matchLabels pair
// and every requirement. A nil or empty selector matches everything; the
// caller decides what a missing selector means before calling it. An
// unknown operator matches nothing.
func selectorMatches(s *kubemodel.LabelSelector, labels map[string]string) bool {
	for k, v := range s.GetMatchLabels() {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, r := range s.GetMatchExpressions() {
		if !requirementMatches(r, labels) {
			return false
		}
	}
	return true
}

func requirementMatches(r *kubemodel.LabelSelectorRequirement, labels map[string]string) bool {
	v, present := labels[r.GetKey()]
	switch r.GetOperator() {
	case OpIn:
		return present && slices.Contains(r.GetValues(), v)
	case OpNotIn:
		return !present || !slices.Contains(r.GetValues(), v)
	case OpExists:
		return present
	case OpDoesNotExist:
		return !present
	default:
		return false
	}
}

// policyPod returns the pod that ep names when policies apply to it (a pod
// that is not host-network), else nil. It panics when ep names a pod that
// is not in c or an address that is not the pod's.
func (c *Cluster) policyPod(ep Endpoint) *kubemodel.Pod {
	if !ep.IsPod() {
		return nil
	}
	p := c.mustPod(ep)
	if p.GetHostNetwork() {
		return nil
	}
	return p
}

// nodeOf returns the node the traffic of ep comes from when ep is a node
// endpoint or a host-network pod, else "".
func (c *Cluster) nodeOf(ep Endpoint) string {
	if !ep.IsPod() {
		return ep.Node
	}
	if p := c.mustPod(ep); p.GetHostNetwork() {
		return p.GetNodeName()
	}
	return ""
}

func (c *Cluster) mustPod(ep Endpoint) *kubemodel.Pod {
	p := c.Pod(ep.Pod)
	if p == nil {
		panic(fmt.Sprintf("policytest: endpoint %s: no such pod", ep))
	}
	if !slices.Contains(PodAddrs(p), ep.Addr) {
		panic(fmt.Sprintf("policytest: endpoint %s: not an address of the pod", ep))
	}
	return p
}

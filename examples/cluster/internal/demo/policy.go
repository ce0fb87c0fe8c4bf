package demo

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// The demo's NetworkPolicy: the pods of the second service (api) accept
// TCP on their target port from the first service's pods (web) only.
const (
	netpolName = "api-from-web"
	netpolTo   = "api"
	netpolFrom = "web"
)

// hasNetpol tells whether the cluster has both services the policy names.
func (c *cluster) hasNetpol() bool { return c.service(netpolTo) != nil && c.service(netpolFrom) != nil }

func netpolObject() *networkingv1.NetworkPolicy {
	port := intstr.FromInt32(targetPort)
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: netpolName, Namespace: namespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": netpolTo}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": netpolFrom}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
			}},
		},
	}
}

// checkPolicy waits until every pod the policy selects is isolated in its
// node's VPP (its interface has ACLs).
func (c *cluster) checkPolicy(context.Context) (check, error) {
	var ch check
	for _, p := range c.readyPods() {
		if p.service != netpolTo {
			continue
		}
		ch.total++
		n := c.node(p.node)
		if n == nil {
			continue
		}
		if _, found := n.vpp.ACLVerdict(tagPrefix+n.podIf(p), true, vppsim.Packet{}); found {
			ch.done++
		} else {
			ch.miss("%s on %s: no ACLs yet", p.name, p.node)
		}
	}
	return ch, nil
}

// policySummary describes the demo's policy: the pods it isolates and, for
// one isolated pod, a connection from an allowed peer and one from a pod
// it does not allow, checked against the ACLs of the VPPs on the path.
func (c *cluster) policySummary() []PolicySummary {
	if !c.hasNetpol() {
		return nil
	}
	ps := PolicySummary{Name: namespace + "/" + netpolName,
		Says: fmt.Sprintf("pods app=%s accept tcp/%d from pods app=%s only", netpolTo, targetPort, netpolFrom), Isolated: []PodOnNode{}}
	var target, allowed, denied *pod
	for _, p := range c.readyPods() {
		switch {
		case p.service == netpolTo:
			ps.Isolated = append(ps.Isolated, PodOnNode{Pod: p.name, Node: p.node, IP: p.ip, Port: targetPort})
			if target == nil {
				target = p
			}
		case p.service == netpolFrom && allowed == nil:
			allowed = p
		case p.service != netpolFrom && denied == nil:
			denied = p
		}
	}
	for _, from := range []*pod{allowed, denied} {
		if from == nil || target == nil {
			continue
		}
		ps.Connections = append(ps.Connections, c.connection(from, target, targetPort))
	}
	return []PolicySummary{ps}
}

// connection checks the first packet from one pod to another through the
// ACLs it meets: the source pod's input on its node, the tunnel's output
// when the pods are on different nodes, the destination pod's output.
func (c *cluster) connection(from, to *pod, port uint16) Connection {
	conn := Connection{From: from.name, To: to.name, Port: fmt.Sprintf("tcp/%d", port), Allowed: true}
	pkt := vppsim.Packet{Src: from.ip, Dst: to.ip, Proto: vppmodel.ProtoTCP, Sport: 40000, Dport: port}
	src, dst := c.node(from.node), c.node(to.node)
	if src == nil || dst == nil {
		return conn
	}
	type hop struct {
		n      *simNode
		iface  string
		output bool
	}
	hops := []hop{{src, src.podIf(from), false}}
	if src != dst {
		hops = append(hops, hop{src, fmt.Sprintf("vxlan-%d", dst.agent.NodeSync.GetNodeID()), true})
	}
	hops = append(hops, hop{dst, dst.podIf(to), true})
	for _, h := range hops {
		if permit, _ := h.n.vpp.ACLVerdict(tagPrefix+h.iface, h.output, pkt); !permit {
			dir := "input"
			if h.output {
				dir = "output"
			}
			conn.Allowed, conn.DeniedBy = false, fmt.Sprintf("%s %s on %s", h.iface, dir, h.n.name)
			break
		}
	}
	return conn
}

// podIf returns the VPP interface of a pod of n.
func (n *simNode) podIf(p *pod) string {
	name, _ := n.agent.PodConn.PodInterface(kubemodel.PodID{Namespace: namespace, Name: p.name})
	return name
}

// readyPods returns the live pods that have an address, in name order.
func (c *cluster) readyPods() []*pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*pod
	for _, p := range sortedPods(c.pods) {
		if p.ip.IsValid() {
			out = append(out, p)
		}
	}
	return out
}

// node returns the live node named name, nil if none.
func (c *cluster) node(name string) *simNode {
	for _, n := range c.liveNodes() {
		if n.name == name {
			return n
		}
	}
	return nil
}

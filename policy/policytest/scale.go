package policytest

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// ScaleOptions sizes a synthetic cluster for benchmarks ([Scale]).
type ScaleOptions struct {
	Nodes       int // nodes (node-1 … node-N); default 5000
	PodsPerNode int // default 30
	Namespaces  int // default 5000; pods are spread over them evenly
	// PoliciesPerNamespace is 1 (a default deny of ingress) or 2 (plus an
	// allow of TCP 8080 from the namespace's app=frontend pods and from
	// the pods of the namespaces of the same team); default 2.
	PoliciesPerNamespace int
	// Teams is the number of distinct team labels of namespaces: a cross
	// namespace peer selects the Namespaces/Teams namespaces of a team.
	// Default 50.
	Teams int
}

func (o ScaleOptions) withDefaults() ScaleOptions {
	if o.Nodes == 0 {
		o.Nodes = 5000
	}
	if o.PodsPerNode == 0 {
		o.PodsPerNode = 30
	}
	if o.Namespaces == 0 {
		o.Namespaces = 5000
	}
	if o.PoliciesPerNamespace == 0 {
		o.PoliciesPerNamespace = 2
	}
	if o.Teams == 0 {
		o.Teams = 50
	}
	return o
}

// ScaleObject is one object of a synthetic cluster with the resource and
// key the reflector would store it under.
type ScaleObject struct {
	Resource, Key string
	Value         proto.Message
}

// Scale returns a synthetic cluster for benchmarks: namespaces labelled
// with a team, pods (with a peer record each; the full records of every
// pod) labelled app=frontend|backend|db in turn with a named port "http"
// (TCP 8080), addresses from per-node /24s of 10.0.0.0/8 as IPAM hands
// them out (node n: 10.n/256.n%256.2 and up), and the policies of
// ScaleOptions.PoliciesPerNamespace.
func Scale(o ScaleOptions) []ScaleObject {
	o = o.withDefaults()
	var out []ScaleObject
	for i := range o.Namespaces {
		ns := ScaleNamespace(i)
		out = append(out, ScaleObject{kubemodel.NamespaceResource, kubemodel.NamespaceKey(ns),
			&kubemodel.Namespace{Name: ns, Labels: map[string]string{"team": fmt.Sprint("t", i%o.Teams), NamespaceNameLabel: ns}}})
		out = append(out, ScaleObject{kubemodel.NetworkPolicyResource, kubemodel.NetworkPolicyKey(ns, "default-deny"),
			&kubemodel.NetworkPolicy{Namespace: ns, Name: "default-deny", PodSelector: &kubemodel.LabelSelector{}}})
		if o.PoliciesPerNamespace < 2 {
			continue
		}
		out = append(out, ScaleObject{kubemodel.NetworkPolicyResource, kubemodel.NetworkPolicyKey(ns, "allow-backend"),
			&kubemodel.NetworkPolicy{Namespace: ns, Name: "allow-backend",
				PodSelector: &kubemodel.LabelSelector{MatchLabels: map[string]string{"app": "backend"}},
				Ingress: []*kubemodel.NetworkPolicyIngressRule{{
					From: []*kubemodel.NetworkPolicyPeer{
						{PodSelector: &kubemodel.LabelSelector{MatchLabels: map[string]string{"app": "frontend"}}},
						{NamespaceSelector: &kubemodel.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprint("t", i%o.Teams)}}},
					},
					Ports: []*kubemodel.NetworkPolicyPort{{PortName: "http"}},
				}}}})
	}
	apps := []string{"frontend", "backend", "db"}
	total := o.Nodes * o.PodsPerNode
	perNS := max(1, total/o.Namespaces) // a namespace's pods are spread over perNS nodes
	for k := range total {
		node, slot := k%o.Nodes, k/o.Nodes
		ns := ScaleNamespace(k / perNS % o.Namespaces)
		name := fmt.Sprintf("pod-%d", k)
		labels := map[string]string{"app": apps[k%len(apps)]}
		addr := fmt.Sprintf("10.%d.%d.%d", (node+1)/256, (node+1)%256, slot+2)
		out = append(out, ScaleObject{kubemodel.PodResource, kubemodel.PodKey(ns, name), &kubemodel.Pod{
			Namespace: ns, Name: name, NodeName: ScaleNode(node), Labels: labels, IpAddresses: []string{addr},
			Containers: []*kubemodel.Container{{Name: "c", Ports: []*kubemodel.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}})
		out = append(out, ScaleObject{kubemodel.PodPeerResource, kubemodel.PodPeerKey(ns, name), &kubemodel.PodPeer{
			Namespace: ns, Name: name, NodeName: ScaleNode(node), Labels: labels, IpAddresses: []string{addr},
			Ports: []*kubemodel.NamedPort{{Name: "http", Port: 8080}}}})
	}
	return out
}

// ScaleNamespace is the name of namespace i of [Scale].
func ScaleNamespace(i int) string { return fmt.Sprint("ns-", i) }

// ScaleNode is the name of node i (from 0) of [Scale]: "node-<i+1>".
func ScaleNode(i int) string { return fmt.Sprint("node-", i+1) }

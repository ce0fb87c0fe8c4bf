package policytest

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Cluster is the state the evaluator answers from. Its fields may be set
// directly; [Cluster.Check] tells whether they are consistent, and the
// evaluator assumes they are.
type Cluster struct {
	// Nodes are the cluster's nodes; they matter as the source of traffic
	// to their own pods (see the package documentation).
	Nodes []Node
	// Namespaces are the namespaces (name and labels). Every pod's
	// namespace must be here.
	Namespaces []*kubemodel.Namespace
	// Pods are the pods: namespace, name, labels, ip_addresses (or
	// ip_address), node_name, host_network and containers with their ports
	// are used.
	Pods []*kubemodel.Pod
	// Policies are the network policies, valid or not: the evaluator
	// ignores those that fail [Validate].
	Policies []*kubemodel.NetworkPolicy
}

// Node is a node of the cluster: its name and its addresses.
type Node struct {
	Name  string
	Addrs []netip.Addr
}

// Endpoint is one end of a connection: a pod with the address it uses, a
// node (a process on the node, the kubelet, a host-network pod) with its
// address, or an address outside the cluster. Build one with [PodEndpoint],
// [NodeEndpoint], [ExternalEndpoint] or [Cluster.EndpointOf].
type Endpoint struct {
	// Pod is the pod, or the zero PodID when the endpoint is not a pod.
	Pod kubemodel.PodID
	// Node is, for an endpoint that is not a pod, the node the traffic
	// comes from or goes to; empty for an address outside the cluster.
	Node string
	// Addr is the address the endpoint uses for the connection.
	Addr netip.Addr
}

// PodEndpoint returns the endpoint of pod id using its address addr (one of
// the pod's addresses).
func PodEndpoint(id kubemodel.PodID, addr netip.Addr) Endpoint {
	return Endpoint{Pod: id, Addr: addr}
}

// NodeEndpoint returns the endpoint of a process on node using addr.
func NodeEndpoint(node string, addr netip.Addr) Endpoint {
	return Endpoint{Node: node, Addr: addr}
}

// ExternalEndpoint returns the endpoint of addr outside the cluster.
func ExternalEndpoint(addr netip.Addr) Endpoint { return Endpoint{Addr: addr} }

// IsPod reports whether e names a pod.
func (e Endpoint) IsPod() bool { return e.Pod != kubemodel.PodID{} }

func (e Endpoint) String() string {
	switch {
	case e.IsPod():
		return e.Pod.String() + "@" + e.Addr.String()
	case e.Node != "":
		return "node " + e.Node + "@" + e.Addr.String()
	default:
		return "external@" + e.Addr.String()
	}
}

// EndpointOf returns the endpoint that uses addr: the pod (not host-network)
// that has it, else the node that has it, else an external endpoint.
func (c *Cluster) EndpointOf(addr netip.Addr) Endpoint {
	for _, p := range c.Pods {
		if !p.GetHostNetwork() && slices.Contains(PodAddrs(p), addr) {
			return PodEndpoint(p.ID(), addr)
		}
	}
	for _, n := range c.Nodes {
		if slices.Contains(n.Addrs, addr) {
			return NodeEndpoint(n.Name, addr)
		}
	}
	return ExternalEndpoint(addr)
}

// PodAddrs returns the addresses of p: ip_addresses, or ip_address when
// ip_addresses is empty. Addresses that do not parse are left out
// ([Cluster.Check] reports them).
func PodAddrs(p *kubemodel.Pod) []netip.Addr {
	strs := p.GetIpAddresses()
	if len(strs) == 0 && p.GetIpAddress() != "" {
		strs = []string{p.GetIpAddress()}
	}
	var addrs []netip.Addr
	for _, s := range strs {
		if a, err := netip.ParseAddr(s); err == nil {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// PodAddr returns the first address of pod id of the given family, and
// whether it has one.
func (c *Cluster) PodAddr(id kubemodel.PodID, ipv6 bool) (netip.Addr, bool) {
	p := c.Pod(id)
	if p == nil {
		return netip.Addr{}, false
	}
	for _, a := range PodAddrs(p) {
		if a.Is6() == ipv6 {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// Pod returns pod id, or nil.
func (c *Cluster) Pod(id kubemodel.PodID) *kubemodel.Pod {
	for _, p := range c.Pods {
		if p.ID() == id {
			return p
		}
	}
	return nil
}

// Namespace returns namespace name, or nil.
func (c *Cluster) Namespace(name string) *kubemodel.Namespace {
	for _, ns := range c.Namespaces {
		if ns.GetName() == name {
			return ns
		}
	}
	return nil
}

// Policy returns policy id, or nil.
func (c *Cluster) Policy(id kubemodel.PolicyID) *kubemodel.NetworkPolicy {
	for _, np := range c.Policies {
		if np.ID() == id {
			return np
		}
	}
	return nil
}

// PodIDs returns the IDs of every pod, sorted by namespace then name.
func (c *Cluster) PodIDs() []kubemodel.PodID {
	var ids []kubemodel.PodID
	for _, p := range c.Pods {
		ids = append(ids, p.ID())
	}
	slices.SortFunc(ids, kubemodel.PodID.Compare)
	return ids
}

// Check reports what makes c inconsistent: a duplicate node, namespace, pod
// or policy, a pod whose namespace is missing, a pod address that does not
// parse, a pod address used by two pods that are not host-network. It does
// not validate the policies (the evaluator ignores invalid ones).
func (c *Cluster) Check() error {
	var problems []string
	seenNode := map[string]bool{}
	for _, n := range c.Nodes {
		if n.Name == "" || seenNode[n.Name] {
			problems = append(problems, fmt.Sprintf("node %q: empty or duplicate name", n.Name))
		}
		seenNode[n.Name] = true
	}
	seenNS := map[string]bool{}
	for _, ns := range c.Namespaces {
		if ns.GetName() == "" || seenNS[ns.GetName()] {
			problems = append(problems, fmt.Sprintf("namespace %q: empty or duplicate name", ns.GetName()))
		}
		seenNS[ns.GetName()] = true
	}
	seenPod := map[kubemodel.PodID]bool{}
	owner := map[netip.Addr]kubemodel.PodID{}
	for _, p := range c.Pods {
		id := p.ID()
		if id.Name == "" || seenPod[id] {
			problems = append(problems, fmt.Sprintf("pod %s: empty or duplicate name", id))
		}
		seenPod[id] = true
		if !seenNS[id.Namespace] {
			problems = append(problems, fmt.Sprintf("pod %s: namespace %q is not in the cluster", id, id.Namespace))
		}
		strs := p.GetIpAddresses()
		if len(strs) == 0 && p.GetIpAddress() != "" {
			strs = []string{p.GetIpAddress()}
		}
		for _, s := range strs {
			a, err := netip.ParseAddr(s)
			if err != nil {
				problems = append(problems, fmt.Sprintf("pod %s: address %q: %v", id, s, err))
				continue
			}
			if p.GetHostNetwork() {
				continue
			}
			if other, ok := owner[a]; ok {
				problems = append(problems, fmt.Sprintf("pod %s: address %s is also pod %s's", id, a, other))
			}
			owner[a] = id
		}
	}
	seenPolicy := map[kubemodel.PolicyID]bool{}
	for _, np := range c.Policies {
		if seenPolicy[np.ID()] {
			problems = append(problems, fmt.Sprintf("policy %s: duplicate", np.ID()))
		}
		seenPolicy[np.ID()] = true
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %v", ErrInvalidCluster, problems)
	}
	return nil
}

// Clone returns a deep copy of c.
func (c *Cluster) Clone() *Cluster {
	out := &Cluster{}
	for _, n := range c.Nodes {
		out.Nodes = append(out.Nodes, Node{Name: n.Name, Addrs: slices.Clone(n.Addrs)})
	}
	for _, ns := range c.Namespaces {
		out.Namespaces = append(out.Namespaces, proto.CloneOf(ns))
	}
	for _, p := range c.Pods {
		out.Pods = append(out.Pods, proto.CloneOf(p))
	}
	for _, np := range c.Policies {
		out.Policies = append(out.Policies, proto.CloneOf(np))
	}
	return out
}

// PutPolicy adds np (a copy of it), or replaces the policy of the same
// namespace and name. The policy is not validated.
func (c *Cluster) PutPolicy(np *kubemodel.NetworkPolicy) {
	np = proto.CloneOf(np)
	for i, old := range c.Policies {
		if old.ID() == np.ID() {
			c.Policies[i] = np
			return
		}
	}
	c.Policies = append(c.Policies, np)
}

// DeletePolicy removes policy id; it reports an error wrapping
// [ErrInvalidCluster] when there is no such policy.
func (c *Cluster) DeletePolicy(id kubemodel.PolicyID) error {
	for i, np := range c.Policies {
		if np.ID() == id {
			c.Policies = slices.Delete(c.Policies, i, i+1)
			return nil
		}
	}
	return fmt.Errorf("%w: no policy %s", ErrInvalidCluster, id)
}

// PutPod adds p (a copy of it), or replaces the pod of the same namespace
// and name.
func (c *Cluster) PutPod(p *kubemodel.Pod) {
	p = proto.CloneOf(p)
	for i, old := range c.Pods {
		if old.ID() == p.ID() {
			c.Pods[i] = p
			return
		}
	}
	c.Pods = append(c.Pods, p)
}

// DeletePod removes pod id; it reports an error wrapping [ErrInvalidCluster]
// when there is no such pod.
func (c *Cluster) DeletePod(id kubemodel.PodID) error {
	for i, p := range c.Pods {
		if p.ID() == id {
			c.Pods = slices.Delete(c.Pods, i, i+1)
			return nil
		}
	}
	return fmt.Errorf("%w: no pod %s", ErrInvalidCluster, id)
}

// SetPodLabels replaces the labels of pod id (the pod is replaced by a
// copy with the new labels).
func (c *Cluster) SetPodLabels(id kubemodel.PodID, labels map[string]string) error {
	old := c.Pod(id)
	if old == nil {
		return fmt.Errorf("%w: no pod %s", ErrInvalidCluster, id)
	}
	p := proto.CloneOf(old)
	p.Labels = maps.Clone(labels)
	c.PutPod(p)
	return nil
}

// SetPodPorts replaces the containers of pod id by one container, "main",
// that declares ports: the pod as recreated with the same name, labels and
// addresses but other container ports.
func (c *Cluster) SetPodPorts(id kubemodel.PodID, ports []*kubemodel.ContainerPort) error {
	old := c.Pod(id)
	if old == nil {
		return fmt.Errorf("%w: no pod %s", ErrInvalidCluster, id)
	}
	p := proto.CloneOf(old)
	main := &kubemodel.Container{Name: "main"}
	for _, cp := range ports {
		main.Ports = append(main.Ports, proto.CloneOf(cp))
	}
	p.Containers = []*kubemodel.Container{main}
	c.PutPod(p)
	return nil
}

// SetNamespaceLabels replaces the labels of namespace name.
func (c *Cluster) SetNamespaceLabels(name string, labels map[string]string) error {
	for i, ns := range c.Namespaces {
		if ns.GetName() == name {
			c.Namespaces[i] = &kubemodel.Namespace{Name: name, Labels: maps.Clone(labels)}
			return nil
		}
	}
	return fmt.Errorf("%w: no namespace %s", ErrInvalidCluster, name)
}

package policytest

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// The upstream e2e model: its namespaces, its pods in each namespace, the
// ports and protocols every pod serves, and the two nodes the pods are
// spread over.
var (
	modelNamespaces = []string{"x", "y", "z"}
	modelPods       = []string{"a", "b", "c"}
	modelPorts      = []int32{80, 81}
	modelProtocols  = []kubemodel.Protocol{kubemodel.Protocol_TCP, kubemodel.Protocol_UDP}
)

// Node names of the model.
const (
	ModelNode1 = "node-1"
	ModelNode2 = "node-2"
)

// NamespaceNameLabel is the label the API server puts on every namespace,
// with the namespace's name as its value.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// ModelOptions configures [Model].
type ModelOptions struct {
	// DualStack gives every pod and node an IPv6 address besides its IPv4
	// one. The zero value is IPv4 only.
	DualStack bool
}

// Model returns the upstream e2e "netpol" model as a cluster without
// policies:
//
//   - namespaces x, y and z, labelled ns=<name> and
//     kubernetes.io/metadata.name=<name>;
//   - pods a, b and c in each namespace, labelled pod=<name>, each with the
//     containers cont-80-tcp, cont-80-udp, cont-81-tcp and cont-81-udp
//     declaring the named ports serve-80-tcp, serve-80-udp, serve-81-tcp
//     and serve-81-udp;
//   - nodes node-1 and node-2; the pods in the order x/a, x/b, …, z/c
//     alternate between them, starting on node-1 (x/a, x/c, y/b, z/a and
//     z/c are on node-1);
//   - addresses as [ModelPodAddr] and [ModelNodeAddr] give them.
func Model(opts ModelOptions) *Cluster {
	c := &Cluster{}
	for _, node := range []string{ModelNode1, ModelNode2} {
		n := Node{Name: node, Addrs: []netip.Addr{ModelNodeAddr(node, false)}}
		if opts.DualStack {
			n.Addrs = append(n.Addrs, ModelNodeAddr(node, true))
		}
		c.Nodes = append(c.Nodes, n)
	}
	for _, ns := range modelNamespaces {
		c.Namespaces = append(c.Namespaces, &kubemodel.Namespace{
			Name:   ns,
			Labels: map[string]string{"ns": ns, NamespaceNameLabel: ns},
		})
		for _, name := range modelPods {
			id := kubemodel.PodID{Namespace: ns, Name: name}
			addrs := []string{ModelPodAddr(id, false).String()}
			if opts.DualStack {
				addrs = append(addrs, ModelPodAddr(id, true).String())
			}
			p := &kubemodel.Pod{
				Namespace:     ns,
				Name:          name,
				Labels:        map[string]string{"pod": name},
				IpAddress:     addrs[0],
				IpAddresses:   addrs,
				NodeName:      ModelPodNode(id),
				HostIpAddress: ModelNodeAddr(ModelPodNode(id), false).String(),
			}
			for _, port := range modelPorts {
				for _, proto := range modelProtocols {
					suffix := fmt.Sprintf("%d-%s", port, strings.ToLower(proto.String()))
					p.Containers = append(p.Containers, &kubemodel.Container{
						Name: "cont-" + suffix,
						Ports: []*kubemodel.ContainerPort{{
							Name:          "serve-" + suffix,
							ContainerPort: port,
							Protocol:      proto,
						}},
					})
				}
			}
			c.Pods = append(c.Pods, p)
		}
	}
	return c
}

// modelIndex returns the position of pod id in the model (x/a is 0, z/c
// is 8). It panics for a pod that is not in the model.
func modelIndex(id kubemodel.PodID) int {
	ns := slices.Index(modelNamespaces, id.Namespace)
	pod := slices.Index(modelPods, id.Name)
	if ns < 0 || pod < 0 {
		panic(fmt.Sprintf("policytest: %s is not a pod of the model", id))
	}
	return ns*len(modelPods) + pod
}

// ModelPodNode returns the node of model pod id: node-1 for the pods at
// even positions (x/a, x/c, y/b, z/a, z/c), node-2 for the others. It
// panics for a pod that is not in the model.
func ModelPodNode(id kubemodel.PodID) string {
	if modelIndex(id)%2 == 0 {
		return ModelNode1
	}
	return ModelNode2
}

// ModelPodAddr returns the address of model pod id: for the pod at
// position i (x/a is 0, z/c is 8) on node n (1 or 2), 10.244.<n>.<10+i>
// and fd00:10:244:<n>::<10+i> (the IPv6 one written with the same digits,
// so x/b is 10.244.2.11 and fd00:10:244:2::11). The pods of node n are
// inside 10.244.<n>.0/24 and fd00:10:244:<n>::/64. It panics for a pod
// that is not in the model.
func ModelPodAddr(id kubemodel.PodID, ipv6 bool) netip.Addr {
	i := modelIndex(id)
	n := i%2 + 1
	if ipv6 {
		return netip.MustParseAddr(fmt.Sprintf("fd00:10:244:%d::%d", n, 10+i))
	}
	return netip.MustParseAddr(fmt.Sprintf("10.244.%d.%d", n, 10+i))
}

// ModelNodeAddr returns the address of a model node: 192.168.0.<n> and
// fd00:192:168::<n> for node-<n>. It panics for another node name.
func ModelNodeAddr(node string, ipv6 bool) netip.Addr {
	n := slices.Index([]string{ModelNode1, ModelNode2}, node) + 1
	if n == 0 {
		panic(fmt.Sprintf("policytest: %q is not a node of the model", node))
	}
	if ipv6 {
		return netip.MustParseAddr(fmt.Sprintf("fd00:192:168::%d", n))
	}
	return netip.MustParseAddr(fmt.Sprintf("192.168.0.%d", n))
}

// ModelProbes returns the probes of the model: TCP and UDP to ports 80 and
// 81 over IPv4 (TCP/80, TCP/81, UDP/80, UDP/81), then the same over IPv6
// for a dual-stack model.
func ModelProbes(opts ModelOptions) []Probe {
	var probes []Probe
	families := []bool{false}
	if opts.DualStack {
		families = append(families, true)
	}
	for _, ipv6 := range families {
		for _, proto := range modelProtocols {
			for _, port := range modelPorts {
				probes = append(probes, Probe{Protocol: proto, Port: int(port), IPv6: ipv6})
			}
		}
	}
	return probes
}

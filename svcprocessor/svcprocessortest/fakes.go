package svcprocessortest

import (
	"net/netip"
	"slices"
	"sync"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
)

// Subnets is a settable [svcprocessor.PodSubnets]. Safe for concurrent use.
type Subnets struct {
	mu                 sync.Mutex
	thisNode, allNodes netip.Prefix
}

var _ svcprocessor.PodSubnets = (*Subnets)(nil)

// NewSubnets returns Subnets holding the given prefixes.
func NewSubnets(thisNode, allNodes netip.Prefix) *Subnets {
	return &Subnets{thisNode: thisNode, allNodes: allNodes}
}

// Set changes both subnets.
func (s *Subnets) Set(thisNode, allNodes netip.Prefix) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.thisNode, s.allNodes = thisNode, allNodes
}

// PodSubnetThisNode returns the subnet of this node.
func (s *Subnets) PodSubnetThisNode() netip.Prefix {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.thisNode
}

// PodSubnetAllNodes returns the subnet of all nodes.
func (s *Subnets) PodSubnetAllNodes() netip.Prefix {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.allNodes
}

// NodeIPs is a settable [svcprocessor.NodeIPs]. Safe for concurrent use.
type NodeIPs struct {
	mu  sync.Mutex
	ips []netip.Addr
}

var _ svcprocessor.NodeIPs = (*NodeIPs)(nil)

// NewNodeIPs returns NodeIPs holding ips.
func NewNodeIPs(ips ...netip.Addr) *NodeIPs { return &NodeIPs{ips: slices.Clone(ips)} }

// Set replaces the node IPs.
func (n *NodeIPs) Set(ips ...netip.Addr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ips = slices.Clone(ips)
}

// NodeIPs returns a copy of the node IPs.
func (n *NodeIPs) NodeIPs() []netip.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.ips)
}

// Pods is a settable [svcprocessor.PodInterfaces]: pod -> VPP interface.
// Safe for concurrent use.
type Pods struct {
	mu  sync.Mutex
	ifs map[kubemodel.PodID]string
}

var _ svcprocessor.PodInterfaces = (*Pods)(nil)

// NewPods returns an empty Pods.
func NewPods() *Pods { return &Pods{} }

// Connect records that pod is connected through ifName.
func (p *Pods) Connect(pod kubemodel.PodID, ifName string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ifs == nil {
		p.ifs = make(map[kubemodel.PodID]string)
	}
	p.ifs[pod] = ifName
}

// Disconnect forgets pod.
func (p *Pods) Disconnect(pod kubemodel.PodID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.ifs, pod)
}

// PodInterface returns the interface of a connected pod.
func (p *Pods) PodInterface(pod kubemodel.PodID) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	name, ok := p.ifs[pod]
	return name, ok
}

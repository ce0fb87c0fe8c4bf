package nodeaddr

import (
	"net/netip"
	"slices"
	"sync"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
)

// NodeLister lists the nodes of the cluster; *nodesync.NodeSync satisfies
// it.
type NodeLister interface {
	GetAllNodes() nodesync.Nodes
}

// NodeIPSetConfig configures a [NodeIPSet]. The zero value is valid.
type NodeIPSetConfig struct {
	// OnlyNode, when set, limits the set to the addresses of the node of
	// that name (normally this node): NodePort services are then exposed on
	// this node's addresses only, and other nodes joining or leaving change
	// nothing. Default: every node's addresses, as svcprocessor.NodeIPs
	// documents.
	OnlyNode string
}

// NodeIPSet is the set of node addresses on which NodePort services are
// exposed: the VPP-side addresses that nodes publish through nodesync and
// their management addresses from Kubernetes. It implements
// svcprocessor.NodeIPs, and it is a controller.EventHandler that keeps the
// set up to date: register it after the nodesync handler and after the
// handler that publishes this node's VPP addresses (render/nodeconn:
// nodesync reports another node's address changes as NodeUpdate, not this
// node's), and before the service processor's handler. A resync reads
// every node once (GetAllNodes); a [nodesync.NodeUpdate] changes only that
// node's entry.
//
// NodeIPSet is safe for concurrent use.
type NodeIPSet struct {
	nodes NodeLister
	cfg   NodeIPSetConfig

	mu     sync.Mutex
	byNode map[string][]netip.Addr // guarded by mu
	count  map[netip.Addr]int      // guarded by mu; nodes holding the address
	sorted []netip.Addr            // guarded by mu; nil when it must be rebuilt
}

var (
	_ svcprocessor.NodeIPs    = (*NodeIPSet)(nil)
	_ controller.EventHandler = (*NodeIPSet)(nil)
)

// NewNodeIPSet returns an empty set that follows nodes.
func NewNodeIPSet(nodes NodeLister, cfg NodeIPSetConfig) *NodeIPSet {
	return &NodeIPSet{nodes: nodes, cfg: cfg, byNode: map[string][]netip.Addr{}, count: map[netip.Addr]int{}}
}

// NodeIPs returns the addresses, sorted and unique. The slice is shared:
// callers must not modify it (svcprocessor copies it).
func (s *NodeIPSet) NodeIPs() []netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sorted == nil {
		s.sorted = make([]netip.Addr, 0, len(s.count))
		for a := range s.count {
			s.sorted = append(s.sorted, a)
		}
		slices.SortFunc(s.sorted, netip.Addr.Compare)
	}
	return s.sorted
}

// String returns "node-ips".
func (s *NodeIPSet) String() string { return "node-ips" }

// HandlesEvent selects resyncs and NodeUpdate events.
func (s *NodeIPSet) HandlesEvent(ev controller.Event) bool {
	if _, ok := ev.(*nodesync.NodeUpdate); ok {
		return true
	}
	m := ev.Method()
	return m == controller.FullResync || m == controller.UpstreamResync
}

// Resync rebuilds the set from every node.
func (s *NodeIPSet) Resync(controller.Event, controller.KubeStateData, int, controller.ResyncOperations) error {
	all := s.nodes.GetAllNodes()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byNode, s.count, s.sorted = map[string][]netip.Addr{}, map[netip.Addr]int{}, nil
	for name, n := range all {
		s.setLocked(name, n)
	}
	return nil
}

// Update applies a NodeUpdate.
func (s *NodeIPSet) Update(ev controller.Event, _ controller.UpdateOperations) (string, error) {
	nu, ok := ev.(*nodesync.NodeUpdate)
	if !ok {
		return "", nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.setLocked(nu.NodeName, nu.NewState) {
		return "", nil
	}
	return "node addresses of " + nu.NodeName + " changed", nil
}

// Revert does nothing: NodeUpdate is best effort.
func (s *NodeIPSet) Revert(controller.Event) error { return nil }

// setLocked replaces the addresses of node name (n nil: the node left) and
// reports whether the set changed.
func (s *NodeIPSet) setLocked(name string, n *nodesync.Node) bool {
	if s.cfg.OnlyNode != "" && name != s.cfg.OnlyNode {
		return false
	}
	var next []netip.Addr
	if n != nil {
		for _, a := range n.VppIPAddresses {
			next = append(next, a.Address.Unmap())
		}
		next = append(next, n.MgmtAddrs()...)
		slices.SortFunc(next, netip.Addr.Compare)
		next = slices.Compact(next)
	}
	prev := s.byNode[name]
	if slices.Equal(prev, next) {
		return false
	}
	changed := false
	for _, a := range prev {
		if s.count[a]--; s.count[a] == 0 {
			delete(s.count, a)
			changed = true
		}
	}
	for _, a := range next {
		if s.count[a]++; s.count[a] == 1 {
			changed = true
		}
	}
	if len(next) == 0 {
		delete(s.byNode, name)
	} else {
		s.byNode[name] = next
	}
	if changed {
		s.sorted = nil
	}
	return changed
}

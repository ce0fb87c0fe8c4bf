package bgp

import (
	"maps"
	"slices"
	"sync"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"google.golang.org/protobuf/proto"
)

// NodeSource returns the current state of the node the controller runs on,
// or nil when it is not known (yet). The returned node is read-only. It must
// be safe for concurrent use.
type NodeSource interface {
	Node() *kubemodel.Node
}

// NodeSourceFunc adapts a function into a [NodeSource].
type NodeSourceFunc func() *kubemodel.Node

var _ NodeSource = NodeSourceFunc(nil)

// Node calls f.
func (f NodeSourceFunc) Node() *kubemodel.Node { return f() }

// PolicySource lists the peering policies of the cluster. The returned
// policies are read-only. It must be safe for concurrent use.
type PolicySource interface {
	Policies() []*PeeringPolicy
}

// PolicySourceFunc adapts a function into a [PolicySource].
type PolicySourceFunc func() []*PeeringPolicy

var _ PolicySource = PolicySourceFunc(nil)

// Policies calls f.
func (f PolicySourceFunc) Policies() []*PeeringPolicy { return f() }

// Store is a programmatic source of the node, the policies and the services:
// it implements [NodeSource], [PolicySource] and [ServiceLister], and signals
// its [Signaler] on every real change. Values are copied in and out.
//
// Store is safe for concurrent use. The zero value is not usable; use
// [NewStore].
type Store struct {
	sig Signaler

	mu       sync.Mutex                // guards the fields below
	node     *kubemodel.Node           // nil until SetNode
	policies map[string]*PeeringPolicy // by name
	services map[string]Service        // by namespace/name
}

var (
	_ NodeSource    = (*Store)(nil)
	_ PolicySource  = (*Store)(nil)
	_ ServiceLister = (*Store)(nil)
)

// NewStore returns an empty store that signals sig on changes (the zero
// Signaler disables signalling).
func NewStore(sig Signaler) *Store {
	return &Store{sig: sig, policies: make(map[string]*PeeringPolicy), services: make(map[string]Service)}
}

// SetNode sets the node (nil forgets it).
func (s *Store) SetNode(n *kubemodel.Node) {
	s.mu.Lock()
	changed := !proto.Equal(s.node, n)
	if changed {
		if n == nil {
			s.node = nil
		} else {
			s.node = proto.Clone(n).(*kubemodel.Node)
		}
	}
	s.mu.Unlock()
	if changed {
		s.sig.Event(n)
	}
}

// Node returns a copy of the node, nil if unknown.
func (s *Store) Node() *kubemodel.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node == nil {
		return nil
	}
	return proto.Clone(s.node).(*kubemodel.Node)
}

// SetPolicy adds or replaces the policy named p.Name.
func (s *Store) SetPolicy(p *PeeringPolicy) {
	s.mu.Lock()
	s.policies[p.Name] = p.Clone()
	s.mu.Unlock()
	s.sig.Event(p)
}

// DeletePolicy removes the policy with the given name, if present.
func (s *Store) DeletePolicy(name string) {
	s.mu.Lock()
	_, ok := s.policies[name]
	delete(s.policies, name)
	s.mu.Unlock()
	if ok {
		s.sig.Event(name)
	}
}

// ReplacePolicies replaces all policies at once (a resync).
func (s *Store) ReplacePolicies(ps []*PeeringPolicy) {
	m := make(map[string]*PeeringPolicy, len(ps))
	for _, p := range ps {
		m[p.Name] = p.Clone()
	}
	s.mu.Lock()
	s.policies = m
	s.mu.Unlock()
	s.sig.Event(nil)
}

// Policies returns copies of the policies, sorted by name.
func (s *Store) Policies() []*PeeringPolicy {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := slices.Sorted(maps.Keys(s.policies))
	out := make([]*PeeringPolicy, len(names))
	for i, n := range names {
		out[i] = s.policies[n].Clone()
	}
	return out
}

// SetService adds or replaces a service.
func (s *Store) SetService(svc Service) {
	svc = cloneService(svc)
	s.mu.Lock()
	s.services[svc.Namespace+"/"+svc.Name] = svc
	s.mu.Unlock()
	s.sig.Event(svc)
}

// DeleteService removes a service, if present.
func (s *Store) DeleteService(namespace, name string) {
	s.mu.Lock()
	_, ok := s.services[namespace+"/"+name]
	delete(s.services, namespace+"/"+name)
	s.mu.Unlock()
	if ok {
		s.sig.Event(name)
	}
}

// ListServices returns copies of the services, sorted by namespace/name.
func (s *Store) ListServices() []Service {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := slices.Sorted(maps.Keys(s.services))
	out := make([]Service, len(keys))
	for i, k := range keys {
		out[i] = cloneService(s.services[k])
	}
	return out
}

func cloneService(svc Service) Service {
	svc.Labels = maps.Clone(svc.Labels)
	svc.ClusterIPs = slices.Clone(svc.ClusterIPs)
	svc.ExternalIPs = slices.Clone(svc.ExternalIPs)
	svc.LoadBalancerIPs = slices.Clone(svc.LoadBalancerIPs)
	return svc
}

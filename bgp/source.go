package bgp

import (
	"maps"
	"slices"
	"strings"
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

// Store is a programmatic source of the node, the v1 policies, the v2
// objects and the services: it implements [NodeSource], [PolicySource],
// [ObjectSource] and [ServiceLister], and signals its [Signaler] on every
// real change. Values are copied in and out (the snapshot [Store.Objects]
// returns is shared and read-only).
//
// Store is safe for concurrent use. The zero value is not usable; use
// [NewStore].
type Store struct {
	sig Signaler

	mu       sync.Mutex                // guards the fields below
	node     *kubemodel.Node           // nil until SetNode
	policies map[string]*PeeringPolicy // by name
	services map[string]Service        // by namespace/name
	objs     Objects                   // v2; maps by name
	objsSnap *Objects                  // snapshot of objs; nil when stale
}

var (
	_ NodeSource    = (*Store)(nil)
	_ PolicySource  = (*Store)(nil)
	_ ServiceLister = (*Store)(nil)
	_ ObjectSource  = (*Store)(nil)
)

// NewStore returns an empty store that signals sig on changes (the zero
// Signaler disables signalling).
func NewStore(sig Signaler) *Store {
	return &Store{sig: sig, policies: make(map[string]*PeeringPolicy), services: make(map[string]Service),
		objs: Objects{PeerConfigs: map[string]*PeerConfig{}, Overrides: map[string]*NodeConfigOverride{}, AuthSecrets: map[string]string{}}}
}

// changeObjects runs f on the v2 objects under the lock and signals.
func (s *Store) changeObjects(f func(o *Objects)) {
	s.mu.Lock()
	f(&s.objs)
	s.objsSnap = nil
	s.mu.Unlock()
	s.sig.Event(nil)
}

// SetClusterConfig adds or replaces the cluster config named c.Name.
func (s *Store) SetClusterConfig(c *ClusterConfig) {
	c = c.Clone()
	s.changeObjects(func(o *Objects) {
		o.ClusterConfigs = slices.DeleteFunc(o.ClusterConfigs, func(x *ClusterConfig) bool { return x.Name == c.Name })
		o.ClusterConfigs = append(o.ClusterConfigs, c)
		slices.SortFunc(o.ClusterConfigs, func(a, b *ClusterConfig) int { return strings.Compare(a.Name, b.Name) })
	})
}

// SetPeerConfig adds or replaces the peer config named c.Name.
func (s *Store) SetPeerConfig(c *PeerConfig) {
	c = c.Clone()
	s.changeObjects(func(o *Objects) { o.PeerConfigs[c.Name] = c })
}

// SetAdvertisement adds or replaces the advertisement named a.Name.
func (s *Store) SetAdvertisement(a *Advertisement) {
	a = a.Clone()
	s.changeObjects(func(o *Objects) {
		o.Advertisements = slices.DeleteFunc(o.Advertisements, func(x *Advertisement) bool { return x.Name == a.Name })
		o.Advertisements = append(o.Advertisements, a)
		slices.SortFunc(o.Advertisements, func(a, b *Advertisement) int { return strings.Compare(a.Name, b.Name) })
	})
}

// SetNodeConfigOverride adds or replaces the override named o.Name (the
// node's name).
func (s *Store) SetNodeConfigOverride(ov *NodeConfigOverride) {
	ov = ov.Clone()
	s.changeObjects(func(o *Objects) { o.Overrides[ov.Name] = ov })
}

// SetAuthSecret sets the password of the auth secret name.
func (s *Store) SetAuthSecret(name, password string) {
	s.changeObjects(func(o *Objects) { o.AuthSecrets[name] = password })
}

// SetInvalidObject records an object that failed its checks, as an
// [EventSource] does, replacing a valid object of the same kind and name.
func (s *Store) SetInvalidObject(kind, name string, err error) {
	s.DeleteObject(kind, name)
	s.changeObjects(func(o *Objects) {
		o.Invalid = append(o.Invalid, InvalidObject{Kind: kind, Name: name, Err: err})
	})
}

// DeleteObject removes the v2 object of the kind (KindClusterConfig,
// KindPeerConfig, KindAdvertisement, KindNodeConfigOverride,
// KindAuthSecret) with the given name, valid or invalid.
func (s *Store) DeleteObject(kind, name string) {
	s.changeObjects(func(o *Objects) {
		o.Invalid = slices.DeleteFunc(o.Invalid, func(x InvalidObject) bool { return x.Kind == kind && x.Name == name })
		switch kind {
		case KindClusterConfig:
			o.ClusterConfigs = slices.DeleteFunc(o.ClusterConfigs, func(x *ClusterConfig) bool { return x.Name == name })
		case KindPeerConfig:
			delete(o.PeerConfigs, name)
		case KindAdvertisement:
			o.Advertisements = slices.DeleteFunc(o.Advertisements, func(x *Advertisement) bool { return x.Name == name })
		case KindNodeConfigOverride:
			delete(o.Overrides, name)
		case KindAuthSecret:
			delete(o.AuthSecrets, name)
		}
	})
}

// Objects returns a snapshot of the v2 objects; shared and read-only.
func (s *Store) Objects() *Objects {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objsSnap == nil {
		s.objsSnap = &Objects{
			ClusterConfigs: slices.Clone(s.objs.ClusterConfigs),
			PeerConfigs:    maps.Clone(s.objs.PeerConfigs),
			Advertisements: slices.Clone(s.objs.Advertisements),
			Overrides:      maps.Clone(s.objs.Overrides),
			AuthSecrets:    maps.Clone(s.objs.AuthSecrets),
			Invalid:        slices.Clone(s.objs.Invalid),
		}
	}
	return s.objsSnap
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

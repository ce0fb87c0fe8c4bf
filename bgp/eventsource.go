package bgp

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"google.golang.org/protobuf/proto"
)

// EventSource feeds a [Controller] from the controller event loop: it is a
// [controller.EventHandler] that follows this node's kubemodel.Node, the v1
// peering policies (bgpmodel.PeeringPolicy) and the v2 objects (cluster
// configs, peer configs, advertisements, node overrides, auth secrets; see
// bgpmodel.V2Resources) through resyncs and KubeStateChange events, and it
// is the [NodeSource], [PolicySource] and [ObjectSource] of the Controller.
// Every change signals the Signaler given to [NewEventSource].
//
// It only reads: it never puts anything into the event's transaction.
// Objects that cannot be converted ([PolicyFromModel],
// [ClusterConfigFromModel], [PeerConfigFromModel],
// [AdvertisementFromModel], [NodeConfigOverrideFromModel]) are left out,
// logged at Warn level once (again only when their problem changes) and
// reported by [EventSource.InvalidPolicies] (v1) and in
// [Objects].Invalid (v2), which the controller turns into status
// conditions.
//
// EventSource is safe for concurrent use: the event loop calls the handler
// methods while the Controller reads the sources.
type EventSource struct {
	nodeName string
	sig      Signaler
	log      *slog.Logger

	mu       sync.Mutex                // guards the fields below
	node     *kubemodel.Node           // nil until seen
	policies map[string]*PeeringPolicy // by policy key
	invalid  map[string]error          // by key, v1 and v2
	v2       map[string]any            // by key: *ClusterConfig, *PeerConfig, *Advertisement, *NodeConfigOverride, string (secret)
	objects  *Objects                  // snapshot of v2, rebuilt lazily; nil when stale
}

var (
	_ controller.EventHandler = (*EventSource)(nil)
	_ NodeSource              = (*EventSource)(nil)
	_ PolicySource            = (*EventSource)(nil)
	_ ObjectSource            = (*EventSource)(nil)
)

// NewEventSource returns an event source for the node named nodeName that
// signals sig on changes. A nil logger discards.
func NewEventSource(nodeName string, sig Signaler, logger *slog.Logger) (*EventSource, error) {
	if err := kubemodel.ValidateName(nodeName); err != nil {
		return nil, fmt.Errorf("bgp: NewEventSource: node name: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &EventSource{
		nodeName: nodeName, sig: sig, log: logger.With(slog.String("component", "bgp-source")),
		policies: make(map[string]*PeeringPolicy), invalid: make(map[string]error), v2: make(map[string]any),
	}, nil
}

// String names the handler.
func (s *EventSource) String() string { return "bgp-source" }

// isBGPResource reports whether name is the resource of a BGP object.
func isBGPResource(name string) bool {
	for _, r := range bgpmodel.Resources() {
		if r.Name == name {
			return true
		}
	}
	return false
}

// HandlesEvent selects resyncs and changes of nodes and BGP objects.
func (s *EventSource) HandlesEvent(ev controller.Event) bool {
	switch ev.Method() {
	case controller.FullResync, controller.UpstreamResync:
		return true
	}
	ksc, ok := ev.(*controller.KubeStateChange)
	return ok && (ksc.Resource == kubemodel.NodeResource || isBGPResource(ksc.Resource))
}

// Resync replaces the node and all BGP objects with those in kubeState.
func (s *EventSource) Resync(_ controller.Event, kubeState controller.KubeStateData, _ int, _ controller.ResyncOperations) error {
	var node *kubemodel.Node
	if n, ok := kubeState[kubemodel.NodeResource][kubemodel.NodeKey(s.nodeName)].(*kubemodel.Node); ok {
		node = n
	}
	policies := make(map[string]*PeeringPolicy)
	invalid := make(map[string]error)
	v2 := make(map[string]any)
	s.mu.Lock()
	prev := s.invalid
	s.mu.Unlock()
	for _, r := range bgpmodel.Resources() {
		for key, v := range kubeState[r.Name] {
			s.convert(r.Name, key, v, policies, v2, invalid, prev[key])
		}
	}
	s.mu.Lock()
	s.node = cloneNode(node)
	s.policies, s.invalid, s.v2, s.objects = policies, invalid, v2, nil
	s.mu.Unlock()
	s.sig.Event(nil)
	return nil
}

// Update applies one KubeStateChange.
func (s *EventSource) Update(ev controller.Event, _ controller.UpdateOperations) (string, error) {
	ksc, ok := ev.(*controller.KubeStateChange)
	if !ok {
		return "", nil
	}
	if ksc.Resource == kubemodel.NodeResource {
		if ksc.Key != kubemodel.NodeKey(s.nodeName) {
			return "", nil
		}
		n, _ := ksc.NewValue.(*kubemodel.Node)
		s.mu.Lock()
		changed := !proto.Equal(s.node, n)
		s.node = cloneNode(n)
		s.mu.Unlock()
		if !changed {
			return "", nil
		}
		s.sig.Event(ksc)
		return "bgp: node changed", nil
	}
	if !isBGPResource(ksc.Resource) {
		return "", nil
	}
	s.mu.Lock()
	prev := s.invalid[ksc.Key]
	delete(s.policies, ksc.Key)
	delete(s.invalid, ksc.Key)
	delete(s.v2, ksc.Key)
	if ksc.NewValue != nil {
		s.convert(ksc.Resource, ksc.Key, ksc.NewValue, s.policies, s.v2, s.invalid, prev)
	}
	s.objects = nil
	s.mu.Unlock()
	s.sig.Event(ksc)
	return "bgp: " + ksc.Resource + " " + ksc.Key + " changed", nil
}

// Revert does nothing: the source keeps no state the transaction could undo.
func (s *EventSource) Revert(controller.Event) error { return nil }

// convert converts the object of resource stored under key into policies
// or v2, or its error into invalid. prev is the key's error before (nil if
// none): an error is logged at Warn only when it differs, so that an
// object left out is logged once, not at every resync.
func (s *EventSource) convert(resource, key string, v proto.Message, policies map[string]*PeeringPolicy, v2 map[string]any,
	invalid map[string]error, prev error) {
	_, name, _ := bgpmodel.ParseObjectKey(key)
	var err error
	switch m := v.(type) {
	case *bgpmodel.PeeringPolicy:
		var p *PeeringPolicy
		if p, err = PolicyFromModel(m); err == nil {
			if p.Name == "" {
				p.Name = name
			}
			policies[key] = p
		}
	case *bgpmodel.ClusterConfig:
		var c *ClusterConfig
		if c, err = ClusterConfigFromModel(m); err == nil {
			v2[key] = c
		}
	case *bgpmodel.PeerConfig:
		var c *PeerConfig
		if c, err = PeerConfigFromModel(m); err == nil {
			v2[key] = c
		}
	case *bgpmodel.Advertisement:
		var a *Advertisement
		if a, err = AdvertisementFromModel(m); err == nil {
			v2[key] = a
		}
	case *bgpmodel.NodeConfigOverride:
		var o *NodeConfigOverride
		if o, err = NodeConfigOverrideFromModel(m); err == nil {
			v2[key] = o
		}
	case *bgpmodel.AuthSecret:
		v2[key] = m.GetPassword()
	default:
		err = fmt.Errorf("bgp: value of %s is %T, not a BGP object", key, v)
	}
	if err != nil {
		invalid[key] = err
		if prev == nil || prev.Error() != err.Error() {
			s.log.Warn("ignoring invalid BGP object", slog.String("resource", resource), slog.String("key", key), slog.Any("error", err))
		}
	}
}

// Node returns a copy of this node's state, nil if unknown.
func (s *EventSource) Node() *kubemodel.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneNode(s.node)
}

// Policies returns copies of the valid policies, sorted by key.
func (s *EventSource) Policies() []*PeeringPolicy {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := slices.Sorted(maps.Keys(s.policies))
	out := make([]*PeeringPolicy, len(keys))
	for i, k := range keys {
		out[i] = s.policies[k].Clone()
	}
	return out
}

// InvalidPolicies returns the conversion error of every v1 policy left
// out, by key.
func (s *EventSource) InvalidPolicies() map[string]error {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]error)
	for k, err := range s.invalid {
		if strings.HasPrefix(k, bgpmodel.PolicyKeyPrefix) {
			out[k] = err
		}
	}
	return out
}

// Objects returns a snapshot of the v2 objects, the invalid ones in
// Invalid (sorted by kind and name). The snapshot and the objects in it
// are shared and read-only; it is rebuilt only after a change.
func (s *EventSource) Objects() *Objects {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objects != nil {
		return s.objects
	}
	o := &Objects{PeerConfigs: map[string]*PeerConfig{}, Overrides: map[string]*NodeConfigOverride{}, AuthSecrets: map[string]string{}}
	for _, key := range slices.Sorted(maps.Keys(s.v2)) {
		_, name, _ := bgpmodel.ParseObjectKey(key)
		switch v := s.v2[key].(type) {
		case *ClusterConfig:
			o.ClusterConfigs = append(o.ClusterConfigs, v)
		case *PeerConfig:
			o.PeerConfigs[v.Name] = v
		case *Advertisement:
			o.Advertisements = append(o.Advertisements, v)
		case *NodeConfigOverride:
			o.Overrides[v.Name] = v
		case string:
			o.AuthSecrets[name] = v
		}
	}
	for _, key := range slices.Sorted(maps.Keys(s.invalid)) {
		res, name, err := bgpmodel.ParseObjectKey(key)
		if err != nil {
			continue
		}
		o.Invalid = append(o.Invalid, InvalidObject{Kind: kindOf(res), Name: name, Err: s.invalid[key]})
	}
	s.objects = o
	return o
}

// kindOf returns the kind of the objects of a BGP resource.
func kindOf(resource string) string {
	switch resource {
	case bgpmodel.PolicyResourceName:
		return KindPeeringPolicy
	case bgpmodel.ClusterConfigResourceName:
		return KindClusterConfig
	case bgpmodel.PeerConfigResourceName:
		return KindPeerConfig
	case bgpmodel.AdvertisementResourceName:
		return KindAdvertisement
	case bgpmodel.NodeConfigOverrideResourceName:
		return KindNodeConfigOverride
	case bgpmodel.AuthSecretResourceName:
		return KindAuthSecret
	}
	return resource
}

func cloneNode(n *kubemodel.Node) *kubemodel.Node {
	if n == nil {
		return nil
	}
	return proto.Clone(n).(*kubemodel.Node)
}

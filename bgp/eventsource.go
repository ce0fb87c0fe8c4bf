package bgp

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"google.golang.org/protobuf/proto"
)

// EventSource feeds a [Controller] from the controller event loop: it is a
// [controller.EventHandler] that follows this node's kubemodel.Node and the
// bgpmodel.PeeringPolicy resource through resyncs and KubeStateChange events,
// and it is the [NodeSource] and [PolicySource] of the Controller. Every
// change signals the Signaler given to [NewEventSource].
//
// It only reads: it never puts anything into the event's transaction.
// Policies that cannot be converted ([PolicyFromModel]) are left out, logged
// at Warn level once (again only when their problem changes) and reported
// by [EventSource.InvalidPolicies].
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
	invalid  map[string]error          // by policy key
}

var (
	_ controller.EventHandler = (*EventSource)(nil)
	_ NodeSource              = (*EventSource)(nil)
	_ PolicySource            = (*EventSource)(nil)
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
		policies: make(map[string]*PeeringPolicy), invalid: make(map[string]error),
	}, nil
}

// String names the handler.
func (s *EventSource) String() string { return "bgp-source" }

// HandlesEvent selects resyncs and changes of nodes and peering policies.
func (s *EventSource) HandlesEvent(ev controller.Event) bool {
	switch ev.Method() {
	case controller.FullResync, controller.UpstreamResync:
		return true
	}
	ksc, ok := ev.(*controller.KubeStateChange)
	return ok && (ksc.Resource == kubemodel.NodeResource || ksc.Resource == bgpmodel.PolicyResourceName)
}

// Resync replaces the node and all policies with those in kubeState.
func (s *EventSource) Resync(_ controller.Event, kubeState controller.KubeStateData, _ int, _ controller.ResyncOperations) error {
	var node *kubemodel.Node
	if n, ok := kubeState[kubemodel.NodeResource][kubemodel.NodeKey(s.nodeName)].(*kubemodel.Node); ok {
		node = n
	}
	policies := make(map[string]*PeeringPolicy)
	invalid := make(map[string]error)
	s.mu.Lock()
	prev := s.invalid
	s.mu.Unlock()
	for key, v := range kubeState[bgpmodel.PolicyResourceName] {
		s.convert(key, v, policies, invalid, prev[key])
	}
	s.mu.Lock()
	s.node = cloneNode(node)
	s.policies, s.invalid = policies, invalid
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
	switch ksc.Resource {
	case kubemodel.NodeResource:
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
	case bgpmodel.PolicyResourceName:
		s.mu.Lock()
		prev := s.invalid[ksc.Key]
		delete(s.policies, ksc.Key)
		delete(s.invalid, ksc.Key)
		if ksc.NewValue != nil {
			s.convert(ksc.Key, ksc.NewValue, s.policies, s.invalid, prev)
		}
		s.mu.Unlock()
		s.sig.Event(ksc)
		return "bgp: peering policy " + ksc.Key + " changed", nil
	}
	return "", nil
}

// Revert does nothing: the source keeps no state the transaction could undo.
func (s *EventSource) Revert(controller.Event) error { return nil }

// convert converts the policy stored under key into policies, or its
// error into invalid. prev is the key's error before (nil if none): an
// error is logged at Warn only when it differs, so that a policy left out
// is logged once, not at every resync.
func (s *EventSource) convert(key string, v proto.Message, policies map[string]*PeeringPolicy, invalid map[string]error, prev error) {
	var p *PeeringPolicy
	var err error
	if m, ok := v.(*bgpmodel.PeeringPolicy); ok {
		p, err = PolicyFromModel(m)
	} else {
		err = fmt.Errorf("bgp: value of %s is %T, want *bgpmodel.PeeringPolicy", key, v)
	}
	if err != nil {
		invalid[key] = err
		if prev == nil || prev.Error() != err.Error() {
			s.log.Warn("ignoring peering policy", slog.String("key", key), slog.Any("error", err))
		}
		return
	}
	if p.Name == "" {
		p.Name, _ = bgpmodel.ParsePolicyKey(key)
	}
	policies[key] = p
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

// InvalidPolicies returns the conversion error of every policy left out,
// by key.
func (s *EventSource) InvalidPolicies() map[string]error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.invalid)
}

func cloneNode(n *kubemodel.Node) *kubemodel.Node {
	if n == nil {
		return nil
	}
	return proto.Clone(n).(*kubemodel.Node)
}

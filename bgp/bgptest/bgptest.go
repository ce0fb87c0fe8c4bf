// Package bgptest provides in-memory fakes for testing code that uses
// package bgp.
//
// [FakeManager] implements [bgp.BGPRouterManager] and [bgp.SpecApplier]:
// it validates the policy like a real manager would, records every call
// and the resulting desired state (as a policy for v1 and as a
// [bgp.NodeSpec] for both APIs), and can inject faults. It has no network
// side: no sessions, no routes. Use package gobgp with loopback peers for
// that.
package bgptest

import (
	"context"
	"errors"
	"maps"
	"net"
	"slices"
	"sync"

	"github.com/vswitchkit/vswitchkit/bgp"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Call is one recorded ConfigurePeers or ApplySpec call. Policy (v1
// only), Spec (the v1 policy translated with bgp.SpecFromPolicy, or the
// spec given to ApplySpec) and State are deep copies (nil when the call
// passed nil).
type Call struct {
	Policy *bgp.PeeringPolicy
	Spec   *bgp.NodeSpec
	State  *bgp.ControlPlaneState
	Err    error
}

// FakeManager is an in-memory [bgp.BGPRouterManager]. The zero value is
// ready to use.
//
// FakeManager is safe for concurrent use. It reports (through Concurrent) if
// ConfigurePeers was ever called concurrently, which the contract forbids.
type FakeManager struct {
	// ConfigurePeersFunc, if set, is called first on every call; a non-nil
	// error is recorded and returned without changing the applied policy.
	// Use it to inject faults ("fail the 3rd call") or to block.
	ConfigurePeersFunc func(ctx context.Context, policy *bgp.PeeringPolicy, state *bgp.ControlPlaneState) error
	// ApplySpecFunc, if set, is called first on every ApplySpec call, like
	// ConfigurePeersFunc.
	ApplySpecFunc func(ctx context.Context, spec *bgp.NodeSpec, state *bgp.ControlPlaneState) error

	mu          sync.Mutex
	calls       []Call
	applied     *bgp.PeeringPolicy
	appliedSpec *bgp.NodeSpec
	inFlight    int
	concurrent  bool
	notify      chan struct{}
}

var (
	_ bgp.BGPRouterManager = (*FakeManager)(nil)
	_ bgp.SpecApplier      = (*FakeManager)(nil)
)

// ConfigurePeers records the call. A non-nil policy is validated (after
// defaults, [bgp.PeeringPolicy.Validate] and
// [bgp.PeeringPolicy.ValidateState] with the state) and becomes the applied
// policy when valid; nil withdraws it.
func (f *FakeManager) ConfigurePeers(ctx context.Context, policy *bgp.PeeringPolicy, state *bgp.ControlPlaneState) error {
	f.mu.Lock()
	f.inFlight++
	if f.inFlight > 1 {
		f.concurrent = true
	}
	fn := f.ConfigurePeersFunc
	f.mu.Unlock()

	var err error
	if fn != nil {
		err = fn(ctx, policy, state)
	}
	if err == nil && policy != nil {
		p := policy.WithDefaults()
		err = errors.Join(p.Validate(), p.ValidateState(state))
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight--
	spec := bgp.SpecFromPolicy(policy, state)
	f.calls = append(f.calls, Call{Policy: policy.Clone(), Spec: spec, State: cloneState(state), Err: err})
	if err == nil {
		f.applied = policy.WithDefaults()
		f.appliedSpec = spec.Clone()
	}
	f.notifyLocked()
	return err
}

// ApplySpec records the call. A non-nil spec becomes the applied spec
// (and the applied policy is cleared); nil withdraws it.
func (f *FakeManager) ApplySpec(ctx context.Context, spec *bgp.NodeSpec, state *bgp.ControlPlaneState) error {
	f.mu.Lock()
	f.inFlight++
	if f.inFlight > 1 {
		f.concurrent = true
	}
	fn := f.ApplySpecFunc
	f.mu.Unlock()

	var err error
	if fn != nil {
		err = fn(ctx, spec, state)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight--
	f.calls = append(f.calls, Call{Spec: spec.Clone(), State: cloneState(state), Err: err})
	if err == nil {
		f.applied = nil
		f.appliedSpec = spec.Clone()
	}
	f.notifyLocked()
	return err
}

func (f *FakeManager) notifyLocked() {
	if f.notify != nil {
		select {
		case f.notify <- struct{}{}:
		default:
		}
	}
}

// AppliedSpec returns a copy of the applied configuration in the internal
// model (a v1 policy translated), nil if nothing is applied.
func (f *FakeManager) AppliedSpec() *bgp.NodeSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.appliedSpec.Clone()
}

// Calls returns copies of the recorded calls, oldest first.
func (f *FakeManager) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Applied returns a copy of the applied v1 policy (with defaults), nil if
// nothing is applied or a spec was applied with ApplySpec.
func (f *FakeManager) Applied() *bgp.PeeringPolicy {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied.Clone()
}

// Concurrent reports whether ConfigurePeers was ever called while another
// call was in progress.
func (f *FakeManager) Concurrent() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.concurrent
}

// Notify returns a channel of capacity 1 that receives a value after each
// call (rolled up, like [bgp.Signaler]).
func (f *FakeManager) Notify() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.notify == nil {
		f.notify = make(chan struct{}, 1)
	}
	return f.notify
}

func cloneState(s *bgp.ControlPlaneState) *bgp.ControlPlaneState {
	if s == nil {
		return nil
	}
	c := &bgp.ControlPlaneState{
		Annotations: maps.Clone(s.Annotations),
		IPv4:        slices.Clone(net.IP(s.IPv4)),
		IPv6:        slices.Clone(net.IP(s.IPv6)),
	}
	if s.Node != nil {
		c.Node = proto.Clone(s.Node).(*kubemodel.Node)
	}
	return c
}

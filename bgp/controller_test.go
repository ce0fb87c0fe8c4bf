package bgp_test

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgptest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

func node(labels map[string]string) *kubemodel.Node {
	return &kubemodel.Node{Name: "n1", Labels: labels, PodCidrs: []string{"10.244.1.0/24"},
		Addresses: []*kubemodel.NodeAddress{
			{Type: kubemodel.NodeAddress_EXTERNAL_IP, Address: "192.0.2.1"},
			{Type: kubemodel.NodeAddress_INTERNAL_IP, Address: "10.0.0.1"},
			{Type: kubemodel.NodeAddress_INTERNAL_IP, Address: "fd00::1"},
		}}
}

func policyFor(name string, sel *bgp.LabelSelector) *bgp.PeeringPolicy {
	p := validPolicy()
	p.Name = name
	p.NodeSelector = sel
	return p
}

func TestPolicySelection(t *testing.T) {
	rack1 := &bgp.LabelSelector{MatchLabels: map[string]string{"rack": "r1"}}
	tests := []struct {
		name     string
		labels   map[string]string
		policies []*bgp.PeeringPolicy
		want     string // selected policy; "" = none
		wantErr  error
	}{
		{name: "no policies", labels: map[string]string{"rack": "r1"}},
		{name: "zero match", labels: map[string]string{"rack": "r2"}, policies: []*bgp.PeeringPolicy{policyFor("a", rack1)}},
		{name: "one match", labels: map[string]string{"rack": "r1"},
			policies: []*bgp.PeeringPolicy{policyFor("a", rack1), policyFor("b", &bgp.LabelSelector{MatchLabels: map[string]string{"rack": "r2"}})}, want: "a"},
		{name: "two match", labels: map[string]string{"rack": "r1"},
			policies: []*bgp.PeeringPolicy{policyFor("a", rack1), policyFor("b", nil)}, wantErr: bgp.ErrMultiplePolicies},
		{name: "nil selector matches all", labels: nil, policies: []*bgp.PeeringPolicy{nil, policyFor("all", nil)}, want: "all"},
		{name: "empty selector matches all", labels: nil, policies: []*bgp.PeeringPolicy{policyFor("all", &bgp.LabelSelector{})}, want: "all"},
		{name: "In", labels: map[string]string{"zone": "b"}, want: "in", policies: []*bgp.PeeringPolicy{policyFor("in",
			&bgp.LabelSelector{MatchExpressions: []bgp.LabelSelectorRequirement{{Key: "zone", Operator: bgp.SelectorOpIn, Values: []string{"a", "b"}}}})}},
		{name: "NotIn matches missing label", labels: nil, want: "notin", policies: []*bgp.PeeringPolicy{policyFor("notin",
			&bgp.LabelSelector{MatchExpressions: []bgp.LabelSelectorRequirement{{Key: "zone", Operator: bgp.SelectorOpNotIn, Values: []string{"a"}}}})}},
		{name: "NotIn excludes", labels: map[string]string{"zone": "a"}, policies: []*bgp.PeeringPolicy{policyFor("notin",
			&bgp.LabelSelector{MatchExpressions: []bgp.LabelSelectorRequirement{{Key: "zone", Operator: bgp.SelectorOpNotIn, Values: []string{"a"}}}})}},
		{name: "Exists and DoesNotExist ANDed with labels", labels: map[string]string{"bgp": "", "rack": "r1"}, want: "x",
			policies: []*bgp.PeeringPolicy{policyFor("x", &bgp.LabelSelector{MatchLabels: map[string]string{"rack": "r1"},
				MatchExpressions: []bgp.LabelSelectorRequirement{{Key: "bgp", Operator: bgp.SelectorOpExists}, {Key: "off", Operator: bgp.SelectorOpDoesNotExist}}})}},
		{name: "DoesNotExist excludes", labels: map[string]string{"off": "1"}, policies: []*bgp.PeeringPolicy{policyFor("x",
			&bgp.LabelSelector{MatchExpressions: []bgp.LabelSelectorRequirement{{Key: "off", Operator: bgp.SelectorOpDoesNotExist}}})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := bgp.PolicySelection(context.Background(), node(tt.labels), tt.policies)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			if tt.want == "" {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, tt.want, got.Name)
		})
	}
}

func TestPolicySelectionErrors(t *testing.T) {
	_, err := bgp.PolicySelection(context.Background(), nil, nil)
	require.Error(t, err)
	bad := policyFor("bad", &bgp.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}})
	_, err = bgp.PolicySelection(context.Background(), node(nil), []*bgp.PeeringPolicy{bad})
	require.ErrorContains(t, err, `policy "bad"`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = bgp.PolicySelection(ctx, node(nil), []*bgp.PeeringPolicy{validPolicy()})
	require.ErrorIs(t, err, context.Canceled)
}

func TestSignalerRollsUp(t *testing.T) {
	s := bgp.NewSignaler()
	for i := range 100 {
		s.Event(i)
	}
	assert.Len(t, s.Sig, 1)
	<-s.Sig
	assert.Empty(t, s.Sig)
	bgp.Signaler{}.Event(nil) // the zero Signaler drops events without blocking
}

// harness runs a controller over a Store and a FakeManager in a synctest
// bubble.
type harness struct {
	store  *bgp.Store
	mgr    *bgptest.FakeManager
	ctrl   *bgp.Controller
	cancel context.CancelFunc
	done   chan error
}

func startController(t *testing.T, mgr *bgptest.FakeManager, cfg bgp.ControllerConfig) *harness {
	t.Helper()
	sig := bgp.NewSignaler()
	h := &harness{store: bgp.NewStore(sig), mgr: mgr, done: make(chan error, 1)}
	cfg.Signaler = sig
	var err error
	h.ctrl, err = bgp.NewController(mgr, h.store, h.store, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.ctrl.Run(ctx) }()
	synctest.Wait()
	return h
}

func (h *harness) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	require.ErrorIs(t, <-h.done, context.Canceled)
}

func TestControllerAppliesPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mgr := &bgptest.FakeManager{}
		h := startController(t, mgr, bgp.ControllerConfig{})
		assert.Empty(t, mgr.Calls(), "nothing to do without a node")

		n := node(map[string]string{"rack": "r1"})
		n.Annotations = map[string]string{bgp.AnnotationPrefix + "65001": "router-id=1.2.3.4,local-port=1790"}
		h.store.SetNode(n)
		h.store.SetPolicy(policyFor("a", &bgp.LabelSelector{MatchLabels: map[string]string{"rack": "r1"}}))
		synctest.Wait()

		calls := mgr.Calls()
		require.NotEmpty(t, calls)
		last := calls[len(calls)-1]
		require.NoError(t, last.Err)
		require.NotNil(t, last.Policy)
		assert.Equal(t, "a", last.Policy.Name)
		assert.Equal(t, 179, int(last.Policy.VirtualRouters[0].Neighbors[0].PeerPort), "defaults applied")
		assert.Equal(t, "10.0.0.1", last.State.IPv4.String(), "InternalIP preferred")
		assert.Equal(t, "fd00::1", last.State.IPv6.String())
		assert.Equal(t, bgp.AnnotationMap{65001: {ASN: 65001, RouterID: netip.MustParseAddr("1.2.3.4"), LocalPort: 1790}}, last.State.Annotations)
		assert.Equal(t, "a", h.ctrl.Status().Policy)

		// The policy stops matching: everything is withdrawn.
		h.store.SetNode(node(map[string]string{"rack": "r2"}))
		synctest.Wait()
		assert.Nil(t, mgr.Applied())
		calls = mgr.Calls()
		assert.Nil(t, calls[len(calls)-1].Policy)
		h.stop(t)
		assert.False(t, mgr.Concurrent())
	})
}

func TestControllerRollsUpBursts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var blocked bool
		mgr := &bgptest.FakeManager{}
		mgr.ConfigurePeersFunc = func(ctx context.Context, p *bgp.PeeringPolicy, _ *bgp.ControlPlaneState) error {
			if p != nil && p.Name == "block" && !blocked {
				blocked = true
				<-release
			}
			return nil
		}
		h := startController(t, mgr, bgp.ControllerConfig{})
		h.store.SetNode(node(nil))
		h.store.SetPolicy(policyFor("block", nil))
		synctest.Wait() // the loop is now blocked inside ConfigurePeers
		require.Len(t, mgr.Calls(), 0)

		for i := range 50 {
			p := policyFor("block", nil)
			p.VirtualRouters[0].LocalASN = uint32(100 + i)
			h.store.SetPolicy(p)
		}
		close(release)
		synctest.Wait()
		calls := mgr.Calls()
		require.Len(t, calls, 2, "50 events during one reconcile roll up into one more")
		assert.Equal(t, uint32(149), calls[1].Policy.VirtualRouters[0].LocalASN, "the last state wins")
		h.stop(t)
	})
}

func TestControllerWithdrawsOnShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mgr := &bgptest.FakeManager{}
		h := startController(t, mgr, bgp.ControllerConfig{})
		h.store.SetNode(node(nil))
		h.store.SetPolicy(policyFor("a", nil))
		synctest.Wait()
		require.NotNil(t, mgr.Applied())

		h.stop(t)
		calls := mgr.Calls()
		assert.Nil(t, calls[len(calls)-1].Policy, "shutdown ends with a full withdrawal")
		assert.Nil(t, mgr.Applied())
	})
}

// TestControllerLeavesGracefulRestartToTheManager: with graceful restart on,
// shutting the controller down must not withdraw (the peers keep the
// routes while the agent restarts); an explicit withdrawal still does.
func TestControllerLeavesGracefulRestartToTheManager(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mgr := &bgptest.FakeManager{}
		h := startController(t, mgr, bgp.ControllerConfig{})
		h.store.SetNode(node(nil))
		p := policyFor("gr", nil)
		p.VirtualRouters[0].Neighbors[0].GracefulRestart.Enabled = true
		h.store.SetPolicy(p)
		synctest.Wait()
		require.NotNil(t, mgr.Applied())
		n := len(mgr.Calls())

		h.stop(t)
		assert.Len(t, mgr.Calls(), n, "no withdrawal at shutdown")
		assert.NotNil(t, mgr.Applied())

		h.ctrl.FullWithdrawal(context.Background())
		assert.Nil(t, mgr.Applied(), "an explicit withdrawal still withdraws")
	})
}

func TestControllerWithdrawalIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var deadline time.Time
		var hadDeadline bool
		mgr := &bgptest.FakeManager{}
		mgr.ConfigurePeersFunc = func(ctx context.Context, p *bgp.PeeringPolicy, _ *bgp.ControlPlaneState) error {
			if p != nil {
				return nil
			}
			deadline, hadDeadline = ctx.Deadline()
			<-ctx.Done() // a manager stuck at shutdown
			return ctx.Err()
		}
		h := startController(t, mgr, bgp.ControllerConfig{WithdrawalTimeout: 3 * time.Second})
		start := time.Now()
		h.stop(t)
		require.True(t, hadDeadline, "FullWithdrawal must get its own bounded context")
		assert.Equal(t, 3*time.Second, deadline.Sub(start))
	})
}

func TestControllerMultiplePolicies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mgr := &bgptest.FakeManager{}
		h := startController(t, mgr, bgp.ControllerConfig{RetryInterval: -1})
		h.store.SetNode(node(nil))
		h.store.SetPolicy(policyFor("a", nil))
		synctest.Wait()
		n := len(mgr.Calls())

		h.store.SetPolicy(policyFor("b", nil))
		synctest.Wait()
		assert.Len(t, mgr.Calls(), n, "the manager keeps the current policy")
		assert.ErrorIs(t, h.ctrl.Status().LastError, bgp.ErrMultiplePolicies)
		assert.Equal(t, "a", mgr.Applied().Name)
		require.ErrorIs(t, h.ctrl.Reconcile(context.Background()), bgp.ErrMultiplePolicies)
		h.stop(t)
	})
}

func TestControllerRetriesAfterFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fail := true
		mgr := &bgptest.FakeManager{}
		mgr.ConfigurePeersFunc = func(context.Context, *bgp.PeeringPolicy, *bgp.ControlPlaneState) error {
			if fail {
				fail = false
				return errors.New("injected")
			}
			return nil
		}
		h := startController(t, mgr, bgp.ControllerConfig{RetryInterval: time.Minute})
		h.store.SetNode(node(nil))
		synctest.Wait()
		h.store.SetPolicy(policyFor("a", nil))
		synctest.Wait()
		require.Len(t, mgr.Calls(), 1)
		require.Error(t, h.ctrl.Status().LastError)

		time.Sleep(time.Minute)
		synctest.Wait()
		require.Len(t, mgr.Calls(), 2)
		assert.NoError(t, h.ctrl.Status().LastError)
		assert.Equal(t, "a", mgr.Applied().Name)
		h.stop(t)
	})
}

// TestControllerLogsAFailureOnce: a reconcile that keeps failing is a
// degraded state, logged at Warn when it starts (and when the error
// changes), not at every retry, and at Info when a reconcile succeeds
// again (CONTRIBUTING R10).
func TestControllerLogsAFailureOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failures := []error{errors.New("injected"), errors.New("injected"), errors.New("injected"), errors.New("other")}
		mgr := &bgptest.FakeManager{}
		mgr.ConfigurePeersFunc = func(context.Context, *bgp.PeeringPolicy, *bgp.ControlPlaneState) error {
			if len(failures) == 0 {
				return nil
			}
			err := failures[0]
			failures = failures[1:]
			return err
		}
		var logs strings.Builder
		h := startController(t, mgr, bgp.ControllerConfig{RetryInterval: time.Minute,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		h.store.SetNode(node(nil))
		h.store.SetPolicy(policyFor("a", nil))
		synctest.Wait()
		for range 4 {
			time.Sleep(time.Minute)
			synctest.Wait()
		}
		require.NoError(t, h.ctrl.Status().LastError)
		assert.Len(t, mgr.Calls(), 5, "four failures, then success")
		h.stop(t)
		assert.Equal(t, 2, strings.Count(logs.String(), "level=WARN"), "the failure starts, its error changes\n%s", logs.String())
		assert.Equal(t, 1, strings.Count(logs.String(), "reconcile succeeds again"))
	})
}

func TestControllerRejectsBadInput(t *testing.T) {
	tests := []struct {
		name    string
		node    func() *kubemodel.Node
		policy  *bgp.PeeringPolicy
		wantErr error
	}{
		{name: "bad annotation", node: func() *kubemodel.Node {
			n := node(nil)
			n.Annotations = map[string]string{bgp.AnnotationPrefix + "65001": "router-id=nope"}
			return n
		}, policy: validPolicy(), wantErr: bgp.ErrInvalidAnnotation},
		{name: "invalid policy", node: func() *kubemodel.Node { return node(nil) }, policy: &bgp.PeeringPolicy{Name: "empty"}, wantErr: bgp.ErrInvalidPolicy},
		{name: "passive neighbor, no local port", node: func() *kubemodel.Node { return node(nil) }, policy: func() *bgp.PeeringPolicy {
			p := validPolicy()
			p.VirtualRouters[0].Neighbors[0].Passive = true
			return p
		}(), wantErr: bgp.ErrInvalidPolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mgr := &bgptest.FakeManager{}
			store := bgp.NewStore(bgp.Signaler{})
			store.SetNode(tt.node())
			store.SetPolicy(tt.policy)
			c, err := bgp.NewController(mgr, store, store, bgp.ControllerConfig{})
			require.NoError(t, err)
			require.ErrorIs(t, c.Reconcile(context.Background()), tt.wantErr)
			assert.Empty(t, mgr.Calls())
		})
	}
}

func TestNewControllerValidates(t *testing.T) {
	_, err := bgp.NewController(nil, nil, nil, bgp.ControllerConfig{IPv4: netip.MustParseAddr("fd00::1"), WithdrawalTimeout: -1})
	require.Error(t, err)
	for _, s := range []string{"manager is nil", "node source is nil", "policy source is nil", "IPv4", "WithdrawalTimeout -1ns is negative"} {
		assert.ErrorContains(t, err, s)
	}
	// A negative RetryInterval is documented to disable retries: valid.
	store := bgp.NewStore(bgp.Signaler{})
	_, err = bgp.NewController(&bgptest.FakeManager{}, store, store, bgp.ControllerConfig{RetryInterval: -1})
	require.NoError(t, err)
}

func TestControllerRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startController(t, &bgptest.FakeManager{}, bgp.ControllerConfig{})
		err := h.ctrl.Run(context.Background())
		require.ErrorIs(t, err, bgp.ErrAlreadyRunning)
		require.ErrorIs(t, err, lifecycle.ErrAlreadyRunning, "one ErrAlreadyRunning for every package")
		assert.EqualError(t, err, "bgp: Run called more than once")
		h.stop(t)
	})
}

func TestControllerConfigAddresses(t *testing.T) {
	mgr := &bgptest.FakeManager{}
	store := bgp.NewStore(bgp.Signaler{})
	store.SetNode(node(nil))
	store.SetPolicy(validPolicy())
	c, err := bgp.NewController(mgr, store, store, bgp.ControllerConfig{IPv4: netip.MustParseAddr("203.0.113.1"), IPv6: netip.MustParseAddr("2001:db8::1")})
	require.NoError(t, err)
	require.NoError(t, c.Reconcile(context.Background()))
	st := mgr.Calls()[0].State
	assert.Equal(t, "203.0.113.1", st.IPv4.String())
	assert.Equal(t, "2001:db8::1", st.IPv6.String())
}

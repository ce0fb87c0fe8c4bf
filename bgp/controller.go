package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/internal/cfgutil"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

// ControllerConfig configures a [Controller]. The zero value is valid.
type ControllerConfig struct {
	// Signaler wakes the control loop. Default: a new one from
	// [NewSignaler]; pass a shared one to let sources such as [Store]
	// signal the controller.
	Signaler Signaler
	// IPv4 and IPv6 are the agent's externally reachable addresses, put into
	// [ControlPlaneState]. Default (zero): the node's first InternalIP of the
	// family, else its first ExternalIP.
	IPv4, IPv6 netip.Addr
	// RetryInterval is how long after a failed reconcile the controller
	// tries again without a signal. Default (zero) 5s; negative disables
	// retries (the next signal reconciles again).
	RetryInterval time.Duration
	// WithdrawalTimeout bounds [Controller.FullWithdrawal] when Run ends.
	// Default (zero) 10s; negative is an error.
	WithdrawalTimeout time.Duration
	// Logger receives the controller's logs. Default: discard.
	Logger *slog.Logger
}

// Controller is the agent-side BGP control plane controller.
//
// Controller listens for signals and drives a [BGPRouterManager] to
// maintain the desired state: on each signal it rebuilds a point-in-time
// [ControlPlaneState] from its sources and applies the single peering policy
// that selects the node.
//
// Controller is safe for concurrent use; its control loop runs on the
// goroutine that calls [Controller.Run].
type Controller struct {
	mgr      BGPRouterManager
	nodes    NodeSource
	policies PolicySource
	sig      Signaler
	cfg      ControllerConfig
	log      *slog.Logger
	run      lifecycle.Once
	// failing is the error of the failing reconciles being logged, nil
	// while they succeed; used by the Run goroutine only.
	failing error

	// mgrMu serializes calls into mgr, as its contract requires, and guards
	// the fields below.
	mgrMu    sync.Mutex
	applied  bool // a non-nil policy may be applied
	graceful bool // the applied policy enables graceful restart for a neighbor
	status   ControllerStatus
	// spec is the configuration applied last (nil if none), with the state
	// it was applied with; excluded and conditions what the last reconcile
	// found (for NodeStatus).
	spec       *NodeSpec
	specState  *ControlPlaneState
	excluded   []ExcludedPeer
	conditions []Condition

	// snapMu guards snap: a copy of the fields above and of status, taken
	// after every reconcile, which NodeStatus and Status read without
	// waiting for a reconcile in progress.
	snapMu sync.Mutex
	snap   controllerSnapshot
}

// ControllerStatus is a snapshot of the controller's last reconcile.
type ControllerStatus struct {
	// Policy is the name of the v1 policy or v2 cluster config applied
	// last; empty if none.
	Policy string
	// Source is the object applied last as "<Kind>/<name>" (see
	// [NodeSpec].Source); empty if none.
	Source string
	// LastError is the error of the last reconcile; nil if it succeeded.
	LastError error
	// Reconciles counts reconcile attempts.
	Reconciles uint64
}

// NewController constructs a BGP control plane controller. It does no I/O
// and starts no goroutine; call [Controller.Run] to start the control loop.
//
// The manager defines which BGP backend is used (see package gobgp). The
// sources provide the node the controller runs for and the cluster's
// peering policies; a policy source that is also an [ObjectSource] (as
// [Store] and [EventSource] are) provides the v2 objects too, which the
// controller applies through the manager's [SpecApplier].
func NewController(mgr BGPRouterManager, nodes NodeSource, policies PolicySource, cfg ControllerConfig) (*Controller, error) {
	var errs []error
	if mgr == nil {
		errs = append(errs, errors.New("bgp: NewController: manager is nil"))
	}
	if nodes == nil {
		errs = append(errs, errors.New("bgp: NewController: node source is nil"))
	}
	if policies == nil {
		errs = append(errs, errors.New("bgp: NewController: policy source is nil"))
	}
	if cfg.IPv4.IsValid() && !cfg.IPv4.Unmap().Is4() {
		errs = append(errs, fmt.Errorf("bgp: ControllerConfig.IPv4 %s is not an IPv4 address", cfg.IPv4))
	}
	if cfg.IPv6.IsValid() && !cfg.IPv6.Is6() {
		errs = append(errs, fmt.Errorf("bgp: ControllerConfig.IPv6 %s is not an IPv6 address", cfg.IPv6))
	}
	for _, err := range cfgutil.Durations([]cfgutil.Duration{
		{Name: "RetryInterval", Value: &cfg.RetryInterval, Default: 5 * time.Second, Off: true},
		{Name: "WithdrawalTimeout", Value: &cfg.WithdrawalTimeout, Default: 10 * time.Second},
	}) {
		errs = append(errs, fmt.Errorf("bgp: ControllerConfig.%w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Signaler.Sig == nil {
		cfg.Signaler = NewSignaler()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Controller{
		mgr: mgr, nodes: nodes, policies: policies, sig: cfg.Signaler, cfg: cfg,
		log: log.With(slog.String("component", "bgp-controller")),
	}, nil
}

// Signaler returns the signaler that wakes the control loop; event sources
// call its Event method.
func (c *Controller) Signaler() Signaler { return c.sig }

// Status returns a snapshot of the last reconcile. It does not wait for a
// reconcile in progress.
func (c *Controller) Status() ControllerStatus {
	c.snapMu.Lock()
	defer c.snapMu.Unlock()
	return c.snap.status
}

// takeSnapshotLocked copies what the status views read; mgrMu is held.
func (c *Controller) takeSnapshotLocked() {
	c.snapMu.Lock()
	c.snap = controllerSnapshot{spec: c.spec, state: c.specState, excluded: c.excluded, conditions: c.conditions, status: c.status}
	c.snapMu.Unlock()
}

// Run places the controller into its control loop: it reconciles once at
// start and then after every signal, and again RetryInterval after a failed
// reconcile. Reconcile errors are recorded in [Controller.Status] and do
// not stop the loop; they are logged at Warn when reconciles start failing
// (and when the error changes), not at every retry, and a reconcile that
// succeeds again is logged at Info.
//
// When ctx is cancelled, Run calls [Controller.FullWithdrawal] with its own
// context bounded by WithdrawalTimeout, then returns ctx.Err(); unless the
// applied policy enables graceful restart for at least one neighbor: then
// the routes are left in place for the manager's own shutdown, which ends
// the sessions without a withdrawal so that graceful-restart peers keep the
// routes for the restart time while the agent restarts (the GoBGP manager
// does so when its Run ends; neighbors without graceful restart get a
// Cease and flush). Run may be called only once; later calls return an
// error wrapping [ErrAlreadyRunning].
func (c *Controller) Run(ctx context.Context) error {
	if err := c.run.Start("bgp"); err != nil {
		return err
	}
	c.log.Info("started")
	c.sig.Event(nil) // initial reconcile
	var (
		retry     *time.Timer
		retryC    <-chan time.Time
		stopRetry = func() {
			if retry != nil {
				retry.Stop()
				retry, retryC = nil, nil
			}
		}
	)
	defer stopRetry()
	for {
		select {
		case <-ctx.Done():
			c.mgrMu.Lock()
			graceful := c.applied && c.graceful
			c.mgrMu.Unlock()
			if graceful {
				c.log.Info("stopped; routes left to graceful restart")
				return ctx.Err()
			}
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.WithdrawalTimeout)
			c.FullWithdrawal(wctx)
			cancel()
			c.log.Info("stopped")
			return ctx.Err()
		case <-c.sig.Sig:
		case <-retryC:
			retry, retryC = nil, nil
		}
		stopRetry()
		err := c.Reconcile(ctx)
		if err != nil && ctx.Err() != nil {
			continue // shutting down; the next iteration withdraws
		}
		c.logOutcome(err)
		if err != nil && c.cfg.RetryInterval > 0 {
			retry = time.NewTimer(c.cfg.RetryInterval)
			retryC = retry.C
		}
	}
}

// logOutcome logs a reconcile of the control loop: a failure at Warn when
// it starts a run of failures or its error differs from the previous
// one's, else at Debug; the first success after failures at Info.
func (c *Controller) logOutcome(err error) {
	switch {
	case err == nil && c.failing != nil:
		c.failing = nil
		c.log.Info("reconcile succeeds again")
	case err == nil:
	case c.failing == nil || c.failing.Error() != err.Error():
		c.failing = err
		c.log.Warn("reconcile failed; retrying", slog.Any("error", err), slog.Duration("retryInterval", c.cfg.RetryInterval))
	default:
		c.log.Debug("reconcile failed", slog.Any("error", err))
	}
}

// Reconcile is the control loop step: it obtains the state of the world and
// drives the BGP control plane toward the configuration that selects the
// node: a v1 peering policy ([PolicySelection]) or a v2 cluster config
// with its peer configs, advertisements and node override ([Resolve]).
// Both are turned into the one internal model, a [NodeSpec]: v1 is
// applied with the manager's ConfigurePeers (which translates it with
// [SpecFromPolicy]), v2 with its [SpecApplier].ApplySpec.
//
// Only a single configuration may apply to the node: with several v1
// policies, [ErrMultiplePolicies] is returned; with several v2 cluster
// configs, [ErrMultipleClusterConfigs]; with both a v1 policy and a v2
// cluster config, [ErrConflictingConfig]; in each case the current
// configuration is kept and the status reports a ConflictingConfig
// condition. With none, or when the node is unknown, everything is
// withdrawn. A policy that fails validation, or node annotations that fail
// [ParseAnnotations], are errors and keep the current configuration, and
// so is a policy that does not fit the node
// ([PeeringPolicy.ValidateState]). Problems of single v2 peers (a missing
// peer config or auth secret) are not errors: those peers are left out
// and reported in [Controller.NodeStatus]. Reconcile may be called
// directly (for example from tests); calls are serialized.
func (c *Controller) Reconcile(ctx context.Context) error {
	c.mgrMu.Lock()
	defer c.mgrMu.Unlock()
	c.status.Reconciles++
	src, err := c.reconcileLocked(ctx)
	c.status.LastError = err
	if err == nil {
		c.status.Source = src
		_, c.status.Policy, _ = strings.Cut(src, "/")
	}
	c.takeSnapshotLocked()
	return err
}

func (c *Controller) reconcileLocked(ctx context.Context) (string, error) {
	node := c.nodes.Node()
	c.conditions = nil
	c.excluded = nil
	// Every invalid v1 policy could select the node.
	if ip, ok := c.policies.(interface{ InvalidPolicies() map[string]error }); ok {
		for key, err := range ip.InvalidPolicies() {
			_, name, _ := strings.Cut(strings.TrimPrefix(key, "k8s/"), "/")
			c.conditions = append(c.conditions, Condition{Type: ConditionInvalidObject, Object: ObjectRef(KindPeeringPolicy, name), Message: err.Error()})
		}
	}
	if node == nil {
		c.log.Debug("node unknown")
		return "", c.withdrawLocked(ctx)
	}
	policy, err := PolicySelection(ctx, node, c.policies.Policies())
	if err != nil {
		if errors.Is(err, ErrMultiplePolicies) {
			c.conditions = append(c.conditions, Condition{Type: ConditionConflictingConfig, Message: err.Error()})
		}
		return "", fmt.Errorf("bgp: select peering policy for node %s: %w", node.GetName(), err)
	}
	var objs *Objects
	if src, ok := c.policies.(ObjectSource); ok {
		objs = src.Objects()
	}
	res, err := Resolve(ctx, node, objs)
	if res != nil {
		c.conditions = append(c.conditions, res.Conditions...)
	}
	if err != nil {
		if errors.Is(err, ErrMultipleClusterConfigs) {
			c.conditions = append(c.conditions, Condition{Type: ConditionConflictingConfig, Message: err.Error()})
		}
		return "", fmt.Errorf("bgp: select cluster config for node %s: %w", node.GetName(), err)
	}
	if policy != nil && res.Spec != nil {
		err := fmt.Errorf("bgp: node %s: peering policy %q and cluster config %q: %w", node.GetName(), policy.Name,
			strings.TrimPrefix(res.Spec.Source, KindClusterConfig+"/"), ErrConflictingConfig)
		c.conditions = append(c.conditions, Condition{Type: ConditionConflictingConfig,
			Object: res.Spec.Source, Message: err.Error()})
		return "", err
	}
	if policy == nil && res.Spec == nil {
		c.log.Debug("no BGP configuration selects the node", slog.String("node", node.GetName()))
		return "", c.withdrawLocked(ctx)
	}
	state := &ControlPlaneState{Node: node}
	v4, v6 := c.cfg.IPv4, c.cfg.IPv6
	if !v4.IsValid() {
		v4 = nodeAddress(node, true)
	}
	if !v6.IsValid() {
		v6 = nodeAddress(node, false)
	}
	if v4.IsValid() {
		state.IPv4 = net.IP(v4.Unmap().AsSlice())
	}
	if v6.IsValid() {
		state.IPv6 = net.IP(v6.AsSlice())
	}
	if policy == nil {
		return c.applySpecLocked(ctx, res, state)
	}
	annotations, err := ParseAnnotations(node.GetAnnotations())
	if err != nil {
		return "", fmt.Errorf("bgp: node %s: %w", node.GetName(), err)
	}
	state.Annotations = annotations
	policy = policy.WithDefaults()
	if err := policy.Validate(); err != nil {
		return "", fmt.Errorf("bgp: policy %q: %w", policy.Name, err)
	}
	if err := policy.ValidateState(state); err != nil {
		return "", fmt.Errorf("bgp: policy %q on node %s: %w", policy.Name, node.GetName(), err)
	}
	c.log.Debug("configuring peers", slog.String("policy", policy.Name), slog.String("node", node.GetName()))
	c.applied = true
	c.graceful = policy.gracefulRestart()
	c.spec, c.specState = SpecFromPolicy(policy, state), state
	if err := c.mgr.ConfigurePeers(ctx, policy, state); err != nil {
		return "", fmt.Errorf("bgp: apply policy %q: %w", policy.Name, err)
	}
	return ObjectRef(KindPeeringPolicy, policy.Name), nil
}

// applySpecLocked applies a v2 resolution through the manager's
// SpecApplier.
func (c *Controller) applySpecLocked(ctx context.Context, res *Resolution, state *ControlPlaneState) (string, error) {
	applier, ok := c.mgr.(SpecApplier)
	if !ok {
		return "", fmt.Errorf("bgp: cluster config %s: the BGP manager %T cannot apply v2 configuration (it does not implement bgp.SpecApplier)",
			res.Spec.Source, c.mgr)
	}
	c.excluded = res.Excluded
	c.log.Debug("applying BGP configuration", slog.String("source", res.Spec.Source), slog.String("node", state.Node.GetName()))
	c.applied = true
	c.graceful = res.Spec.GracefulRestart()
	c.spec, c.specState = res.Spec, state
	if err := applier.ApplySpec(ctx, res.Spec, state); err != nil {
		return "", fmt.Errorf("bgp: apply %s: %w", res.Spec.Source, err)
	}
	return res.Spec.Source, nil
}

func (c *Controller) withdrawLocked(ctx context.Context) error {
	if !c.applied {
		return nil
	}
	if err := c.mgr.ConfigurePeers(ctx, nil, nil); err != nil {
		return fmt.Errorf("bgp: withdraw: %w", err)
	}
	c.applied = false
	c.spec, c.specState = nil, nil
	return nil
}

// FullWithdrawal instructs the manager to withdraw all BGP servers and
// peers (ConfigurePeers with a nil policy). Errors are logged, as there is
// nobody to return them to at shutdown.
func (c *Controller) FullWithdrawal(ctx context.Context) {
	c.mgrMu.Lock()
	defer c.mgrMu.Unlock()
	if err := c.mgr.ConfigurePeers(ctx, nil, nil); err != nil {
		c.log.Error("full withdrawal failed", slog.Any("error", err))
		return
	}
	c.applied = false
	c.spec, c.specState = nil, nil
	c.status.Policy, c.status.Source = "", ""
	c.takeSnapshotLocked()
}

// nodeAddress returns the node's first InternalIP of the family, else its
// first ExternalIP.
func nodeAddress(n *kubemodel.Node, v4 bool) netip.Addr {
	for _, typ := range []kubemodel.NodeAddress_Type{kubemodel.NodeAddress_INTERNAL_IP, kubemodel.NodeAddress_EXTERNAL_IP} {
		for _, a := range n.GetAddresses() {
			if a.GetType() != typ {
				continue
			}
			ip, err := netip.ParseAddr(a.GetAddress())
			if err != nil {
				continue
			}
			ip = ip.Unmap()
			if ip.Is4() == v4 {
				return ip
			}
		}
	}
	return netip.Addr{}
}

// gracefulRestart reports whether any neighbor enables graceful restart.
func (p *PeeringPolicy) gracefulRestart() bool {
	for _, vr := range p.VirtualRouters {
		for _, n := range vr.Neighbors {
			if n.GracefulRestart.Enabled {
				return true
			}
		}
	}
	return false
}

package bgproutes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// ErrAlreadyRunning is returned (wrapped) by a second call of
// [Handler.Run]; the same value as every package's ErrAlreadyRunning.
var ErrAlreadyRunning = lifecycle.ErrAlreadyRunning

// Config configures a [Handler]. The zero value is valid.
type Config struct {
	// Uplink is the logical name of the interface the routes go out of
	// (the node's uplink); empty: recursive routes (next hop only).
	Uplink string
	// VRF is the VPP table of the routes. Default 0.
	VRF uint32
	// Reserved are the cluster's own ranges: a learned route within one of
	// them is not installed. Default none.
	Reserved []netip.Prefix
	// Logger receives Debug logs per change and Warn logs, once each,
	// for routes left out. Default: discard.
	Logger *slog.Logger
}

// Stats are the handler's counters; a copy.
type Stats struct {
	// Installed is the number of routes in the desired state now; Left the
	// learned routes left out (reserved or of a mixed family).
	Installed, Left int
	// Events counts the RoutesChanged events pushed.
	Events uint64
}

// Handler is the controller.EventHandler that puts the learned routes into
// the loop's transactions as vppmodel.Route values. See the package
// documentation.
//
// Handler is safe for concurrent use.
type Handler struct {
	learned bgp.LearnedRouteSource
	sig     bgp.Signaler
	loop    controller.EventLoop
	cfg     Config
	log     *slog.Logger
	run     lifecycle.Once

	pending atomic.Bool // a RoutesChanged is queued and not processed yet
	events  atomic.Uint64

	mu        sync.Mutex // guards the fields below; the loop writes, Stats reads
	installed controller.KeyValuePairs
	left      map[netip.Prefix]string // route left out -> why (logged once)
}

var _ controller.EventHandler = (*Handler)(nil)

// New returns a handler of the routes of learned (a gobgp.Manager),
// woken by sig (the manager's Config.LearnedRoutes), pushing its events
// into loop. It does no I/O and starts no goroutine.
func New(learned bgp.LearnedRouteSource, sig bgp.Signaler, loop controller.EventLoop, cfg Config) (*Handler, error) {
	var errs []error
	if learned == nil {
		errs = append(errs, errors.New("bgproutes: New: learned route source is nil"))
	}
	if sig.Sig == nil {
		errs = append(errs, errors.New("bgproutes: New: the Signaler has no channel (use bgp.NewSignaler)"))
	}
	if loop == nil {
		errs = append(errs, errors.New("bgproutes: New: event loop is nil"))
	}
	for i, p := range cfg.Reserved {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("bgproutes: Config.Reserved[%d] is not a valid prefix", i))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg.Reserved = slices.Clone(cfg.Reserved)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{learned: learned, sig: sig, loop: loop, cfg: cfg, log: log.With(slog.String("component", "bgproutes")),
		installed: controller.KeyValuePairs{}, left: map[netip.Prefix]string{}}, nil
}

// RoutesChanged is the event that makes the handler re-read the learned
// routes; Run pushes it. It is an update event (BestEffort, Forward) that
// only this handler acts on.
type RoutesChanged struct{}

var _ controller.UpdateEvent = (*RoutesChanged)(nil)

// GetName names the event.
func (*RoutesChanged) GetName() string { return "BGP learned routes changed" }

// String describes the event.
func (*RoutesChanged) String() string { return "BGP learned routes changed" }

// Method is Update.
func (*RoutesChanged) Method() controller.EventMethodType { return controller.Update }

// IsBlocking is false: nobody waits for it.
func (*RoutesChanged) IsBlocking() bool { return false }

// Done does nothing.
func (*RoutesChanged) Done(error) {}

// TransactionType is BestEffort.
func (*RoutesChanged) TransactionType() controller.UpdateTransactionType {
	return controller.BestEffort
}

// Direction is Forward.
func (*RoutesChanged) Direction() controller.UpdateDirectionType { return controller.Forward }

// Run pushes a [RoutesChanged] event after every signal of the speaker,
// unless one is queued already, until ctx ends; then it returns ctx.Err().
// A push the loop refuses (its queue is full) is retried at the next
// signal and logged at Warn. A second call returns an error wrapping
// [ErrAlreadyRunning].
func (h *Handler) Run(ctx context.Context) error {
	if err := h.run.Start("bgproutes"); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.sig.Sig:
		}
		if !h.pending.CompareAndSwap(false, true) {
			continue // the queued event will read the routes
		}
		if err := h.loop.PushEvent(&RoutesChanged{}); err != nil {
			h.pending.Store(false)
			h.log.Warn("cannot queue the learned routes change; retrying at the next change", slog.Any("error", err))
			continue
		}
		h.events.Add(1)
	}
}

// String names the handler.
func (h *Handler) String() string { return "bgproutes" }

// HandlesEvent selects resyncs and RoutesChanged.
func (h *Handler) HandlesEvent(ev controller.Event) bool {
	if _, ok := ev.(*RoutesChanged); ok {
		return true
	}
	m := ev.Method()
	return m == controller.FullResync || m == controller.UpstreamResync
}

// Resync puts every learned route.
func (h *Handler) Resync(_ controller.Event, _ controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
	want := h.desired()
	controller.PutAll(txn, want)
	h.mu.Lock()
	h.installed = want
	h.mu.Unlock()
	return nil
}

// Update applies the difference between the routes installed and the
// learned ones now.
func (h *Handler) Update(ev controller.Event, txn controller.UpdateOperations) (string, error) {
	if _, ok := ev.(*RoutesChanged); !ok {
		return "", nil
	}
	h.pending.Store(false) // a signal from now on queues a new event
	want := h.desired()
	h.mu.Lock()
	old := h.installed
	h.installed = want
	h.mu.Unlock()
	n := controller.ReplaceAll(txn, old, want)
	if n == 0 {
		return "", nil
	}
	h.log.Debug("learned routes changed", slog.Int("operations", n), slog.Int("routes", len(want)))
	return fmt.Sprintf("bgp: %d learned route changes, %d routes", n, len(want)), nil
}

// Revert does nothing: its events are BestEffort.
func (h *Handler) Revert(controller.Event) error { return nil }

// Stats returns the counters.
func (h *Handler) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Stats{Installed: len(h.installed), Left: len(h.left), Events: h.events.Load()}
}

// Routes returns the routes the handler wants in VPP now, by key (shared:
// read-only).
func (h *Handler) Routes() controller.KeyValuePairs {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.installed
}

// desired turns the learned routes into VPP routes, leaving out the
// reserved ones and those with a next hop of the other family.
func (h *Handler) desired() controller.KeyValuePairs {
	learned := h.learned.LearnedRoutes()
	out := make(controller.KeyValuePairs, len(learned))
	left := map[netip.Prefix]string{}
	for _, r := range learned {
		p := r.Prefix.Masked()
		if !r.NextHop.IsValid() || r.NextHop.Unmap().Is4() != p.Addr().Is4() {
			left[p] = fmt.Sprintf("next hop %v is not of the route's address family", r.NextHop)
			continue
		}
		if i := slices.IndexFunc(h.cfg.Reserved, func(res netip.Prefix) bool {
			return res.Addr().Is4() == p.Addr().Is4() && res.Bits() <= p.Bits() && res.Contains(p.Addr())
		}); i >= 0 {
			left[p] = fmt.Sprintf("within the cluster's range %s", h.cfg.Reserved[i])
			continue
		}
		route := &vppmodel.Route{Vrf: h.cfg.VRF, DstNetwork: p.String(),
			Paths: []*vppmodel.Path{{OutgoingInterface: h.cfg.Uplink, NextHop: r.NextHop.Unmap().String()}}}
		out[vppmodel.RouteKey(h.cfg.VRF, p)] = route
	}
	h.mu.Lock()
	for p, why := range left {
		if h.left[p] != why {
			h.log.Warn("learned route not installed", slog.Any("prefix", p), slog.String("reason", why))
		}
	}
	h.left = left
	h.mu.Unlock()
	return out
}

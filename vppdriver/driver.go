package vppdriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/core"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// Driver is the desired-state reconciler that programs VPP. It implements
// [controller.Southbound] and [controller.KeyOwner]. It is safe for
// concurrent use.
type Driver struct {
	cfg        Config
	log        *slog.Logger // cfg.Logger with component=vppdriver
	newAdapter func() adapter.VppAPI
	run        lifecycle.Once
	seq        atomic.Uint64
	stats      counters

	broken chan error    // cap 1: a transport failure was seen (the first one)
	wake   chan struct{} // cap 1: the retry schedule or the work queue changed

	mu        sync.Mutex       // guards the fields below; held during a pass
	items     map[string]*item // every key desired or held by VPP
	cl        *client          // nil when not connected
	readBack  bool             // VPP's state was read back on the current connection
	compatErr error            // result of the last compatibility check (core messages)
	vxlanErr  error            // the same for the VXLAN messages
	natErr    error            // the same for the NAT44-ED messages
	memifErr  error            // the same for the memif messages
	aclErr    error            // the same for the ACL plugin's messages
	cnatErr   error            // the same for the cnat plugin's messages
	// memifSockets maps memif socket filenames to VPP socket IDs (learnt
	// from dumps and replies); memifPending marks registrations in flight.
	memifSockets map[string]uint32
	memifPending map[string]bool
	// needResync: a pass was cut short by its caller's context; the next
	// pass reads VPP back first.
	needResync bool
	// fullState: a CommitResync has given the complete desired state. Until
	// then, what a readback finds in VPP and no commit mentioned is kept
	// (an agent that restarts connects before its first resync commit and
	// must not tear down what it is about to want again).
	fullState bool

	// Indexes, so that a pass costs what changed and its dependents.
	users   map[string]map[*item]struct{} // dependency key -> items whose applied value depends on it
	waiters map[string]map[*item]struct{} // dependency key -> items parked until it is configured
	dirty   []*item                       // items to look at in the next pass
	// cnatBatch numbers the removal batches; cnatReset is the one in which
	// the SNAT addresses were set again (see cnatTrDelete).
	cnatBatch, cnatReset uint64
	retries              retryHeap // items with a scheduled retry, earliest first
	pubq                 []*item   // items whose status may have changed
	// Generations of the item marks (see item): dirtyGen of Driver.dirty,
	// pubGen of Driver.pubq, gen of the sets of the current pass.
	dirtyGen, pubGen, gen uint64
	plan                  plan  // the plan of the current pass (its arrays kept from pass to pass)
	execOps               []*op // the executor's batch array, kept likewise
	// incompatible collects the ErrIncompatible failures of keys (a VPP
	// without an optional feature) seen since the current Commit began.
	incompatible []error

	stMu     sync.Mutex // guards the fields below
	statuses map[string]KeyStatus
	counts   stateCounts
	failing  map[string]bool // the keys that keep failing -> announced at Warn
	online   bool            // statuses may say configured: connected and read back
}

// counters are the monotonic counters of Stats.
type counters struct {
	commits, invalid, passes, resyncs, connects, requests, failures atomic.Uint64
}

var (
	_ controller.Southbound = (*Driver)(nil)
	_ controller.KeyOwner   = (*Driver)(nil)
)

// New returns a driver that connects to VPP through adapters made by
// newAdapter (one per connection attempt; e.g. socketclient.NewVppClient
// or a vppsim VPP's NewAdapter). It does no I/O and starts no goroutine;
// call Run. A bad cfg is an error wrapping [ErrInvalidConfig] that names
// every bad field.
func New(newAdapter func() adapter.VppAPI, cfg Config) (*Driver, error) {
	if newAdapter == nil {
		return nil, errors.New("vppdriver: newAdapter is nil")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Driver{
		cfg:        cfg,
		log:        cfg.Logger.With(slog.String("component", "vppdriver")),
		newAdapter: newAdapter,
		broken:     make(chan error, 1),
		wake:       make(chan struct{}, 1),
		items:      map[string]*item{},
		users:      map[string]map[*item]struct{}{},
		waiters:    map[string]map[*item]struct{}{},
		statuses:   map[string]KeyStatus{},
		failing:    map[string]bool{},
		dirtyGen:   1,
		pubGen:     1,
	}, nil
}

// OwnsKey reports whether key belongs to the driver: exactly the keys under
// [vppmodel.KeyRoot] ("vpp/"). Commit ignores every other key.
func (d *Driver) OwnsKey(key string) bool { return strings.HasPrefix(key, vppmodel.KeyRoot) }

// Run connects to VPP, reads its state back and reconciles, then keeps the
// connection healthy: it probes VPP every HealthInterval, retries failed
// keys when their backoff expires, and after any transport failure
// reconnects and resyncs. It returns ctx.Err() when ctx ends, after
// disconnecting; nothing else stops it (VPP being away is waited out).
// Run is single-use: a second call returns an error wrapping
// [ErrAlreadyRunning].
//
// Not being connected is logged at Warn once when it begins (a failed
// first connect, a lost connection) and once when it ends (connected
// again), not per attempt.
func (d *Driver) Run(ctx context.Context) error {
	if err := d.run.Start("vppdriver"); err != nil {
		return err
	}
	failedConnects := 0 // since the last connection, or the start
	lost := false       // a connection was lost, and none made since
	for {
		conn, err := core.Connect(d.newAdapter())
		if err != nil {
			failedConnects++
			if failedConnects == 1 && !lost {
				d.log.Warn("cannot connect to VPP; retrying", slog.Any("error", err),
					slog.Duration("interval", d.cfg.ReconnectInterval))
			} else {
				d.log.Debug("connect to VPP failed", slog.Int("attempt", failedConnects), slog.Any("error", err))
			}
		} else {
			if failedConnects > 0 || lost {
				d.log.Warn("connected to VPP again; resyncing", slog.Int("failedConnects", failedConnects))
			} else {
				d.log.Info("connected to VPP; resyncing")
			}
			failedConnects, lost = 0, false
			err := d.serve(ctx, conn)
			conn.Disconnect()
			if err != nil && ctx.Err() == nil {
				lost = true
				d.log.Warn("lost the VPP connection; reconnecting", slog.Any("error", err))
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d.cfg.ReconnectInterval):
		}
	}
}

// serve runs one connection until ctx ends (nil) or the connection fails
// (the failure).
func (d *Driver) serve(ctx context.Context, conn *core.Connection) error {
	select { // drop a stale failure signal of the previous connection
	case <-d.broken:
	default:
	}
	d.mu.Lock()
	d.stats.connects.Add(1)
	d.cl = newClient(conn, d.cfg, &d.stats.requests)
	d.readBack = false
	d.checkCompatibilityLocked(conn)
	d.memifSockets, d.memifPending = map[string]uint32{}, map[string]bool{}
	// A new connection (maybe to a restarted or another VPP): what failed
	// before is tried again.
	for _, it := range d.items {
		d.resetFailureLocked(it)
	}
	err := d.resyncLocked(ctx)
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.cl.close()
		d.cl, d.readBack = nil, false
		d.publishLocked()
		d.mu.Unlock()
	}()
	if errors.Is(err, ErrTransport) {
		return err
	}
	health := time.NewTicker(d.cfg.HealthInterval)
	defer health.Stop()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		d.mu.Lock()
		next := d.nextRetryLocked()
		if d.needResync || len(d.dirty) > 0 {
			next = time.Now()
		}
		d.mu.Unlock()
		if next.IsZero() {
			retry.Reset(time.Hour)
		} else {
			retry.Reset(max(time.Until(next), 0))
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-d.broken:
			return err
		case <-d.wake:
		case <-health.C:
			d.mu.Lock()
			err := d.cl.ping(ctx)
			d.mu.Unlock()
			if err != nil {
				return fmt.Errorf("health probe: %w", err)
			}
		case <-retry.C:
			d.mu.Lock()
			var err error
			if d.needResync {
				err = d.resyncLocked(ctx)
			} else {
				err = d.passLocked(ctx)
			}
			d.mu.Unlock()
			if errors.Is(err, ErrTransport) {
				return err
			}
		}
	}
}

// checkCompatibilityLocked checks the connected VPP's messages. What it
// finds lasts as long as the connection and is logged once per
// connection, at Warn: the driver recovers by itself on a reconnect to a
// compatible VPP.
func (d *Driver) checkCompatibilityLocked(conn *core.Connection) {
	d.compatErr = checkCompatibility(conn, coreMessages())
	if d.compatErr != nil {
		d.log.Warn("incompatible VPP: every key fails", slog.Any("error", d.compatErr))
	}
	d.natErr = checkCompatibility(conn, natMessages())
	if d.natErr != nil {
		d.natErr = fmt.Errorf("NAT44-ED unavailable: %w", d.natErr)
		d.log.Warn("VPP without NAT44-ED: its keys fail", slog.Any("error", d.natErr))
	}
	d.memifErr = checkCompatibility(conn, memifMessages())
	if d.memifErr != nil {
		d.memifErr = fmt.Errorf("memif unavailable: %w", d.memifErr)
		d.log.Warn("VPP without memif: its keys fail", slog.Any("error", d.memifErr))
	}
	d.aclErr = checkCompatibility(conn, aclMessages())
	if d.aclErr != nil {
		d.aclErr = fmt.Errorf("ACL plugin unavailable: %w", d.aclErr)
		d.log.Warn("VPP without the ACL plugin: its keys fail", slog.Any("error", d.aclErr))
	}
	d.cnatErr = checkCompatibility(conn, cnatMessages())
	if d.cnatErr != nil {
		d.cnatErr = fmt.Errorf("cnat plugin unavailable: %w", d.cnatErr)
		d.log.Warn("VPP without the cnat plugin: its keys fail", slog.Any("error", d.cnatErr))
	}
	d.vxlanErr = checkCompatibility(conn, vxlanMessages())
	if d.vxlanErr != nil {
		d.vxlanErr = fmt.Errorf("VXLAN unavailable: %w", d.vxlanErr)
		d.log.Warn("VPP without VXLAN: its keys fail", slog.Any("error", d.vxlanErr))
	}
}

// connBroken tells Run that the connection failed (err, a transport
// failure): it reconnects and resyncs.
func (d *Driver) connBroken(err error) {
	select {
	case d.broken <- err:
	default:
	}
}

func (d *Driver) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Commit applies a transaction of the controller: CommitUpdate changes the
// given keys (nil deletes), CommitResync replaces the whole desired state
// and reconciles it against what VPP reports, CommitReapply re-reads VPP
// and re-applies the last desired state.
//
// Only the keys the driver owns (see [Driver.OwnsKey]) are looked at; the
// others are ignored in every kind of commit. A value that fails
// validation is rejected for its key alone: the key is Failed with the
// error (see [Driver.Status]), it is not retried, it has no desired value
// VPP could hold (an object applied for an earlier value of the key is
// removed, and what depends on it waits), and the error is returned as a
// [*controller.KeyError]; every other key of the commit is applied.
//
// The returned error joins (errors.Join) the KeyErrors of the commit's
// invalid values, sorted by key, and, marked with
// [controller.NewPermanentError], an [ErrIncompatible] error if the
// connected VPP lacks messages the driver needs (the driver recovers by
// itself when it reconnects to a compatible VPP). All other failures are
// retried by the driver itself (see Status); a transport failure makes
// Run reconnect and resync. Commit works without a connection: the values
// are recorded and applied once Run has connected.
func (d *Driver) Commit(ctx context.Context, c *controller.Commit) (uint64, error) {
	if c == nil {
		return 0, fmt.Errorf("%w: nil commit", ErrInvalidValue)
	}
	seq := d.seq.Add(1)
	switch c.Kind {
	case controller.CommitUpdate, controller.CommitResync, controller.CommitReapply:
	default:
		return seq, fmt.Errorf("%w: unknown commit kind %v", ErrInvalidValue, c.Kind)
	}
	d.stats.commits.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	before := d.nextRetryLocked()
	d.incompatible = d.incompatible[:0]
	var keyErrs []*controller.KeyError
	switch c.Kind {
	case controller.CommitUpdate:
		for k, v := range c.Values {
			if d.OwnsKey(k) {
				if ke := d.desireLocked(k, v); ke != nil {
					keyErrs = append(keyErrs, ke)
				}
			}
		}
	case controller.CommitResync:
		d.fullState = true
		for _, it := range d.items {
			switch {
			case it.desired():
				if v, ok := c.Values[it.key]; !ok || v == nil {
					d.clearWantLocked(it)
				}
			case it.state == stateUnclaimed:
				it.state = stateRemoving // now known not to be desired
				d.markDirtyLocked(it)
			}
		}
		for k, v := range c.Values {
			if v != nil && d.OwnsKey(k) {
				if ke := d.desireLocked(k, v); ke != nil {
					keyErrs = append(keyErrs, ke)
				}
			}
		}
	}
	var err error
	if c.Kind == controller.CommitUpdate && !d.needResync {
		err = d.passLocked(ctx)
	} else {
		err = d.resyncLocked(ctx)
	}
	if !d.nextRetryLocked().Equal(before) || len(d.dirty) > 0 || d.needResync {
		d.signal(d.wake)
	}
	slices.SortFunc(keyErrs, func(a, b *controller.KeyError) int { return strings.Compare(a.Key, b.Key) })
	errs := make([]error, 0, len(keyErrs)+2)
	for _, ke := range keyErrs {
		errs = append(errs, ke)
	}
	switch {
	case err == nil, errors.Is(err, ErrTransport), errors.Is(err, ErrNotConnected):
		// healed by reconnect + resync
	case isIncompatible(err):
		errs = append(errs, controller.NewPermanentError(err))
	default:
		errs = append(errs, err)
	}
	for _, e := range d.incompatible {
		if err == nil || e.Error() != err.Error() {
			errs = append(errs, controller.NewPermanentError(e))
		}
	}
	return seq, errors.Join(errs...)
}

// desireLocked records the committed value of an owned key (nil: not
// desired). It returns the key's rejection if the value is invalid.
func (d *Driver) desireLocked(key string, msg proto.Message) *controller.KeyError {
	it := d.items[key]
	if msg == nil {
		if it != nil && it.desired() {
			d.clearWantLocked(it)
		}
		return nil
	}
	if it != nil && it.msg == msg && it.desired() {
		// The same message again (values are immutable): nothing to parse.
		if it.bad != nil {
			d.stats.invalid.Add(1)
			return &controller.KeyError{Key: key, Err: it.bad}
		}
		return nil
	}
	v, err := parseChecked(key, msg)
	if it == nil {
		it = d.itemLocked(key)
	}
	if err != nil {
		d.stats.invalid.Add(1)
		d.setBadLocked(it, msg, err)
		return &controller.KeyError{Key: key, Err: err}
	}
	d.setWantLocked(it, msg, v)
	return nil
}

// parseChecked validates msg as the value of key (model validation) and
// parses it into its value. Errors wrap ErrInvalidValue.
func parseChecked(key string, msg proto.Message) (value, error) {
	if err := vppmodel.CheckKey(key, msg); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidValue, err)
	}
	v, err := parseValue(msg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidValue, err)
	}
	return v, nil
}

// Status returns the status of a desired key; ok is false for a key that is
// not desired. While VPP is not connected (or not read back since the last
// connect), a key is never Configured: it is Pending.
func (d *Driver) Status(key string) (KeyStatus, bool) {
	d.stMu.Lock()
	defer d.stMu.Unlock()
	s, ok := d.statuses[key]
	if !ok {
		return s, false
	}
	return d.offlineLocked(s), true
}

// Statuses returns the status of every desired key (see [Driver.Status]).
func (d *Driver) Statuses() map[string]KeyStatus {
	d.stMu.Lock()
	defer d.stMu.Unlock()
	out := maps.Clone(d.statuses)
	if !d.online {
		for k, s := range out {
			if s.State == StateConfigured {
				out[k] = d.offlineLocked(s)
			}
		}
	}
	return out
}

// offlineLocked returns s as it must be reported: nothing is Configured
// while VPP's state is unknown. PendingOn is a copy.
func (d *Driver) offlineLocked(s KeyStatus) KeyStatus {
	if !d.online && s.State == StateConfigured {
		s.State = StatePending
	}
	s.PendingOn = slices.Clone(s.PendingOn)
	return s
}

// Stats returns a snapshot of the driver's state and counters. It does
// not wait for a pass in progress.
func (d *Driver) Stats() Stats {
	d.stMu.Lock()
	s := Stats{Connected: d.online, Keys: len(d.statuses), Configured: d.counts.configured,
		Pending: d.counts.pending, Failed: d.counts.failed, Invalid: d.counts.invalid}
	for kd, n := range d.counts.failing {
		if n > 0 {
			if s.FailingByKind == nil {
				s.FailingByKind = map[string]int{}
			}
			s.Failing += n
			s.FailingByKind[kindNames[kd]] += n
		}
	}
	d.stMu.Unlock()
	if !s.Connected {
		s.Pending += s.Configured
		s.Configured = 0
	}
	s.Commits = d.stats.commits.Load()
	s.InvalidRejected = d.stats.invalid.Load()
	s.Passes = d.stats.passes.Load()
	s.Resyncs = d.stats.resyncs.Load()
	s.Connects = d.stats.connects.Load()
	s.Requests = d.stats.requests.Load()
	s.FailedAttempts = d.stats.failures.Load()
	return s
}

// Compatibility returns the result of the last compatibility check (nil
// before the first connect or if VPP has every message the driver uses).
// Missing VXLAN, memif, NAT44-ED, ACL or cnat plugin messages only
// disable those keys and are included.
func (d *Driver) Compatibility() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return errors.Join(d.compatErr, d.vxlanErr, d.natErr, d.memifErr, d.aclErr, d.cnatErr)
}

// Applied returns a copy of what the driver believes VPP holds for the keys
// it owns, as canonical model messages.
func (d *Driver) Applied() map[string]proto.Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]proto.Message{}
	for k, it := range d.items {
		if it.have != nil {
			out[k] = it.have.message()
		}
	}
	return out
}

// Desired returns a copy of the desired state of the keys the driver owns:
// the values last committed for them, invalid ones included (their
// status is Failed; see [Driver.Status]). With [Driver.Applied] it shows
// desired against applied per key.
func (d *Driver) Desired() map[string]proto.Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]proto.Message{}
	for k, it := range d.items {
		if it.desired() && it.msg != nil {
			out[k] = proto.Clone(it.msg)
		}
	}
	return out
}

// Connected tells whether the driver currently holds a VPP connection
// (and has finished the resync that follows connecting).
func (d *Driver) Connected() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cl != nil
}

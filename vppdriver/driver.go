package vppdriver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/core"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver/model"
)

// Driver is the desired-state reconciler that programs VPP. It implements
// [controller.Southbound]. It is safe for concurrent use.
type Driver struct {
	cfg        Config
	newAdapter func() adapter.VppAPI
	running    atomic.Bool
	seq        atomic.Uint64

	broken chan struct{} // cap 1: a transport failure was seen
	wake   chan struct{} // cap 1: retry schedule changed

	mu        sync.Mutex       // guards the fields below; held during a pass
	items     map[string]*item // every key desired or applied
	cl        *client          // nil when not connected
	compatErr error            // result of the last compatibility check (core messages)
	vxlanErr  error            // the same for the VXLAN messages
	natErr    error            // the same for the NAT44-ED messages
	memifErr  error            // the same for the memif messages
	// memifSockets maps memif socket filenames to VPP socket IDs (learnt
	// from dumps and replies); memifPending marks registrations in flight.
	memifSockets map[string]uint32
	memifPending map[string]bool
	// needResync: a pass was cut short by its caller's context; the next
	// pass reads VPP back first.
	needResync bool

	stMu     sync.Mutex // guards statuses
	statuses map[string]KeyStatus
}

// item is the driver's record of one key. Guarded by Driver.mu.
type item struct {
	key     string
	desired proto.Message // normalized; nil = not desired
	applied proto.Message // what VPP holds (normalized); nil = absent
	created bool          // the VPP object exists (interfaces: swIfIndex valid)
	dirty   bool          // half-configured interface: re-create
	inSync  bool          // applied equals desired (both non-nil)

	swIfIndex uint32

	failed    error
	attempts  int
	nextRetry time.Time
}

var _ controller.Southbound = (*Driver)(nil)

// New returns a driver that connects to VPP through adapters made by
// newAdapter (one per connection attempt; e.g. socketclient.NewVppClient
// or a vppsim VPP's NewAdapter). It does no I/O; call Run.
func New(newAdapter func() adapter.VppAPI, cfg Config) (*Driver, error) {
	if newAdapter == nil {
		return nil, errors.New("vppdriver: newAdapter is nil")
	}
	return &Driver{
		cfg:        cfg.withDefaults(),
		newAdapter: newAdapter,
		broken:     make(chan struct{}, 1),
		wake:       make(chan struct{}, 1),
		items:      map[string]*item{},
		statuses:   map[string]KeyStatus{},
	}, nil
}

// Run connects to VPP, reads its state back and reconciles, then keeps the
// connection healthy: it probes VPP every HealthInterval, retries failed
// keys when their backoff expires, and after any transport failure
// reconnects and resyncs. It returns nil when ctx is cancelled, after
// disconnecting. Only one Run may be active.
func (d *Driver) Run(ctx context.Context) error {
	if !d.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer d.running.Store(false)
	for {
		conn, err := core.Connect(d.newAdapter())
		if err != nil {
			d.cfg.Logger.Warn("vppdriver: connect failed", "err", err)
		} else {
			d.serve(ctx, conn)
			conn.Disconnect()
		}
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d.cfg.ReconnectInterval):
		}
	}
}

// serve runs one connection until ctx ends or the transport fails.
func (d *Driver) serve(ctx context.Context, conn *core.Connection) {
	select { // drop a stale failure signal of the previous connection
	case <-d.broken:
	default:
	}
	d.mu.Lock()
	d.cl = &client{conn: conn, timeout: d.cfg}
	d.compatErr = checkCompatibility(conn, coreMessages())
	if d.compatErr != nil {
		d.cfg.Logger.Error("vppdriver: incompatible VPP", "err", d.compatErr)
	}
	d.natErr = checkCompatibility(conn, natMessages())
	if d.natErr != nil {
		d.natErr = fmt.Errorf("NAT44-ED unavailable: %w", d.natErr)
		d.cfg.Logger.Warn("vppdriver: VPP without NAT44-ED", "err", d.natErr)
	}
	d.memifErr = checkCompatibility(conn, memifMessages())
	if d.memifErr != nil {
		d.memifErr = fmt.Errorf("memif unavailable: %w", d.memifErr)
		d.cfg.Logger.Warn("vppdriver: VPP without memif", "err", d.memifErr)
	}
	d.memifSockets, d.memifPending = map[string]uint32{}, map[string]bool{}
	d.vxlanErr = checkCompatibility(conn, vxlanMessages())
	if d.vxlanErr != nil {
		d.vxlanErr = fmt.Errorf("VXLAN unavailable: %w", d.vxlanErr)
		d.cfg.Logger.Warn("vppdriver: VPP without VXLAN", "err", d.vxlanErr)
	}
	d.cfg.Logger.Info("vppdriver: connected to VPP; resyncing")
	err := d.resyncLocked(ctx)
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.cl = nil
		d.publishLocked()
		d.mu.Unlock()
	}()
	if errors.Is(err, ErrTransport) {
		return
	}
	health := time.NewTicker(d.cfg.HealthInterval)
	defer health.Stop()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		d.mu.Lock()
		next := d.nextRetryLocked()
		if d.needResync {
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
			return
		case <-d.broken:
			return
		case <-d.wake:
		case <-health.C:
			d.mu.Lock()
			err := d.cl.ping(ctx)
			d.mu.Unlock()
			if err != nil {
				d.cfg.Logger.Warn("vppdriver: health probe failed; reconnecting", "err", err)
				return
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
				return
			}
		}
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
// and re-applies the last desired state. Keys outside this package's key
// space are rejected (an invalid value leaves the key's previous desired
// value in place, also in a resync). It returns an error only for invalid
// values and an incompatible VPP: other failures are retried by the
// driver itself (see Status); a transport failure makes Run reconnect and
// resync.
func (d *Driver) Commit(ctx context.Context, c *controller.Commit) (uint64, error) {
	if c == nil {
		return 0, fmt.Errorf("%w: nil commit", ErrInvalidValue)
	}
	seq := d.seq.Add(1)
	var errs []error
	values := make(map[string]proto.Message, len(c.Values))
	invalid := map[string]bool{}
	for k, v := range c.Values {
		if v == nil {
			if c.Kind == controller.CommitUpdate {
				values[k] = nil
			}
			continue
		}
		if err := model.CheckKey(k, v); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidValue, err))
			invalid[k] = true // keeps its previous desired value
			continue
		}
		values[k] = normalize(v)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch c.Kind {
	case controller.CommitUpdate:
		for k, v := range values {
			d.setDesiredLocked(k, v)
		}
	case controller.CommitResync:
		for k, it := range d.items {
			if _, ok := values[k]; !ok && it.desired != nil && !invalid[k] {
				d.setDesiredLocked(k, nil)
			}
		}
		for k, v := range values {
			d.setDesiredLocked(k, v)
		}
	case controller.CommitReapply:
	default:
		return seq, fmt.Errorf("%w: unknown commit kind %v", ErrInvalidValue, c.Kind)
	}
	var err error
	if c.Kind == controller.CommitUpdate && !d.needResync {
		err = d.passLocked(ctx)
	} else {
		err = d.resyncLocked(ctx)
	}
	if errors.Is(err, ErrTransport) || errors.Is(err, ErrNotConnected) {
		err = nil // healed by reconnect + resync
	}
	if err != nil {
		errs = append(errs, err)
	}
	d.signal(d.wake)
	return seq, errors.Join(errs...)
}

func (d *Driver) setDesiredLocked(k string, v proto.Message) {
	it := d.items[k]
	if it == nil {
		if v == nil {
			return
		}
		it = &item{key: k}
		d.items[k] = it
	}
	if (it.desired == nil) != (v == nil) || (v != nil && !proto.Equal(it.desired, v)) {
		it.failed, it.attempts, it.nextRetry = nil, 0, time.Time{}
	}
	it.desired = v
	it.inSync = it.applied != nil && v != nil && (it.applied == v || proto.Equal(it.applied, v))
}

// Status returns the status of a desired key; ok is false for a key that is
// not desired.
func (d *Driver) Status(key string) (KeyStatus, bool) {
	d.stMu.Lock()
	defer d.stMu.Unlock()
	s, ok := d.statuses[key]
	if ok {
		s.PendingOn = slices.Clone(s.PendingOn)
	}
	return s, ok
}

// Statuses returns the status of every desired key.
func (d *Driver) Statuses() map[string]KeyStatus {
	d.stMu.Lock()
	defer d.stMu.Unlock()
	return maps.Clone(d.statuses)
}

// Compatibility returns the result of the last compatibility check (nil
// before the first connect or if VPP has every message the driver uses).
// Missing VXLAN messages only disable VXLAN tunnels and are included.
func (d *Driver) Compatibility() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return errors.Join(d.compatErr, d.vxlanErr, d.natErr, d.memifErr)
}

// Applied returns a copy of what the driver believes VPP holds for the keys
// it owns.
func (d *Driver) Applied() map[string]proto.Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]proto.Message{}
	for k, it := range d.items {
		if it.applied != nil {
			out[k] = proto.Clone(it.applied)
		}
	}
	return out
}

func (d *Driver) nextRetryLocked() time.Time {
	var next time.Time
	for _, it := range d.items {
		if !it.nextRetry.IsZero() && (next.IsZero() || it.nextRetry.Before(next)) {
			next = it.nextRetry
		}
	}
	return next
}

func (d *Driver) backoff(attempts int) time.Duration {
	b := d.cfg.RetryInitial
	for i := 1; i < attempts && b < d.cfg.RetryMax; i++ {
		b *= 2
	}
	return min(b, d.cfg.RetryMax)
}

// publishLocked recomputes the statuses of all desired keys.
func (d *Driver) publishLocked() {
	d.stMu.Lock()
	defer d.stMu.Unlock()
	st := d.statuses
	for k := range st {
		if it := d.items[k]; it == nil || it.desired == nil {
			delete(st, k)
		}
	}
	for k, it := range d.items {
		if it.desired == nil {
			continue
		}
		s := KeyStatus{Key: k, Attempts: it.attempts, NextRetry: it.nextRetry}
		switch {
		case it.inSync:
			s.State = StateConfigured
		case it.failed != nil:
			s.State, s.Err = StateFailed, it.failed
		case d.cl == nil:
			s.State = StatePending
		default:
			s.State, s.PendingOn = StatePending, d.missingDepsLocked(it)
		}
		st[k] = s
	}
}

// ready tells whether dependency key is configured as desired.
func (d *Driver) readyLocked(key string) bool {
	it := d.items[key]
	return it != nil && it.inSync
}

func (d *Driver) missingDepsLocked(it *item) []string {
	var out []string
	for _, dep := range dependencies(it.desired) {
		if !d.readyLocked(dep) {
			out = append(out, dep)
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

// setApplied records what VPP holds and whether it is the desired value.
func (it *item) setApplied(v proto.Message) {
	it.applied = v
	it.inSync = v != nil && it.desired != nil && (v == it.desired || proto.Equal(v, it.desired))
}

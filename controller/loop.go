package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
)

// RemoteDBSource is the external-configuration source name under which the
// ExternalConfig of DBResync events is kept.
const RemoteDBSource = "remotedb"

// Loop is the event loop: it processes one event at a time by calling the
// registered handlers and commits one transaction per event to the
// southbound.
//
// PushEvent, Healthy, Stats and History are safe for concurrent use.
// GetConfig is only for handlers, called on the loop goroutine. Run is
// called once.
type Loop struct {
	handlers []EventHandler
	sb       Southbound
	cfg      Config
	log      *slog.Logger
	history  *History
	stats    counters

	running atomic.Bool
	regMu   sync.Mutex // serializes Register with the start of Run
	// inHandler is set while the loop goroutine processes an event; loopG
	// identifies that goroutine. Together they detect follow-up pushes.
	inHandler atomic.Bool
	loopG     atomic.Uintptr

	mu          sync.Mutex
	queue       []Event       // guarded by mu; outside events in push order
	deferredLen int           // guarded by mu; events held by the start-up gate
	stopped     bool          // guarded by mu
	wake        chan struct{} // capacity 1; signalled on push

	// Everything below is owned by the loop goroutine.
	followUps   []Event
	deferred    []Event
	gateOpen    bool
	resyncCount int
	kubeState   KubeStateData
	internal    KeyValuePairs            // handlers' desired state as last committed
	external    map[string]KeyValuePairs // source -> external config
	sources     []string                 // sorted names of external sources
	txn         txn
	cur         *txn // transaction being built, for GetConfig
	commitVals  KeyValuePairs
	commitBuf   Commit        // reused for every commit; the southbound must not keep it
	undo        KeyValuePairs // RevertOnFailure: previous internal values of changed keys
	ran         []int         // indexes of handlers that ran for the current event
	rec         Record
	seq         uint64
	fatal       error

	healPending   bool
	healErr       error
	healTimer     *time.Timer
	healFailures  int
	healNextDelay time.Duration
}

var (
	_ EventLoop       = (*Loop)(nil)
	_ ConfigRetriever = (*Loop)(nil)
)

// New returns a loop that calls handlers in the given order (see
// [UpdateDirectionType]) and commits to sb. It does no I/O and starts no
// goroutine: call [Loop.Run].
//
// handlers may be empty: components that need the loop in their own
// constructor (nodesync, ipam in external mode, the pod server) are built
// after it and added with [Loop.Register] before Run:
//
//	loop, _ := controller.New(nil, driver, controller.Config{})
//	ns, _ := nodesync.New(nodeName, db, loop, nodesync.Config{})
//	_ = loop.Register(ns, ipamHandler, services.Handler())
func New(handlers []EventHandler, sb Southbound, cfg Config) (*Loop, error) {
	if sb == nil {
		return nil, errors.New("controller: nil southbound")
	}
	for i, h := range handlers {
		if h == nil {
			return nil, fmt.Errorf("controller: handler %d is nil", i)
		}
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Loop{
		handlers:   slices.Clone(handlers),
		sb:         sb,
		cfg:        cfg,
		log:        cfg.Logger.With(slog.String("component", "controller")),
		history:    newHistory(cfg.HistorySize),
		wake:       make(chan struct{}, 1),
		kubeState:  NewKubeStateData(),
		internal:   make(KeyValuePairs),
		external:   make(map[string]KeyValuePairs),
		txn:        txn{values: make(KeyValuePairs)},
		commitVals: make(KeyValuePairs),
		undo:       make(KeyValuePairs),
	}, nil
}

// Register appends handlers to the loop, after those given to New and
// registered before, in that order. It returns ErrRegisterAfterRun once Run
// has started (handlers are fixed while the loop runs) and an error for a
// nil handler; then nothing is registered. Register is safe for concurrent
// use with PushEvent.
func (l *Loop) Register(handlers ...EventHandler) error {
	for i, h := range handlers {
		if h == nil {
			return fmt.Errorf("controller: register: handler %d is nil", i)
		}
	}
	l.regMu.Lock()
	defer l.regMu.Unlock()
	if l.running.Load() {
		return ErrRegisterAfterRun
	}
	l.handlers = append(l.handlers, handlers...)
	return nil
}

// History returns the event history. It is never nil; with history
// disabled it holds nothing.
func (l *Loop) History() *History { return l.history }

// Stats returns a snapshot of the loop's counters.
func (l *Loop) Stats() Stats {
	l.mu.Lock()
	queued := len(l.queue) + l.deferredLen
	l.mu.Unlock()
	c := &l.stats
	return Stats{
		Queued: queued, Processed: c.processed.Load(), Failed: c.failed.Load(),
		FollowUps: c.followUps.Load(), Resyncs: c.resyncs.Load(), DownstreamResyncs: c.downstream.Load(),
		HealingScheduled: c.healScheduled.Load(), HealingFailed: c.healFailed.Load(),
		Commits: c.commits.Load(), CommitErrors: c.commitErrors.Load(), Reverts: c.reverts.Load(),
		Aborts: c.aborts.Load(), QueueFull: c.queueFull.Load(),
		StartupResyncDone: c.startupDone.Load(), StartupDeadlineHit: c.deadlineHit.Load(),
	}
}

// Healthy returns nil while the loop is healthy, and ErrStartupResyncMissing
// when the start-up DBResync did not arrive within the deadline (until it
// arrives).
func (l *Loop) Healthy() error {
	if l.stats.deadlineHit.Load() && !l.stats.startupDone.Load() {
		return ErrStartupResyncMissing
	}
	return nil
}

// PushEvent adds the event to the queue. It never blocks.
//
// Called from a handler on the loop goroutine, the event is a follow-up: it
// runs right after the current event, before any event queued from outside;
// a blocking follow-up is refused with ErrBlockingFollowUp (waiting for it
// would deadlock). Otherwise the event is queued in push order. PushEvent
// returns ErrQueueFull when the bounded queue is full and ErrStopped after
// the loop has stopped. Events pushed before Run are queued.
func (l *Loop) PushEvent(ev Event) error {
	if ev == nil {
		return errors.New("controller: nil event")
	}
	if l.inHandler.Load() && curG() == l.loopG.Load() {
		if ev.IsBlocking() {
			return fmt.Errorf("%w: %s", ErrBlockingFollowUp, ev.GetName())
		}
		if len(l.followUps) >= l.cfg.QueueSize {
			l.stats.queueFull.Add(1)
			return ErrQueueFull
		}
		l.followUps = append(l.followUps, ev)
		return nil
	}
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return ErrStopped
	}
	if len(l.queue)+l.deferredLen >= l.cfg.QueueSize {
		l.mu.Unlock()
		l.stats.queueFull.Add(1)
		return ErrQueueFull
	}
	l.queue = append(l.queue, ev)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return nil
}

// GetConfig returns the value of key in the transaction of the event being
// processed or, if the transaction does not touch key, in the handlers'
// committed desired state. Only call it from handlers (on the loop
// goroutine).
func (l *Loop) GetConfig(key string) proto.Message {
	if l.cur != nil {
		if v, ok := l.cur.values[key]; ok {
			return v
		}
		if l.cur.resync {
			return nil
		}
	}
	return l.internal[key]
}

// Run processes events until ctx is done, a Shutdown event was processed,
// or a fatal error occurred, and returns then: ctx.Err() after
// cancellation (the loop first processes a Shutdown event so handlers can
// remove what they own, bounded by Config.ShutdownTimeout), nil after a
// pushed Shutdown event, the fatal error otherwise. Events still queued when
// the loop stops are completed with ErrStopped. Run starts no goroutine of
// its own: when it returns, nothing of the loop is left running.
func (l *Loop) Run(ctx context.Context) error {
	l.regMu.Lock()
	started := l.running.CompareAndSwap(false, true)
	l.regMu.Unlock()
	if !started {
		return ErrAlreadyRunning
	}
	l.loopG.Store(curG())
	l.log.Info("event loop started", slog.Int("handlers", len(l.handlers)))
	defer l.stopTimers()

	var startupC <-chan time.Time
	if l.cfg.StartupResyncDeadline > 0 {
		t := time.NewTimer(l.cfg.StartupResyncDeadline)
		defer t.Stop()
		startupC = t.C
	}
	var periodicC <-chan time.Time
	if l.cfg.PeriodicHealingInterval > 0 {
		t := time.NewTicker(l.cfg.PeriodicHealingInterval)
		defer t.Stop()
		periodicC = t.C
	}

	// batch is the slice of outside events being processed; batchBuf is its
	// full backing array, handed back to the queue once batch is consumed.
	var batch, batchBuf []Event
	for {
		if l.fatal != nil {
			return l.stop(fmt.Errorf("controller: fatal error: %w", l.fatal), batch)
		}
		if len(l.followUps) > 0 {
			ev := l.followUps[0]
			l.followUps[0] = nil
			l.followUps = l.followUps[1:]
			if len(l.followUps) == 0 {
				l.followUps = l.followUps[:0:0]
			}
			l.process(ctx, ev, true)
			continue
		}
		if len(batch) > 0 {
			ev := batch[0]
			batch[0] = nil
			batch = batch[1:]
			if _, isShutdown := ev.(*Shutdown); isShutdown {
				l.process(ctx, ev, false)
				return l.stop(nil, batch)
			}
			if !l.gateOpen {
				if _, ok := ev.(*DBResync); !ok {
					l.deferred = append(l.deferred, ev)
					l.mu.Lock()
					l.deferredLen++
					l.mu.Unlock()
					continue
				}
			}
			l.process(ctx, ev, false)
			if l.gateOpen && len(l.deferred) > 0 {
				// The gate just opened: held events run before the rest.
				batch = append(l.deferred, batch...)
				l.deferred = nil
				l.mu.Lock()
				l.deferredLen = 0
				l.mu.Unlock()
			}
			continue
		}

		// Between batches: timers and cancellation, without blocking.
		select {
		case <-ctx.Done():
			return l.shutdown(ctx, batch)
		case <-startupC:
			l.startupDeadline()
			continue
		case <-l.healC():
			l.heal(ctx)
			continue
		case <-periodicC:
			l.periodic(ctx)
			continue
		default:
		}

		l.mu.Lock()
		if len(l.queue) > 0 {
			batch = l.queue
			l.queue = batchBuf[:0]
			batchBuf = batch
		}
		l.mu.Unlock()
		if len(batch) > 0 {
			continue
		}

		select {
		case <-ctx.Done():
			return l.shutdown(ctx, batch)
		case <-l.wake:
		case <-startupC:
			l.startupDeadline()
		case <-l.healC():
			l.heal(ctx)
		case <-periodicC:
			l.periodic(ctx)
		}
	}
}

func (l *Loop) startupDeadline() {
	if l.gateOpen {
		return
	}
	l.stats.deadlineHit.Store(true)
	l.log.Warn("no start-up DBResync within the deadline; events wait for it",
		slog.Duration("deadline", l.cfg.StartupResyncDeadline))
}

func (l *Loop) periodic(ctx context.Context) {
	if !l.gateOpen {
		return
	}
	l.process(ctx, &HealingResync{Type: Periodic}, false)
}

// shutdown processes a Shutdown event after ctx was cancelled, then stops.
func (l *Loop) shutdown(ctx context.Context, rest []Event) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.ShutdownTimeout)
	defer cancel()
	l.process(sctx, NewShutdownEvent(), false)
	return l.stop(ctx.Err(), rest)
}

// stop refuses further pushes and completes everything still queued (rest
// is the unprocessed part of the current batch) with ErrStopped.
func (l *Loop) stop(result error, rest []Event) error {
	l.mu.Lock()
	l.stopped = true
	queued := l.queue
	l.queue = nil
	l.deferredLen = 0
	l.mu.Unlock()
	l.failAll(l.followUps)
	l.failAll(rest)
	l.failAll(l.deferred)
	l.failAll(queued)
	l.followUps, l.deferred = nil, nil
	if result != nil && !errors.Is(result, context.Canceled) {
		l.log.Info("event loop stopped", slog.Any("error", result))
	} else {
		l.log.Info("event loop stopped")
	}
	return result
}

func (l *Loop) failAll(evs []Event) {
	for _, ev := range evs {
		if ev != nil {
			ev.Done(ErrStopped)
		}
	}
}

// setSource replaces (kvs non-nil) or removes (kvs nil) an external source.
func (l *Loop) setSource(name string, kvs KeyValuePairs) {
	_, known := l.external[name]
	if kvs == nil {
		if known {
			delete(l.external, name)
			l.sources = slices.DeleteFunc(l.sources, func(s string) bool { return s == name })
		}
		return
	}
	l.external[name] = kvs
	if !known {
		l.sources = append(l.sources, name)
		sort.Strings(l.sources)
	}
}

// effective returns the value of key after merging external configuration
// over the handlers' desired state: external sources win over handlers, and
// among sources the one whose name sorts last wins.
func (l *Loop) effective(key string) proto.Message {
	for i := len(l.sources) - 1; i >= 0; i-- {
		if v, ok := l.external[l.sources[i]][key]; ok && v != nil {
			return v
		}
	}
	return l.internal[key]
}

// merged returns the complete desired state: internal overlaid with every
// external source in ascending name order.
func (l *Loop) merged() KeyValuePairs {
	out := make(KeyValuePairs, len(l.internal))
	for k, v := range l.internal {
		out[k] = v
	}
	for _, s := range l.sources {
		for k, v := range l.external[s] {
			if v != nil {
				out[k] = v
			}
		}
	}
	return out
}

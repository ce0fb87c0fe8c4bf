package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petermattis/goid"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

// Loop is the event loop: it processes one event at a time by calling the
// registered handlers and commits one transaction per event to the
// southbound.
//
// PushEvent, Register, Healthy, RejectedKeys, Stats, EventStats,
// HandlerStats, History, Ready, WaitStartupResync and Sync are safe for
// concurrent use. GetConfig is only for handlers, called on the loop
// goroutine. Run is called once.
type Loop struct {
	handlers []EventHandler
	sb       Southbound
	cfg      Config
	log      *slog.Logger
	history  *History
	stats    counters
	health   health
	// typeStats counts events per name and errors per handler.
	typeStats typeStats

	run     lifecycle.Once
	regMu   sync.Mutex // serializes Register with the start of Run
	waiters waitState  // what Ready, WaitStartupResync and Sync wait for
	// inHandler is set while the Run goroutine processes an event; loopG
	// is the ID of that goroutine. Together they detect follow-up pushes
	// through PushEvent (the fallback of PushFollowUp).
	inHandler atomic.Bool
	loopG     atomic.Int64

	mu      sync.Mutex
	queue   []Event       // guarded by mu; outside events in push order
	heldLen int           // guarded by mu; len(held), for the queue bound and Stats
	stopped bool          // guarded by mu
	wake    chan struct{} // capacity 1; signalled on push

	// Everything below is owned by the Run goroutine.

	followUps fifo    // events pushed by handlers, in push order
	batch     fifo    // outside events taken from queue, in push order
	held      []Event // outside events held by the start-up gate, in push order
	gateOpen  bool    // the first DBResync was processed
	bounded   bool    // the event in progress is a Shutdown (see I6)
	fatal     error

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
	ran         []ranHandler  // RevertOnFailure: handlers whose Update succeeded for the current event
	rec         Record
	seq         uint64

	// The KeyErrors of the event in progress (see health.go).
	evKeys []*KeyError

	heal healing
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
	l := &Loop{
		handlers:   slices.Clone(handlers),
		sb:         sb,
		cfg:        cfg,
		log:        cfg.Logger.With(slog.String("component", "controller")),
		history:    newHistory(cfg.HistorySize),
		health:     health{rejected: make(map[string]error)},
		wake:       make(chan struct{}, 1),
		kubeState:  NewKubeStateData(),
		internal:   make(KeyValuePairs),
		external:   make(map[string]KeyValuePairs),
		txn:        txn{values: make(KeyValuePairs)},
		commitVals: make(KeyValuePairs),
		undo:       make(KeyValuePairs),
		waiters:    newWaitState(),
	}
	l.txn.loop = l
	return l, nil
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
	if l.run.Started() {
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
	queued := len(l.queue) + l.heldLen
	l.mu.Unlock()
	c := &l.stats
	return Stats{
		Queued: queued, Processed: c.processed.Load(), Failed: c.failed.Load(),
		FollowUps: c.followUps.Load(), Resyncs: c.resyncs.Load(), DownstreamResyncs: c.downstream.Load(),
		HealingScheduled: c.healScheduled.Load(), HealingFailed: c.healFailed.Load(), HealingFailing: int(c.healFailing.Load()),
		Commits: c.commits.Load(), CommitErrors: c.commitErrors.Load(), Reverts: c.reverts.Load(),
		Aborts: c.aborts.Load(), QueueFull: c.queueFull.Load(),
		PermanentErrors: c.permanent.Load(), RejectedKeys: l.health.numRejected(),
		StartupResyncDone: c.startupDone.Load(), StartupDeadlineHit: c.deadlineHit.Load(),
	}
}

// Healthy returns nil while the loop is healthy. Otherwise it returns:
//
//   - ErrStartupResyncMissing when the start-up DBResync did not arrive
//     within Config.StartupResyncDeadline (until it arrives): the loop
//     processes nothing yet;
//   - an error wrapping ErrDegraded while keys are rejected for good (see
//     [Loop.RejectedKeys]; the error wraps the [KeyError] of the first in key
//     order) or a permanent error that is not about a key is outstanding
//     (the error wraps it, so errors.Is finds, say, the southbound's
//     incompatibility sentinel). The loop runs and applies everything else;
//     an application may report the state as degraded and alert, but
//     restarting does not help: the rejected input must change;
//   - an error wrapping ErrHealing while healing resyncs fail in a row
//     (how many, since when, and the last error): the loop keeps healing;
//     what the resync reads (etcd, VPP) is failing.
//
// Several can hold at once; the result then wraps each.
func (l *Loop) Healthy() error {
	var startup error
	if l.stats.deadlineHit.Load() && !l.stats.startupDone.Load() {
		startup = ErrStartupResyncMissing
	}
	var errs []error
	for _, err := range []error{startup, l.health.healingErr(), l.health.degraded()} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

// PushEvent adds the event to the queue. It never blocks.
//
// Called from a handler on the loop goroutine, the event is a follow-up: it
// runs right after the current event, before any event queued from outside;
// a blocking follow-up is refused with ErrBlockingFollowUp (waiting for it
// would deadlock). Otherwise the event is queued in push order. PushEvent
// returns ErrQueueFull when the bounded queue is full and ErrStopped after
// the loop has stopped. Events pushed before Run are queued.
//
// Handlers should push follow-ups with [PushFollowUp], which says so
// explicitly. PushEvent tells a handler's push from a concurrent push of
// another goroutine by goroutine identity (the ID of the goroutine running
// Run, read with github.com/petermattis/goid, compared only while an
// event is in progress): the fallback for handlers (and a southbound) that
// hold the loop only as an [EventLoop], and the only way from Revert,
// which receives no transaction.
func (l *Loop) PushEvent(ev Event) error {
	if ev == nil {
		return errors.New("controller: nil event")
	}
	if l.inHandler.Load() && goid.Get() == l.loopG.Load() {
		return l.pushFollowUp(ev)
	}
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return ErrStopped
	}
	if len(l.queue)+l.heldLen >= l.cfg.QueueSize {
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

// pushFollowUp queues ev as a follow-up of the event in progress; it is
// called on the loop goroutine only.
func (l *Loop) pushFollowUp(ev Event) error {
	if ev == nil {
		return errors.New("controller: nil event")
	}
	if ev.IsBlocking() {
		return fmt.Errorf("%w: %s", ErrBlockingFollowUp, ev.GetName())
	}
	if l.followUps.len() >= l.cfg.QueueSize {
		l.stats.queueFull.Add(1)
		return ErrQueueFull
	}
	l.followUps.push(ev)
	return nil
}

// GetConfig returns the handlers' desired value of key: the value in the
// transaction of the event being processed or, if that transaction does not
// touch key, the value the handlers committed last (during a resync, only
// the resync's transaction counts: the handlers rebuild their state).
// External configuration is not included: a handler adjusts what another
// handler produced, and external values are merged over the result when
// the transaction is committed. Only call it from handlers (on the loop
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
// cancellation, nil after a pushed Shutdown event, the fatal error
// otherwise. A second call returns an error wrapping ErrAlreadyRunning.
//
// When ctx ends, Run finishes the event in progress, then processes a
// Shutdown event so that handlers can remove what they own. The loop
// cannot interrupt a handler; it tells handlers when to give up through
// [ContextOf]: the context of the event in progress is not cancelled with
// ctx, but Config.ShutdownTimeout later, so a handler whose I/O honours it
// returns by then. The event's commit gets ctx as it is (cancelled), so a
// southbound that honours ctx fails it. Config.ShutdownTimeout bounds the
// Shutdown event too: its handlers and its commit get a context with that
// deadline from the start of the event (not cancelled with ctx), and once
// the deadline passed no further handler is called and nothing is
// committed. A handler that blocks without honouring its context still
// blocks Run. Everything else still queued, follow-ups included, is
// completed with ErrStopped without running a handler. A pushed Shutdown
// event is processed the same way.
//
// Run starts no goroutine of its own (only the timers of the contexts it
// derives): when it returns, nothing of the loop is left running.
func (l *Loop) Run(ctx context.Context) error {
	l.regMu.Lock()
	err := l.run.Start("controller")
	l.regMu.Unlock()
	if err != nil {
		return err
	}
	l.loopG.Store(goid.Get())
	close(l.waiters.started)
	l.log.Info("event loop started", slog.Int("handlers", len(l.handlers)))
	t := l.startTimers()
	defer t.stop()
	defer l.stopHealTimer()
	hctx, stopHctx := l.handlerContext(ctx)
	defer stopHctx()
	ec := evContexts{handlers: hctx, commit: ctx}

	// Each turn takes exactly one step: the first of these rules that
	// applies. Only this goroutine touches the loop's state; others append
	// to l.queue under l.mu and signal l.wake.
	//
	//	R1 fatal      a FatalError (handler, southbound, or healing that
	//	              gave up): stop.
	//	R2 cancelled  ctx is done: process a Shutdown event, stop.
	//	R3 follow-up  process the oldest follow-up.
	//	R4 batch      admit the oldest outside event of the batch: a
	//	              Shutdown is processed and stops the loop; before the
	//	              first DBResync anything else is held; otherwise it
	//	              is processed (a Sync barrier is completed).
	//	R5 timer      act on a due timer: start-up deadline, healing
	//	              resync, periodic healing.
	//	R6 refill     the queue of outside events becomes the batch.
	//	R7 wait       block until a push, a timer or cancellation.
	//
	// Invariants that follow:
	//
	//	I1 One event at a time, on this goroutine: handlers and the
	//	   southbound are only called from process.
	//	I2 Follow-ups run strictly before any other pending event or timer
	//	   (R3 precedes R4–R7; only process pushes follow-ups), in push
	//	   order.
	//	I3 Before the first DBResync only DBResync and Shutdown are
	//	   processed. Held events keep push order and go to the front of
	//	   the batch as soon as that DBResync was processed: after its
	//	   follow-ups, before any event pushed later.
	//	I4 No event starts after ctx is done except one Shutdown: R2 is
	//	   checked before every event. Whatever is pending when the loop
	//	   stops (follow-ups, batch, held, queue, and what was pushed while
	//	   Shutdown ran) completes with ErrStopped; later pushes return
	//	   ErrStopped.
	//	I5 Timers act between batches (R5 after R4): a due timer waits for
	//	   at most one batch (at most QueueSize outside events and their
	//	   follow-ups). At most one healing resync is pending.
	//	I6 The Shutdown event runs with a context that ends
	//	   ShutdownTimeout after it started and is not cancelled with
	//	   ctx; once it ended no handler is called and nothing is
	//	   committed.
	//	I7 The handlers of every other event get a context (ContextOf)
	//	   that is not cancelled with ctx but ShutdownTimeout after ctx
	//	   ended; their commits get ctx.
	for {
		if l.fatal != nil { // R1
			return l.stop(fmt.Errorf("controller: fatal error: %w", l.fatal))
		}
		if ctx.Err() != nil { // R2
			l.shutdown(ctx, NewShutdownEvent())
			return l.stop(l.result(ctx.Err()))
		}
		if ev, ok := l.followUps.pop(); ok { // R3
			l.process(ec, ev, true)
			continue
		}
		if ev, ok := l.batch.pop(); ok { // R4
			if stop := l.admit(ctx, ec, ev); stop {
				return l.stop(l.result(nil))
			}
			continue
		}
		if k := l.dueTimer(&t); k != noTimer { // R5
			l.fire(ec, k)
			continue
		}
		if l.refill() { // R6
			continue
		}
		l.wait(ctx, &t) // R7
	}
}

// admit processes an outside event through the start-up gate (R4, I3). It
// reports whether the loop stops (ev was a Shutdown).
func (l *Loop) admit(ctx context.Context, ec evContexts, ev Event) (stop bool) {
	switch ev.(type) {
	case *Shutdown:
		l.shutdown(ctx, ev)
		return true
	case *barrier:
		if l.gateOpen {
			ev.Done(nil)
			return false
		}
		l.held = append(l.held, ev)
		l.mu.Lock()
		l.heldLen++
		l.mu.Unlock()
		return false
	case *DBResync:
	default:
		if !l.gateOpen {
			l.held = append(l.held, ev)
			l.mu.Lock()
			l.heldLen++
			l.mu.Unlock()
			return false
		}
	}
	l.process(ec, ev, false)
	if l.gateOpen && len(l.held) > 0 {
		l.batch.pushFront(l.held)
		l.held = nil
		l.mu.Lock()
		l.heldLen = 0
		l.mu.Unlock()
	}
	return false
}

// refill makes the outside queue the batch (R6); the batch is empty. It
// reports whether there was anything.
func (l *Loop) refill() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) == 0 {
		return false
	}
	l.queue = l.batch.swap(l.queue)
	return true
}

// shutdown processes a Shutdown event under Config.ShutdownTimeout (I6):
// its handlers and its commit get a context that ends ShutdownTimeout
// after it started and is not cancelled with ctx.
func (l *Loop) shutdown(ctx context.Context, ev Event) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.ShutdownTimeout)
	defer cancel()
	l.bounded = true
	l.process(evContexts{handlers: sctx, commit: sctx}, ev, false)
	l.bounded = false
}

// evContexts are the contexts an event is processed under.
type evContexts struct {
	// handlers is what handlers get through ContextOf; the Shutdown
	// event's deadline is checked on it.
	handlers context.Context
	// commit is what Southbound.Commit gets.
	commit context.Context
}

// handlerContext returns the context for the handlers of every event but
// Shutdown (I7): ctx's values, not cancelled when ctx ends but
// Config.ShutdownTimeout later. Handlers that honour it let Run return in
// bounded time after cancellation, while an event in progress is not torn
// by the cancellation itself. stop releases it; Run calls it before it
// returns.
func (l *Loop) handlerContext(ctx context.Context) (hctx context.Context, stop func()) {
	hctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var mu sync.Mutex
	var grace *time.Timer
	stopped := false
	stopAfter := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			grace = time.AfterFunc(l.cfg.ShutdownTimeout, func() { cancel(errGraceOver) })
		}
	})
	return hctx, func() {
		stopAfter()
		mu.Lock()
		stopped = true
		if grace != nil {
			grace.Stop()
		}
		mu.Unlock()
		cancel(nil)
	}
}

// errGraceOver is the cause (context.Cause) of the handlers' context when
// ShutdownTimeout passed after Run's context ended.
var errGraceOver = errors.New("controller: ShutdownTimeout passed since the Run context ended")

// result is what Run returns after the Shutdown event: a fatal error of
// that event, or res.
func (l *Loop) result(res error) error {
	if l.fatal != nil {
		return fmt.Errorf("controller: fatal error: %w", l.fatal)
	}
	return res
}

// stop refuses further pushes and completes everything still pending with
// ErrStopped (I4).
func (l *Loop) stop(result error) error {
	l.mu.Lock()
	l.stopped = true
	queued := l.queue
	l.queue = nil
	l.heldLen = 0
	l.mu.Unlock()
	failAll(l.followUps.take())
	failAll(l.batch.take())
	failAll(l.held)
	failAll(queued)
	l.held = nil
	close(l.waiters.stopped)
	if result != nil && !errors.Is(result, context.Canceled) {
		l.log.Info("event loop stopped", slog.Any("error", result))
	} else {
		l.log.Info("event loop stopped")
	}
	return result
}

func failAll(evs []Event) {
	for _, ev := range evs {
		if ev != nil {
			ev.Done(ErrStopped)
		}
	}
}

func (l *Loop) stopHealTimer() {
	if l.heal.timer != nil {
		l.heal.timer.Stop()
	}
}

// timerKind names the loop's timers.
type timerKind uint8

const (
	noTimer timerKind = iota
	startupTimer
	healTimer
	periodicTimer
)

// timers are the loop's timer channels (nil when off) and a timer that R7
// received but that was not acted on yet.
type timers struct {
	startup, periodic <-chan time.Time
	fired             timerKind
	stops             []func()
}

func (l *Loop) startTimers() timers {
	var t timers
	if l.cfg.StartupResyncDeadline > 0 {
		st := time.NewTimer(l.cfg.StartupResyncDeadline)
		t.startup = st.C
		t.stops = append(t.stops, func() { st.Stop() })
	}
	if l.cfg.PeriodicHealingInterval > 0 {
		pt := time.NewTicker(l.cfg.PeriodicHealingInterval)
		t.periodic = pt.C
		t.stops = append(t.stops, pt.Stop)
	}
	return t
}

func (t *timers) stop() {
	for _, stop := range t.stops {
		stop()
	}
}

// dueTimer returns the timer to act on now, if any (R5).
func (l *Loop) dueTimer(t *timers) timerKind {
	if k := t.fired; k != noTimer {
		t.fired = noTimer
		return k
	}
	select {
	case <-t.startup:
		return startupTimer
	case <-l.healC():
		return healTimer
	case <-t.periodic:
		return periodicTimer
	default:
		return noTimer
	}
}

// wait blocks until a push, a timer or cancellation (R7). A timer that
// fires is kept in t for R5, after R1–R4 were checked again.
func (l *Loop) wait(ctx context.Context, t *timers) {
	select {
	case <-ctx.Done():
	case <-l.wake:
	case <-t.startup:
		t.fired = startupTimer
	case <-l.healC():
		t.fired = healTimer
	case <-t.periodic:
		t.fired = periodicTimer
	}
}

// fire acts on a timer (R5).
func (l *Loop) fire(ec evContexts, k timerKind) {
	switch k {
	case startupTimer:
		if l.gateOpen {
			return
		}
		l.stats.deadlineHit.Store(true)
		close(l.waiters.startupLate)
		l.log.Warn("no start-up DBResync within the deadline; events wait for it",
			slog.Duration("deadline", l.cfg.StartupResyncDeadline))
	case healTimer:
		l.heal.pending = false
		err := l.heal.err
		l.heal.err = nil
		l.process(ec, &HealingResync{Type: AfterError, Error: err}, false)
	case periodicTimer:
		if l.gateOpen {
			l.process(ec, &HealingResync{Type: Periodic}, false)
		}
	}
}

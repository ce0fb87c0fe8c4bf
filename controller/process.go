package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// process runs one event to completion and calls its Done.
func (l *Loop) process(ctx context.Context, ev Event, followUp bool) {
	l.seq++
	rec := &l.rec
	*rec = Record{
		Seq: l.seq, Name: ev.GetName(), Method: ev.Method(), FollowUp: followUp,
		Handlers: rec.Handlers[:0], Start: time.Now(),
	}
	if l.history.Cap() > 0 {
		rec.Description = ev.String()
	}
	l.inHandler.Store(true)
	var err error
	switch ev.Method() {
	case FullResync, UpstreamResync:
		err = l.resync(ctx, ev)
	case DownstreamResync:
		l.stats.downstream.Add(1)
		err = l.commit(ctx, Commit{Kind: CommitReapply, Event: ev})
		if err != nil {
			l.scheduleHealing(err, false)
		}
	case Update:
		err = l.update(ctx, ev)
	default:
		err = fmt.Errorf("controller: event %q has unknown method %v", ev.GetName(), ev.Method())
	}
	l.inHandler.Store(false)
	l.cur = nil
	rec.End = rec.Start.Add(time.Since(rec.Start))
	rec.Err = err

	l.stats.processed.Add(1)
	if followUp {
		l.stats.followUps.Add(1)
	}
	if err != nil {
		l.stats.failed.Add(1)
		l.log.Warn("event processing failed", slog.Uint64("seq", rec.Seq),
			slog.String("event", rec.Name), slog.Any("error", err))
	} else if l.log.Enabled(ctx, slog.LevelDebug) {
		l.log.Debug("event processed", slog.Uint64("seq", rec.Seq), slog.String("event", ev.String()),
			slog.Duration("duration", rec.Duration()))
	}
	l.history.add(rec)
	ev.Done(err)
}

// outcome appends a handler outcome to the current record. since is the
// offset from the start of the event at which the handler was called; the
// returned offset is when it returned. Offsets use only the monotonic clock
// (one clock read per handler).
func (l *Loop) outcome(h EventHandler, change string, err error, since time.Duration) time.Duration {
	if l.history.Cap() == 0 {
		return 0
	}
	now := time.Since(l.rec.Start)
	l.rec.Handlers = append(l.rec.Handlers, HandlerOutcome{
		Handler: h.String(), Change: change, Err: err, Duration: now - since,
	})
	return now
}

// resync processes a FullResync or UpstreamResync event.
func (l *Loop) resync(ctx context.Context, ev Event) error {
	l.stats.resyncs.Add(1)
	l.resyncCount++
	l.rec.ResyncCount = l.resyncCount
	healing := false
	switch e := ev.(type) {
	case *DBResync:
		if e.KubeState != nil {
			l.kubeState = e.KubeState
		} else {
			l.kubeState = NewKubeStateData()
		}
		ext := e.ExternalConfig
		if ext == nil {
			ext = make(KeyValuePairs)
		}
		l.setSource(RemoteDBSource, ext)
		if !l.gateOpen {
			l.gateOpen = true
			l.stats.startupDone.Store(true)
		}
	case *ExternalConfigResync:
		ext := e.ExternalConfig
		if ext == nil {
			ext = make(KeyValuePairs)
		}
		l.setSource(e.Source, ext)
	case *HealingResync:
		healing = e.Type == AfterError
	}

	t := &l.txn
	t.reset(true)
	l.cur = t
	var errs []error
	var stop error // abort or fatal
	var start time.Duration
	for _, h := range l.handlers {
		if !h.HandlesEvent(ev) {
			continue
		}
		err := h.Resync(ev, l.kubeState, l.resyncCount, t)
		start = l.outcome(h, "", err, start)
		if err == nil {
			continue
		}
		err = fmt.Errorf("%s: resync: %w", h, err)
		if isFatal(err) || isAbort(err) {
			stop = err
			break
		}
		errs = append(errs, err)
	}
	if stop != nil {
		return l.stopEvent(stop, healing)
	}

	// The handlers' output becomes the internal configuration.
	l.internal, t.values = t.values, l.internal
	clear(t.values)
	l.cur = nil
	if err := l.commit(ctx, Commit{Kind: CommitResync, Event: ev, Values: l.merged()}); err != nil {
		if isFatal(err) {
			l.fatal = err
			return err
		}
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	if err != nil {
		l.scheduleHealing(err, healing)
	} else {
		l.healingSucceeded()
	}
	return err
}

// stopEvent handles an AbortEventError or FatalError returned by a handler.
func (l *Loop) stopEvent(err error, healing bool) error {
	if isFatal(err) {
		l.fatal = err
		return err
	}
	l.stats.aborts.Add(1)
	l.scheduleHealing(err, healing)
	return err
}

// update processes an Update event.
func (l *Loop) update(ctx context.Context, ev Event) error {
	ue, ok := ev.(UpdateEvent)
	if !ok {
		return fmt.Errorf("controller: event %q has method Update but does not implement UpdateEvent", ev.GetName())
	}
	tt, dir := ue.TransactionType(), ue.Direction()
	l.rec.TransactionType, l.rec.Direction = tt, dir

	if e, ok := ev.(*KubeStateChange); ok {
		kvs := l.kubeState[e.Resource]
		if e.NewValue == nil {
			delete(kvs, e.Key)
		} else {
			if kvs == nil {
				kvs = make(KeyValuePairs)
				l.kubeState[e.Resource] = kvs
			}
			kvs[e.Key] = e.NewValue
		}
	}

	t := &l.txn
	t.reset(false)
	l.cur = t
	l.ran = l.ran[:0]
	var errs []error
	var stop error // abort, fatal, or the first error of RevertOnFailure
	n := len(l.handlers)
	var start time.Duration
	for i := range n {
		idx := i
		if dir == Reverse {
			idx = n - 1 - i
		}
		h := l.handlers[idx]
		if !h.HandlesEvent(ev) {
			continue
		}
		change, err := h.Update(ev, t)
		start = l.outcome(h, change, err, start)
		if err == nil {
			l.ran = append(l.ran, idx)
			continue
		}
		err = fmt.Errorf("%s: %w", h, err)
		if isFatal(err) || isAbort(err) || tt == RevertOnFailure {
			stop = err
			break
		}
		errs = append(errs, err)
	}
	if stop != nil {
		if isFatal(stop) {
			l.fatal = stop
			return stop
		}
		if tt == RevertOnFailure {
			stop = errors.Join(stop, l.revert(ev))
		}
		if isAbort(stop) {
			return l.stopEvent(stop, false)
		}
		return stop
	}

	// Apply the handlers' changes to the internal configuration, remember
	// the previous values for a revert, and build the merged changes.
	clear(l.undo)
	clear(l.commitVals)
	for k, v := range t.values {
		if tt == RevertOnFailure {
			l.undo[k] = l.internal[k]
		}
		if v == nil {
			delete(l.internal, k)
		} else {
			l.internal[k] = v
		}
	}
	if e, ok := ev.(*ExternalConfigChange); ok {
		src := l.external[e.Source]
		if src == nil {
			src = make(KeyValuePairs)
			l.setSource(e.Source, src)
		}
		for k, v := range e.UpdatedKVs {
			if v == nil {
				delete(src, k)
			} else {
				src[k] = v
			}
			l.commitVals[k] = l.effective(k)
		}
	}
	for k := range t.values {
		l.commitVals[k] = l.effective(k)
	}
	l.cur = nil

	if len(l.commitVals) > 0 {
		err := l.commit(ctx, Commit{Kind: CommitUpdate, Event: ev, TransactionType: tt, Values: l.commitVals})
		if err != nil {
			if isFatal(err) {
				l.fatal = err
				return err
			}
			if tt == RevertOnFailure {
				for k, v := range l.undo {
					if v == nil {
						delete(l.internal, k)
					} else {
						l.internal[k] = v
					}
				}
				err = errors.Join(err, l.revert(ev))
			}
			// The data plane may hold part of the transaction: heal.
			l.scheduleHealing(err, false)
			return err
		}
	}
	err := errors.Join(errs...)
	if err != nil && tt == BestEffort {
		l.scheduleHealing(err, false)
	}
	return err
}

// revert calls Revert on the handlers that ran for ev, in reverse order.
func (l *Loop) revert(ev Event) error {
	l.stats.reverts.Add(1)
	var errs []error
	for i := len(l.ran) - 1; i >= 0; i-- {
		h := l.handlers[l.ran[i]]
		err := h.Revert(ev)
		for j := range l.rec.Handlers {
			if l.rec.Handlers[j].Handler == h.String() {
				l.rec.Handlers[j].Reverted = true
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: revert: %w", h, err))
		}
	}
	return errors.Join(errs...)
}

// commit hands c to the southbound and records the outcome.
func (l *Loop) commit(ctx context.Context, c Commit) error {
	if l.cfg.CommitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.cfg.CommitTimeout)
		defer cancel()
	}
	l.stats.commits.Add(1)
	l.commitBuf = c
	seq, err := l.sb.Commit(ctx, &l.commitBuf)
	l.commitBuf = Commit{}
	l.rec.Committed, l.rec.TxnSeq = true, seq
	if err != nil {
		l.stats.commitErrors.Add(1)
		err = fmt.Errorf("commit: %w", err)
		l.rec.CommitErr = err
	}
	return err
}

// scheduleHealing arranges a healing resync after err. failedHealing is set
// when err comes from a healing resync: the backoff grows and, after
// Config.MaxHealingAttempts failures in a row, the loop stops.
func (l *Loop) scheduleHealing(err error, failedHealing bool) {
	immediate := isAbort(err)
	if failedHealing {
		l.stats.healFailed.Add(1)
		l.healFailures++
		if l.cfg.MaxHealingAttempts > 0 && l.healFailures >= l.cfg.MaxHealingAttempts {
			l.fatal = fmt.Errorf("%w (%d attempts): %w", ErrHealingFailed, l.healFailures, err)
			return
		}
	}
	if l.healPending {
		return
	}
	delay := l.cfg.HealingDelay
	if l.healFailures > 0 {
		delay = l.healNextDelay
	}
	if immediate && l.healFailures == 0 {
		delay = 0
	}
	l.healNextDelay = min(max(delay, l.cfg.HealingDelay)*2, l.cfg.MaxHealingDelay)
	l.healPending = true
	l.healErr = err
	l.stats.healScheduled.Add(1)
	if l.healTimer == nil {
		l.healTimer = time.NewTimer(delay)
	} else {
		l.healTimer.Reset(delay)
	}
	l.log.Warn("healing resync scheduled", slog.Duration("delay", delay),
		slog.Int("failedAttempts", l.healFailures), slog.Any("error", err))
}

// healingSucceeded resets the backoff after a successful resync.
func (l *Loop) healingSucceeded() {
	if l.healFailures > 0 {
		l.log.Info("healing resync succeeded", slog.Int("failedAttempts", l.healFailures))
	}
	l.healFailures = 0
	l.healNextDelay = 0
}

// healC returns the channel of the pending healing timer, or nil.
func (l *Loop) healC() <-chan time.Time {
	if !l.healPending {
		return nil
	}
	return l.healTimer.C
}

// heal runs the pending healing resync.
func (l *Loop) heal(ctx context.Context) {
	l.healPending = false
	err := l.healErr
	l.healErr = nil
	l.process(ctx, &HealingResync{Type: AfterError, Error: err}, false)
}

func (l *Loop) stopTimers() {
	if l.healTimer != nil {
		l.healTimer.Stop()
	}
}

func isFatal(err error) bool {
	var f *FatalError
	return errors.As(err, &f)
}

func isAbort(err error) bool {
	var a *AbortEventError
	return errors.As(err, &a)
}

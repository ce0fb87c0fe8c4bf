package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// process runs one event to completion and calls its Done (I1).
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
	if len(l.evKeys) > 0 {
		clear(l.evKeys)
		l.evKeys = l.evKeys[:0]
	}
	l.evTransient = false
	l.inHandler.Store(true)
	var err error
	switch ev.Method() {
	case FullResync, UpstreamResync:
		err = l.resync(ctx, ev)
	case DownstreamResync:
		err = l.reapply(ctx, ev)
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
	l.typeStats.countEvent(rec.Name, err != nil, rec.Duration())
	if followUp {
		l.stats.followUps.Add(1)
	}
	if err != nil {
		l.stats.failed.Add(1)
		l.log.Warn("event processing failed", slog.Uint64("seq", rec.Seq),
			slog.String("event", rec.Name), slog.Bool("permanent", IsPermanent(err)), slog.Any("error", err))
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

// resync processes a FullResync or UpstreamResync event: the handlers
// rebuild their complete desired state, which is committed as a whole.
//
// Errors: an abort stops the event (no commit) and heals at once; other
// handler errors do not stop it. The event's error joins every handler
// error and the commit error. Unless every part of it is permanent, a
// healing resync is scheduled; a failed healing resync counts towards
// Config.MaxHealingAttempts. A resync without a transient error resets the
// healing backoff.
func (l *Loop) resync(ctx context.Context, ev Event) error {
	l.stats.resyncs.Add(1)
	l.resyncCount++
	l.rec.ResyncCount = l.resyncCount
	healing := l.applyResyncInput(ev)
	if _, ok := ev.(*DBResync); ok && !l.gateOpen {
		l.gateOpen = true
		// Done once processed (committed, or failed), not while the
		// handlers run: readiness checks read it.
		defer l.stats.startupDone.Store(true)
	}

	t := &l.txn
	t.reset(true)
	t.ctx = ctx
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
		l.handlerOutcome(h, true, err)
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
		l.settleKeys(ev, settleAdd)
		err := joinErrs(errs, stop)
		if isFatal(stop) {
			l.fatal = stop
			return err
		}
		l.stats.aborts.Add(1)
		l.scheduleHealing(err, healing)
		return err
	}

	// The handlers' output becomes the internal configuration.
	l.internal, t.values = t.values, l.internal
	clear(t.values)
	l.cur = nil
	commitErr := l.commit(ctx, Commit{Kind: CommitResync, Event: ev, Values: l.merged()})
	err := joinErrs(errs, commitErr)
	if isFatal(commitErr) {
		l.fatal = commitErr
		return err
	}
	l.settleKeys(ev, settleResync)
	if err != nil && !IsPermanent(err) {
		l.scheduleHealing(err, healing)
	} else {
		l.healingSucceeded()
	}
	return err
}

// reapply processes a DownstreamResync: no handler runs, the southbound
// re-applies the committed state. A transient error heals.
func (l *Loop) reapply(ctx context.Context, ev Event) error {
	l.stats.downstream.Add(1)
	err := l.commit(ctx, Commit{Kind: CommitReapply, Event: ev})
	switch {
	case isFatal(err):
		l.fatal = err
		return err
	case err != nil && !IsPermanent(err):
		l.scheduleHealing(err, false)
	}
	l.settleKeys(ev, settleAdd)
	return err
}

// update processes an Update event: the handlers change their desired
// state in the event's direction, and the changes are committed.
//
// Errors (see the package documentation for the table): the event's error
// joins every handler error and the commit error. Handler errors of a
// BestEffort event heal unless all are permanent; a commit error heals
// unless it is permanent, and always for RevertOnFailure (the loop reverts
// the handlers while the southbound may have applied the other keys).
func (l *Loop) update(ctx context.Context, ev Event) error {
	ue, ok := ev.(UpdateEvent)
	if !ok {
		return fmt.Errorf("controller: event %q has method Update but does not implement UpdateEvent", ev.GetName())
	}
	tt, dir := ue.TransactionType(), ue.Direction()
	l.rec.TransactionType, l.rec.Direction = tt, dir
	l.applyUpdateInput(ev)

	t := &l.txn
	t.reset(false)
	t.ctx = ctx
	l.cur = t
	l.ran = l.ran[:0]
	var errs []error
	var stop error // abort, fatal, the first error of RevertOnFailure, or the shutdown deadline
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
		if l.bounded && ctx.Err() != nil {
			stop = fmt.Errorf("controller: %s stopped before handler %s: ShutdownTimeout %v exceeded: %w",
				ev.GetName(), h, l.cfg.ShutdownTimeout, ctx.Err())
			break
		}
		change, err := h.Update(ev, t)
		start = l.outcome(h, change, err, start)
		if err == nil {
			l.ran = append(l.ran, idx)
			continue
		}
		l.handlerOutcome(h, false, err)
		err = fmt.Errorf("%s: %w", h, err)
		if isFatal(err) || isAbort(err) || tt == RevertOnFailure {
			stop = err
			break
		}
		errs = append(errs, err)
	}
	if stop == nil && l.bounded && ctx.Err() != nil && len(t.values) > 0 {
		stop = fmt.Errorf("controller: %s not committed: ShutdownTimeout %v exceeded: %w",
			ev.GetName(), l.cfg.ShutdownTimeout, ctx.Err())
	}
	if stop != nil {
		l.cur = nil
		return l.stopUpdate(ev, tt, errs, stop)
	}

	l.applyChanges(ev, tt)
	var commitErr error
	if len(l.commitVals) > 0 {
		commitErr = l.commit(ctx, Commit{Kind: CommitUpdate, Event: ev, TransactionType: tt, Values: l.commitVals})
		if isFatal(commitErr) {
			l.fatal = commitErr
			return joinErrs(errs, commitErr)
		}
		if commitErr != nil && tt == RevertOnFailure {
			l.undoChanges()
			commitErr = errors.Join(commitErr, l.revert(ev))
		}
	}
	l.settleKeys(ev, settleUpdate)
	err := joinErrs(errs, commitErr)
	switch {
	case err == nil:
	case commitErr != nil && (tt == RevertOnFailure || !IsPermanent(commitErr)):
		// The data plane may hold part of the transaction: heal.
		l.scheduleHealing(err, false)
	case tt == BestEffort && !IsPermanent(err):
		l.scheduleHealing(err, false)
	}
	return err
}

// stopUpdate ends an update event that a handler stopped (nothing is
// committed): a fatal error stops the loop; RevertOnFailure reverts the
// handlers that ran; an abort heals at once.
func (l *Loop) stopUpdate(ev Event, tt UpdateTransactionType, errs []error, stop error) error {
	if isFatal(stop) {
		l.fatal = stop
		return joinErrs(errs, stop)
	}
	if tt == RevertOnFailure {
		stop = errors.Join(stop, l.revert(ev))
	}
	l.settleKeys(ev, settleAdd)
	if isAbort(stop) {
		l.stats.aborts.Add(1)
		l.scheduleHealing(stop, false)
	}
	return joinErrs(errs, stop)
}

// applyChanges applies the handlers' transaction to the internal
// configuration, remembers the previous values for a revert, and builds
// the merged changes to commit: the keys the handlers touched and the keys
// of an ExternalConfigChange, each with its effective value.
func (l *Loop) applyChanges(ev Event, tt UpdateTransactionType) {
	t := &l.txn
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
		for k := range e.UpdatedKVs {
			l.commitVals[k] = l.effective(k)
		}
	}
	for k := range t.values {
		l.commitVals[k] = l.effective(k)
	}
	l.cur = nil
}

// undoChanges restores the internal configuration after a failed commit of
// a RevertOnFailure event.
func (l *Loop) undoChanges() {
	for k, v := range l.undo {
		if v == nil {
			delete(l.internal, k)
		} else {
			l.internal[k] = v
		}
	}
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
		if isFatal(err) {
			return err
		}
	}
	l.southboundOutcome(c.Kind, err)
	return err
}

// joinErrs joins errs and last (which may be nil) without allocating when
// there is nothing to join.
func joinErrs(errs []error, last error) error {
	switch {
	case len(errs) == 0:
		return last
	case last == nil:
		return errors.Join(errs...)
	}
	return errors.Join(append(errs, last)...)
}

// isFatal and isAbort allocate (errors.As needs a pointer): test err for
// nil first on hot paths.
func isFatal(err error) bool {
	if err == nil {
		return false
	}
	var f *FatalError
	return errors.As(err, &f)
}

func isAbort(err error) bool {
	if err == nil {
		return false
	}
	var a *AbortEventError
	return errors.As(err, &a)
}

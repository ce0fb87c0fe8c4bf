package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// process runs one event to completion and calls its Done (I1).
func (l *Loop) process(ec evContexts, ev Event, followUp bool) {
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
	l.inHandler.Store(true)
	err := l.handle(ec, ev)
	l.inHandler.Store(false)
	rec.End = rec.Start.Add(time.Since(rec.Start))
	rec.Err = err

	l.stats.processed.Add(1)
	l.typeStats.countEvent(rec.Name, err != nil, rec.Duration())
	if followUp {
		l.stats.followUps.Add(1)
	}
	if err != nil {
		l.stats.failed.Add(1)
		// A healing resync that fails again is part of a failure already
		// reported: Debug (CONTRIBUTING R10).
		level := slog.LevelWarn
		if _, healing := ev.(*HealingResync); healing && l.heal.failures > 0 {
			level = slog.LevelDebug
		}
		l.log.LogAttrs(ec.commit, level, "event processing failed", slog.Uint64("seq", rec.Seq),
			slog.String("event", rec.Name), slog.Bool("permanent", IsPermanent(err)), slog.Any("error", err))
	} else if l.log.Enabled(ec.commit, slog.LevelDebug) {
		l.log.Debug("event processed", slog.Uint64("seq", rec.Seq), slog.String("event", ev.String()),
			slog.Duration("duration", rec.Duration()))
	}
	l.history.add(rec)
	ev.Done(err)
}

// recordHandler appends a handler outcome to the current record. since is
// the offset from the start of the event at which the handler was called;
// the returned offset is when it returned. Offsets use only the monotonic
// clock (one clock read per handler).
func (l *Loop) recordHandler(h EventHandler, change string, err error, since time.Duration) time.Duration {
	if l.history.Cap() == 0 {
		return 0
	}
	now := time.Since(l.rec.Start)
	l.rec.Handlers = append(l.rec.Handlers, HandlerOutcome{
		Handler: h.String(), Change: change, Err: err, Duration: now - since,
	})
	return now
}

// handle processes ev: it gathers the facts of the event (its kind, the
// handlers' errors, the commit's error, the shutdown deadline), asks
// decide what they mean, and carries that out. It returns the event's
// error: every handler error and the commit's (or the error that stopped
// the event), joined, with the errors of Revert calls.
func (l *Loop) handle(ec evContexts, ev Event) (err error) {
	f, err := l.begin(ev)
	if err != nil {
		return err
	}
	if _, ok := ev.(*DBResync); ok && !l.gateOpen {
		l.gateOpen = true
		// Done once processed (committed, or failed), not while the
		// handlers run: readiness checks read it.
		defer l.startupDone(&err)
	}

	var errs []error // handler errors that did not stop the event
	var last error   // the error that stopped the event, or the commit's
	if f.kind != kindReapply {
		t := &l.txn
		t.reset(f.kind != kindUpdate)
		t.ctx = ec.handlers
		l.cur = t // GetConfig sees the transaction while, and only while, the handlers build it
		errs, last = l.callHandlers(ec.handlers, ev, &f)
		l.cur = nil
	}
	o := decide(f)
	if o.commit {
		last = l.commitEvent(ec.commit, ev, f)
		if last != nil { // else the facts, and so the outcome, are unchanged
			f.commit = classify(last)
			o = decide(f)
		}
	}

	if o.fatal {
		l.fatal = last
		return joinErrs(errs, last)
	}
	if o.undo {
		l.undoChanges()
	}
	if o.revert {
		if rerr := l.revert(ev); rerr != nil {
			last = errors.Join(last, rerr)
		}
	}
	err = joinErrs(errs, last)
	l.settleKeys(ev, o.keys)
	if o.abort {
		l.stats.aborts.Add(1)
	}
	if o.heal != healNone {
		l.scheduleHealing(err, o.heal == healNow, o.healFailed)
	}
	if o.resetBackoff {
		l.healingSucceeded()
	}
	return err
}

// startupDone records that the start-up DBResync was processed, with its
// error (for WaitStartupResync), and releases the waiters.
func (l *Loop) startupDone(err *error) {
	l.waiters.startupErr = *err
	l.stats.startupDone.Store(true)
	close(l.waiters.ready)
}

// begin returns the facts known before any handler runs, records the
// event's kind, and makes the input the event carries part of the loop's
// state (see external.go).
func (l *Loop) begin(ev Event) (facts, error) {
	switch ev.Method() {
	case FullResync, UpstreamResync:
		l.stats.resyncs.Add(1)
		l.resyncCount++
		l.rec.ResyncCount = l.resyncCount
		if l.applyResyncInput(ev) {
			return facts{kind: kindHealing}, nil
		}
		return facts{kind: kindResync}, nil
	case DownstreamResync:
		l.stats.downstream.Add(1)
		return facts{kind: kindReapply}, nil
	case Update:
		ue, ok := ev.(UpdateEvent)
		if !ok {
			return facts{}, fmt.Errorf("controller: event %q has method Update but does not implement UpdateEvent", ev.GetName())
		}
		tt := ue.TransactionType()
		l.rec.TransactionType, l.rec.Direction = tt, ue.Direction()
		l.applyUpdateInput(ev)
		return facts{kind: kindUpdate, tt: tt}, nil
	}
	return facts{}, fmt.Errorf("controller: event %q has unknown method %v", ev.GetName(), ev.Method())
}

// callHandlers calls the interested handlers' Resync (resyncs) or Update
// (updates, in the event's direction) and adds what they return to f. It
// stops as soon as decide rules out the commit, and returns the errors
// that did not stop the event and the one that did (nil if none). The
// handlers whose Update succeeded are recorded in l.ran, for a revert.
func (l *Loop) callHandlers(ctx context.Context, ev Event, f *facts) (errs []error, stop error) {
	t := &l.txn
	resync := f.kind != kindUpdate
	reverse := !resync && l.rec.Direction == Reverse
	l.ran = l.ran[:0]
	n := len(l.handlers)
	var start time.Duration
	for i := range n {
		idx := i
		if reverse {
			idx = n - 1 - i
		}
		h := l.handlers[idx]
		if !h.HandlesEvent(ev) {
			continue
		}
		if l.bounded && ctx.Err() != nil {
			f.deadline = true
			return errs, fmt.Errorf("controller: %s stopped before handler %s: ShutdownTimeout %v exceeded: %w",
				ev.GetName(), h, l.cfg.ShutdownTimeout, ctx.Err())
		}
		recIdx := len(l.rec.Handlers) // where recordHandler records the call (history on)
		var change string
		var err error
		if resync {
			err = h.Resync(ev, l.kubeState, l.resyncCount, t)
		} else {
			change, err = h.Update(ev, t)
		}
		start = l.recordHandler(h, change, err, start)
		if resync || err != nil {
			l.handlerOutcome(h, resync, err)
		}
		if err == nil {
			if !resync {
				if l.history.Cap() == 0 {
					recIdx = -1
				}
				l.ran = append(l.ran, ranHandler{handler: idx, rec: recIdx})
			}
			continue
		}
		if resync {
			err = fmt.Errorf("%s: resync: %w", h, err)
		} else {
			err = fmt.Errorf("%s: %w", h, err)
		}
		f.handlers = max(f.handlers, classify(err))
		if !decide(*f).commit {
			return errs, err
		}
		errs = append(errs, err)
	}
	if !resync && l.bounded && ctx.Err() != nil && len(t.values) > 0 {
		f.deadline = true
		return errs, fmt.Errorf("controller: %s not committed: ShutdownTimeout %v exceeded: %w",
			ev.GetName(), l.cfg.ShutdownTimeout, ctx.Err())
	}
	return errs, nil
}

// commitEvent makes the handlers' transaction the loop's record of their
// desired state and commits it: a resync's whole, an update's changes (if
// any), nothing for a reapply (the southbound re-applies what it has).
func (l *Loop) commitEvent(ctx context.Context, ev Event, f facts) error {
	switch f.kind {
	case kindReapply:
		return l.commit(ctx, Commit{Kind: CommitReapply, Event: ev})
	case kindUpdate:
		l.applyChanges(ev, f.tt)
		if len(l.commitVals) == 0 {
			return nil
		}
		return l.commit(ctx, Commit{Kind: CommitUpdate, Event: ev, TransactionType: f.tt, Values: l.commitVals})
	}
	t := &l.txn
	l.internal, t.values = t.values, l.internal
	clear(t.values)
	return l.commit(ctx, Commit{Kind: CommitResync, Event: ev, Values: l.merged()})
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

// ranHandler is a handler whose Update succeeded for the current event:
// its index in l.handlers and the index of its outcome in l.rec.Handlers
// (-1 with history off).
type ranHandler struct{ handler, rec int }

// revert calls Revert on the handlers that ran for ev, in reverse order,
// and marks their outcomes in the record as reverted.
func (l *Loop) revert(ev Event) error {
	l.stats.reverts.Add(1)
	var errs []error
	for i := len(l.ran) - 1; i >= 0; i-- {
		r := l.ran[i]
		h := l.handlers[r.handler]
		err := h.Revert(ev)
		if r.rec >= 0 {
			l.rec.Handlers[r.rec].Reverted = true
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

package controller

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// health is what the loop knows about errors that a resync cannot heal (see
// [IsPermanent]): the keys rejected for good, and the outstanding permanent
// errors that are not about a key, per origin.
//
// The Run goroutine is the only writer: it reads the fields without the
// lock and writes them under mu; other goroutines read them under mu.
type health struct {
	mu       sync.Mutex
	rejected map[string]error // key -> why it was rejected
	// southbound is the southbound's last permanent error that is not a
	// KeyError; nil once a resync or reapply commit came back without one.
	southbound error
	// handlers maps a handler's name to its last permanent error that is
	// not a KeyError; removed once its Resync came back without one.
	handlers map[string]error
	// healing is nil, or ErrHealing wrapping the last error of the healing
	// resyncs failing in a row (see Loop.scheduleHealing).
	healing error
}

// setHealing records the state of failing healing resyncs: failures in
// a row since since, the last with err; failures 0 clears it.
func (h *health) setHealing(failures int, since time.Time, err error) {
	var rep error
	if failures > 0 {
		rep = fmt.Errorf("%w: %d in a row since %s: %w", ErrHealing, failures, since.UTC().Format(time.TimeOnly), err)
	}
	h.mu.Lock()
	h.healing = rep
	h.mu.Unlock()
}

// healingErr returns what setHealing recorded.
func (h *health) healingErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.healing
}

// RejectedKeys returns a copy of the keys currently rejected for good, each
// with the reason: the [KeyError]s that the southbound (for keys of the
// desired state) or a handler (for keys of its input, such as the key of a
// KubeStateChange) returned. A key stays rejected until an update event that
// carries it (in its commit, or as the key of a KubeStateChange) is not
// rejected for it again, or a resync that ends with permanent errors only
// does not reject it. It is safe for concurrent use.
func (l *Loop) RejectedKeys() map[string]error {
	h := &l.health
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.rejected)
}

// degraded returns nil, or an error wrapping ErrDegraded that describes
// what is outstanding.
func (h *health) degraded() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.rejected) == 0 && h.southbound == nil && len(h.handlers) == 0 {
		return nil
	}
	var parts []error
	if h.southbound != nil {
		parts = append(parts, fmt.Errorf("southbound: %w", h.southbound))
	}
	for _, name := range slices.Sorted(maps.Keys(h.handlers)) {
		parts = append(parts, fmt.Errorf("handler %s: %w", name, h.handlers[name]))
	}
	if n := len(h.rejected); n > 0 {
		first := ""
		for k := range h.rejected {
			if first == "" || k < first {
				first = k
			}
		}
		parts = append(parts, fmt.Errorf("%d keys rejected, the first %w", n, &KeyError{Key: first, Err: h.rejected[first]}))
	}
	return fmt.Errorf("%w: %w", ErrDegraded, errors.Join(parts...))
}

func (h *health) numRejected() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.rejected)
}

// permanentParts splits err (walking errors.Join and wrapping) into its
// KeyErrors, its other permanent errors, and whether any part is transient
// (neither). A PermanentError or KeyError ends the walk of its branch.
func permanentParts(err error) (keys []*KeyError, others []error, transient bool) {
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *KeyError:
			keys = append(keys, e)
		case *PermanentError:
			others = append(others, e)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			if u := e.Unwrap(); u != nil {
				walk(u)
			} else {
				transient = true
			}
		default:
			transient = true
		}
	}
	walk(err)
	return keys, others, transient
}

// noteErr files the permanent parts of err (a handler's or the
// southbound's) with the current event: its KeyErrors are collected for
// settleKeys, and the rest is returned.
func (l *Loop) noteErr(err error) (others []error, transient bool) {
	keys, others, transient := permanentParts(err)
	if n := len(keys) + len(others); n > 0 {
		l.stats.permanent.Add(uint64(n))
	}
	l.evKeys = append(l.evKeys, keys...)
	return others, transient
}

// handlerOutcome records what a handler's Resync (resync) or Update
// returned: a permanent error other than a KeyError becomes the handler's
// outstanding error; a Resync without one (and without a transient error
// that might hide one) clears it.
func (l *Loop) handlerOutcome(h EventHandler, resync bool, err error) {
	if err != nil {
		l.typeStats.countHandlerError(h.String())
	}
	if err == nil {
		if resync && len(l.health.handlers) > 0 {
			l.setHandlerErr(h.String(), nil)
		}
		return
	}
	if isFatal(err) || isAbort(err) {
		return // the event stops; nothing to conclude
	}
	others, transient := l.noteErr(err)
	switch {
	case len(others) > 0:
		l.setHandlerErr(h.String(), errors.Join(others...))
	case resync && !transient && len(l.health.handlers) > 0:
		l.setHandlerErr(h.String(), nil)
	}
}

func (l *Loop) setHandlerErr(name string, err error) {
	h := &l.health
	if err == nil && h.handlers[name] == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		delete(h.handlers, name)
		return
	}
	if h.handlers == nil {
		h.handlers = make(map[string]error)
	}
	h.handlers[name] = err
}

// southboundOutcome records what a commit of kind returned (err is not
// fatal): a permanent error other than a KeyError becomes the southbound's
// outstanding error; a resync or reapply commit without one (and without a
// transient error that might hide one) clears it. An update commit carries
// only some keys, so its success proves nothing.
func (l *Loop) southboundOutcome(kind CommitKind, err error) {
	var others []error
	transient := false
	if err != nil {
		others, transient = l.noteErr(err)
	}
	var set error
	switch {
	case len(others) > 0:
		set = errors.Join(others...)
	case kind == CommitUpdate || transient || l.health.southbound == nil:
		return
	}
	h := &l.health
	h.mu.Lock()
	h.southbound = set
	h.mu.Unlock()
}

// settleMode tells settleKeys what an event's KeyErrors mean for the keys
// rejected before it (decided by decide).
type settleMode uint8

const (
	settleNone   settleMode = iota // leave the rejected keys alone (the loop stops)
	settleAdd                      // add the event's rejected keys
	settleUpdate                   // the keys the update carried are rejected only if rejected again
	settleResync                   // the resync's rejected keys replace all
)

// settleKeys updates the rejected keys at the end of an event from the
// KeyErrors it collected. Its cost is proportional to the keys the event
// carried, and nothing while no key is rejected.
func (l *Loop) settleKeys(ev Event, mode settleMode) {
	h := &l.health
	if mode == settleNone || len(l.evKeys) == 0 && (mode == settleAdd || len(h.rejected) == 0) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch mode {
	case settleResync:
		clear(h.rejected)
	case settleUpdate:
		for k := range l.commitVals {
			delete(h.rejected, k)
		}
		if e, ok := ev.(*KubeStateChange); ok {
			delete(h.rejected, e.Key)
		}
	}
	for _, ke := range l.evKeys {
		h.rejected[ke.Key] = ke.Err
	}
}

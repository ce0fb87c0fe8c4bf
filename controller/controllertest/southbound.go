package controllertest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/vswitchkit/vswitchkit/controller"
	"google.golang.org/protobuf/proto"
)

// CommitRecord is a copy of one commit received by [Southbound].
type CommitRecord struct {
	Seq             uint64
	Kind            controller.CommitKind
	EventName       string
	TransactionType controller.UpdateTransactionType
	Values          controller.KeyValuePairs // a copy
	Err             error                    // what Commit returned
	// CtxErr is ctx.Err() of the context Commit was called with, at the
	// time of the call (nil for a live context).
	CtxErr error
	// HasDeadline tells whether that context carried a deadline; Deadline
	// is the deadline.
	HasDeadline bool
	Deadline    time.Time
}

// Southbound is an in-memory [controller.Southbound]: it records every
// commit and maintains the state that results from them (updates applied,
// resyncs replacing everything). The zero value is ready to use.
//
// Two fault injections are available, both called with the Southbound's
// lock held (they must not call its methods):
//
//   - Fail fails a whole commit: Commit returns its error and the state is
//     left unchanged, as a data plane that is unreachable;
//   - RejectKey rejects single keys, as a data plane that refuses an
//     invalid value: the other keys of the commit are applied and Commit
//     returns one [controller.KeyError] per rejected key, joined with
//     errors.Join in key order. A rejected key keeps the value it had before
//     the commit (none if it had none).
type Southbound struct {
	// Fail, when set, is consulted before each commit; a non-nil result is
	// returned from Commit and the state is left unchanged. n counts commits
	// from 1, including failed ones.
	Fail func(n int, c *controller.Commit) error

	// RejectKey, when set, is consulted for every key of a CommitUpdate or
	// CommitResync (value nil for a delete) of a commit that Fail let
	// through. A non-nil result rejects the key: it is not applied and
	// Commit returns &controller.KeyError{Key: key, Err: result} for it.
	// A result wrapped in controller.NewFatalError is returned as it is and
	// nothing of the commit is applied.
	RejectKey func(key string, value proto.Message) error

	// NoRecord disables recording of commits (the state is still kept);
	// useful in benchmarks.
	NoRecord bool

	mu      sync.Mutex
	n       int
	seq     uint64
	commits []CommitRecord
	state   controller.KeyValuePairs
	reapply int
}

var _ controller.Southbound = (*Southbound)(nil)

// Commit records c and applies it to the state.
func (s *Southbound) Commit(ctx context.Context, c *controller.Commit) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	var err error
	if s.Fail != nil {
		err = s.Fail(s.n, c)
	}
	var seq uint64
	if err == nil {
		s.seq++
		seq = s.seq
		err = s.apply(c)
	}
	if !s.NoRecord {
		deadline, hasDeadline := ctx.Deadline()
		s.commits = append(s.commits, CommitRecord{
			Seq: seq, Kind: c.Kind, EventName: c.Event.GetName(),
			TransactionType: c.TransactionType, Values: maps.Clone(c.Values), Err: err,
			CtxErr: ctx.Err(), HasDeadline: hasDeadline, Deadline: deadline,
		})
	}
	return seq, err
}

// apply applies c to the state, except the keys that RejectKey rejects, and
// returns their errors.
func (s *Southbound) apply(c *controller.Commit) error {
	if s.state == nil {
		s.state = make(controller.KeyValuePairs)
	}
	var rejected map[string]error
	if s.RejectKey != nil && c.Kind != controller.CommitReapply {
		for k, v := range c.Values {
			if err := s.RejectKey(k, v); err != nil {
				var fatal *controller.FatalError
				if errors.As(err, &fatal) {
					return err // the data plane is gone: nothing applied
				}
				if rejected == nil {
					rejected = make(map[string]error)
				}
				rejected[k] = err
			}
		}
	}
	switch c.Kind {
	case controller.CommitUpdate:
		for k, v := range c.Values {
			switch {
			case rejected[k] != nil:
			case v == nil:
				delete(s.state, k)
			default:
				s.state[k] = v
			}
		}
	case controller.CommitResync:
		old := s.state
		s.state = make(controller.KeyValuePairs, len(c.Values))
		for k, v := range c.Values {
			if rejected[k] == nil {
				s.state[k] = v
			} else if prev, ok := old[k]; ok {
				s.state[k] = prev
			}
		}
	case controller.CommitReapply:
		s.reapply++
	}
	if len(rejected) == 0 {
		return nil
	}
	errs := make([]error, 0, len(rejected))
	for _, k := range slices.Sorted(maps.Keys(rejected)) {
		errs = append(errs, &controller.KeyError{Key: k, Err: rejected[k]})
	}
	return errors.Join(errs...)
}

// Commits returns copies of the recorded commits, in order.
func (s *Southbound) Commits() []CommitRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]CommitRecord(nil), s.commits...)
}

// State returns a copy of the state resulting from the commits (keys that
// Fail or RejectKey refused are not in it).
func (s *Southbound) State() controller.KeyValuePairs {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := maps.Clone(s.state)
	if out == nil {
		out = make(controller.KeyValuePairs)
	}
	return out
}

// Reapplies returns the number of successful CommitReapply commits.
func (s *Southbound) Reapplies() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reapply
}

// Reset forgets the recorded commits (the state is kept).
func (s *Southbound) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits = nil
}

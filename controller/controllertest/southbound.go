package controllertest

import (
	"context"
	"maps"
	"sync"

	"github.com/vswitchkit/vswitchkit/controller"
)

// CommitRecord is a copy of one commit received by [Southbound].
type CommitRecord struct {
	Seq             uint64
	Kind            controller.CommitKind
	EventName       string
	TransactionType controller.UpdateTransactionType
	Values          controller.KeyValuePairs // a copy
	Err             error                    // what Commit returned
}

// Southbound is an in-memory [controller.Southbound]: it records every
// commit and maintains the state that results from them (updates applied,
// resyncs replacing everything). The zero value is ready to use.
type Southbound struct {
	// Fail, when set, is consulted before each commit; a non-nil result is
	// returned from Commit and the state is left unchanged. n counts commits
	// from 1, including failed ones.
	Fail func(n int, c *controller.Commit) error

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
func (s *Southbound) Commit(_ context.Context, c *controller.Commit) (uint64, error) {
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
		s.apply(c)
	}
	if !s.NoRecord {
		s.commits = append(s.commits, CommitRecord{
			Seq: seq, Kind: c.Kind, EventName: c.Event.GetName(),
			TransactionType: c.TransactionType, Values: maps.Clone(c.Values), Err: err,
		})
	}
	return seq, err
}

func (s *Southbound) apply(c *controller.Commit) {
	if s.state == nil {
		s.state = make(controller.KeyValuePairs)
	}
	switch c.Kind {
	case controller.CommitUpdate:
		for k, v := range c.Values {
			if v == nil {
				delete(s.state, k)
			} else {
				s.state[k] = v
			}
		}
	case controller.CommitResync:
		clear(s.state)
		for k, v := range c.Values {
			s.state[k] = v
		}
	case controller.CommitReapply:
		s.reapply++
	}
}

// Commits returns copies of the recorded commits, in order.
func (s *Southbound) Commits() []CommitRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]CommitRecord(nil), s.commits...)
}

// State returns a copy of the state resulting from the successful commits.
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

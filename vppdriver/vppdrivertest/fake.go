// Package vppdrivertest provides test doubles for code that commits VPP
// configuration to a vppdriver: [FakeDriver] is a controller.Southbound
// that validates values like the real driver and records the resulting
// desired state, with per-commit fault injection.
//
// For tests that need VPP semantics (dependencies, retvals, restarts) use
// the real vppdriver.Driver against vppsim instead.
//
// # Limits
//
// FakeDriver does not program anything, has no dependency ordering or
// statuses, and treats CommitReapply as a no-op that is only counted.
//
// # Concurrency
//
// FakeDriver is safe for concurrent use.
//
// # Lifecycle
//
// Nothing to start or stop.
package vppdrivertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver/model"
)

// ErrInvalid is returned (wrapped) for a commit with an invalid key or
// value; the state is not changed.
var ErrInvalid = errors.New("vppdrivertest: invalid value")

// FakeDriver records the VPP configuration committed to it. The zero value
// is ready to use. It is safe for concurrent use.
type FakeDriver struct {
	// CommitHook, if set, is called before each commit is applied with the
	// commit's 1-based sequence number; a non-nil error fails the commit
	// (the state is not changed), e.g. to fail the 3rd commit.
	CommitHook func(seq uint64, c *controller.Commit) error

	mu        sync.Mutex // guards the fields below
	seq       uint64
	state     map[string]proto.Message
	reapplies int
}

var _ controller.Southbound = (*FakeDriver)(nil)

// Commit validates every value with vppdriver's model rules and applies
// the commit to the recorded state.
func (f *FakeDriver) Commit(_ context.Context, c *controller.Commit) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	seq := f.seq
	if c == nil {
		return seq, fmt.Errorf("%w: nil commit", ErrInvalid)
	}
	if f.CommitHook != nil {
		if err := f.CommitHook(seq, c); err != nil {
			return seq, err
		}
	}
	var errs []error
	for k, v := range c.Values {
		if v == nil {
			continue
		}
		if err := model.CheckKey(k, v); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return seq, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	if f.state == nil {
		f.state = map[string]proto.Message{}
	}
	switch c.Kind {
	case controller.CommitUpdate:
		for k, v := range c.Values {
			if v == nil {
				delete(f.state, k)
			} else {
				f.state[k] = v
			}
		}
	case controller.CommitResync:
		f.state = map[string]proto.Message{}
		for k, v := range c.Values {
			if v != nil {
				f.state[k] = v
			}
		}
	case controller.CommitReapply:
		f.reapplies++
	default:
		return seq, fmt.Errorf("%w: unknown commit kind %v", ErrInvalid, c.Kind)
	}
	return seq, nil
}

// State returns a copy of the recorded configuration (key -> value; the
// values are shared and must not be modified).
func (f *FakeDriver) State() map[string]proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.state)
}

// Get returns the recorded value of key, or nil.
func (f *FakeDriver) Get(key string) proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state[key]
}

// Commits returns the number of commits received.
func (f *FakeDriver) Commits() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

// Reapplies returns the number of CommitReapply commits received.
func (f *FakeDriver) Reapplies() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reapplies
}

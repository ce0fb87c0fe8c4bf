// Package vppdrivertest provides test doubles and test helpers for code
// that commits VPP configuration to a vppdriver:
//
//   - [FakeDriver] is a controller.Southbound (and controller.KeyOwner)
//     that validates values like the real driver, with the same contract
//     (it owns the keys under "vpp/" and ignores the others; an invalid
//     value is rejected for its key alone with a *controller.KeyError), and
//     records the resulting desired state, with per-commit fault injection;
//   - [StartRealVPP] and [RealVPPSocket] give a test a real VPP;
//   - [ReadNAT44] reads VPP's NAT44-ED tables (the stand-in's or a real
//     VPP's) in a form that compares across restarts;
//   - [RequestRecorder] wraps GoVPP adapters and records the requests a
//     driver sends (to the stand-in or a real VPP), in order and counted
//     by message; [Writes] and [ReadOnlyMessage] tell the ones that change
//     VPP;
//   - [NewNetns], [Veth] and [Netns.Ping] make network namespaces and veth
//     pairs for packets through a real VPP, and send ICMP echo requests
//     from a namespace (root only; they skip the test otherwise).
//
// For tests that need VPP semantics (dependencies, retvals, restarts) use
// the real vppdriver.Driver against vppsim instead.
//
// # A real VPP in tests
//
// The environment decides whether tests that need a real VPP run:
//
//   - VPP_SH names a vpp.sh-compatible control script ("start DIR" prints
//     VPP_API_SOCKET=<socket>; "stop DIR", "restart DIR", "cli DIR ...").
//     [StartRealVPP] starts one VPP per test in its own t.TempDir() and
//     stops it in t.Cleanup; VPP needs root.
//   - VPP_API_SOCKET names the binary-API socket of a VPP that is already
//     running; [RealVPPSocket] returns it for tests that neither stop nor
//     restart VPP (otherwise it starts one with VPP_SH).
//
// Without them (or without root) such tests skip with a message saying
// what to set. Nothing is hard-coded: in this repository's environment,
// e.g. VPP_SH=../shared/vpp/vpp.sh go test ./vppdriver/...
//
// # Limits
//
// FakeDriver does not program anything, has no dependency ordering or
// statuses, and treats CommitReapply as a no-op that is only counted.
//
// # Concurrency
//
// FakeDriver and RequestRecorder are safe for concurrent use. A RealVPP and a Netns are owned by the test that made them.
//
// # Lifecycle
//
// FakeDriver: nothing to start or stop. A RealVPP is stopped, namespaces
// and veth pairs are deleted, by t.Cleanup.
package vppdrivertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// ErrInvalid is wrapped by the rejection of an invalid value (in the
// *controller.KeyError of its key).
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
	rejected  map[string]error
	reapplies int
}

var (
	_ controller.Southbound = (*FakeDriver)(nil)
	_ controller.KeyOwner   = (*FakeDriver)(nil)
)

// OwnsKey reports whether key is under "vpp/" (vppmodel.KeyRoot), like the
// real driver.
func (f *FakeDriver) OwnsKey(key string) bool { return strings.HasPrefix(key, vppmodel.KeyRoot) }

// Commit applies the commit to the recorded state with the real driver's
// contract: keys it does not own are ignored; a value that fails
// vppdriver's model validation is rejected for its key alone (the key
// leaves the state, see [FakeDriver.Rejected], and the commit returns a
// *controller.KeyError wrapping ErrInvalid for it, joined and sorted by
// key); every other key is applied.
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
	if f.state == nil {
		f.state, f.rejected = map[string]proto.Message{}, map[string]error{}
	}
	var keyErrs []*controller.KeyError
	put := func(k string, v proto.Message) {
		delete(f.rejected, k)
		if v == nil {
			delete(f.state, k)
			return
		}
		if err := vppmodel.CheckKey(k, v); err != nil {
			err = fmt.Errorf("%w: %w", ErrInvalid, err)
			keyErrs = append(keyErrs, &controller.KeyError{Key: k, Err: err})
			f.rejected[k] = err
			delete(f.state, k)
			return
		}
		f.state[k] = v
	}
	switch c.Kind {
	case controller.CommitUpdate:
		for k, v := range c.Values {
			if f.OwnsKey(k) {
				put(k, v)
			}
		}
	case controller.CommitResync:
		clear(f.state)
		clear(f.rejected)
		for k, v := range c.Values {
			if v != nil && f.OwnsKey(k) {
				put(k, v)
			}
		}
	case controller.CommitReapply:
		f.reapplies++
	default:
		return seq, fmt.Errorf("%w: unknown commit kind %v", ErrInvalid, c.Kind)
	}
	slices.SortFunc(keyErrs, func(a, b *controller.KeyError) int { return strings.Compare(a.Key, b.Key) })
	errs := make([]error, len(keyErrs))
	for i, ke := range keyErrs {
		errs[i] = ke
	}
	return seq, errors.Join(errs...)
}

// Rejected returns the keys whose last committed value was rejected as
// invalid, with the reason (a copy).
func (f *FakeDriver) Rejected() map[string]error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.rejected)
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

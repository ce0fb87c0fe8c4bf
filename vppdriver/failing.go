package vppdriver

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
)

// kindNames name the kinds of keys for Stats.FailingByKind: the segment of
// the key after "vpp/" (one name for the NAT44 kinds, one for the ACL
// kinds, one for the cnat kinds).
var kindNames = [numKinds]string{
	kindVrf:       "vrf",
	kindNatGlobal: "nat44",
	kindInterface: "interface",
	kindNeighbor:  "neighbor",
	kindRoute:     "route",
	kindNat:       "nat44",
	kindACL:       "acl",
	kindACLIface:  "acl",
	kindCnatSnat:  "cnat",
	kindCnat:      "cnat",
	kindCnatIface: "cnat",
}

// failingEvent is a key that began, or ceased, to keep failing: logged at
// Warn once each (CONTRIBUTING R10), after the statuses are published.
type failingEvent struct {
	key     string
	start   bool
	s       KeyStatus // the key's new status
	deleted bool      // ceased: the key is no longer desired
}

func (e failingEvent) log(l *slog.Logger) {
	kind := slog.String("kind", kindNames[kindOf(e.key)])
	if e.start {
		l.Warn("key failing", slog.String("key", e.key), kind, slog.Int("attempts", e.s.Attempts),
			slog.Any("error", e.s.Err), slog.Time("nextRetry", e.s.NextRetry))
		return
	}
	state := e.s.State.String()
	switch {
	case e.deleted:
		state = "deleted"
	case isInvalid(e.s.Err):
		state = "invalid"
	}
	l.Warn("key no longer failing", slog.String("key", e.key), kind, slog.String("state", state))
}

// failingChangeLocked keeps the set of failing keys (d.failing) as the
// status of key goes from old to s (desired: the key has a status), and
// returns the event to log, if any. Keys failing because VPP lacks
// messages are counted but not logged one by one: the incompatibility is
// logged once per connection. Guarded by stMu.
func (d *Driver) failingChangeLocked(key string, old, s KeyStatus, desired bool) (failingEvent, bool) {
	announced, was := d.failing[key]
	is := desired && !s.FailingSince.IsZero()
	switch {
	case is && !was:
		announced = !isIncompatible(s.Err)
		d.failing[key] = announced
		return failingEvent{key: key, start: true, s: s}, announced
	case was && !is:
		delete(d.failing, key)
		return failingEvent{key: key, s: s, deleted: !desired}, announced
	}
	return failingEvent{}, false
}

// Failing returns the statuses of the keys that keep failing (see
// [KeyStatus].FailingSince), sorted by key: their last error, the
// attempts and the next retry. Empty when none is.
func (d *Driver) Failing() []KeyStatus {
	d.stMu.Lock()
	defer d.stMu.Unlock()
	out := make([]KeyStatus, 0, len(d.failing))
	for _, k := range slices.Sorted(maps.Keys(d.failing)) {
		out = append(out, d.offlineLocked(d.statuses[k]))
	}
	return out
}

// maxDegradedKeys bounds the keys Degraded names.
const maxDegradedKeys = 10

// Degraded returns nil while no key keeps failing, else an error wrapping
// [ErrDegraded] that names the failing keys (sorted, the first ten) with
// their last errors and attempts. The driver keeps retrying them by
// itself; the error says that part of the desired state is not in VPP
// and why, for a health endpoint. See the package doc ("Failing keys").
func (d *Driver) Degraded() error {
	failing := d.Failing()
	if len(failing) == 0 {
		return nil
	}
	parts := make([]string, 0, min(len(failing), maxDegradedKeys)+1)
	for i, s := range failing {
		if i == maxDegradedKeys {
			parts = append(parts, fmt.Sprintf("and %d more", len(failing)-i))
			break
		}
		p := s.Key + ": "
		switch {
		case s.Err != nil:
			p += s.Err.Error()
		case len(s.PendingOn) > 0:
			p += fmt.Sprintf("pending on %v", s.PendingOn)
		default:
			p += s.State.String()
		}
		parts = append(parts, fmt.Sprintf("%s (%d attempts since %s)", p, s.Attempts, s.FailingSince.UTC().Format("15:04:05Z")))
	}
	noun := "keys"
	if len(failing) == 1 {
		noun = "key"
	}
	return fmt.Errorf("%w: %d %s failing: %s", ErrDegraded, len(failing), noun, strings.Join(parts, "; "))
}

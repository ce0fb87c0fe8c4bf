package reflector

import (
	"errors"
	"fmt"

	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

// ErrAlreadyRunning is returned (wrapped) by a second call of
// [Reflector.Run]. It is the same value as every other package's
// ErrAlreadyRunning (internal/lifecycle), so errors.Is works across
// packages.
var ErrAlreadyRunning = lifecycle.ErrAlreadyRunning

// Sentinel errors of the reflector.
var (
	// ErrBadObject is matched (errors.Is) by every [*ObjectError]: a
	// Kubernetes object that cannot be reflected.
	ErrBadObject = errors.New("reflector: object cannot be reflected")

	// errLostLeadership ends a leadership term: a fenced write was refused
	// because this replica no longer holds the election key, or its
	// session ended.
	errLostLeadership = errors.New("reflector: leadership lost")
)

// ObjectError reports a Kubernetes object that cannot be converted into its
// model, for example a pod whose status.podIP does not parse or a service
// port out of range. The object is skipped (its key is deleted if an
// earlier version was reflected), the error is logged and counted in
// [ResourceStats.BadObjects], and the other objects are reflected.
//
// Resource converters ([Resource.Convert]) may return an *ObjectError or
// any other error; the reflector treats both alike. An ObjectError is
// immutable once returned.
type ObjectError struct {
	// Resource is the name of the resource ([Resource.Name]).
	Resource string
	// Object is "namespace/name", or "name" for cluster-scoped objects.
	Object string
	// Field is the path of the offending field, e.g. "status.podIP";
	// empty when the object as a whole is bad.
	Field string
	// Value is the offending value; nil when not applicable.
	Value any
	// Reason says what is wrong, e.g. "not an IP address".
	Reason string
}

// Error describes the problem: resource, object, field, value and reason.
func (e *ObjectError) Error() string {
	msg := "reflector: " + e.Resource + " " + e.Object
	if e.Field != "" {
		msg += ": " + e.Field
	}
	if e.Value != nil {
		msg += fmt.Sprintf(" %q", fmt.Sprint(e.Value))
	}
	return msg + ": " + e.Reason
}

// Is reports whether target is [ErrBadObject].
func (e *ObjectError) Is(target error) bool { return target == ErrBadObject }

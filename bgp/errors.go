package bgp

import (
	"errors"
	"fmt"

	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

// ErrAlreadyRunning is returned (wrapped) by a second call of
// [Controller.Run]. It is the same value as every other package's
// ErrAlreadyRunning (internal/lifecycle), so errors.Is works across
// packages.
var ErrAlreadyRunning = lifecycle.ErrAlreadyRunning

var (
	// ErrMultiplePolicies is returned by [PolicySelection] (and by
	// [Controller.Reconcile]) when more than one peering policy applies to
	// the node. Only a single policy may apply to a node to avoid ambiguity.
	ErrMultiplePolicies = errors.New("bgp: more than one BGP peering policy applies to this node, please ensure only a single policy matches this node's labels")

	// ErrMultipleClusterConfigs is returned by [ClusterConfigSelection]
	// (and by [Controller.Reconcile]) when more than one v2 cluster config
	// selects the node.
	ErrMultipleClusterConfigs = errors.New("bgp: more than one BGP cluster config selects this node, please ensure only a single cluster config matches this node's labels")

	// ErrConflictingConfig is returned by [Controller.Reconcile] when both
	// a v1 peering policy and a v2 cluster config select the node: the
	// controller keeps what it applied before instead of choosing.
	ErrConflictingConfig = errors.New("bgp: both a v1 BGP peering policy and a v2 BGP cluster config select this node, please ensure only one of them matches this node's labels")

	// ErrInvalidPolicy wraps every validation problem of a peering policy;
	// use errors.Is to test for it and errors.As with *[FieldError] to get
	// the offending fields.
	ErrInvalidPolicy = errors.New("bgp: invalid BGP peering policy")

	// ErrInvalidAnnotation is wrapped by the errors of [ParseAnnotations].
	ErrInvalidAnnotation = errors.New("bgp: invalid BGP virtual-router annotation")
)

// FieldError names one bad field of a peering policy. Field is a path such as
// "virtualRouters[0].neighbors[1].holdTime". FieldError matches
// [ErrInvalidPolicy] with errors.Is.
type FieldError struct {
	Field  string
	Value  any
	Reason string
}

// Error returns "<field>: <reason> (got <value>)".
func (e *FieldError) Error() string {
	if e.Value == nil {
		return fmt.Sprintf("%s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("%s: %s (got %v)", e.Field, e.Reason, e.Value)
}

// Is reports whether target is ErrInvalidPolicy.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidPolicy }

// AnnotationError describes a node annotation that [ParseAnnotations]
// rejected. It matches [ErrInvalidAnnotation] with errors.Is.
type AnnotationError struct {
	Key    string
	Value  string
	Reason string
}

// Error returns a message quoting the annotation.
func (e *AnnotationError) Error() string {
	return fmt.Sprintf("annotation %q=%q: %s", e.Key, e.Value, e.Reason)
}

// Is reports whether target is ErrInvalidAnnotation.
func (e *AnnotationError) Is(target error) bool { return target == ErrInvalidAnnotation }

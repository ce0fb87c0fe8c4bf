package policy

import (
	"errors"
	"fmt"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// PolicyError reports a NetworkPolicy that the processor ignores because
// it is invalid (the Kubernetes API server would have refused it): an
// invalid selector, CIDR, port or protocol. Err joins every problem.
type PolicyError struct {
	Policy kubemodel.PolicyID
	Err    error
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("policy: network policy %s is invalid and ignored: %v", e.Policy, e.Err)
}

func (e *PolicyError) Unwrap() error { return e.Err }

var (
	// ErrNilRenderer is returned by RegisterRenderer for a nil renderer.
	ErrNilRenderer = errors.New("policy: nil renderer")
)

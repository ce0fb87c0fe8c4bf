package policytest

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

var (
	// ErrInvalidPolicy is matched (errors.Is) by every [PolicyError].
	ErrInvalidPolicy = errors.New("policytest: invalid network policy")

	// ErrInvalidCluster is returned (wrapped) by [Cluster.Check] and by the
	// functions that change a Cluster when the cluster's objects are not
	// consistent: an unknown pod or namespace, a duplicate, a pod address
	// that does not parse.
	ErrInvalidCluster = errors.New("policytest: invalid cluster")
)

// PolicyError reports why a network policy fails [Validate]: every problem
// found, each as "<field path>: <reason>" with the field paths of the
// Kubernetes API (spec.ingress[0].from[1].ipBlock.cidr).
type PolicyError struct {
	Policy   kubemodel.PolicyID
	Problems []string
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("policytest: invalid network policy %s: %s", e.Policy, strings.Join(e.Problems, "; "))
}

// Is reports whether target is [ErrInvalidPolicy].
func (e *PolicyError) Is(target error) bool { return target == ErrInvalidPolicy }

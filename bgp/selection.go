package bgp

import (
	"context"
	"fmt"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// PolicySelection returns the peering policy that applies to the node,
// enforced by a set of policy selection rules:
//
//   - A policy matches a node if its NodeSelector matches the node's labels
//     (a nil NodeSelector matches every node).
//   - If more than one policy matches, [ErrMultiplePolicies] is returned:
//     only a single policy may apply to a node to avoid ambiguity.
//
// It returns nil and no error when no policy matches. A policy with an
// invalid node selector is an error naming the policy. Nil policies in the
// slice are skipped. ctx is checked between policies.
func PolicySelection(ctx context.Context, node *kubemodel.Node, policies []*PeeringPolicy) (*PeeringPolicy, error) {
	if node == nil {
		return nil, fmt.Errorf("bgp: policy selection: node is nil")
	}
	var selected *PeeringPolicy
	for _, p := range policies {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if p == nil {
			continue
		}
		match := true
		if p.NodeSelector != nil {
			var err error
			match, err = p.NodeSelector.Matches(node.GetLabels())
			if err != nil {
				return nil, fmt.Errorf("bgp: policy %q: node selector: %w", p.Name, err)
			}
		}
		if !match {
			continue
		}
		if selected != nil {
			return nil, fmt.Errorf("policies %q and %q: %w", selected.Name, p.Name, ErrMultiplePolicies)
		}
		selected = p
	}
	return selected, nil
}

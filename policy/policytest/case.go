package policytest

import (
	"fmt"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Case is one truth-table case on the [Model]: policies, then optional
// steps, with the expected matrix of each stage computed by the evaluator
// ([Case.Expect]).
type Case struct {
	// Name identifies the case (lower-case words joined by "-"), unique
	// among [Cases].
	Name string
	// Upstream is the name of the upstream e2e test
	// (kubernetes/kubernetes test/e2e/network/netpol/network_policy.go)
	// this case follows, or "" when it has none.
	Upstream string
	// Setup changes the model before the policies are added (for example
	// pod ports for named-port cases); its stage is not checked.
	Setup []Step
	// Policies are added to the model (after Setup): the first stage.
	Policies []*kubemodel.NetworkPolicy
	// Steps are applied one by one; each one is a further stage.
	Steps []Step
}

// Start returns the case's first stage: the model with the Setup steps
// applied and the Policies added.
func (cs Case) Start(opts ModelOptions) (*Cluster, error) {
	c := Model(opts)
	for _, s := range cs.Setup {
		if err := s.Apply(c); err != nil {
			return nil, fmt.Errorf("%w (case %s, setup: %s)", err, cs.Name, s)
		}
	}
	for _, np := range cs.Policies {
		c.PutPolicy(np)
	}
	if err := c.Check(); err != nil {
		return nil, fmt.Errorf("%w (case %s)", err, cs.Name)
	}
	return c, nil
}

// Expect returns the evaluator's matrix (for [ModelProbes]) of every stage
// of the case: the first stage, then the stage after each step.
func (cs Case) Expect(opts ModelOptions) ([]*Matrix, error) {
	c, err := cs.Start(opts)
	if err != nil {
		return nil, err
	}
	probes := ModelProbes(opts)
	matrices := []*Matrix{c.Matrix(probes)}
	for i, s := range cs.Steps {
		if err := s.Apply(c); err != nil {
			return nil, fmt.Errorf("%w (case %s, step %d: %s)", err, cs.Name, i+1, s)
		}
		if err := c.Check(); err != nil {
			return nil, fmt.Errorf("%w (case %s, step %d: %s)", err, cs.Name, i+1, s)
		}
		matrices = append(matrices, c.Matrix(probes))
	}
	return matrices, nil
}

package policytest

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

func TestCasesAreWellFormed(t *testing.T) {
	cases := Cases()
	require.GreaterOrEqual(t, len(cases), 45)
	names := map[string]bool{}
	steps, upstream := 0, 0
	nameRE := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	for _, cs := range cases {
		assert.Regexp(t, nameRE, cs.Name)
		assert.False(t, names[cs.Name], "duplicate case %s", cs.Name)
		names[cs.Name] = true
		steps += len(cs.Steps)
		if cs.Upstream != "" {
			upstream++
		}
		// Policies are valid, except in the cases about invalid ones,
		// which have at least one.
		invalid := 0
		for _, np := range cs.Policies {
			if Validate(np) != nil {
				invalid++
			}
		}
		for _, s := range cs.Steps {
			if put, ok := s.(PutPolicy); ok && Validate(put.Policy) != nil {
				invalid++
			}
		}
		if strings.HasPrefix(cs.Name, "invalid-") {
			assert.Positive(t, invalid, cs.Name)
		} else {
			assert.Zero(t, invalid, cs.Name)
		}
	}
	t.Logf("%d cases (%d following an upstream test), %d steps", len(cases), upstream, steps)
}

// TestCasesStages runs every case in both model variants: every stage
// can be computed, every step changes the matrix (a step that changes
// nothing tests nothing), and the IPv6 tables of the dual-stack model are
// the IPv4 ones, except where a case says otherwise.
func TestCasesStages(t *testing.T) {
	v4, dual := ModelOptions{}, ModelOptions{DualStack: true}
	for _, cs := range Cases() {
		t.Run(cs.Name, func(t *testing.T) {
			m4, err := cs.Expect(v4)
			require.NoError(t, err)
			require.Len(t, m4, len(cs.Steps)+1)
			for i := 1; i < len(m4); i++ {
				assert.False(t, m4[i].Equal(m4[i-1]), "step %d (%s) changes nothing", i, cs.Steps[i-1])
			}

			m46, err := cs.Expect(dual)
			require.NoError(t, err)
			for stage := range m46 {
				same := true
				for _, p := range ModelProbes(v4) {
					p6 := p
					p6.IPv6 = true
					assert.Equal(t, m4[stage].Table(p), m46[stage].Table(p), "IPv4 tables of the dual-stack model, stage %d", stage)
					for _, from := range m46[stage].Pods() {
						for _, to := range m46[stage].Pods() {
							a4, _ := m46[stage].Allowed(from, to, p)
							a6, _ := m46[stage].Allowed(from, to, p6)
							same = same && a4 == a6
						}
					}
				}
				assert.Equal(t, cs.Name != "ipblock-ipv4-only", same, "IPv6 tables equal to IPv4 ones, stage %d", stage)
			}
		})
	}
}

func TestCaseExpectLeavesTheCaseAlone(t *testing.T) {
	for _, cs := range Cases() {
		first, err := cs.Expect(ModelOptions{})
		require.NoError(t, err)
		second, err := cs.Expect(ModelOptions{})
		require.NoError(t, err)
		for i := range first {
			assert.Empty(t, Diff(first[i], second[i]), "%s stage %d", cs.Name, i)
		}
	}
}

func TestCaseStartAndSteps(t *testing.T) {
	var named Case
	for _, cs := range Cases() {
		if cs.Name == "named-port-on-some-pods-ingress" {
			named = cs
		}
	}
	c, err := named.Start(ModelOptions{})
	require.NoError(t, err)
	assert.Len(t, c.Policies, 1)
	assert.True(t, hasNamedPort(c.Pod(pod("x", "b")), "http", tcpProto, 80), "setup applied")
	assert.Equal(t, "pod x/c ports [http=TCP/81]", named.Steps[0].String())

	bad := Case{Name: "bad", Setup: []Step{DeletePod{pod("w", "q")}}}
	_, err = bad.Start(ModelOptions{})
	assert.ErrorIs(t, err, ErrInvalidCluster)
	bad = Case{Name: "bad", Steps: []Step{DeletePolicy{kubemodel.PolicyID{Namespace: "x", Name: "q"}}}}
	_, err = bad.Expect(ModelOptions{})
	assert.ErrorIs(t, err, ErrInvalidCluster)
	bad = Case{Name: "bad", Steps: []Step{SetPodLabels{pod("x", "a"), nil}, SetNamespaceLabels{"q", nil}}}
	_, err = bad.Expect(ModelOptions{})
	assert.EqualError(t, err, "policytest: invalid cluster: no namespace q (case bad, step 2: namespace q labels {})")

	for _, s := range []Step{
		PutPolicy{newPolicy("x", "p", nil).build()},
		DeletePolicy{kubemodel.PolicyID{Namespace: "x", Name: "p"}},
		SetPodLabels{pod("x", "a"), map[string]string{"b": "2", "a": "1"}},
		DeletePod{pod("x", "a")},
		SetNamespaceLabels{"x", map[string]string{"ns": "x"}},
	} {
		assert.NotEmpty(t, s.String())
	}
	assert.Equal(t, "pod x/a labels {a=1,b=2}", SetPodLabels{pod("x", "a"), map[string]string{"b": "2", "a": "1"}}.String())
}

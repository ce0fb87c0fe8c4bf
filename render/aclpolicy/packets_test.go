package aclpolicy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/policy/policytest"
	"github.com/vswitchkit/vswitchkit/render/aclpolicy"
)

// packetCases are the policytest cases that TestPacketsRealVPP runs with
// real packets: a spread over deny-all in each direction, namespace, pod
// and combined selectors, ipBlocks with except, named ports (one name
// meaning different ports on different pods), endPort ranges, UDP,
// DNS-style egress, stacked policies, and policies, pod labels,
// namespace labels and pod ports changing in place.
var packetCases = []string{
	"deny-ingress-to-namespace-x",
	"deny-egress-from-namespace-x",
	"deny-all-in-namespace-x",
	"allow-x-a-from-namespace-y",
	"allow-x-a-from-pod-b-and-not-namespace-x",
	"allow-x-a-from-pod-b-or-not-namespace-x",
	"ipblock-ingress-from-all-but-one-pod",
	"ipblock-egress-except-then-replaced-by-the-excepted-address",
	"ipblock-and-selector-peers-in-one-rule",
	"named-port-ingress",
	"named-port-on-some-pods-ingress",
	"named-port-on-some-pods-egress",
	"port-range-80-81-tcp",
	"port-range-egress",
	"protocol-udp-only",
	"egress-dns-and-tcp-80-to-pod-b",
	"egress-denies-what-ingress-allows",
	"stacked-policies-one-per-port",
	"allow-all-ingress-adds-to-port-80-policy",
	"update-pod-label-into-peer-selector",
	"update-namespace-label",
	"policy-types-ingress-and-egress",
}

// TestPacketsRealVPP sends real packets through a real VPP 26.06 (VPP_SH,
// root) between network namespaces: the nine pods of the policytest model
// (namespaces x, y, z; pods a, b, c), each on an af_packet interface of
// VPP and serving TCP and UDP on ports 80 and 81, an external namespace
// behind the uplink and a host namespace on the host interconnect. The
// partial agent (rendertest: nodesync, IPAM, nodeconn with NAT44, podconn,
// the service processor with svcnat, the policy processor with this
// renderer) programs VPP; the test feeds it the model's Kubernetes state
// as KubeStateChange events, with the real pods' addresses.
//
// Truth tables: each case of packetCases, stage by stage, probes every
// pair of pods with TCP connects and UDP requests to 80 and 81 (72 pairs
// × 4 probes) and compares the reachability with the evaluator's matrix
// for the same cluster (which is checked to equal the case's own
// expectation on the model's addresses).
//
// Then the scenarios of scenarios_test.go, each from the model without
// policies: stateful replies in both directions of an interface; a
// ClusterIP in front of an ingress-isolated pod (permitted and denied
// clients, egress-isolated clients checked after translation); a NodePort
// in front of it (external traffic policy Cluster and Local); a ClusterIP
// with a backend outside the cluster (the check on the uplink); where VPP
// runs each check relative to NAT44 (feature arcs and a packet trace); a
// policy change while a TCP connection is open; what an unrelated change
// of a pod's ACLs does to its sessions; the time from a policy's event
// until probes are denied; a new pod's first connections.
func TestPacketsRealVPP(t *testing.T) {
	l := startLab(t)
	t.Cleanup(func() {
		if t.Failed() {
			l.vppState(t)
		}
	})

	t.Run("truth tables", func(t *testing.T) {
		byName := map[string]policytest.Case{}
		for _, cs := range policytest.Cases() {
			byName[cs.Name] = cs
		}
		opts := policytest.ModelOptions{}
		probes := policytest.ModelProbes(opts)
		for _, name := range packetCases {
			cs, ok := byName[name]
			require.True(t, ok, "case %s", name)
			t.Run(name, func(t *testing.T) {
				c, err := cs.Start(opts)
				require.NoError(t, err)
				expect, err := cs.Expect(opts)
				require.NoError(t, err)
				l.remap(t, c)
				stage := func(i int, what string) {
					t.Helper()
					want := c.Matrix(probes)
					require.Empty(t, policytest.Diff(expect[i], want), "stage %d (%s): the lab's cluster means what the model means", i, what)
					took := l.apply(t, aclpolicy.KubeState(c))
					got := l.matrix(t, want)
					if d := policytest.Diff(want, got); d != "" {
						l.vppState(t)
						t.Errorf("stage %d (%s): real packets differ from the evaluator:\n%s\nwant:\n%s\ngot:\n%s", i, what, d, want, got)
						return
					}
					t.Logf("stage %d (%s): %d cells as the evaluator says (in VPP %v after the first change)", i, what,
						len(probes)*len(want.Pods())*(len(want.Pods())-1), took.Round(time.Millisecond))
				}
				stage(0, "policies added")
				for i, step := range cs.Steps {
					step = l.remapStep(t, step)
					require.NoError(t, step.Apply(c))
					stage(i+1, step.String())
				}
			})
		}
	})

	t.Run("stateful replies", func(t *testing.T) { testStatefulReplies(t, l) })
	t.Run("a service in front of a selected pod", func(t *testing.T) { testServiceBackend(t, l) })
	t.Run("a node port in front of a selected pod", func(t *testing.T) { testNodePort(t, l) })
	t.Run("a service with a backend outside the cluster", func(t *testing.T) { testExternalBackend(t, l) })
	t.Run("where VPP checks", func(t *testing.T) { testFeatureOrder(t, l) })
	t.Run("a policy change while a connection is open", func(t *testing.T) { testOpenConnection(t, l) })
	t.Run("an unrelated change of a pod's ACLs", func(t *testing.T) { testUnrelatedChange(t, l) })
	t.Run("time until a policy is enforced", func(t *testing.T) { testTimeToEnforce(t, l) })
	t.Run("a new pod's first packet", func(t *testing.T) { testNewPod(t, l) })
}

package policytest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

func TestValidateAcceptsValidPolicies(t *testing.T) {
	valid := []*kubemodel.NetworkPolicy{
		{Namespace: "x", Name: "no-selector"}, // a missing podSelector is the empty one
		newPolicy("x", "deny", all()).build(),
		newPolicy("x", "both", all()).types(ingressType, egressType).build(),
		newPolicy("x", "rules", match("app", "web", "example.com/tier", "front")).
			ingress(peers(
				pods(expr("a", OpIn, "1", "2")),
				namespaces(expr("b", OpNotIn, "1")),
				podsIn(expr("c", OpExists), expr("d", OpDoesNotExist)),
				block("10.0.0.0/8", "10.1.0.0/16", "10.2.3.4/32"),
				block("2001:db8::/32", "2001:db8::/64"),
				block("10.1.2.3/8"), // non-canonical: accepted, means 10.0.0.0/8
				block("0.0.0.0/0"),
			), ports(tcp(1), udp(65535), num(sctpProto, 80), anyPort(udpProto),
				portRange(tcpProto, 80, 80), portRange(tcpProto, 1, 65535),
				named(tcpProto, "http"), named(udpProto, "a-1"), named(tcpProto, "abcdefghijklmno"))).
			egress(nil, nil).build(),
		newPolicy("x", "empty-label-value", match("k", "")).build(),
	}
	for _, np := range valid {
		assert.NoError(t, Validate(np), np.GetName())
	}
}

func TestValidateRejectsInvalidPolicies(t *testing.T) {
	ing := func(from []*kubemodel.NetworkPolicyPeer, p ...*kubemodel.NetworkPolicyPort) *kubemodel.NetworkPolicy {
		return newPolicy("x", "p", all()).ingress(from, p).build()
	}
	tests := []struct {
		name string
		np   *kubemodel.NetworkPolicy
		want string // a substring of the error
	}{
		{"unknown operator", newPolicy("x", "p", expr("a", "Equals", "1")).build(), `spec.podSelector.matchExpressions[0].operator: "Equals"`},
		{"lower-case operator", newPolicy("x", "p", expr("a", "in", "1")).build(), "operator"},
		{"In without values", newPolicy("x", "p", expr("a", OpIn)).build(), "matchExpressions[0].values: must be given"},
		{"NotIn without values", newPolicy("x", "p", expr("a", OpNotIn)).build(), "must be given"},
		{"Exists with values", newPolicy("x", "p", expr("a", OpExists, "1")).build(), "must be empty"},
		{"DoesNotExist with values", newPolicy("x", "p", expr("a", OpDoesNotExist, "1")).build(), "must be empty"},
		{"bad key", newPolicy("x", "p", expr("-a", OpExists)).build(), "matchExpressions[0].key"},
		{"bad key prefix", newPolicy("x", "p", match("Example.com/a", "1")).build(), "prefix"},
		{"empty key", newPolicy("x", "p", match("", "1")).build(), "matchLabels"},
		{"bad label value", newPolicy("x", "p", match("a", "b c")).build(), `value "b c"`},
		{"bad expression value", newPolicy("x", "p", expr("a", OpIn, "-1")).build(), "values[0]"},
		{"long value", newPolicy("x", "p", match("a", strings.Repeat("v", 64))).build(), "63"},
		{"unknown policy type", newPolicy("x", "p", all()).types(kubemodel.PolicyType(7)).build(), "spec.policyTypes[0]: unknown"},
		{"duplicate policy type", newPolicy("x", "p", all()).types(ingressType, ingressType).build(), "spec.policyTypes[1]: duplicate"},
		{"empty peer", ing(peers(&kubemodel.NetworkPolicyPeer{})), "spec.ingress[0].from[0]: must have"},
		{"ipBlock with selector", ing(peers(&kubemodel.NetworkPolicyPeer{PodSelector: all(), IpBlock: &kubemodel.IPBlock{Cidr: "10.0.0.0/8"}})), "may not be combined"},
		{"bad cidr", ing(peers(block("10.0.0.0/33"))), `ipBlock.cidr: "10.0.0.0/33"`},
		{"bare address", ing(peers(block("10.0.0.1"))), "ipBlock.cidr"},
		{"empty cidr", ing(peers(block(""))), "ipBlock.cidr"},
		{"bad except", ing(peers(block("10.0.0.0/8", "10.1.0.0"))), "ipBlock.except[0]"},
		{"except outside", ing(peers(block("10.0.0.0/8", "11.0.0.0/16"))), "not strictly inside"},
		{"except equal", ing(peers(block("10.0.0.0/8", "10.0.0.0/8"))), "not strictly inside"},
		{"except wider", ing(peers(block("10.0.0.0/8", "0.0.0.0/0"))), "not strictly inside"},
		{"except other family", ing(peers(block("10.0.0.0/8", "::/128"))), "not strictly inside"},
		{"bad selector in peer", ing(peers(podsIn(all(), expr("a", "Equals")))), "from[0].namespaceSelector.matchExpressions[0].operator"},
		{"unknown protocol", ing(nil, &kubemodel.NetworkPolicyPort{Protocol: kubemodel.Protocol(9), Port: 80}), "ports[0].protocol"},
		{"port too big", ing(nil, tcp(65536)), "65536 is not in 1-65535"},
		{"negative port", ing(nil, tcp(-1)), "-1 is not in 1-65535"},
		{"number and name", ing(nil, &kubemodel.NetworkPolicyPort{Port: 80, PortName: "http"}), "at once"},
		{"upper-case name", ing(nil, named(tcpProto, "HTTP")), "lower-case"},
		{"name without letter", ing(nil, named(tcpProto, "80")), "must contain a letter"},
		{"name too long", ing(nil, named(tcpProto, "abcdefghijklmnop")), "longer than 15"},
		{"name with --", ing(nil, named(tcpProto, "a--b")), "--"},
		{"name ends with -", ing(nil, named(tcpProto, "ab-")), "start or end"},
		{"endPort without port", ing(nil, &kubemodel.NetworkPolicyPort{EndPort: 90}), "needs a numbered port"},
		{"endPort with name", ing(nil, &kubemodel.NetworkPolicyPort{PortName: "http", EndPort: 90}), "needs a numbered port"},
		{"endPort below port", ing(nil, portRange(tcpProto, 81, 80)), "80 is below port 81"},
		{"endPort too big", ing(nil, portRange(tcpProto, 80, 70000)), "endPort: 70000"},
		{"egress peer", newPolicy("x", "p", all()).egress(peers(block("x")), nil).build(), "spec.egress[0].to[0].ipBlock.cidr"},
		{"egress port", newPolicy("x", "p", all()).egress(nil, ports(tcp(0), tcp(70000))).build(), "spec.egress[0].ports[1].port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.np)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidPolicy)
			assert.ErrorContains(t, err, tt.want)
			assert.True(t, strings.HasPrefix(err.Error(), "policytest: invalid network policy x/p: "), err.Error())
			var pe *PolicyError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, kubemodel.PolicyID{Namespace: "x", Name: "p"}, pe.Policy)
		})
	}
	assert.ErrorIs(t, Validate(nil), ErrInvalidPolicy)
}

func TestValidateReportsEveryProblem(t *testing.T) {
	np := newPolicy("x", "p", expr("a", "Equals")).
		ingress(peers(block("bad")), ports(tcp(70000))).build()
	var pe *PolicyError
	require.ErrorAs(t, Validate(np), &pe)
	assert.Len(t, pe.Problems, 3, pe.Problems)
}

// The selector and port-name rules, compared with the API machinery's own
// validation on a few tricky inputs (the fuzz tests below explore more).
func TestValidateAgreesWithAPIMachinery(t *testing.T) {
	keys := []string{"a", "A", "a.b", "a_b", "a-", "-a", "_a", "a/b", "a.com/b", "A.com/b", "/b", "a.com/", "a/b/c",
		"a..b/c", "-a.com/b", strings.Repeat("k", 63), strings.Repeat("k", 64), strings.Repeat("p", 254) + "/k", ""}
	for _, k := range keys {
		assert.Equal(t, len(validation.IsQualifiedName(k)) == 0, qualifiedNameProblem(k) == "", "key %q", k)
	}
	values := []string{"", "a", "a.b", "a_b", "A-1", "-a", "a-", "a b", "a/b", strings.Repeat("v", 63), strings.Repeat("v", 64)}
	for _, v := range values {
		assert.Equal(t, len(validation.IsValidLabelValue(v)) == 0, labelValueProblem(v) == "", "value %q", v)
	}
	names := []string{"http", "a", "1a", "a1", "80", "a-b", "a--b", "-a", "a-", "A", "a_b", "abcdefghijklmno", "abcdefghijklmnop", "1-2", "1-a"}
	for _, n := range names {
		assert.Equal(t, len(validation.IsValidPortName(n)) == 0, portNameProblem(n) == "", "port name %q", n)
	}
}

// FuzzSelectorValidation compares the validity of a label selector
// (Validate of a policy with it as podSelector) with the API machinery's
// ValidateLabelSelector.
func FuzzSelectorValidation(f *testing.F) {
	f.Add("a", "In", "1", "b", "2")
	f.Add("a.com/b", "Exists", "", "-x", "")
	f.Add("a", "NotIn", "", "b", "c d")
	f.Fuzz(func(t *testing.T, key, op, value, labelKey, labelValue string) {
		var values []string
		if value != "" {
			values = strings.Split(value, ",")
		}
		ours := &kubemodel.LabelSelector{
			MatchLabels:      map[string]string{labelKey: labelValue},
			MatchExpressions: []*kubemodel.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}},
		}
		theirs := &metav1.LabelSelector{
			MatchLabels: map[string]string{labelKey: labelValue},
			MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: key, Operator: metav1.LabelSelectorOperator(op), Values: values},
			},
		}
		want := len(metav1validation.ValidateLabelSelector(theirs, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("s"))) == 0
		got := Validate(newPolicy("x", "p", ours).build()) == nil
		if got != want {
			t.Fatalf("selector %v: valid here %v, for the API machinery %v", ours, got, want)
		}
	})
}

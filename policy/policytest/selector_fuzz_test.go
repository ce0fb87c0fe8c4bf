package policytest

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// decodeSelector turns fuzz bytes into a label selector and a label set
// over a small alphabet (keys k0-k2, values v0-v2), so that matches and
// misses are both frequent. Each byte of data is one instruction: its low
// two bits choose what to add (a matchLabels pair, a requirement, a label,
// a value of the last requirement), the other bits the key, operator and
// value.
func decodeSelector(data []byte) (*kubemodel.LabelSelector, map[string]string) {
	keys := []string{"k0", "k1", "k2"}
	values := []string{"v0", "v1", "v2"}
	ops := []string{OpIn, OpNotIn, OpExists, OpDoesNotExist}
	sel := &kubemodel.LabelSelector{}
	set := map[string]string{}
	for _, b := range data {
		key, value := keys[int(b>>2)%3], values[int(b>>4)%3]
		switch b & 3 {
		case 0:
			if sel.MatchLabels == nil {
				sel.MatchLabels = map[string]string{}
			}
			sel.MatchLabels[key] = value
		case 1:
			r := &kubemodel.LabelSelectorRequirement{Key: key, Operator: ops[int(b>>6)%4]}
			if r.Operator == OpIn || r.Operator == OpNotIn {
				r.Values = []string{value}
			}
			sel.MatchExpressions = append(sel.MatchExpressions, r)
		case 2:
			set[key] = value
		case 3:
			if n := len(sel.MatchExpressions); n > 0 {
				if r := sel.MatchExpressions[n-1]; r.Operator == OpIn || r.Operator == OpNotIn {
					r.Values = append(r.Values, value)
				}
			}
		}
	}
	return sel, set
}

// apiMachineryMatches is the second formulation: the selector converted to
// the API machinery's LabelSelector and matched by its labels package.
func apiMachineryMatches(t *testing.T, s *kubemodel.LabelSelector, set map[string]string) bool {
	ls := &metav1.LabelSelector{MatchLabels: s.GetMatchLabels()}
	for _, r := range s.GetMatchExpressions() {
		ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: r.GetKey(), Operator: metav1.LabelSelectorOperator(r.GetOperator()), Values: r.GetValues(),
		})
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		t.Fatalf("selector %v: %v", s, err)
	}
	return sel.Matches(labels.Set(set))
}

// FuzzSelectorMatches compares selectorMatches with the API machinery's
// label selectors.
func FuzzSelectorMatches(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x00, 0x02})       // matchLabels k0=v0, label k0=v0
	f.Add([]byte{0x41, 0x06})       // k0 NotIn (v0); label k1=v0
	f.Add([]byte{0x81, 0x02, 0xc5}) // k0 Exists; label k0=v0; k1 DoesNotExist
	f.Add([]byte{0x01, 0x13, 0x22}) // k0 In (v0, v1); label k0=v2
	f.Fuzz(func(t *testing.T, data []byte) {
		sel, set := decodeSelector(data)
		if got, want := selectorMatches(sel, set), apiMachineryMatches(t, sel, set); got != want {
			t.Fatalf("selector %v on %v: %v here, %v for the API machinery", sel, set, got, want)
		}
	})
}

// TestSelectorMatchesExhaustive runs the comparison over every input of up
// to three instructions.
func TestSelectorMatchesExhaustive(t *testing.T) {
	n := 0
	for a := 0; a < 256; a++ {
		for b := 0; b < 256; b += 3 {
			for _, c := range []int{0x02, 0x16, 0x2a, 0x43, 0x81} {
				sel, set := decodeSelector([]byte{byte(a), byte(b), byte(c)})
				if got, want := selectorMatches(sel, set), apiMachineryMatches(t, sel, set); got != want {
					t.Fatalf("selector %v on %v: %v here, %v for the API machinery", sel, set, got, want)
				}
				n++
			}
		}
	}
	t.Logf("%d selectors compared", n)
}

package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// selector is a compiled Kubernetes label selector. The nil selector is
// "not given"; a selector with no requirements matches every label set.
type selector struct {
	labels map[string]string
	exprs  []expr
	key    string // canonical text: equal selectors have equal keys
}

type expr struct {
	key    string
	op     string // In, NotIn, Exists, DoesNotExist
	values []string
}

// Selector operators.
const (
	opIn           = "In"
	opNotIn        = "NotIn"
	opExists       = "Exists"
	opDoesNotExist = "DoesNotExist"
)

// compileSelector compiles s; nil for nil.
func compileSelector(s *kubemodel.LabelSelector) (*selector, error) {
	if s == nil {
		return nil, nil
	}
	sel := &selector{labels: maps.Clone(s.GetMatchLabels())}
	for i, e := range s.GetMatchExpressions() {
		x := expr{key: e.GetKey(), op: e.GetOperator(), values: slices.Clone(e.GetValues())}
		if x.key == "" {
			return nil, fmt.Errorf("matchExpressions[%d]: empty key", i)
		}
		switch x.op {
		case opIn, opNotIn:
			if len(x.values) == 0 {
				return nil, fmt.Errorf("matchExpressions[%d]: operator %s needs values", i, x.op)
			}
		case opExists, opDoesNotExist:
			if len(x.values) != 0 {
				return nil, fmt.Errorf("matchExpressions[%d]: operator %s takes no values", i, x.op)
			}
		default:
			return nil, fmt.Errorf("matchExpressions[%d]: unknown operator %q (want In, NotIn, Exists or DoesNotExist)", i, x.op)
		}
		slices.Sort(x.values)
		sel.exprs = append(sel.exprs, x)
	}
	slices.SortFunc(sel.exprs, func(a, b expr) int {
		return strings.Compare(a.key+"\x00"+a.op+"\x00"+strings.Join(a.values, "\x00"), b.key+"\x00"+b.op+"\x00"+strings.Join(b.values, "\x00"))
	})
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(sel.labels)) {
		fmt.Fprintf(&b, "%s=%s,", k, sel.labels[k])
	}
	for _, x := range sel.exprs {
		fmt.Fprintf(&b, "%s %s (%s),", x.key, x.op, strings.Join(x.values, ","))
	}
	sel.key = b.String()
	return sel, nil
}

// matches reports whether labels satisfy s (s must not be nil).
func (s *selector) matches(labels map[string]string) bool {
	for k, v := range s.labels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, x := range s.exprs {
		v, ok := labels[x.key]
		switch x.op {
		case opIn:
			if !ok || !slices.Contains(x.values, v) {
				return false
			}
		case opNotIn:
			if ok && slices.Contains(x.values, v) {
				return false
			}
		case opExists:
			if !ok {
				return false
			}
		case opDoesNotExist:
			if ok {
				return false
			}
		}
	}
	return true
}

// all reports whether s matches every label set.
func (s *selector) all() bool { return len(s.labels) == 0 && len(s.exprs) == 0 }

package policytest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Probe is one kind of connection a matrix is computed for: a protocol, a
// destination port and an address family.
type Probe struct {
	Protocol kubemodel.Protocol
	Port     int
	// IPv6 selects the pods' IPv6 addresses; false selects IPv4.
	IPv6 bool
}

// String returns "TCP/80", or "TCP/80 v6" for an IPv6 probe.
func (p Probe) String() string {
	s := fmt.Sprintf("%s/%d", p.Protocol, p.Port)
	if p.IPv6 {
		s += " v6"
	}
	return s
}

// Matrix is the reachability of pods from pods: for each probe, whether a
// new connection from each pod to each pod is allowed. Build one with
// [Cluster.Matrix] or [NewMatrix]; it is not changed afterwards.
type Matrix struct {
	pods    []kubemodel.PodID
	probes  []Probe
	allowed [][][]bool // [probe][from][to]
}

// NewMatrix returns the matrix of pods × pods × probes with the verdicts
// of allowed(from, to, probe), in the order given.
func NewMatrix(pods []kubemodel.PodID, probes []Probe, allowed func(from, to kubemodel.PodID, p Probe) bool) *Matrix {
	m := &Matrix{pods: slices.Clone(pods), probes: slices.Clone(probes)}
	for _, p := range probes {
		table := make([][]bool, len(pods))
		for i, from := range pods {
			table[i] = make([]bool, len(pods))
			for j, to := range pods {
				table[i][j] = allowed(from, to, p)
			}
		}
		m.allowed = append(m.allowed, table)
	}
	return m
}

// Matrix returns the evaluator's matrix of every pod of c (sorted by
// namespace and name) for probes: a cell is allowed when both pods have an
// address of the probe's family (the first one is used) and
// [Cluster.Allowed] allows the connection.
func (c *Cluster) Matrix(probes []Probe) *Matrix {
	return NewMatrix(c.PodIDs(), probes, func(from, to kubemodel.PodID, p Probe) bool {
		fromAddr, ok1 := c.PodAddr(from, p.IPv6)
		toAddr, ok2 := c.PodAddr(to, p.IPv6)
		return ok1 && ok2 && c.Allowed(PodEndpoint(from, fromAddr), PodEndpoint(to, toAddr), p.Protocol, p.Port)
	})
}

// Pods returns the pods of m, in order.
func (m *Matrix) Pods() []kubemodel.PodID { return slices.Clone(m.pods) }

// Probes returns the probes of m, in order.
func (m *Matrix) Probes() []Probe { return slices.Clone(m.probes) }

// Allowed returns the verdict of m for a connection from from to to with
// probe p, and whether m has that cell.
func (m *Matrix) Allowed(from, to kubemodel.PodID, p Probe) (allowed, ok bool) {
	k, i, j := slices.Index(m.probes, p), slices.Index(m.pods, from), slices.Index(m.pods, to)
	if k < 0 || i < 0 || j < 0 {
		return false, false
	}
	return m.allowed[k][i][j], true
}

// Table returns the table of probe p in the style of the upstream truth
// tables: a header row with the probe and the destination pods, then one
// row per source pod with "." for allowed and "X" for denied, for example
//
//	TCP/80 x/a x/b
//	x/a     X   .
//	x/b     .   .
//
// Rows have no trailing spaces. A probe that m does not have gives "".
func (m *Matrix) Table(p Probe) string {
	k := slices.Index(m.probes, p)
	if k < 0 {
		return ""
	}
	col := 0 // width of a column: the longest pod name
	for _, id := range m.pods {
		col = max(col, len(id.String()))
	}
	first := len(p.String()) // width of the first column
	for _, id := range m.pods {
		first = max(first, len(id.String()))
	}
	var b strings.Builder
	line := []string{pad(p.String(), first)}
	for _, to := range m.pods {
		line = append(line, pad(to.String(), col))
	}
	b.WriteString(strings.TrimRight(strings.Join(line, " "), " ") + "\n")
	for i, from := range m.pods {
		line = []string{pad(from.String(), first)}
		for j := range m.pods {
			mark := "X"
			if m.allowed[k][i][j] {
				mark = "."
			}
			line = append(line, pad(strings.Repeat(" ", col/2)+mark, col))
		}
		b.WriteString(strings.TrimRight(strings.Join(line, " "), " ") + "\n")
	}
	return b.String()
}

func pad(s string, width int) string {
	return s + strings.Repeat(" ", max(0, width-len(s)))
}

// String returns the tables of every probe, in order, separated by blank
// lines.
func (m *Matrix) String() string {
	tables := make([]string, 0, len(m.probes))
	for _, p := range m.probes {
		tables = append(tables, m.Table(p))
	}
	return strings.Join(tables, "\n")
}

// Equal reports whether m and other have the same pods, probes and
// verdicts.
func (m *Matrix) Equal(other *Matrix) bool { return Diff(m, other) == "" }

// Diff returns "" when want and got are equal, else a description of the
// differences: the pods or probes that only one has, or one line per
// differing cell ("TCP/80 x/a -> y/b: want ., got X").
func Diff(want, got *Matrix) string {
	if !slices.Equal(want.pods, got.pods) {
		return fmt.Sprintf("pods differ: want %v, got %v\n", want.pods, got.pods)
	}
	if !slices.Equal(want.probes, got.probes) {
		return fmt.Sprintf("probes differ: want %v, got %v\n", want.probes, got.probes)
	}
	mark := func(allowed bool) string {
		if allowed {
			return "."
		}
		return "X"
	}
	var b strings.Builder
	for k, p := range want.probes {
		for i, from := range want.pods {
			for j, to := range want.pods {
				if w, g := want.allowed[k][i][j], got.allowed[k][i][j]; w != g {
					fmt.Fprintf(&b, "%s %s -> %s: want %s, got %s\n", p, from, to, mark(w), mark(g))
				}
			}
		}
	}
	return b.String()
}

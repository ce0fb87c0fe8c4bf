package demo_test

import (
	"context"
	"log/slog"
	"sort"
	"sync"
)

// componentCheck is a slog.Handler that records, for every log record, the
// component attributes it carries (those added by With and those of the
// record, outside groups), so a test can check that the SDK adds
// component=<name> exactly once per line (CONTRIBUTING R9). It is safe
// for concurrent use.
type componentCheck struct {
	level slog.Level
	st    *componentStats
	with  []string // components added by WithAttrs
	group bool     // inside WithGroup: attributes are not top level
}

type componentStats struct {
	mu    sync.Mutex
	lines int
	seen  map[string]int      // component -> lines
	twice map[string][]string // message -> its components, for lines with more than one
}

func newComponentCheck(level slog.Level) *componentCheck {
	return &componentCheck{level: level, st: &componentStats{seen: map[string]int{}, twice: map[string][]string{}}}
}

func (h *componentCheck) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *componentCheck) Handle(_ context.Context, r slog.Record) error {
	comps := append([]string(nil), h.with...)
	if !h.group {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "component" {
				comps = append(comps, a.Value.String())
			}
			return true
		})
	}
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	h.st.lines++
	for _, c := range comps {
		h.st.seen[c]++
	}
	if len(comps) > 1 {
		h.st.twice[r.Message] = comps
	}
	return nil
}

func (h *componentCheck) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	if !h.group {
		c.with = append([]string(nil), h.with...)
		for _, a := range attrs {
			if a.Key == "component" {
				c.with = append(c.with, a.Value.String())
			}
		}
	}
	return &c
}

func (h *componentCheck) WithGroup(string) slog.Handler {
	c := *h
	c.group = true
	return &c
}

// components returns the components seen, sorted.
func (h *componentCheck) components() []string {
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	var out []string
	for c := range h.st.seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

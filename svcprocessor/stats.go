package svcprocessor

import (
	"cmp"
	"log/slog"
	"slices"
	"strings"
)

// SkipReason tells why a part of a service was skipped ([SkippedError]).
// Its String is a stable name, usable as a metric label.
type SkipReason uint8

// Reasons for skipping a part of a service.
const (
	// InvalidIP: a cluster, external or load-balancer IP that does not
	// parse.
	InvalidIP SkipReason = iota + 1
	// InvalidPort: a service port number outside 1..65535; the port is
	// left out of the view.
	InvalidPort
	// InvalidNodePort: a node port outside 1..65535; the port is kept
	// without a node port.
	InvalidNodePort
	// InvalidEndpointIP: an endpoint address that does not parse.
	InvalidEndpointIP
	// InvalidEndpointPort: an endpoint port number outside 1..65535; no
	// service port matches it.
	InvalidEndpointPort

	numSkipReasons = int(InvalidEndpointPort)
)

// SkipReasons returns every SkipReason, in order.
func SkipReasons() []SkipReason {
	return []SkipReason{InvalidIP, InvalidPort, InvalidNodePort, InvalidEndpointIP, InvalidEndpointPort}
}

// String returns the reason's name: "invalid_ip", "invalid_port",
// "invalid_node_port", "invalid_endpoint_ip" or "invalid_endpoint_port".
func (r SkipReason) String() string {
	switch r {
	case InvalidIP:
		return "invalid_ip"
	case InvalidPort:
		return "invalid_port"
	case InvalidNodePort:
		return "invalid_node_port"
	case InvalidEndpointIP:
		return "invalid_endpoint_ip"
	case InvalidEndpointPort:
		return "invalid_endpoint_port"
	}
	return "unknown"
}

// describe is the reason in words, for error messages.
func (r SkipReason) describe() string {
	switch r {
	case InvalidIP, InvalidEndpointIP:
		return "not an IP address"
	case InvalidPort, InvalidEndpointPort:
		return "invalid port number"
	case InvalidNodePort:
		return "invalid node port number"
	}
	return "unknown reason"
}

// Stats is a snapshot of the processor's state and counters. It is a copy:
// safe for concurrent use.
type Stats struct {
	// Services is the number of services with a combined view.
	Services int
	// Skipped is the number of malformed parts of the current services
	// that were skipped ([ServiceProcessor.Skipped]), per reason; every
	// reason is present. It goes down when a service is fixed or deleted.
	Skipped map[SkipReason]int
	// SkipReports counts, since New, the malformed parts reported: each
	// one was logged at Warn once, when it appeared.
	SkipReports uint64
}

// Stats returns the current state and counters.
func (sp *ServiceProcessor) Stats() Stats {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	st := Stats{Services: sp.numContiv, SkipReports: sp.skipReports, Skipped: make(map[SkipReason]int, numSkipReasons)}
	for _, r := range SkipReasons() {
		st.Skipped[r] = sp.skipCounts[r]
	}
	return st
}

// Skipped returns the malformed parts of the current services that were
// skipped, sorted by service, field and value. The result is the
// caller's.
func (sp *ServiceProcessor) Skipped() []SkippedError {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var out []SkippedError
	for _, sk := range sp.skipped {
		out = append(out, sk...)
	}
	slices.SortFunc(out, compareSkipped)
	return out
}

func compareSkipped(a, b SkippedError) int {
	return cmp.Or(compareSvcID(a.Service, b.Service), strings.Compare(a.Field, b.Field), strings.Compare(a.Value, b.Value),
		cmp.Compare(a.Reason, b.Reason))
}

// noteSkipped keeps the skipped parts of one service in step, from old to
// cur, and reports (logs and counts) the parts that are new. Called with
// sp.mu held.
func (sp *ServiceProcessor) noteSkipped(old, cur []SkippedError) {
	if len(old) == 0 && len(cur) == 0 {
		return
	}
	for _, sk := range old {
		sp.skipCounts[sk.Reason]--
	}
	for _, sk := range cur {
		sp.skipCounts[sk.Reason]++
		if !slices.Contains(old, sk) {
			sp.skipReports++
			logSkipped(sp.log, sk)
		}
	}
	if len(cur) > 0 {
		sp.skipped[cur[0].Service] = cur
	} else {
		delete(sp.skipped, old[0].Service)
	}
}

func logSkipped(log *slog.Logger, sk SkippedError) {
	log.Warn("skipping malformed part of a service", slog.String("service", sk.Service.String()),
		slog.String("field", sk.Field), slog.String("value", sk.Value), slog.String("reason", sk.Reason.String()))
}

package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vswitchkit/vswitchkit/bgp"
)

// NodeStatusCollector exports collectNodeStatus to the tests: a collector
// of one node status.
type NodeStatusCollector struct{ Status *bgp.NodeStatus }

// Describe sends nothing: an unchecked collector.
func (NodeStatusCollector) Describe(chan<- *prometheus.Desc) {}

// Collect collects the status.
func (c NodeStatusCollector) Collect(ch chan<- prometheus.Metric) { collectNodeStatus(ch, c.Status) }

// NodeStatusView exports nodeStatusView to the tests.
var NodeStatusView = nodeStatusView

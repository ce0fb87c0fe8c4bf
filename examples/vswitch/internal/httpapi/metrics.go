package httpapi

import (
	"context"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// The metrics' descriptions. Every metric is read from a component's
// Stats snapshot when Prometheus scrapes.
var (
	descReady = prometheus.NewDesc("vswitchkit_ready", "1 once the agent is ready (start-up resync done, node ID known, VPP connected).", nil, nil)

	descQueue         = prometheus.NewDesc("vswitchkit_loop_queue_depth", "Events waiting in the event loop's queue (held ones included).", nil, nil)
	descEvents        = prometheus.NewDesc("vswitchkit_loop_events_total", "Events processed by the event loop, per event type.", []string{"event"}, nil)
	descEventErrors   = prometheus.NewDesc("vswitchkit_loop_event_errors_total", "Events whose processing failed, per event type.", []string{"event"}, nil)
	descEventDuration = prometheus.NewDesc("vswitchkit_loop_event_duration_seconds", "Processing time of events per type: count and sum of all events; quantiles over the events still in the loop's history.", []string{"event"}, nil)
	descHandlerErrors = prometheus.NewDesc("vswitchkit_loop_handler_errors_total", "Errors returned by event handlers, per handler.", []string{"handler"}, nil)
	descHealing       = prometheus.NewDesc("vswitchkit_loop_healing_resyncs_total", "Healing resyncs scheduled after failed events.", nil, nil)
	descHealingFailed = prometheus.NewDesc("vswitchkit_loop_healing_resync_failures_total", "Healing resyncs that failed.", nil, nil)
	descHealingStreak = prometheus.NewDesc("vswitchkit_loop_healing_failing", "Healing resyncs that failed in a row right now (0 once one succeeds); the loop keeps healing.", nil, nil)
	descCommits       = prometheus.NewDesc("vswitchkit_loop_commits_total", "Transactions committed to the VPP driver.", nil, nil)
	descCommitErrors  = prometheus.NewDesc("vswitchkit_loop_commit_errors_total", "Commits that returned an error.", nil, nil)
	descQueueFull     = prometheus.NewDesc("vswitchkit_loop_queue_full_total", "Events refused because the queue was full.", nil, nil)
	descRejected      = prometheus.NewDesc("vswitchkit_loop_rejected_keys", "Keys rejected for good (invalid values) right now.", nil, nil)
	descDegraded      = prometheus.NewDesc("vswitchkit_degraded", "1 while /healthz says degraded: keys rejected for good, healing resyncs failing, VPP keys failing, parts of services skipped or not rendered.", nil, nil)

	descIPAMAllocated = prometheus.NewDesc("vswitchkit_ipam_pool_allocated", "Pod addresses allocated in this node's pod subnet.", []string{"subnet"}, nil)
	descIPAMCapacity  = prometheus.NewDesc("vswitchkit_ipam_pool_capacity", "Pod addresses this node's pod subnet can hand out.", []string{"subnet"}, nil)

	descNodes  = prometheus.NewDesc("vswitchkit_nodes", "Nodes known to node sync (this one included).", nil, nil)
	descNodeID = prometheus.NewDesc("vswitchkit_node_id", "This node's cluster-wide node ID (0 until allocated).", nil, nil)

	descServices  = prometheus.NewDesc("vswitchkit_services_rendered", "Services with at least one NAT44 mapping in VPP's desired state.", nil, nil)
	descMappings  = prometheus.NewDesc("vswitchkit_nat44_mappings", "NAT44 mappings (static and load-balanced) of services.", nil, nil)
	descBackends  = prometheus.NewDesc("vswitchkit_nat44_backends", "Backends in the services' NAT44 mappings.", nil, nil)
	descConflicts = prometheus.NewDesc("vswitchkit_nat44_conflicts", "Service frontends wanted by more than one service.", nil, nil)

	descSvcSkipped = prometheus.NewDesc("vswitchkit_services_skipped", "Malformed parts of the current services (IPs, ports) that the service processor left out, per reason.", []string{"reason"}, nil)
	descSvcReports = prometheus.NewDesc("vswitchkit_services_skip_reports_total", "Malformed parts of services reported (each logged at warn once).", nil, nil)

	descPolicies     = prometheus.NewDesc("vswitchkit_policies", "NetworkPolicies the policy processor knows, valid ones and invalid ones (ignored, see /debug/policy).", []string{"state"}, nil)
	descPolicyPods   = prometheus.NewDesc("vswitchkit_policy_pods_isolated", "This node's pods isolated by a NetworkPolicy, per direction.", []string{"direction"}, nil)
	descPolicyPeers  = prometheus.NewDesc("vswitchkit_policy_peers", "Pods of the cluster known as NetworkPolicy peers.", nil, nil)
	descPolicyACLs   = prometheus.NewDesc("vswitchkit_policy_acls", "ACLs the NetworkPolicy renderer has in VPP's desired state.", nil, nil)
	descPolicyRules  = prometheus.NewDesc("vswitchkit_policy_acl_rules", "Rules of those ACLs.", nil, nil)
	descPolicyIfs    = prometheus.NewDesc("vswitchkit_policy_acl_interfaces", "Interfaces with NetworkPolicy ACLs (pods and exit interfaces).", nil, nil)
	descPolicyRender = prometheus.NewDesc("vswitchkit_policy_render_seconds", "Time the last policy change took: the processor's computation and render, and the ACL renderer's part of it.", []string{"part"}, nil)

	descVPPConnected = prometheus.NewDesc("vswitchkit_vpp_connected", "1 while the driver holds a VPP connection and has read VPP's state back.", nil, nil)
	descVPPConnects  = prometheus.NewDesc("vswitchkit_vpp_connects_total", "Connections made to VPP (the first and every reconnect).", nil, nil)
	descVPPRequests  = prometheus.NewDesc("vswitchkit_vpp_requests_total", "Binary-API requests sent to VPP.", nil, nil)
	descVPPFailures  = prometheus.NewDesc("vswitchkit_vpp_failed_attempts_total", "Failed attempts to apply or remove a key in VPP.", nil, nil)
	descVPPKeys      = prometheus.NewDesc("vswitchkit_vpp_keys", "Desired VPP keys per kind and reconciliation state (configured, pending, failed).", []string{"kind", "state"}, nil)
	descVPPFailing   = prometheus.NewDesc("vswitchkit_vpp_failing_keys", "VPP keys that keep failing (the driver retries them), per kind.", []string{"kind"}, nil)

	descBGPState      = prometheus.NewDesc("vswitchkit_bgp_session_state", "1 for the current state of each BGP session, 0 for the others.", []string{"local_asn", "peer", "peer_asn", "state"}, nil)
	descBGPAdvertised = prometheus.NewDesc("vswitchkit_bgp_routes_advertised", "Routes advertised to a peer, per address family.", []string{"local_asn", "peer", "family"}, nil)
	descBGPReceived   = prometheus.NewDesc("vswitchkit_bgp_routes_received", "Routes received from a peer, per address family.", []string{"local_asn", "peer", "family"}, nil)
	descBGPReconciles = prometheus.NewDesc("vswitchkit_bgp_reconciles_total", "Reconciles of the BGP controller.", nil, nil)
	descBGPFailing    = prometheus.NewDesc("vswitchkit_bgp_reconcile_failing", "1 while the last BGP reconcile failed.", nil, nil)

	descCNIRequests = prometheus.NewDesc("vswitchkit_cni_requests_total", "CNI requests served, per command.", []string{"command"}, nil)
	descCNIErrors   = prometheus.NewDesc("vswitchkit_cni_request_errors_total", "CNI requests answered with an error, per command.", []string{"command"}, nil)
	descCNIDuration = prometheus.NewDesc("vswitchkit_cni_request_duration_seconds", "Time to serve CNI requests, per command (count and sum).", []string{"command"}, nil)
	descCNIBad      = prometheus.NewDesc("vswitchkit_cni_bad_requests_total", "CNI requests that could not be decoded.", nil, nil)

	descWatchResyncs  = prometheus.NewDesc("vswitchkit_watcher_resyncs_total", "Full resyncs delivered by the etcd watcher, from etcd or from the local mirror.", []string{"source"}, nil)
	descWatchChanges  = prometheus.NewDesc("vswitchkit_watcher_changes_total", "Changes delivered by the etcd watcher (Kubernetes state, external configuration).", []string{"kind"}, nil)
	descWatchRecovers = prometheus.NewDesc("vswitchkit_watcher_reconnects_total", "Resyncs after the connection to etcd came back.", nil, nil)
	descWatchRev      = prometheus.NewDesc("vswitchkit_watcher_revision", "Highest etcd revision delivered.", nil, nil)
	descWatchSkipped  = prometheus.NewDesc("vswitchkit_watcher_skipped_total", "Keys and values in etcd the watcher skipped, per resource (\"external\" for the external configuration): keys that break the resource's key scheme (bad_key), values that do not decode (bad_value).", []string{"resource", "reason"}, nil)
	descWatchUnknown  = prometheus.NewDesc("vswitchkit_watcher_unknown_keys_total", "Keys in the watched range of no resource the agent uses.", nil, nil)
)

// allDescs lists every description, for Describe.
var allDescs = []*prometheus.Desc{
	descReady, descQueue, descEvents, descEventErrors, descEventDuration, descHandlerErrors, descHealing, descHealingFailed, descHealingStreak,
	descCommits, descCommitErrors, descQueueFull, descRejected, descDegraded, descIPAMAllocated, descIPAMCapacity, descNodes, descNodeID,
	descServices, descMappings, descBackends, descConflicts, descSvcSkipped, descSvcReports, descVPPConnected, descVPPConnects,
	descVPPRequests, descVPPFailures, descVPPKeys, descVPPFailing, descBGPState, descBGPAdvertised, descBGPReceived, descBGPReconciles, descBGPFailing,
	descCNIRequests, descCNIErrors, descCNIDuration, descCNIBad, descWatchResyncs, descWatchChanges, descWatchRecovers,
	descWatchRev, descWatchSkipped, descWatchUnknown,
	descPolicies, descPolicyPods, descPolicyPeers, descPolicyACLs, descPolicyRules, descPolicyIfs, descPolicyRender,
}

// sessionStates are the BGP session states, each exported per peer.
var sessionStates = []bgp.SessionState{
	bgp.SessionIdle, bgp.SessionConnect, bgp.SessionActive, bgp.SessionOpenSent,
	bgp.SessionOpenConfirm, bgp.SessionEstablished, bgp.SessionUnknown,
}

// quantiles of the event durations, over the loop's history.
var quantiles = []float64{0.5, 0.9, 0.99}

// collector exports the agent's component stats; it reads them at every
// scrape. It is safe for concurrent use.
type collector struct {
	s *Server
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v uint64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	a := c.s.agent()
	gauge(ch, descReady, boolf(a != nil && a.Ready() == nil))
	if a == nil {
		return
	}
	collectLoop(ch, a)

	pu := a.IPAM.PoolUsage()
	if pu.Subnet.IsValid() {
		gauge(ch, descIPAMAllocated, float64(pu.Allocated), pu.Subnet.String())
		gauge(ch, descIPAMCapacity, float64(pu.Capacity), pu.Subnet.String())
	}
	gauge(ch, descNodes, float64(len(a.NodeSync.GetAllNodes())))
	gauge(ch, descNodeID, float64(a.NodeSync.GetNodeID()))

	gauge(ch, descDegraded, boolf(len(degradation(a)) > 0))

	if a.NAT != nil {
		ns := a.NAT.Stats()
		gauge(ch, descServices, float64(ns.Services))
		gauge(ch, descMappings, float64(ns.Mappings))
		gauge(ch, descBackends, float64(ns.Backends))
		gauge(ch, descConflicts, float64(ns.Conflicts))
	}
	ss := a.Services.Stats()
	for _, r := range svcprocessor.SkipReasons() {
		gauge(ch, descSvcSkipped, float64(ss.Skipped[r]), r.String())
	}
	counter(ch, descSvcReports, ss.SkipReports)

	if a.Policy != nil {
		ps, rs := a.Policy.Stats(), a.ACLs.Stats()
		gauge(ch, descPolicies, float64(ps.Policies), "valid")
		gauge(ch, descPolicies, float64(ps.InvalidPolicies), "invalid")
		gauge(ch, descPolicyPods, float64(ps.IsolatedIngress), "ingress")
		gauge(ch, descPolicyPods, float64(ps.IsolatedEgress), "egress")
		gauge(ch, descPolicyPeers, float64(ps.Peers))
		gauge(ch, descPolicyACLs, float64(rs.ACLs))
		gauge(ch, descPolicyRules, float64(rs.Rules))
		gauge(ch, descPolicyIfs, float64(rs.Interfaces))
		gauge(ch, descPolicyRender, ps.LastRender.Seconds(), "total")
		gauge(ch, descPolicyRender, rs.LastRender.Seconds(), "acl")
	}
	collectVPP(ch, a)
	if a.BGP != nil {
		c.collectBGP(ch, a)
	}

	cs := a.CNI.Stats()
	for _, cmd := range slices.Sorted(maps.Keys(cs.Commands)) {
		st := cs.Commands[cmd]
		counter(ch, descCNIRequests, st.Requests, cmd)
		counter(ch, descCNIErrors, st.Failed, cmd)
		ch <- prometheus.MustNewConstSummary(descCNIDuration, st.Requests, st.Duration.Seconds(), nil, cmd)
	}
	counter(ch, descCNIBad, cs.BadRequests)

	ws := a.Watcher.Stats()
	counter(ch, descWatchResyncs, ws.RemoteResyncs, "etcd")
	counter(ch, descWatchResyncs, ws.LocalResyncs, "mirror")
	counter(ch, descWatchChanges, ws.KubeChanges, "kube")
	counter(ch, descWatchChanges, ws.ExternalChanges, "external")
	counter(ch, descWatchRecovers, ws.Reconnects)
	gauge(ch, descWatchRev, float64(ws.Revision))
	for _, res := range slices.Sorted(maps.Keys(ws.SkippedByResource)) {
		sk := ws.SkippedByResource[res]
		counter(ch, descWatchSkipped, sk.BadKeys, res, "bad_key")
		counter(ch, descWatchSkipped, sk.BadValues, res, "bad_value")
	}
	counter(ch, descWatchSkipped, ws.SkippedExternal.BadKeys, "external", "bad_key")
	counter(ch, descWatchSkipped, ws.SkippedExternal.BadValues, "external", "bad_value")
	counter(ch, descWatchUnknown, ws.UnknownKeys)
}

func collectLoop(ch chan<- prometheus.Metric, a *agent.Agent) {
	ls := a.Loop.Stats()
	gauge(ch, descQueue, float64(ls.Queued))
	counter(ch, descHealing, ls.HealingScheduled)
	counter(ch, descHealingFailed, ls.HealingFailed)
	gauge(ch, descHealingStreak, float64(ls.HealingFailing))
	counter(ch, descCommits, ls.Commits)
	counter(ch, descCommitErrors, ls.CommitErrors)
	counter(ch, descQueueFull, ls.QueueFull)
	gauge(ch, descRejected, float64(ls.RejectedKeys))

	// Quantiles over the durations of the events still in the history.
	recent := map[string][]float64{}
	h := a.Loop.History()
	for _, r := range h.Last(h.Cap()) {
		recent[r.Name] = append(recent[r.Name], r.Duration().Seconds())
	}
	es := a.Loop.EventStats()
	for _, name := range slices.Sorted(maps.Keys(es)) {
		st := es[name]
		counter(ch, descEvents, st.Processed, name)
		counter(ch, descEventErrors, st.Failed, name)
		ch <- prometheus.MustNewConstSummary(descEventDuration, st.Processed, st.Duration.Seconds(), quantilesOf(recent[name]), name)
	}
	hs := a.Loop.HandlerStats()
	for _, name := range slices.Sorted(maps.Keys(hs)) {
		counter(ch, descHandlerErrors, hs[name].Errors, name)
	}
}

// quantilesOf returns the quantiles of vs (nil for none).
func quantilesOf(vs []float64) map[float64]float64 {
	if len(vs) == 0 {
		return nil
	}
	sort.Float64s(vs)
	out := make(map[float64]float64, len(quantiles))
	for _, q := range quantiles {
		i := int(q*float64(len(vs))+0.5) - 1
		out[q] = vs[min(max(i, 0), len(vs)-1)]
	}
	return out
}

func collectVPP(ch chan<- prometheus.Metric, a *agent.Agent) {
	ds := a.Driver.Stats()
	gauge(ch, descVPPConnected, boolf(ds.Connected))
	counter(ch, descVPPConnects, ds.Connects)
	counter(ch, descVPPRequests, ds.Requests)
	counter(ch, descVPPFailures, ds.FailedAttempts)
	type ks struct{ kind, state string }
	counts := map[ks]int{}
	kinds := map[string]bool{}
	for key, st := range a.Driver.Statuses() {
		k := KeyKind(key)
		kinds[k] = true
		counts[ks{k, st.State.String()}]++
	}
	for _, kind := range slices.Sorted(maps.Keys(kinds)) {
		for _, state := range []vppdriver.State{vppdriver.StateConfigured, vppdriver.StatePending, vppdriver.StateFailed} {
			gauge(ch, descVPPKeys, float64(counts[ks{kind, state.String()}]), kind, state.String())
		}
	}
	// The driver's kinds (a key's segment after "vpp/"): the basic ones and
	// every one that has keys (ACLs, cnat…), zero included, so that a
	// series does not appear only when something fails.
	failing := map[string]int{"interface": 0, "vrf": 0, "route": 0, "neighbor": 0, "nat44": 0}
	for kind := range kinds {
		failing[kind] = 0
	}
	for kind, n := range ds.FailingByKind {
		failing[kind] = n
	}
	for _, kind := range slices.Sorted(maps.Keys(failing)) {
		gauge(ch, descVPPFailing, float64(failing[kind]), kind)
	}
}

// KeyKind returns the kind of a VPP key for metrics: "interface", "vrf",
// "route", "neighbor", "nat44_static", "nat44_lb", ...
func KeyKind(key string) string {
	rest, ok := strings.CutPrefix(key, vppmodel.KeyRoot)
	if !ok {
		return "other"
	}
	first, rest, _ := strings.Cut(rest, "/")
	if first == "nat44" {
		second, _, _ := strings.Cut(rest, "/")
		return "nat44_" + second
	}
	return first
}

func (c collector) collectBGP(ch chan<- prometheus.Metric, a *agent.Agent) {
	st := a.BGP.Controller.Status()
	counter(ch, descBGPReconciles, st.Reconciles)
	gauge(ch, descBGPFailing, boolf(st.LastError != nil))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	peers, err := a.BGP.Manager.Peers(ctx)
	if err != nil {
		return // not running (yet, or any more)
	}
	for _, p := range peers {
		local, peer, peerASN := strconv.FormatUint(uint64(p.LocalASN), 10), p.PeerAddress.String(), strconv.FormatUint(uint64(p.PeerASN), 10)
		for _, s := range sessionStates {
			gauge(ch, descBGPState, boolf(p.State == s), local, peer, peerASN, strings.ToLower(string(s)))
		}
		for _, fam := range slices.Sorted(maps.Keys(p.Advertised)) {
			gauge(ch, descBGPAdvertised, float64(p.Advertised[fam]), local, peer, string(fam))
		}
		for _, fam := range slices.Sorted(maps.Keys(p.Received)) {
			gauge(ch, descBGPReceived, float64(p.Received[fam]), local, peer, string(fam))
		}
	}
}

package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/policy"
	"github.com/vswitchkit/vswitchkit/render/aclpolicy"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// debugView is one debug view: its path, what it shows and its query
// parameters (listed by /debug/).
type debugView struct {
	Path  string            `json:"path"`
	Shows string            `json:"shows"`
	Query map[string]string `json:"query,omitempty"`
	serve func(*http.Request, *agent.Agent) (any, error)
}

// debugViews are the debug views, in the order /debug/ lists them.
var debugViews = []debugView{
	{Path: "/debug/events", Shows: "the event loop's history with each handler's outcome and duration, counters per event type, handler errors",
		Query: map[string]string{"n": "only the last n events"}, serve: debugEvents},
	{Path: "/debug/ipam", Shows: "the address plan, this node's pod pool and every allocation with its pod and container", serve: debugIPAM},
	{Path: "/debug/nodes", Shows: "the nodes node sync knows: ID, VPP and management addresses, pod CIDRs", serve: debugNodes},
	{Path: "/debug/services", Shows: "the services as the service processor combined them, the malformed parts it skipped, the service renderer's counters (nat44, or cnat with its problems: parts of services and pods' hostPorts not rendered, and why)", serve: debugServices},
	{Path: "/debug/vpp", Shows: "per VPP key its desired and applied value and its state",
		Query: map[string]string{
			"state":  "only keys in this state: " + strings.Join(vppStates, ", "),
			"kind":   "only keys of this kind, e.g. interface, route, nat44_static (an unknown kind answers 400 with the valid ones)",
			"prefix": "only keys with this prefix, e.g. vpp/route/",
		}, serve: debugVPP},
	{Path: "/debug/policy", Shows: "every NetworkPolicy with its error or the local pods it selects and its unresolved named ports; each local pod's effective ingress and egress rules; the ACL renderer's counters",
		Query: map[string]string{"pod": "only this pod (namespace/name)"}, serve: debugPolicy},
	{Path: "/debug/bgp", Shows: "the BGP controller's policy and last error, every session with its state and route counts",
		Query: map[string]string{"routes": "any value: add the routes advertised to each established peer"}, serve: debugBGP},
	{Path: "/debug/bgp/status", Shows: "this node's BGP status as it publishes it: configuration source, instances and peers with session state, timers, routes per family, conditions; learned routes", serve: debugBGPStatus},
}

// vppStates are the states /debug/vpp reports for a key.
var vppStates = []string{vppdriver.StateConfigured.String(), vppdriver.StatePending.String(), vppdriver.StateFailed.String(), "removing"}

// vppKinds returns the kinds ?kind= accepts: those of every key the VPP
// model defines, and those of the keys present.
func vppKinds(present map[string]bool) []string {
	kinds := map[string]bool{}
	for _, prefix := range []string{
		vppmodel.InterfaceKeyPrefix, vppmodel.VrfTableKeyPrefix, vppmodel.RouteKeyPrefix, vppmodel.IPNeighborKeyPrefix,
		vppmodel.ACLKeyPrefix, vppmodel.ACLInterfaceKeyPrefix, vppmodel.Nat44InterfaceKeyPrefix,
		vppmodel.Nat44AddressPoolKeyPrefix, vppmodel.Nat44StaticMappingKeyPrefix, vppmodel.Nat44IdentityMappingKeyPrefix,
		vppmodel.Nat44LbStaticMappingKeyPrefix,
	} {
		kinds[KeyKind(prefix+"x")] = true
	}
	kinds[KeyKind(vppmodel.Nat44GlobalKey)] = true
	for k := range present {
		kinds[KeyKind(k)] = true
	}
	return slices.Sorted(maps.Keys(kinds))
}

// The JSON shapes of the debug views. Durations are strings such as
// "1.5ms"; errors are strings, empty when there is none.

type eventView struct {
	Seq             uint64        `json:"seq"`
	Name            string        `json:"name"`
	Description     string        `json:"description"`
	Method          string        `json:"method"`
	Direction       string        `json:"direction,omitempty"`
	TransactionType string        `json:"transactionType,omitempty"`
	FollowUp        bool          `json:"followUp,omitempty"`
	ResyncCount     int           `json:"resyncCount,omitempty"`
	Start           time.Time     `json:"start"`
	Duration        string        `json:"duration"`
	Handlers        []handlerView `json:"handlers"`
	Committed       bool          `json:"committed"`
	TxnSeq          uint64        `json:"txnSeq,omitempty"`
	CommitError     string        `json:"commitError,omitempty"`
	Error           string        `json:"error,omitempty"`
}

type handlerView struct {
	Handler  string `json:"handler"`
	Change   string `json:"change,omitempty"`
	Error    string `json:"error,omitempty"`
	Duration string `json:"duration"`
	Reverted bool   `json:"reverted,omitempty"`
}

type eventStatsView struct {
	Processed     uint64 `json:"processed"`
	Failed        uint64 `json:"failed"`
	TotalDuration string `json:"totalDuration"`
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// debugEvents: the loop's counters and its history, oldest first; ?n=
// keeps the last n events.
func debugEvents(r *http.Request, a *agent.Agent) (any, error) {
	h := a.Loop.History()
	n := h.Cap()
	if s := r.URL.Query().Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("n: %q is not a count", s)
		}
		n = min(v, n)
	}
	st := a.Loop.Stats()
	out := struct {
		HistoryCapacity int                       `json:"historyCapacity"`
		Queued          int                       `json:"queued"`
		Processed       uint64                    `json:"processed"`
		Failed          uint64                    `json:"failed"`
		StartupResync   bool                      `json:"startupResyncDone"`
		Healthy         string                    `json:"healthy"`
		ByEvent         map[string]eventStatsView `json:"byEvent"`
		HandlerErrors   map[string]uint64         `json:"handlerErrors"`
		Events          []eventView               `json:"events"`
	}{
		HistoryCapacity: h.Cap(), Queued: st.Queued, Processed: st.Processed, Failed: st.Failed,
		StartupResync: st.StartupResyncDone, Healthy: "ok",
		ByEvent: map[string]eventStatsView{}, HandlerErrors: map[string]uint64{}, Events: []eventView{},
	}
	if err := a.Loop.Healthy(); err != nil {
		out.Healthy = err.Error()
	}
	for name, es := range a.Loop.EventStats() {
		out.ByEvent[name] = eventStatsView{Processed: es.Processed, Failed: es.Failed, TotalDuration: es.Duration.String()}
	}
	for name, hs := range a.Loop.HandlerStats() {
		out.HandlerErrors[name] = hs.Errors
	}
	for _, rec := range h.Last(n) {
		ev := eventView{
			Seq: rec.Seq, Name: rec.Name, Description: rec.Description, Method: rec.Method.String(),
			FollowUp: rec.FollowUp, ResyncCount: rec.ResyncCount, Start: rec.Start, Duration: rec.Duration().String(),
			Handlers: []handlerView{}, Committed: rec.Committed, TxnSeq: rec.TxnSeq,
			CommitError: errString(rec.CommitErr), Error: errString(rec.Err),
		}
		if rec.Method == controller.Update {
			ev.Direction, ev.TransactionType = rec.Direction.String(), rec.TransactionType.String()
		}
		for _, ho := range rec.Handlers {
			ev.Handlers = append(ev.Handlers, handlerView{Handler: ho.Handler, Change: ho.Change, Error: errString(ho.Err),
				Duration: ho.Duration.String(), Reverted: ho.Reverted})
		}
		out.Events = append(out.Events, ev)
	}
	return out, nil
}

// addrString and prefixString print a valid address or prefix, "" for
// one not known yet.
func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

func prefixString(p netip.Prefix) string {
	if !p.IsValid() {
		return ""
	}
	return p.String()
}

// debugIPAM: the address plan, this node's pool and its allocations.
func debugIPAM(_ *http.Request, a *agent.Agent) (any, error) {
	i := a.IPAM
	id := i.NodeID()
	type allocation struct {
		Pod         string     `json:"pod"`
		Address     netip.Addr `json:"address"`
		ContainerID string     `json:"containerID,omitempty"`
	}
	out := struct {
		NodeID               uint32       `json:"nodeID"`
		PodSubnetAllNodes    string       `json:"podSubnetAllNodes"`
		ServiceCIDR          string       `json:"serviceCIDR"`
		PodSubnet            string       `json:"podSubnet"`
		PodGateway           string       `json:"podGateway"`
		Capacity             uint64       `json:"capacity"`
		Allocated            uint64       `json:"allocated"`
		HostInterconnect     string       `json:"hostInterconnectSubnet"`
		HostInterconnectVPP  string       `json:"hostInterconnectVPP"`
		HostInterconnectHost string       `json:"hostInterconnectLinux"`
		NodeIP               string       `json:"nodeIP"`
		VXLANIP              string       `json:"vxlanIP"`
		Allocations          []allocation `json:"allocations"`
	}{
		NodeID: id, PodSubnetAllNodes: prefixString(i.PodSubnetAllNodesPrefix()), ServiceCIDR: prefixString(i.ServiceNetworkPrefix()),
		PodGateway: addrString(i.PodGatewayAddr()), HostInterconnect: prefixString(i.HostInterconnectSubnetThisNodePrefix()),
		HostInterconnectVPP: addrString(i.HostInterconnectAddrInVPP()), HostInterconnectHost: addrString(i.HostInterconnectAddrInLinux()),
		Allocations: []allocation{},
	}
	pu := i.PoolUsage()
	out.PodSubnet = prefixString(pu.Subnet)
	out.Capacity, out.Allocated = pu.Capacity, pu.Allocated
	if id != 0 {
		if p, err := i.NodeAddr(id); err == nil {
			out.NodeIP = p.String()
		}
		if p, err := i.VxlanAddr(id); err == nil {
			out.VXLANIP = p.String()
		}
	}
	for _, al := range i.Allocations() {
		out.Allocations = append(out.Allocations, allocation{Pod: al.Pod.String(), Address: al.Addr, ContainerID: al.ContainerID})
	}
	return out, nil
}

// debugNodes: the nodes node sync knows, by ID.
func debugNodes(_ *http.Request, a *agent.Agent) (any, error) {
	type node struct {
		ID             uint32         `json:"id"`
		Name           string         `json:"name"`
		VPPAddresses   []string       `json:"vppAddresses"`
		MgmtAddresses  []string       `json:"mgmtAddresses"`
		PodCIDRs       []netip.Prefix `json:"podCIDRs"`
		ThisNode       bool           `json:"thisNode,omitempty"`
		HasVswitchNode bool           `json:"hasVswitch"`
	}
	out := struct {
		NodeName string `json:"nodeName"`
		NodeID   uint32 `json:"nodeID"`
		Nodes    []node `json:"nodes"`
	}{NodeName: a.Config().NodeName, NodeID: a.NodeSync.GetNodeID(), Nodes: []node{}}
	for name, n := range a.NodeSync.GetAllNodes() {
		v := node{ID: n.ID, Name: name, VPPAddresses: []string{}, MgmtAddresses: []string{}, PodCIDRs: n.PodCIDRs,
			ThisNode: name == out.NodeName, HasVswitchNode: n.ID != 0}
		if v.PodCIDRs == nil {
			v.PodCIDRs = []netip.Prefix{}
		}
		for _, ip := range n.VppIPAddresses {
			v.VPPAddresses = append(v.VPPAddresses, netip.PrefixFrom(ip.Address, ip.Network.Bits()).String())
		}
		for _, ip := range n.MgmtIPAddresses {
			v.MgmtAddresses = append(v.MgmtAddresses, ip.String())
		}
		out.Nodes = append(out.Nodes, v)
	}
	slices.SortFunc(out.Nodes, func(x, y node) int { return cmp.Or(cmp.Compare(x.ID, y.ID), strings.Compare(x.Name, y.Name)) })
	return out, nil
}

// debugServices: the combined service views and the service renderer's
// counters (NAT44's, or cnat's with its problems).
func debugServices(_ *http.Request, a *agent.Agent) (any, error) {
	type backend struct {
		IP          netip.Addr `json:"ip"`
		Port        uint16     `json:"port"`
		Pod         string     `json:"pod,omitempty"`
		Local       bool       `json:"local,omitempty"`
		HostNetwork bool       `json:"hostNetwork,omitempty"`
		Ready       bool       `json:"ready"`
		Terminating bool       `json:"terminating,omitempty"`
	}
	type port struct {
		Name             string    `json:"name"`
		Protocol         string    `json:"protocol"`
		Port             uint16    `json:"port"`
		NodePort         uint16    `json:"nodePort,omitempty"`
		Backends         []backend `json:"backends"`
		NotReadyBackends []backend `json:"notReadyBackends,omitempty"`
	}
	type service struct {
		ID                     string       `json:"id"`
		Type                   string       `json:"type"`
		ClusterIPs             []netip.Addr `json:"clusterIPs"`
		ExternalIPs            []netip.Addr `json:"externalIPs,omitempty"`
		Ports                  []port       `json:"ports"`
		ExternalTrafficPolicy  string       `json:"externalTrafficPolicy"`
		InternalTrafficPolicy  string       `json:"internalTrafficPolicy"`
		SessionAffinityTimeout uint32       `json:"sessionAffinityTimeoutSeconds,omitempty"`
	}
	backends := func(bs []svcprocessor.ServiceBackend) []backend {
		out := []backend{}
		for _, b := range bs {
			v := backend{IP: b.IP, Port: b.Port, Local: b.Local, HostNetwork: b.HostNetwork, Ready: b.Ready, Terminating: b.Terminating}
			if b.Pod.Name != "" {
				v.Pod = b.Pod.String()
			}
			out = append(out, v)
		}
		return out
	}
	type skipped struct {
		Service string `json:"service"`
		Reason  string `json:"reason"`
		Field   string `json:"field"`
		Value   string `json:"value"`
	}
	snap := a.Services.Snapshot()
	out := struct {
		Services  []service    `json:"services"`
		Skipped   []skipped    `json:"skipped"`
		NodeIPs   []netip.Addr `json:"nodeIPs"`
		Frontends []string     `json:"frontendInterfaces"`
		Backends  []string     `json:"backendInterfaces"`
		NAT44     any          `json:"nat44,omitempty"`
		Cnat      any          `json:"cnat,omitempty"`
	}{Services: []service{}, Skipped: []skipped{}, NodeIPs: snap.NodeIPs, Frontends: snap.Frontends, Backends: snap.Backends, Cnat: cnatView(a)}
	if a.NAT != nil {
		out.NAT44 = lowerCamel(a.NAT.Stats())
	}
	for _, sk := range a.Services.Skipped() {
		out.Skipped = append(out.Skipped, skipped{Service: sk.Service.String(), Reason: sk.Reason.String(), Field: sk.Field, Value: sk.Value})
	}
	for _, s := range snap.Services {
		v := service{ID: s.ID.String(), Type: s.Type.String(), ClusterIPs: s.ClusterIPs, ExternalIPs: s.ExternalIPs,
			ExternalTrafficPolicy: s.ExternalTrafficPolicy.String(), InternalTrafficPolicy: s.InternalTrafficPolicy.String(),
			SessionAffinityTimeout: s.SessionAffinityTimeout, Ports: []port{}}
		for _, p := range s.Ports {
			v.Ports = append(v.Ports, port{Name: p.Name, Protocol: p.Protocol.String(), Port: p.Port, NodePort: p.NodePort,
				Backends: backends(p.Backends), NotReadyBackends: backends(p.NotReadyBackends)})
		}
		out.Services = append(out.Services, v)
	}
	return out, nil
}

// debugVPP: per key, the desired and the applied value and the status.
// Filters: ?state=configured|pending|failed, ?kind=route, ?prefix=vpp/...
func debugVPP(r *http.Request, a *agent.Agent) (any, error) {
	q := r.URL.Query()
	wantState, wantKind, prefix := q.Get("state"), q.Get("kind"), q.Get("prefix")
	if wantState != "" && !slices.Contains(vppStates, wantState) {
		return nil, fmt.Errorf("state: %q is not one of %s", wantState, strings.Join(vppStates, ", "))
	}
	type key struct {
		Key       string     `json:"key"`
		Kind      string     `json:"kind"`
		State     string     `json:"state"`
		PendingOn []string   `json:"pendingOn,omitempty"`
		Error     string     `json:"error,omitempty"`
		Attempts  int        `json:"attempts,omitempty"`
		NextRetry *time.Time `json:"nextRetry,omitempty"`
		// FailingSince is set while the key keeps failing (see
		// vppdriver.KeyStatus.FailingSince).
		FailingSince *time.Time      `json:"failingSince,omitempty"`
		Desired      json.RawMessage `json:"desired"`
		Applied      json.RawMessage `json:"applied"`
	}
	ds := a.Driver.Stats()
	out := struct {
		Connected     bool   `json:"connected"`
		Compatibility string `json:"compatibility,omitempty"`
		Stats         any    `json:"stats"`
		Keys          []key  `json:"keys"`
	}{Connected: ds.Connected, Compatibility: errString(a.Driver.Compatibility()), Stats: lowerCamel(ds), Keys: []key{}}
	statuses, desired, applied := a.Driver.Statuses(), a.Driver.Desired(), a.Driver.Applied()
	all := map[string]bool{}
	for k := range statuses {
		all[k] = true
	}
	for k := range applied {
		all[k] = true // applied but no longer desired: being removed
	}
	if kinds := vppKinds(all); wantKind != "" && !slices.Contains(kinds, wantKind) {
		return nil, fmt.Errorf("kind: %q is not one of %s", wantKind, strings.Join(kinds, ", "))
	}
	for _, k := range slices.Sorted(maps.Keys(all)) {
		st, isDesired := statuses[k]
		v := key{Key: k, Kind: KeyKind(k), State: "removing", Desired: protoJSON(desired[k]), Applied: protoJSON(applied[k])}
		if isDesired {
			v.State, v.PendingOn, v.Error, v.Attempts = st.State.String(), st.PendingOn, errString(st.Err), st.Attempts
			if !st.NextRetry.IsZero() {
				v.NextRetry = &st.NextRetry
			}
			if !st.FailingSince.IsZero() {
				v.FailingSince = &st.FailingSince
			}
		}
		if (wantState != "" && v.State != wantState) || (wantKind != "" && v.Kind != wantKind) || !strings.HasPrefix(k, prefix) {
			continue
		}
		out.Keys = append(out.Keys, v)
	}
	return out, nil
}

var protoJSONOptions = protojson.MarshalOptions{UseProtoNames: false, EmitUnpopulated: false}

func protoJSON(m proto.Message) json.RawMessage {
	if m == nil {
		return json.RawMessage("null")
	}
	b, err := protoJSONOptions.Marshal(m)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	return b
}

// debugBGP: the controller's status and the sessions; ?routes=1 adds the
// routes advertised to each established peer.
func debugBGP(r *http.Request, a *agent.Agent) (any, error) {
	type peer struct {
		LocalASN   uint32                `json:"localASN"`
		Peer       netip.Addr            `json:"peer"`
		PeerASN    uint32                `json:"peerASN"`
		State      string                `json:"state"`
		Uptime     string                `json:"uptime,omitempty"`
		Negotiated []bgp.Family          `json:"negotiated"`
		Disabled   map[bgp.Family]string `json:"disabled,omitempty"`
		Advertised map[bgp.Family]int    `json:"advertised"`
		Received   map[bgp.Family]int    `json:"received"`
		Routes     map[bgp.Family][]any  `json:"advertisedRoutes,omitempty"`
	}
	out := struct {
		Enabled    bool   `json:"enabled"`
		Policy     string `json:"policy,omitempty"`
		LastError  string `json:"lastError,omitempty"`
		Reconciles uint64 `json:"reconciles"`
		Error      string `json:"error,omitempty"`
		Peers      []peer `json:"peers"`
	}{Peers: []peer{}}
	if a.BGP == nil {
		return out, nil
	}
	out.Enabled = true
	st := a.BGP.Controller.Status()
	out.Policy, out.LastError, out.Reconciles = st.Policy, errString(st.LastError), st.Reconciles
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	peers, err := a.BGP.Manager.Peers(ctx)
	if err != nil {
		out.Error = err.Error()
		return out, nil
	}
	withRoutes := r.URL.Query().Get("routes") != ""
	for _, p := range peers {
		v := peer{LocalASN: p.LocalASN, Peer: p.PeerAddress, PeerASN: p.PeerASN, State: string(p.State),
			Negotiated: p.Negotiated, Disabled: p.Disabled, Advertised: p.Advertised, Received: p.Received}
		if v.Negotiated == nil {
			v.Negotiated = []bgp.Family{}
		}
		if p.State == bgp.SessionEstablished {
			v.Uptime = p.Uptime.Round(time.Second).String()
		}
		if withRoutes && p.State == bgp.SessionEstablished {
			v.Routes = map[bgp.Family][]any{}
			for _, fam := range p.Negotiated {
				routes, err := a.BGP.Manager.Routes(ctx, gobgp.RouteQuery{LocalASN: p.LocalASN, Peer: p.PeerAddress, Family: fam})
				if err != nil {
					continue
				}
				for _, rt := range routes {
					v.Routes[fam] = append(v.Routes[fam], map[string]any{"prefix": rt.Prefix, "nextHop": rt.NextHop, "asPath": rt.ASPath})
				}
			}
		}
		out.Peers = append(out.Peers, v)
	}
	return out, nil
}

// lowerCamel returns the exported fields of struct v by their JSON names
// (jsonName), the style of the other JSON fields.
func lowerCamel(v any) map[string]any {
	rv := reflect.ValueOf(v)
	out := map[string]any{}
	for i, f := range reflect.VisibleFields(rv.Type()) {
		if f.IsExported() && !f.Anonymous {
			out[jsonName(f.Name)] = rv.Field(i).Interface()
		}
	}
	return out
}

// jsonName returns the JSON name of a Go field name: camelCase whose first
// word is lower-case, an initialism included ("IPv6Frontends" is
// "ipv6Frontends", "NAT44Mappings" "nat44Mappings", "VPPConnected"
// "vppConnected"), and whose later initialisms keep their case
// ("TwiceNATPool" is "twiceNATPool"), as "nodeID" and "clusterIPs" of the
// views.
func jsonName(name string) string {
	for _, ini := range []string{"IPv4", "IPv6"} {
		if strings.HasPrefix(name, ini) {
			return strings.ToLower(ini) + name[len(ini):]
		}
	}
	n := strings.IndexFunc(name, func(r rune) bool { return !unicode.IsUpper(r) })
	switch {
	case n == -1:
		return strings.ToLower(name) // all upper case: "NAT"
	case n == 0:
		return name
	case n == 1 || !unicode.IsLower(rune(name[n])):
		return strings.ToLower(name[:n]) + name[n:] // "Services", "NAT44Mappings"
	default:
		return strings.ToLower(name[:n-1]) + name[n-1:] // "VPPConnected": the last capital starts the next word
	}
}

func debugPolicy(r *http.Request, a *agent.Agent) (any, error) {
	if a.Policy == nil {
		return nil, fmt.Errorf("%w: NetworkPolicy enforcement is disabled", errNotFound)
	}
	type status struct {
		Policy          string   `json:"policy"`
		Error           string   `json:"error,omitempty"`
		LocalPods       int      `json:"localPods"`
		UnresolvedPorts []string `json:"unresolvedPorts,omitempty"`
	}
	type direction struct {
		Isolated bool     `json:"isolated"`
		Rules    []string `json:"rules,omitempty"`
	}
	type pod struct {
		Pod      string       `json:"pod"`
		Addrs    []netip.Addr `json:"addrs"`
		Policies []string     `json:"policies,omitempty"`
		Ingress  direction    `json:"ingress"`
		Egress   direction    `json:"egress"`
	}
	out := struct {
		Policies []status        `json:"policies"`
		Pods     []pod           `json:"pods"`
		Stats    policy.Stats    `json:"stats"`
		ACLs     aclpolicy.Stats `json:"acls"`
	}{Stats: a.Policy.Stats(), ACLs: a.ACLs.Stats()}
	sts := a.Policy.PolicyStatuses()
	for _, id := range slices.SortedFunc(maps.Keys(sts), func(x, y kubemodel.PolicyID) int { return strings.Compare(x.String(), y.String()) }) {
		st := sts[id]
		s := status{Policy: id.String(), LocalPods: st.LocalPods, UnresolvedPorts: st.UnresolvedPorts}
		if st.Err != nil {
			s.Error = st.Err.Error()
		}
		out.Policies = append(out.Policies, s)
	}
	want := r.URL.Query().Get("pod")
	for _, v := range a.Policy.PodPolicies() {
		if want != "" && v.Pod.String() != want {
			continue
		}
		p := pod{Pod: v.Pod.String(), Addrs: v.Addrs}
		for _, id := range v.Policies {
			p.Policies = append(p.Policies, id.String())
		}
		for _, d := range []struct {
			to  *direction
			dir policy.Direction
		}{{&p.Ingress, v.Ingress}, {&p.Egress, v.Egress}} {
			d.to.Isolated = d.dir.Isolated
			for _, r := range d.dir.Rules {
				d.to.Rules = append(d.to.Rules, r.String())
			}
		}
		out.Pods = append(out.Pods, p)
	}
	if want != "" && len(out.Pods) == 0 {
		return nil, fmt.Errorf("%w: pod %q is not a pod of this node", errNotFound, want)
	}
	return out, nil
}

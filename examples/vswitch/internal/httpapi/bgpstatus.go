package httpapi

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// The metrics of the node's BGP status (bgp.NodeStatus, as the agent
// publishes it): per peer of each instance, the session, the routes per
// family and direction, the negotiated timers; the conditions; the learned
// routes installed into VPP; the status publications.
var (
	descBGPPeerUp        = prometheus.NewDesc("vswitchkit_bgp_peer_established", "1 while a configured peer's session is Established, 0 otherwise (also for peers a condition keeps out).", []string{"instance", "peer", "peer_address", "state"}, nil)
	descBGPPeerUptime    = prometheus.NewDesc("vswitchkit_bgp_peer_uptime_seconds", "How long a peer's session has been Established.", []string{"instance", "peer"}, nil)
	descBGPPeerRoutes    = prometheus.NewDesc("vswitchkit_bgp_peer_routes", "Routes exchanged with a peer per family: advertised, received, and accepted by its import prefix lists.", []string{"instance", "peer", "family", "direction"}, nil)
	descBGPPeerHold      = prometheus.NewDesc("vswitchkit_bgp_peer_hold_time_seconds", "The hold time negotiated with a peer.", []string{"instance", "peer"}, nil)
	descBGPPeerKeepalive = prometheus.NewDesc("vswitchkit_bgp_peer_keepalive_seconds", "The keepalive interval applied with a peer.", []string{"instance", "peer"}, nil)
	descBGPCondition     = prometheus.NewDesc("vswitchkit_bgp_condition", "1 per problem of the node's BGP configuration (peer empty for node-level ones).", []string{"type", "object", "instance", "peer"}, nil)
	descBGPLearned       = prometheus.NewDesc("vswitchkit_bgp_learned_routes", "Routes learned from peers: installed into VPP, or left out (within the cluster's ranges).", []string{"state"}, nil)
	descBGPPublishes     = prometheus.NewDesc("vswitchkit_bgp_status_publishes_total", "BGP statuses written to the node's etcd key.", nil, nil)
	descBGPPublishErrors = prometheus.NewDesc("vswitchkit_bgp_status_publish_errors_total", "Failed reads or writes of the BGP status.", nil, nil)
)

// bgpStatusCollector exports the BGP status the agent publishes (read from
// its publisher's last status: scrapes cost no BGP query).
type bgpStatusCollector struct{ s *Server }

func (bgpStatusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBGPPeerUp, descBGPPeerUptime, descBGPPeerRoutes, descBGPPeerHold, descBGPPeerKeepalive,
		descBGPCondition, descBGPLearned, descBGPPublishes, descBGPPublishErrors} {
		ch <- d
	}
}

func (c bgpStatusCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.s.agent()
	if a == nil || a.BGP == nil {
		return
	}
	ps := a.BGP.Status.Stats()
	counter(ch, descBGPPublishes, ps.Writes)
	counter(ch, descBGPPublishErrors, ps.Errors)
	rs := a.BGP.Routes.Stats()
	gauge(ch, descBGPLearned, float64(rs.Installed), "installed")
	gauge(ch, descBGPLearned, float64(rs.Left), "left")
	collectNodeStatus(ch, a.BGP.Status.Last())
}

// collectNodeStatus exports a node status (nothing for nil).
func collectNodeStatus(ch chan<- prometheus.Metric, st *bgp.NodeStatus) {
	if st == nil {
		return
	}
	for _, c := range st.Conditions {
		gauge(ch, descBGPCondition, 1, string(c.Type), c.Object, "", "")
	}
	for _, in := range st.Instances {
		for _, p := range in.Peers {
			gauge(ch, descBGPPeerUp, boolf(p.State == bgp.SessionEstablished), in.Name, p.Name, p.PeerAddress.String(), string(p.State))
			for _, c := range p.Conditions {
				gauge(ch, descBGPCondition, 1, string(c.Type), c.Object, in.Name, p.Name)
			}
			if p.State != bgp.SessionEstablished {
				continue
			}
			if !p.Since.IsZero() {
				gauge(ch, descBGPPeerUptime, max(time.Since(p.Since), 0).Seconds(), in.Name, p.Name)
			}
			gauge(ch, descBGPPeerHold, p.HoldTime.Seconds(), in.Name, p.Name)
			gauge(ch, descBGPPeerKeepalive, p.KeepaliveTime.Seconds(), in.Name, p.Name)
			for _, fam := range p.Negotiated {
				gauge(ch, descBGPPeerRoutes, float64(p.Advertised[fam]), in.Name, p.Name, string(fam), "advertised")
				gauge(ch, descBGPPeerRoutes, float64(p.Received[fam]), in.Name, p.Name, string(fam), "received")
				gauge(ch, descBGPPeerRoutes, float64(p.Accepted[fam]), in.Name, p.Name, string(fam), "accepted")
			}
		}
	}
}

// debugBGPStatus: the node's BGP status, fresh (what the agent publishes,
// plus uptimes), where it is published, and the learned routes installed
// into VPP.
func debugBGPStatus(r *http.Request, a *agent.Agent) (any, error) {
	out := map[string]any{"enabled": a.BGP != nil}
	if a.BGP == nil {
		return out, nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	st, err := a.BGP.Controller.NodeStatus(ctx)
	if err != nil {
		out["error"] = err.Error()
	} else {
		out["status"] = nodeStatusView(st)
	}
	ps := a.BGP.Status.Stats()
	out["published"] = map[string]any{"key": a.BGP.Status.Key(), "writes": ps.Writes, "errors": ps.Errors, "lastWrite": ps.LastWrite}
	routes := a.BGP.Routes.Routes()
	learned := []map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(routes)) {
		rt := routes[k].(*vppmodel.Route)
		learned = append(learned, map[string]any{"prefix": rt.GetDstNetwork(), "via": rt.GetPaths()[0].GetOutgoingInterface(),
			"nextHop": rt.GetPaths()[0].GetNextHop()})
	}
	out["learnedRoutes"] = learned
	return out, nil
}

// nodeStatusView is a node status in the JSON shape of the BGPNodeStatus
// objects, plus uptimes.
func nodeStatusView(st *bgp.NodeStatus) map[string]any {
	conds := func(cs []bgp.Condition) []map[string]string {
		out := []map[string]string{}
		for _, c := range cs {
			out = append(out, map[string]string{"type": string(c.Type), "object": c.Object, "message": c.Message})
		}
		return out
	}
	var instances []map[string]any
	for _, in := range st.Instances {
		var peers []map[string]any
		for _, p := range in.Peers {
			v := map[string]any{"name": p.Name, "peerAddress": p.PeerAddress, "peerASN": p.PeerASN, "peeringState": p.State,
				"conditions": conds(p.Conditions)}
			if p.State == bgp.SessionEstablished {
				v["uptime"] = p.Uptime.Round(time.Second).String()
				v["timers"] = map[string]any{"appliedHoldTimeSeconds": int(p.HoldTime.Seconds()), "appliedKeepaliveSeconds": int(p.KeepaliveTime.Seconds())}
				counts := []map[string]any{}
				for _, f := range p.Negotiated {
					afi, safi := f.AFI()
					counts = append(counts, map[string]any{"afi": afi, "safi": safi, "advertised": p.Advertised[f], "received": p.Received[f],
						"accepted": p.Accepted[f]})
				}
				v["routeCount"] = counts
			}
			peers = append(peers, v)
		}
		v := map[string]any{"name": in.Name, "localASN": in.LocalASN, "peers": peers}
		if in.RouterID.IsValid() {
			v["routerID"] = in.RouterID
		}
		if in.LocalPort != 0 {
			v["localPort"] = in.LocalPort
		}
		instances = append(instances, v)
	}
	return map[string]any{"node": st.Node, "source": st.Source, "bgpInstances": instances, "conditions": conds(st.Conditions)}
}

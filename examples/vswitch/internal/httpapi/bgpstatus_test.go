package httpapi_test

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/examples/vswitch/internal/httpapi"
)

func exampleStatus() *bgp.NodeStatus {
	return &bgp.NodeStatus{Node: "node-1", Source: "BGPClusterConfig/cc",
		Conditions: []bgp.Condition{{Type: bgp.ConditionInvalidObject, Object: "BGPAdvertisement/bad", Message: "bad community"}},
		Instances: []bgp.InstanceStatus{{Name: "main", LocalASN: 65001, RouterID: netip.MustParseAddr("10.0.0.1"), Peers: []bgp.PeerStatus{
			{Name: "tor", PeerAddress: netip.MustParseAddr("10.0.0.254"), PeerASN: 65000, State: bgp.SessionEstablished,
				Since: time.Now().Add(-time.Minute), Uptime: time.Minute, HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second,
				Negotiated: []bgp.Family{bgp.IPv4Unicast}, Advertised: map[bgp.Family]int{bgp.IPv4Unicast: 3},
				Received: map[bgp.Family]int{bgp.IPv4Unicast: 2}, Accepted: map[bgp.Family]int{bgp.IPv4Unicast: 1}},
			{Name: "md5", PeerAddress: netip.MustParseAddr("10.0.0.253"), PeerASN: 65000, State: bgp.SessionNotConfigured,
				Conditions: []bgp.Condition{{Type: bgp.ConditionMissingAuthSecret, Object: "Secret/md5", Message: "missing"}}},
		}}}}
}

// TestBGPStatusMetrics: the status metrics of the node's BGP status.
func TestBGPStatusMetrics(t *testing.T) {
	c := httpapi.NodeStatusCollector{Status: exampleStatus()}
	want := `
# HELP vswitchkit_bgp_condition 1 per problem of the node's BGP configuration (peer empty for node-level ones).
# TYPE vswitchkit_bgp_condition gauge
vswitchkit_bgp_condition{instance="",object="BGPAdvertisement/bad",peer="",type="InvalidObject"} 1
vswitchkit_bgp_condition{instance="main",object="Secret/md5",peer="md5",type="MissingAuthSecret"} 1
# HELP vswitchkit_bgp_peer_established 1 while a configured peer's session is Established, 0 otherwise (also for peers a condition keeps out).
# TYPE vswitchkit_bgp_peer_established gauge
vswitchkit_bgp_peer_established{instance="main",peer="md5",peer_address="10.0.0.253",state="NotConfigured"} 0
vswitchkit_bgp_peer_established{instance="main",peer="tor",peer_address="10.0.0.254",state="Established"} 1
# HELP vswitchkit_bgp_peer_hold_time_seconds The hold time negotiated with a peer.
# TYPE vswitchkit_bgp_peer_hold_time_seconds gauge
vswitchkit_bgp_peer_hold_time_seconds{instance="main",peer="tor"} 9
# HELP vswitchkit_bgp_peer_keepalive_seconds The keepalive interval applied with a peer.
# TYPE vswitchkit_bgp_peer_keepalive_seconds gauge
vswitchkit_bgp_peer_keepalive_seconds{instance="main",peer="tor"} 3
# HELP vswitchkit_bgp_peer_routes Routes exchanged with a peer per family: advertised, received, and accepted by its import prefix lists.
# TYPE vswitchkit_bgp_peer_routes gauge
vswitchkit_bgp_peer_routes{direction="accepted",family="ipv4-unicast",instance="main",peer="tor"} 1
vswitchkit_bgp_peer_routes{direction="advertised",family="ipv4-unicast",instance="main",peer="tor"} 3
vswitchkit_bgp_peer_routes{direction="received",family="ipv4-unicast",instance="main",peer="tor"} 2
`
	mfs, err := registryOf(c).Gather()
	require.NoError(t, err)
	var got strings.Builder
	uptimes := 0
	for _, mf := range mfs {
		if mf.GetName() == "vswitchkit_bgp_peer_uptime_seconds" {
			uptimes = len(mf.GetMetric())
			continue
		}
		_, err := expfmt.MetricFamilyToText(&got, mf)
		require.NoError(t, err)
	}
	assert.Equal(t, strings.TrimPrefix(want, "\n"), got.String())
	assert.Equal(t, 1, uptimes, "the established peer's uptime")
}

// TestBGPStatusView: the debug view has the shape of the BGPNodeStatus
// objects.
func TestBGPStatusView(t *testing.T) {
	b, err := json.Marshal(httpapi.NodeStatusView(exampleStatus()))
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(b, &v))
	assert.Equal(t, "BGPClusterConfig/cc", v["source"])
	peers := v["bgpInstances"].([]any)[0].(map[string]any)["peers"].([]any)
	tor := peers[0].(map[string]any)
	assert.Equal(t, "Established", tor["peeringState"])
	assert.Equal(t, "1m0s", tor["uptime"])
	assert.Equal(t, map[string]any{"afi": "ipv4", "safi": "unicast", "advertised": float64(3), "received": float64(2), "accepted": float64(1)},
		tor["routeCount"].([]any)[0])
	md5 := peers[1].(map[string]any)
	assert.Equal(t, "MissingAuthSecret", md5["conditions"].([]any)[0].(map[string]any)["type"])
}

func registryOf(c prometheus.Collector) *prometheus.Registry {
	r := prometheus.NewPedanticRegistry()
	r.MustRegister(c)
	return r
}

package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// TestDegradedIsVisible: what the agent cannot apply is visible while the
// daemon runs (issue 27, item 3: a VPP key failing again and again, garbage
// values in etcd and a service whose only port is invalid left /healthz at
// "ok" and no metric counted them). Each is in /healthz ("ok (degraded)"
// and a line naming it; 200: restarting would not help), in a metric, and
// /readyz stays 200: the node serves its other pods.
func TestDegradedIsVisible(t *testing.T) {
	ctx := context.Background()
	etcd, cli := startEtcd(t)
	put := func(key string, raw []byte) {
		t.Helper()
		_, err := cli.Put(ctx, key, string(raw))
		require.NoError(t, err)
	}
	marshal := func(m proto.Message) []byte {
		t.Helper()
		b, err := proto.Marshal(m)
		require.NoError(t, err)
		return b
	}
	put(kubemodel.EtcdKey("", kubemodel.NodeKey("node-1")), marshal(&kubemodel.Node{Name: "node-1"}))

	dir := shortDir(t)
	cfgFile := filepath.Join(dir, "vswitch.yaml")
	// The stand-in has no /dev/vhost-net: the host interconnect's tap
	// fails (-11) at every attempt.
	require.NoError(t, os.WriteFile(cfgFile, []byte(`
nodeName: node-1
stateDir: `+filepath.Join(dir, "state")+`
etcd: {endpoints: [`+etcd.Endpoints()[0]+`]}
vpp: {mode: sim}
linux: fake
cniSocket: `+filepath.Join(dir, "cni.sock")+`
uplink: {afPacketHostIf: eth1}
hostInterconnect: {tapHostIfName: vpp-tap}
bgp: {disabled: true}
http: {listen: 127.0.0.1:0}
log: {format: json}
`), 0o600))
	d := startDaemon(t, "-config", cfgFile)
	d.waitReady()

	// A value that is no protobuf, a service whose only port is out of
	// range, a VPP value that does not match its key (external
	// configuration).
	put(kubemodel.EtcdKey("", kubemodel.PodKey("default", "junk")), []byte("\xff\xffnot a pod"))
	put(kubemodel.EtcdKey("", kubemodel.ServiceKey("default", "web")), marshal(&kubemodel.Service{Namespace: "default", Name: "web",
		ClusterIps: []string{"10.96.0.10"}, Ports: []*kubemodel.ServicePort{{Name: "http", Port: 70000}}}))
	route, err := anypb.New(&vppmodel.Route{DstNetwork: "10.9.8.0/24"})
	require.NoError(t, err)
	put("/vswitchkit/config/node-1/vpp/route/0/10.9.9.0/24", marshal(route))

	var body string
	require.Eventually(t, func() bool {
		var code int
		code, body = d.get("/healthz")
		return code == http.StatusOK && strings.Contains(body, "vpp/interface/vpp-host") &&
			strings.Contains(body, "svcprocessor:") && strings.Contains(body, "vpp/route/0/10.9.9.0/24")
	}, time.Minute, 50*time.Millisecond, "/healthz names every problem: %s", body)
	lines := strings.Split(strings.TrimSpace(body), "\n")
	require.Len(t, lines, 4, body)
	assert.Equal(t, "ok (degraded)", lines[0])
	assert.Contains(t, body, "controller: degraded: 1 keys rejected, the first key vpp/route/0/10.9.9.0/24")
	assert.Contains(t, body, "vppdriver: degraded: 1 key failing: vpp/interface/vpp-host:")
	assert.Contains(t, body, `svcprocessor: 1 malformed parts of services skipped: service default/web: ports["http"].port 70000`)
	code, _ := d.get("/readyz")
	assert.Equal(t, http.StatusOK, code, "degraded is still ready")

	m := d.metrics()
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"vswitchkit_degraded", nil, 1},
		{"vswitchkit_vpp_failing_keys", []string{"kind", "interface"}, 1},
		{"vswitchkit_vpp_failing_keys", []string{"kind", "route"}, 0},
		{"vswitchkit_watcher_skipped_total", []string{"resource", "pod", "reason", "bad_value"}, 1},
		{"vswitchkit_watcher_skipped_total", []string{"resource", "service", "reason", "bad_value"}, 0},
		{"vswitchkit_services_skipped", []string{"reason", "invalid_port"}, 1},
		{"vswitchkit_services_skipped", []string{"reason", "invalid_ip"}, 0},
		{"vswitchkit_services_skip_reports_total", nil, 1},
		{"vswitchkit_loop_rejected_keys", nil, 1},
		{"vswitchkit_loop_healing_failing", nil, 0},
		{"vswitchkit_ready", nil, 1},
	} {
		got, ok := m.value(tc.name, tc.labels...)
		if assert.True(t, ok, "%s%v missing", tc.name, tc.labels) {
			assert.Equal(t, tc.want, got, "%s%v", tc.name, tc.labels)
		}
	}

	var vppView struct {
		Keys []struct {
			Key, State, Error string
			FailingSince      *time.Time `json:"failingSince"`
		}
	}
	d.getJSON("/debug/vpp?prefix=vpp/interface/vpp-host", &vppView)
	require.Len(t, vppView.Keys, 1)
	assert.NotNil(t, vppView.Keys[0].FailingSince)
	var svcView struct {
		Skipped []struct{ Service, Reason, Field, Value string }
	}
	d.getJSON("/debug/services", &svcView)
	require.Len(t, svcView.Skipped, 1)
	assert.Equal(t, "default/web", svcView.Skipped[0].Service)
	assert.Equal(t, "invalid_port", svcView.Skipped[0].Reason)
	assert.Equal(t, "70000", svcView.Skipped[0].Value)

	assert.Equal(t, 0, d.stop())
	joined := strings.Join(d.lines(), "\n")
	assert.Equal(t, 1, strings.Count(joined, `"msg":"key failing"`), "the failing key is logged at warn once, not per retry")
}

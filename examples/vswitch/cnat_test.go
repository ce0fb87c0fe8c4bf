package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// TestCnatDualStack: the daemon with -services cnat -ip-family dual (on
// the stand-in): a pod gets an address of each family; dual-stack
// services become translations of both families; a service with an
// unknown lb annotation is rendered with ecmp, and of two pods with the
// same hostPort the first has it: each problem is in /healthz, in
// vswitchkit_cnat_problems and in /debug/services and logged once, while
// the rest keeps working.
func TestCnatDualStack(t *testing.T) {
	ctx := context.Background()
	etcd, cli := startEtcd(t)
	put := func(key string, m proto.Message) {
		t.Helper()
		b, err := proto.Marshal(m)
		require.NoError(t, err)
		_, err = cli.Put(ctx, kubemodel.EtcdKey("", key), string(b))
		require.NoError(t, err)
	}
	put(kubemodel.NodeKey("node-1"), &kubemodel.Node{Name: "node-1", Addresses: []*kubemodel.NodeAddress{
		{Type: kubemodel.NodeAddress_INTERNAL_IP, Address: "10.0.0.1"}}})

	dir := shortDir(t)
	socket := filepath.Join(dir, "cni.sock")
	d := startDaemon(t, "-node-name", "node-1", "-vpp", "sim", "-linux", "fake", "-bgp-disabled",
		"-state-dir", filepath.Join(dir, "state"), "-cni-socket", socket, "-http-listen", "127.0.0.1:0",
		"-etcd-endpoints", etcd.Endpoints()[0], "-log-format", "json", "-services", "cnat", "-ip-family", "dual")
	d.waitReady()

	netns := filepath.Join(dir, "netns-web")
	require.NoError(t, os.WriteFile(netns, nil, 0o600))
	out, err := cniCall(socket, "ADD", "c-web", netns, "web")
	require.NoError(t, err)
	var res struct{ IPs []struct{ Address string } }
	require.NoError(t, json.Unmarshal(out, &res))
	require.Len(t, res.IPs, 2, "an address of each family: %s", out)
	assert.Equal(t, "10.1.1.2/32", res.IPs[0].Address)
	assert.Equal(t, "fd00:1::102/128", res.IPs[1].Address)

	eps := &kubemodel.EndpointSubset{Ports: []*kubemodel.EndpointPort{{Name: "http", Port: 8080}}}
	for _, ip := range []string{"10.1.1.2", "fd00:1::102"} {
		eps.Addresses = append(eps.Addresses, &kubemodel.EndpointAddress{Ip: ip, NodeName: "node-1",
			TargetRef: &kubemodel.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}})
	}
	for _, name := range []string{"good", "odd"} {
		svc := &kubemodel.Service{Name: name, Namespace: "default", ClusterIps: []string{"10.96.0.10", "fd00:96::10"},
			Ports: []*kubemodel.ServicePort{{Name: "http", Port: 80, TargetPortNumber: 8080}}}
		if name == "odd" {
			svc.ClusterIps = []string{"10.96.0.11", "fd00:96::11"}
			svc.Type, svc.Ports[0].NodePort = kubemodel.Service_NODE_PORT, 30080
			svc.Annotations = map[string]string{"vswitchkit.io/lb": "round-robin"}
		}
		put(kubemodel.ServiceKey("default", name), svc)
		put(kubemodel.EndpointsKey("default", name), &kubemodel.Endpoints{Name: name, Namespace: "default", Subsets: []*kubemodel.EndpointSubset{eps}})
	}

	// Two pods of this node with the same hostPort: the first by name
	// has it, the other is reported.
	hp := &kubemodel.ContainerPort{HostPort: 8081, ContainerPort: 80, Protocol: kubemodel.Protocol_TCP}
	for name, ips := range map[string][]string{"h1": {"10.1.1.50", "fd00:1::150"}, "h2": {"10.1.1.51", "fd00:1::151"}} {
		put(kubemodel.PodKey("default", name), &kubemodel.Pod{Name: name, Namespace: "default", NodeName: "node-1",
			IpAddress: ips[0], IpAddresses: ips, Containers: []*kubemodel.Container{{Name: "c", Ports: []*kubemodel.ContainerPort{hp}}}})
	}

	var body string
	require.Eventually(t, func() bool {
		var code int
		code, body = d.get("/healthz")
		return code == http.StatusOK && strings.Contains(body, "svccnat: 4 parts")
	}, time.Minute, 50*time.Millisecond, "/healthz names the problems: %s", body)
	assert.Contains(t, body, "ok (degraded)")
	assert.Contains(t, body, `svccnat: 4 parts of services or pods not rendered: pod default/h2: frontend tcp 10.0.0.1:8081 (pod default/h1's) is not rendered for it; `)
	assert.Contains(t, body, `; service default/odd: annotation vswitchkit.io/lb "round-robin" is neither "ecmp" nor "maglev": rendered with ecmp`)
	code, _ := d.get("/readyz")
	assert.Equal(t, http.StatusOK, code, "degraded is still ready")

	m := d.metrics()
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"vswitchkit_cnat_problems", []string{"reason", "UnknownLB"}, 1},
		{"vswitchkit_cnat_problems", []string{"reason", "FrontendTaken"}, 3}, // on each node address
		{"vswitchkit_cnat_problems", []string{"reason", "NoNodeAddress"}, 0},
		{"vswitchkit_cnat_services", nil, 2},
		{"vswitchkit_cnat_hostport_pods", nil, 2}, // h2 wants its hostPort too
		// Cluster IPs of both families for both services, odd's node port
		// and h1's hostPort on the node's three addresses (its InternalIP,
		// its VPP addresses of both families).
		{"vswitchkit_cnat_translations", nil, 10},
		{"vswitchkit_cnat_conflicts", nil, 3},
		{"vswitchkit_degraded", nil, 1},
	} {
		got, ok := m.value(tc.name, tc.labels...)
		if assert.True(t, ok, "%s%v missing", tc.name, tc.labels) {
			assert.Equal(t, tc.want, got, "%s%v", tc.name, tc.labels)
		}
	}
	_, ok := m.value("vswitchkit_nat44_mappings")
	assert.False(t, ok, "no NAT44 renderer")

	var view struct {
		NAT44 any `json:"nat44"`
		Cnat  struct {
			Translations int `json:"translations"`
			Problems     []struct {
				Service, Pod, Reason, Detail, Error string
			} `json:"problems"`
		} `json:"cnat"`
	}
	d.getJSON("/debug/services", &view)
	assert.Nil(t, view.NAT44)
	assert.Equal(t, 10, view.Cnat.Translations)
	require.Len(t, view.Cnat.Problems, 4)
	assert.Equal(t, "default/h2", view.Cnat.Problems[0].Pod)
	assert.Equal(t, "FrontendTaken", view.Cnat.Problems[0].Reason)
	assert.Equal(t, "tcp 10.0.0.1:8081 (pod default/h1's)", view.Cnat.Problems[0].Detail)
	assert.Equal(t, "default/odd", view.Cnat.Problems[3].Service)
	assert.Equal(t, "UnknownLB", view.Cnat.Problems[3].Reason)
	assert.Equal(t, "round-robin", view.Cnat.Problems[3].Detail)

	// Each problem is logged once, at warn.
	warned := 0
	for _, l := range d.lines() {
		if strings.Contains(l, `"level":"WARN"`) && strings.Contains(l, `"component":"svccnat"`) {
			warned++
		}
	}
	assert.Equal(t, 4, warned, "one warning per problem:\n%s", strings.Join(d.lines(), "\n"))
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	"github.com/vswitchkit/vswitchkit/examples/vswitch/internal/config"
)

// secureEtcd is an in-process etcd with mutual TLS and authentication on,
// and a user "vswitchkit" that may read and write /vswitchkit/ only.
type secureEtcd struct {
	root  *clientv3.Client
	certs etcdtest.TLSFiles
	url   string
}

const agentPassword = "agent-secret"

func startSecureEtcd(t *testing.T) *secureEtcd {
	t.Helper()
	ctx := context.Background()
	certs, err := etcdtest.GenerateCerts(t.TempDir())
	require.NoError(t, err)
	srv, err := embedetcd.Start(ctx, embedetcd.Config{
		CertFile: certs.ServerCert, KeyFile: certs.ServerKey, ClientCAFile: certs.CAFile,
		ClientCertFile: certs.ClientCert, ClientKeyFile: certs.ClientKey, CAFile: certs.CAFile,
		RootPassword: "root-secret", UnsafeNoFsync: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	root, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })
	_, err = root.RoleAdd(ctx, "vswitchkit")
	require.NoError(t, err)
	_, err = root.RoleGrantPermission(ctx, "vswitchkit", "/vswitchkit/", clientv3.GetPrefixRangeEnd("/vswitchkit/"),
		clientv3.PermissionType(clientv3.PermReadWrite))
	require.NoError(t, err)
	_, err = root.UserAdd(ctx, "vswitchkit", agentPassword)
	require.NoError(t, err)
	_, err = root.UserGrantRole(ctx, "vswitchkit", "vswitchkit")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(srv.Endpoints()[0], "https://"), "TLS on: %v", srv.Endpoints())
	return &secureEtcd{root: root, certs: certs, url: srv.Endpoints()[0]}
}

func (e *secureEtcd) put(t *testing.T, key string, value proto.Message) {
	t.Helper()
	raw, err := proto.Marshal(value)
	require.NoError(t, err)
	_, err = e.root.Put(context.Background(), kubemodel.EtcdKey("", key), string(raw))
	require.NoError(t, err)
}

// TestDaemon runs the daemon binary against an etcd with TLS and
// authentication and the VPP stand-in (simulated pod links, no root
// needed), with a BGP peer on loopback: it gets ready, serves a pod
// through the CNI socket, renders a service, advertises the pod subnet;
// the metrics and every debug view show it; SIGTERM stops it cleanly.
func TestDaemon(t *testing.T) {
	etcd := startSecureEtcd(t)
	local := netip.MustParseAddr("127.0.0.71")
	peer := gobgptest.StartPeer(t, gobgptest.PeerConfig{Address: netip.MustParseAddr("127.0.0.72"), ASN: 65072})
	peer.AddNeighbor(t, gobgptest.Neighbor{Address: local, ASN: 65071, Families: []bgp.Family{bgp.IPv4Unicast}})
	etcd.put(t, kubemodel.NodeKey("node-1"), &kubemodel.Node{Name: "node-1", Labels: map[string]string{"bgp": "on"},
		Addresses: []*kubemodel.NodeAddress{{Type: kubemodel.NodeAddress_INTERNAL_IP, Address: "192.168.0.1"}}})
	etcd.put(t, bgpmodel.PolicyKey("nodes"), &bgpmodel.PeeringPolicy{
		Name:         "nodes",
		NodeSelector: &bgpmodel.LabelSelector{MatchLabels: map[string]string{"bgp": "on"}},
		VirtualRouters: []*bgpmodel.VirtualRouter{{
			LocalAsn: 65071, ExportPodCidr: true,
			Neighbors: []*bgpmodel.Neighbor{{
				PeerAddress: peer.Address().String(), PeerPort: uint32(peer.Port()), PeerAsn: 65072,
				LocalAddress: local.String(), ConnectRetryTimeSeconds: 2, HoldTimeSeconds: 9, KeepaliveTimeSeconds: 3,
				Families: []string{string(bgp.IPv4Unicast)},
			}},
		}},
	})

	dir := shortDir(t)
	socket := filepath.Join(dir, "cni.sock")
	pwFile := filepath.Join(dir, "etcd-password")
	require.NoError(t, os.WriteFile(pwFile, []byte(agentPassword+"\n"), 0o600))
	cfgFile := filepath.Join(dir, "vswitch.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(`
nodeName: node-1
stateDir: `+filepath.Join(dir, "state")+`
etcd:
  endpoints: [`+etcd.url+`]
  caFile: `+etcd.certs.CAFile+`
  certFile: `+etcd.certs.ClientCert+`
  keyFile: `+etcd.certs.ClientKey+`
  username: vswitchkit
  passwordFile: `+pwFile+`
vpp:
  mode: socket
  apiSocket: /nonexistent/api.sock
ipamStore: etcd
cniSocket: `+socket+`
uplink:
  afPacketHostIf: eth1
hostInterconnect:
  afPacketHostIf: vpp1
bgp:
  ipv4: `+local.String()+`
http:
  listen: 127.0.0.1:9
log:
  format: text
`), 0o600))

	// Flags override the file: the stand-in instead of the socket, fake
	// pod links, any free port, JSON logs.
	d := startDaemon(t, "-config", cfgFile, "-vpp=sim", "-linux=fake", "-http-listen=127.0.0.1:0", "-log-format=json", "-log-level=debug")
	code, body := d.get("/healthz")
	assert.Equal(t, http.StatusOK, code, body)
	d.waitReady()

	// A pod through the CNI socket; its namespace is a file (simulated
	// links).
	netns := filepath.Join(dir, "netns-web")
	require.NoError(t, os.WriteFile(netns, nil, 0o600))
	out, err := cniCall(socket, "ADD", "c-web", netns, "web")
	require.NoError(t, err)
	var res struct{ IPs []struct{ Address string } }
	require.NoError(t, json.Unmarshal(out, &res))
	require.Len(t, res.IPs, 1)
	podIP := netip.MustParsePrefix(res.IPs[0].Address).Addr()
	assert.True(t, netip.MustParsePrefix("10.1.1.0/24").Contains(podIP), "%v in node 1's pod subnet", podIP)

	// A service backed by it.
	etcd.put(t, kubemodel.ServiceKey("default", "web"), &kubemodel.Service{Name: "web", Namespace: "default",
		ClusterIps: []string{"10.96.0.10"}, Ports: []*kubemodel.ServicePort{{Name: "http", Port: 80, TargetPortNumber: 8080}}})
	etcd.put(t, kubemodel.EndpointsKey("default", "web"), &kubemodel.Endpoints{Name: "web", Namespace: "default",
		Subsets: []*kubemodel.EndpointSubset{{
			Addresses: []*kubemodel.EndpointAddress{{Ip: podIP.String(), NodeName: "node-1",
				TargetRef: &kubemodel.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"}}},
			Ports: []*kubemodel.EndpointPort{{Name: "http", Port: 8080}},
		}}})
	podSubnet := netip.MustParsePrefix("10.1.1.0/24")
	peer.WaitPrefix(t, podSubnet, true)

	// Metrics: values, not only names.
	var m metrics
	require.Eventually(t, func() bool {
		m = d.metrics()
		v, _ := m.value("vswitchkit_services_rendered")
		adv, _ := m.value("vswitchkit_bgp_routes_advertised", "family", "ipv4-unicast")
		return v == 1 && adv == 1
	}, time.Minute, 50*time.Millisecond, "a rendered service and an advertised route")
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"vswitchkit_ready", nil, 1},
		{"vswitchkit_cni_requests_total", []string{"command", "ADD"}, 1},
		{"vswitchkit_cni_request_errors_total", []string{"command", "ADD"}, 0},
		{"vswitchkit_cni_request_duration_seconds", []string{"command", "ADD"}, 1}, // sample count
		{"vswitchkit_nodes", nil, 1},
		{"vswitchkit_node_id", nil, 1},
		{"vswitchkit_ipam_pool_allocated", []string{"subnet", "10.1.1.0/24"}, 1},
		{"vswitchkit_ipam_pool_capacity", []string{"subnet", "10.1.1.0/24"}, 253},
		{"vswitchkit_vpp_connected", nil, 1},
		{"vswitchkit_vpp_keys", []string{"kind", "interface", "state", "failed"}, 0},
		{"vswitchkit_vpp_keys", []string{"kind", "route", "state", "pending"}, 0},
		{"vswitchkit_loop_events_total", []string{"event", "Add Pod"}, 1},
		{"vswitchkit_loop_event_errors_total", []string{"event", "Add Pod"}, 0},
		{"vswitchkit_loop_event_duration_seconds", []string{"event", "Add Pod"}, 1},
		{"vswitchkit_loop_events_total", []string{"event", "Database Resync"}, 1},
		{"vswitchkit_loop_rejected_keys", nil, 0},
		{"vswitchkit_loop_queue_depth", nil, 0},
		{"vswitchkit_bgp_session_state", []string{"peer", "127.0.0.72", "state", "established"}, 1},
		{"vswitchkit_bgp_session_state", []string{"peer", "127.0.0.72", "state", "idle"}, 0},
		{"vswitchkit_watcher_resyncs_total", []string{"source", "etcd"}, 1},
	} {
		got, ok := m.value(tc.name, tc.labels...)
		if assert.True(t, ok, "%s%v missing", tc.name, tc.labels) {
			assert.Equal(t, tc.want, got, "%s%v", tc.name, tc.labels)
		}
	}
	configured, _ := m.value("vswitchkit_vpp_keys", "kind", "interface", "state", "configured")
	assert.GreaterOrEqual(t, configured, 5.0, "uplink, host interconnect, VXLAN and pod-gateway loopbacks, the pod")
	mappings, _ := m.value("vswitchkit_nat44_mappings")
	assert.Positive(t, mappings)
	assert.Contains(t, m, "go_goroutines", "the Go runtime's metrics")
	assert.Contains(t, m, "process_open_fds", "the process's metrics")

	// The debug views.
	var events struct {
		ByEvent map[string]struct{ Processed uint64 } `json:"byEvent"`
		Events  []struct {
			Name     string
			Handlers []struct{ Handler string }
			Error    string
		} `json:"events"`
	}
	d.getJSON("/debug/events", &events)
	assert.Equal(t, uint64(1), events.ByEvent["Add Pod"].Processed)
	i := slices.IndexFunc(events.Events, func(e struct {
		Name     string
		Handlers []struct{ Handler string }
		Error    string
	}) bool {
		return e.Name == "Add Pod"
	})
	require.GreaterOrEqual(t, i, 0, "the Add Pod event is in the history")
	assert.Empty(t, events.Events[i].Error)
	assert.NotEmpty(t, events.Events[i].Handlers)
	d.getJSON("/debug/events?n=1", &events)
	assert.Len(t, events.Events, 1)

	var ipamView struct {
		NodeID      uint32 `json:"nodeID"`
		PodSubnet   string `json:"podSubnet"`
		Plan        map[string]any
		Allocated   uint64 `json:"allocated"`
		Allocations []struct {
			Pod, Address, ContainerID string
		} `json:"allocations"`
	}
	d.getJSON("/debug/ipam", &ipamView)
	d.getJSON("/debug/ipam", &ipamView.Plan)
	for field, want := range map[string]string{"podSubnetAllNodes": "10.1.0.0/16", "serviceCIDR": "10.96.0.0/12", "podGateway": "10.1.1.1",
		"hostInterconnectSubnet": "172.30.1.0/24", "hostInterconnectVPP": "172.30.1.1", "hostInterconnectLinux": "172.30.1.2",
		"nodeIP": "192.168.16.1/24", "vxlanIP": "192.168.30.1/24"} {
		assert.Equal(t, want, ipamView.Plan[field], field)
	}
	assert.Equal(t, uint32(1), ipamView.NodeID)
	assert.Equal(t, "10.1.1.0/24", ipamView.PodSubnet)
	require.Len(t, ipamView.Allocations, 1)
	assert.Equal(t, "default/web", ipamView.Allocations[0].Pod)
	assert.Equal(t, podIP.String(), ipamView.Allocations[0].Address)
	assert.Equal(t, "c-web", ipamView.Allocations[0].ContainerID)

	var nodesView struct {
		NodeID uint32
		Nodes  []struct {
			ID            uint32
			Name          string
			MgmtAddresses []string
			ThisNode      bool
		}
	}
	d.getJSON("/debug/nodes", &nodesView)
	require.Len(t, nodesView.Nodes, 1)
	assert.Equal(t, "node-1", nodesView.Nodes[0].Name)
	assert.Equal(t, uint32(1), nodesView.Nodes[0].ID)
	assert.True(t, nodesView.Nodes[0].ThisNode)
	assert.Equal(t, []string{"192.168.0.1"}, nodesView.Nodes[0].MgmtAddresses)

	var svcView struct {
		Services []struct {
			ID         string
			ClusterIPs []string
			Ports      []struct {
				Port     int
				Backends []struct {
					IP    string
					Port  int
					Pod   string
					Local bool
				}
			}
		}
	}
	d.getJSON("/debug/services", &svcView)
	require.Len(t, svcView.Services, 1)
	svc := svcView.Services[0]
	assert.Equal(t, "default/web", svc.ID)
	assert.Equal(t, []string{"10.96.0.10"}, svc.ClusterIPs)
	require.Len(t, svc.Ports, 1)
	require.Len(t, svc.Ports[0].Backends, 1)
	assert.Equal(t, podIP.String(), svc.Ports[0].Backends[0].IP)
	assert.Equal(t, "default/web", svc.Ports[0].Backends[0].Pod)
	assert.True(t, svc.Ports[0].Backends[0].Local)

	type vppKey struct {
		Key     string
		Kind    string
		State   string
		Desired json.RawMessage
		Applied json.RawMessage
	}
	var vppView struct {
		Connected bool
		Keys      []vppKey
	}
	d.getJSON("/debug/vpp", &vppView)
	assert.True(t, vppView.Connected)
	route := "vpp/route/0/" + podIP.String() + "/32"
	i = slices.IndexFunc(vppView.Keys, func(k vppKey) bool { return k.Key == route })
	require.GreaterOrEqual(t, i, 0, "the pod's route %s", route)
	assert.Equal(t, "configured", vppView.Keys[i].State)
	assert.Equal(t, "route", vppView.Keys[i].Kind)
	assert.Contains(t, string(vppView.Keys[i].Desired), podIP.String())
	assert.JSONEq(t, string(vppView.Keys[i].Desired), string(vppView.Keys[i].Applied), "applied as desired")
	for _, k := range vppView.Keys {
		assert.Equal(t, "configured", k.State, "%s", k.Key)
	}
	d.getJSON("/debug/vpp?kind=nat44_static", &vppView)
	require.NotEmpty(t, vppView.Keys, "the service's static mapping")
	assert.Contains(t, string(vppView.Keys[0].Desired), "10.96.0.10")

	var bgpView struct {
		Enabled bool
		Policy  string
		Peers   []struct {
			Peer       string
			State      string
			Advertised map[string]int
			Routes     map[string][]struct{ Prefix, NextHop string } `json:"advertisedRoutes"`
		}
	}
	d.getJSON("/debug/bgp?routes=1", &bgpView)
	assert.True(t, bgpView.Enabled)
	assert.Equal(t, "nodes", bgpView.Policy)
	require.Len(t, bgpView.Peers, 1)
	assert.Equal(t, "Established", bgpView.Peers[0].State)
	assert.Equal(t, 1, bgpView.Peers[0].Advertised["ipv4-unicast"])
	require.Len(t, bgpView.Peers[0].Routes["ipv4-unicast"], 1)
	assert.Equal(t, "10.1.1.0/24", bgpView.Peers[0].Routes["ipv4-unicast"][0].Prefix)
	assert.Equal(t, local.String(), bgpView.Peers[0].Routes["ipv4-unicast"][0].NextHop)

	// The index of the debug views, each of which answers; unknown filter
	// values are refused with the valid ones; every JSON name is camelCase
	// with a lower-case first word (issue 27, item 8: /debug/ had no index,
	// ?kind=bogus answered 200 with nothing, a key was "iPv6Frontends").
	var index struct {
		Views []struct {
			Path  string
			Shows string
			Query map[string]string
		}
	}
	d.getJSON("/debug/", &index)
	require.Len(t, index.Views, 8)
	for _, v := range index.Views {
		assert.NotEmpty(t, v.Shows, v.Path)
		var view any
		d.getJSON(v.Path, &view)
		checkJSONNames(t, v.Path, view)
	}
	code, body = d.get("/debug/policy?pod=default/nobody")
	assert.Equal(t, http.StatusNotFound, code, body)
	pm := d.metrics()
	for _, name := range []string{"vswitchkit_policy_acls", "vswitchkit_policy_peers"} {
		_, ok := pm.value(name)
		assert.True(t, ok, "metric %s", name)
	}
	inv, ok := pm.value("vswitchkit_policies", "state", "invalid")
	assert.True(t, ok)
	assert.Zero(t, inv)
	code, body = d.get("/debug/vpp?kind=bogus")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, `kind: "bogus" is not one of acl, acl-interface, interface, nat44_global, nat44_identity, nat44_interface, nat44_lb, nat44_pool, nat44_static, neighbor, route, vrf`)
	code, body = d.get("/debug/vpp?state=bogus")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, `state: "bogus" is not one of configured, pending, failed, removing`)
	var natStats struct {
		NAT44 map[string]any `json:"nat44"`
	}
	d.getJSON("/debug/services", &natStats)
	assert.Contains(t, natStats.NAT44, "ipv6Frontends")

	// SIGTERM: a clean exit; nothing is left: the process, the socket,
	// the HTTP port, the BGP session (the peer drops the route), the
	// IPAM store's etcd lease.
	pid := d.cmd.Process.Pid
	assert.Equal(t, 0, d.stop(), "exit code")
	assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the process is gone")
	_, err = os.Stat(socket)
	assert.ErrorIs(t, err, os.ErrNotExist, "the CNI socket is removed")
	assert.True(t, refused(d.addr), "the HTTP port is closed")
	peer.WaitPrefix(t, podSubnet, false)
	leases, err := etcd.root.Leases(context.Background())
	require.NoError(t, err)
	assert.Empty(t, leases.Leases, "etcd leases released")
	logs := d.lines()
	for _, line := range logs {
		assert.True(t, json.Valid([]byte(line)), "JSON log line: %s", line)
	}
	joined := strings.Join(logs, "\n")
	assert.Contains(t, joined, `"msg":"vswitch ready","nodeID":1`, "the daemon says when it is ready")
	assert.Contains(t, joined, `"msg":"agent stopping"`)
	assert.Contains(t, joined, `"msg":"vswitch stopped"`)
	assert.NotContains(t, joined, `"level":"ERROR"`)
}

// dataMaps are the JSON objects of the debug views whose keys are data
// (event and handler names, address families, key kinds), not names.
var dataMaps = map[string]bool{"byEvent": true, "handlerErrors": true, "advertised": true, "received": true,
	"advertisedRoutes": true, "disabled": true, "failingByKind": true}

// checkJSONNames checks that every name in a debug view is camelCase with
// a lower-case first word (initialisms after it keep their case:
// "nodeID", "clusterIPs").
func checkJSONNames(t *testing.T, path string, v any) {
	t.Helper()
	camel := regexp.MustCompile(`^[a-z][a-z0-9]*([A-Z][A-Za-z0-9]*)*$`)
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				if !camel.MatchString(k) || regexp.MustCompile(`^[a-z][A-Z]`).MatchString(k) {
					t.Errorf("%s: %s.%s is not camelCase", path, at, k)
				}
				if !dataMaps[k] {
					walk(at+"."+k, sub)
				}
			}
		case []any:
			for _, sub := range v {
				walk(at+"[]", sub)
			}
		}
	}
	walk("", v)
}

// TestBadConfig: a bad configuration file exits with status 2 before
// anything starts, and the message names the field and the reason.
func TestBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		want []string
	}{
		{"unknown field", "nodeName: n1\ncniSockett: /run/x.sock\n", []string{"cniSockett: unknown field"}},
		{"bad CIDR", "nodeName: n1\nipam:\n  podSubnetCIDR: 10.1.0.0/40\n", []string{"ipam.podSubnetCIDR:", "10.1.0.0/40"}},
		{"host bits", "nodeName: n1\nipam:\n  serviceCIDR: 10.96.0.1/12\n", []string{"ipam.serviceCIDR: 10.96.0.1/12: has host bits set"}},
		{"no node name", "etcd:\n  endpoints: [127.0.0.1:2379]\n", []string{"nodeName: required"}},
		{"missing TLS file and a bad value", "nodeName: n1\netcd:\n  caFile: /nonexistent/ca.pem\nlinux: fake\n", []string{"etcd.caFile:", "no such file", `linux: "fake"`}},
		{"fake linux, real VPP", "nodeName: n1\nlinux: fake\n", []string{`linux: "fake" is only for the VPP stand-in`}},
		{"several", "nodeName: n1\npodInterfaceType: veth\nhttp:\n  listen: nowhere\n", []string{"podInterfaceType:", "http.listen:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := shortDir(t)
			cfgFile := filepath.Join(dir, "vswitch.yaml")
			socket := filepath.Join(dir, "cni.sock")
			require.NoError(t, os.WriteFile(cfgFile, []byte(tc.file), 0o600))
			var stderr strings.Builder
			cmd := exec.Command(binary, "-config", cfgFile, "-cni-socket", socket, "-state-dir", filepath.Join(dir, "state"))
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s", stderr.String())
			assert.Equal(t, 2, ee.ExitCode())
			assert.Contains(t, stderr.String(), "invalid configuration (file "+cfgFile+")")
			for _, w := range tc.want {
				assert.Contains(t, stderr.String(), w)
			}
			_, err = os.Stat(filepath.Join(dir, "state"))
			assert.ErrorIs(t, err, os.ErrNotExist, "nothing started: no state directory")
		})
	}
}

// TestEveryProblemInOneReport: the README's example of a report is what
// the daemon prints for such a file: every problem at once (issue 27, item
// 6: the unknown key was reported alone, the others after it was fixed),
// with a duplicate key, a value of the wrong type and a bad flag value
// beside them.
func TestEveryProblemInOneReport(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(readme), "```\nvswitch: invalid configuration (file /etc/vswitchkit/vswitch.yaml):\n")
	require.True(t, ok, "the README shows a report")
	block, _, _ = strings.Cut(block, "```")
	require.NoFileExists(t, "/etc/vswitchkit/etcd/ca.crt", "the example names a file that does not exist here")

	dir := shortDir(t)
	cfgFile := filepath.Join(dir, "vswitch.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("nodeName: n1\ncniSockett: /run/x.sock\nipam:\n  serviceCIDR: 10.96.0.1/12\n"+
		"etcd:\n  caFile: /etc/vswitchkit/etcd/ca.crt\n"), 0o600))
	code, stderr := runBinary(t, "-config", cfgFile, "-state-dir", filepath.Join(dir, "state"))
	assert.Equal(t, 2, code)
	assert.Equal(t, "vswitch: invalid configuration (file "+cfgFile+"):\n"+block, stderr)

	require.NoError(t, os.WriteFile(cfgFile, []byte("nodeName: n1\nnodeName: n2\nstateDir: [x]\nnodeNam: n1\nhttp: {listen: nowhere}\n"), 0o600))
	code, stderr = runBinary(t, "-config", cfgFile, "-bgp-ipv4", "x")
	assert.Equal(t, 2, code)
	assert.Equal(t, "vswitch: invalid configuration (file "+cfgFile+"):\n"+
		"  nodeName: duplicate key (lines 1 and 2)\n"+
		"  nodeNam: unknown field\n"+
		"  stateDir: cannot unmarshal array into Go value of type string\n"+
		"  bgp.ipv4 (-bgp-ipv4): ParseAddr(\"x\"): unable to parse IP\n"+
		"  http.listen: \"nowhere\": address nowhere: missing port in address\n", stderr)
}

// runBinary runs the daemon to its end (within a minute) and returns its
// exit status and standard error.
func runBinary(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var stderr strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Stderr = &stderr
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "the daemon did not end: %s", stderr.String())
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stderr.String()
	}
	require.NoError(t, err, "%s", stderr.String())
	return 0, stderr.String()
}

// TestExitStatuses: every way the daemon cannot start returns its error
// with the start-up status 3, at once and without a panic; flag errors that
// are alike exit alike (issue 27, items 1, 2 and 8: a state directory under
// a plain file or held by another daemon panicked in agent.Close(nil) with
// status 2, the status of a bad configuration; a taken HTTP port was
// reported only when the daemon stopped; a missing VPP socket left it
// running unready; a CNI socket that cannot be made gave 1, a missing TLS
// file 2).
func TestExitStatuses(t *testing.T) {
	dir := shortDir(t)
	plainFile := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(plainFile, nil, 0o600))
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()

	// A daemon that holds its state directory: its agent is open once the
	// debug views answer.
	held := filepath.Join(dir, "held")
	first := startDaemon(t, "-log-format=json", "-node-name", "n1", "-vpp=sim", "-linux=fake", "-etcd-endpoints", "127.0.0.1:1",
		"-http-listen", "127.0.0.1:0", "-state-dir", held, "-cni-socket", filepath.Join(held, "cni.sock"))
	require.Eventually(t, func() bool {
		code, _ := first.get("/debug/ipam")
		return code == http.StatusOK
	}, time.Minute, 20*time.Millisecond, "the first daemon's agent is open")

	// sim runs the stand-in against an etcd that does not answer (the
	// agent starts anyway, from local state).
	sim := func(state string, extra ...string) []string {
		return append([]string{"-node-name", "n1", "-vpp=sim", "-linux=fake", "-etcd-endpoints", "127.0.0.1:1",
			"-http-listen", "127.0.0.1:0", "-state-dir", state, "-cni-socket", filepath.Join(dir, "cni.sock")}, extra...)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		// Start-up: the machine does not match a valid configuration.
		{"state directory under a plain file", sim(filepath.Join(plainFile, "state")), 3, "agent: state directory: mkdir " + plainFile + ": not a directory"},
		{"state directory held by another daemon", sim(held), 3, "(is another agent running on this node?)"},
		{"HTTP address taken", sim(filepath.Join(dir, "s1"), "-http-listen", taken.Addr().String()), 3, "bind: address already in use"},
		{"VPP socket missing", []string{"-node-name", "n1", "-vpp-socket", filepath.Join(dir, "api.sock"), "-http-listen", "127.0.0.1:0",
			"-state-dir", filepath.Join(dir, "s2"), "-cni-socket", filepath.Join(dir, "cni.sock")}, 3, "vpp: API socket: stat " + filepath.Join(dir, "api.sock") + ": no such file or directory"},
		{"VPP socket not a socket", []string{"-node-name", "n1", "-vpp-socket", plainFile, "-http-listen", "127.0.0.1:0",
			"-state-dir", filepath.Join(dir, "s3"), "-cni-socket", filepath.Join(dir, "cni.sock")}, 3, "is not a socket"},
		{"CNI socket cannot be made", sim(filepath.Join(dir, "s4"), "-cni-socket", filepath.Join(plainFile, "cni.sock")), 3, "cniserver: create socket directory"},
		{"TLS file missing", sim(filepath.Join(dir, "s5"), "-etcd-ca", filepath.Join(dir, "ca.pem")), 3, "etcd.caFile: open " + filepath.Join(dir, "ca.pem")},
		{"password file missing", sim(filepath.Join(dir, "s6"), "-etcd-user", "u", "-etcd-password-file", filepath.Join(dir, "pw")), 3, "etcd.passwordFile: open"},
		{"configuration file missing", []string{"-config", filepath.Join(dir, "vswitch.yaml")}, 3, "no such file or directory"},
		// Configuration: what is written is wrong.
		{"unknown flag", sim(filepath.Join(dir, "s7"), "-no-such-flag"), 2, "flag provided but not defined: -no-such-flag"},
		{"flag without its value", sim(filepath.Join(dir, "s7"), "-log-level"), 2, "flag needs an argument: -log-level"},
		{"an argument that is no flag", sim(filepath.Join(dir, "s7"), "extra"), 2, `unexpected arguments: ["extra"]`},
		{"bad flag value", sim(filepath.Join(dir, "s7"), "-bgp-ipv4", "x"), 2, "bgp.ipv4 (-bgp-ipv4)"},
		{"bad duration flag", sim(filepath.Join(dir, "s7"), "-etcd-dial-timeout", "5"), 2, "etcd.dialTimeout (-etcd-dial-timeout)"},
		{"bad HTTP address", sim(filepath.Join(dir, "s7"), "-http-listen", "nowhere"), 2, "http.listen:"},
		{"relative state directory", sim("state"), 2, `stateDir: "state" is not an absolute path`},
		{"missing file and a bad value", sim(filepath.Join(dir, "s7"), "-etcd-ca", filepath.Join(dir, "ca.pem"), "-log-level", "loud"), 2, "log.level:"},
		{"help", []string{"-h"}, 0, "Exit statuses:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, stderr := runBinary(t, tc.args...)
			assert.Equal(t, tc.code, code, "%s", stderr)
			assert.Contains(t, stderr, tc.want)
			assert.NotContains(t, stderr, "panic")
			assert.Less(t, time.Since(start), 20*time.Second, "it ends at once")
			if tc.code == 3 && !strings.Contains(stderr, "invalid configuration") {
				assert.Contains(t, stderr, `msg="vswitch cannot start"`)
			}
		})
	}
	_, err = os.Stat(filepath.Join(dir, "s1"))
	assert.ErrorIs(t, err, os.ErrNotExist, "with its HTTP address taken the daemon started nothing")
	assert.Equal(t, 0, first.stop(), "the first daemon was not disturbed")
}

// TestEtcdLoginRefused: wrong etcd credentials end the start-up with
// status 3 and the reason.
func TestEtcdLoginRefused(t *testing.T) {
	etcd := startSecureEtcd(t)
	dir := shortDir(t)
	pwFile := filepath.Join(dir, "etcd-password")
	require.NoError(t, os.WriteFile(pwFile, []byte("wrong\n"), 0o600))
	code, stderr := runBinary(t, "-node-name", "n1", "-vpp=sim", "-linux=fake", "-http-listen", "127.0.0.1:0",
		"-state-dir", filepath.Join(dir, "state"), "-cni-socket", filepath.Join(dir, "cni.sock"),
		"-etcd-endpoints", etcd.url, "-etcd-ca", etcd.certs.CAFile, "-etcd-cert", etcd.certs.ClientCert, "-etcd-key", etcd.certs.ClientKey,
		"-etcd-user", "vswitchkit", "-etcd-password-file", pwFile)
	assert.Equal(t, 3, code, "%s", stderr)
	assert.Contains(t, stderr, `msg="vswitch cannot start"`)
	assert.Contains(t, stderr, `etcd login as \"vswitchkit\"`)
}

// TestExampleConfig: the example file decodes strictly, and the only
// problems validation finds are its files that do not exist here.
func TestExampleConfig(t *testing.T) {
	doc, err := os.ReadFile("vswitch.example.yaml")
	require.NoError(t, err)
	var cfg config.Config
	require.NoError(t, config.Decode(doc, &cfg))
	assert.Equal(t, "worker-1", cfg.NodeName)
	assert.Len(t, cfg.Etcd.Endpoints, 3)
	errs := unjoin(cfg.Validate())
	require.Len(t, errs, 3, "%v", errs)
	for _, e := range errs {
		assert.Regexp(t, `^etcd\.(caFile|certFile|passwordFile): .*no such file`, e.Error())
	}
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}

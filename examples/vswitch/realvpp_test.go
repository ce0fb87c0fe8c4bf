package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/adapter/socketclient"
	"go.fd.io/govpp/api"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/memclnt"
	"go.fd.io/govpp/core"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
)

// TestRealVPP runs the daemon against a real VPP ($VPP_API_SOCKET, or one
// started with $VPP_SH; skipped otherwise) with real pod interfaces: a pod
// added through the CNI socket gets a veth pair in its network namespace
// and an af_packet interface in VPP, and reaches its gateway in VPP. The
// daemon stops and VPP keeps the pod connected; a new daemon takes over
// the pod's interface as it is (not re-created). Needs root.
func TestRealVPP(t *testing.T) {
	sock := vppdrivertest.RealVPPSocket(t)
	vppdrivertest.NeedNetns(t)
	for name, i := range vppInterfaces(t, sock) {
		if strings.HasPrefix(i.tag, "vsk:") {
			t.Skipf("the VPP at %s holds %s (tag %q) of another vswitchkit agent; the test removes what is tagged vsk: when it ends: give it a VPP of its own", sock, name, i.tag)
		}
	}
	id := strconv.Itoa(os.Getpid() % 100000)

	// The uplink: a veth pair, VPP's end in this namespace, the other end
	// in a namespace of the test.
	outside := vppdrivertest.NewNetns(t, "vskd-out-"+id)
	uplink := "vskdup" + id
	vppdrivertest.Veth(t, uplink, outside, "eth0")
	pod := vppdrivertest.NewNetns(t, "vskd-pod-"+id)
	t.Cleanup(func() { removeOwned(t, sock) })

	etcdSrv, cli := startEtcd(t)
	raw, err := proto.Marshal(&kubemodel.Node{Name: "node-1",
		Addresses: []*kubemodel.NodeAddress{{Type: kubemodel.NodeAddress_INTERNAL_IP, Address: "192.168.0.1"}}})
	require.NoError(t, err)
	_, err = cli.Put(context.Background(), kubemodel.EtcdKey("", kubemodel.NodeKey("node-1")), string(raw))
	require.NoError(t, err)

	dir := shortDir(t)
	socket := filepath.Join(dir, "cni.sock")
	cfgFile := filepath.Join(dir, "vswitch.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(fmt.Sprintf(`
nodeName: node-1
stateDir: %s
etcd:
  endpoints: [%s]
vpp:
  apiSocket: %s
cniSocket: %s
uplink:
  afPacketHostIf: %s
bgp:
  disabled: true
http:
  listen: 127.0.0.1:0
log:
  format: json
`, filepath.Join(dir, "state"), etcdSrv.Endpoints()[0], sock, socket, uplink)), 0o600))

	d := startDaemon(t, "-config", cfgFile)
	d.waitReady()
	out, err := cniCall(socket, "ADD", "c-web", pod.Path(), "web")
	require.NoError(t, err, "ADD")
	var res struct {
		IPs []struct{ Address, Gateway string }
	}
	require.NoError(t, json.Unmarshal(out, &res))
	require.Len(t, res.IPs, 1)
	gateway := netip.MustParseAddr(res.IPs[0].Gateway)
	host := cniserver.HostIfName("c-web", "eth0")
	before := vppInterfaces(t, sock)
	podIf, ok := before["host-"+host]
	require.True(t, ok, "the pod's af_packet interface in VPP: %v", before)
	assert.True(t, strings.HasPrefix(podIf.tag, "vsk:pod-"), "owned: %q", podIf.tag)
	assert.Contains(t, before, "host-"+uplink)
	ping(t, pod, gateway)

	m := d.metrics()
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"vswitchkit_vpp_connected", nil, 1},
		{"vswitchkit_cni_requests_total", []string{"command", "ADD"}, 1},
		{"vswitchkit_ipam_pool_allocated", nil, 1},
		{"vswitchkit_vpp_keys", []string{"kind", "interface", "state", "failed"}, 0},
		{"vswitchkit_vpp_keys", []string{"kind", "interface", "state", "pending"}, 0},
	} {
		got, ok := m.value(tc.name, tc.labels...)
		if assert.True(t, ok, "%s%v", tc.name, tc.labels) {
			assert.Equal(t, tc.want, got, "%s%v", tc.name, tc.labels)
		}
	}

	// Stopped: VPP stays configured, the pod keeps its connectivity.
	assert.Equal(t, 0, d.stop())
	assert.Equal(t, before, vppInterfaces(t, sock), "VPP left as it was")
	ping(t, pod, gateway)

	// A new daemon takes over: the pod's interface is kept as it is.
	d = startDaemon(t, "-config", cfgFile)
	d.waitReady()
	var vppView struct {
		Keys []struct{ Key, State string }
	}
	require.Eventually(t, func() bool {
		d.getJSON("/debug/vpp", &vppView)
		for _, k := range vppView.Keys {
			if k.State != "configured" {
				return false
			}
		}
		return len(vppView.Keys) > 0
	}, time.Minute, 50*time.Millisecond, "every key configured after the restart: %v", vppView.Keys)
	assert.Equal(t, before, vppInterfaces(t, sock), "nothing re-created")
	ping(t, pod, gateway)

	// DEL removes the pod's interface; the daemon stops cleanly.
	_, err = cniCall(socket, "DEL", "c-web", pod.Path(), "web")
	require.NoError(t, err, "DEL")
	require.Eventually(t, func() bool {
		_, ok := vppInterfaces(t, sock)["host-"+host]
		return !ok
	}, time.Minute, 50*time.Millisecond, "the pod's interface removed from VPP")
	code, _ := d.get("/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, 0, d.stop())
}

func ping(t *testing.T, ns *vppdrivertest.Netns, dst netip.Addr) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := ns.Ping(ctx, dst)
	require.NoError(t, err, "ping %s from %s", dst, ns.Name())
}

type vppIf struct {
	index uint32
	tag   string
}

// vppInterfaces lists VPP's interfaces by name.
func vppInterfaces(t *testing.T, sock string) map[string]vppIf {
	t.Helper()
	out := map[string]vppIf{}
	for _, m := range vppDump(t, sock, &interfaces.SwInterfaceDump{SwIfIndex: interface_types.InterfaceIndex(^uint32(0))}) {
		d := m.(*interfaces.SwInterfaceDetails)
		out[d.InterfaceName] = vppIf{index: uint32(d.SwIfIndex), tag: d.Tag}
	}
	return out
}

func vppDump(t *testing.T, sock string, req api.Message) []api.Message {
	t.Helper()
	conn, err := core.Connect(socketclient.NewVppClient(sock))
	require.NoError(t, err)
	defer conn.Disconnect()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := conn.NewStream(ctx, core.WithReplySize(1024))
	require.NoError(t, err)
	defer func() { _ = st.Close() }()
	require.NoError(t, st.SendMsg(req))
	require.NoError(t, st.SendMsg(&memclnt.ControlPing{}))
	var out []api.Message
	for {
		m, err := st.RecvMsg()
		require.NoError(t, err)
		if _, ok := m.(*memclnt.ControlPingReply); ok {
			return out
		}
		out = append(out, m)
	}
}

// removeOwned removes what the daemon left in VPP (objects tagged "vsk:"):
// a driver with the daemon's tag prefix commits an empty desired state.
func removeOwned(t *testing.T, sock string) {
	d, err := vppdriver.New(func() adapter.VppAPI { return socketclient.NewVppClient(sock) }, vppdriver.Config{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	_, err = d.Commit(ctx, &controller.Commit{Kind: controller.CommitResync, Values: controller.KeyValuePairs{}})
	assert.NoError(t, err)
	assert.Eventually(t, func() bool {
		for _, i := range vppInterfaces(t, sock) {
			if strings.HasPrefix(i.tag, "vsk:") {
				return false
			}
		}
		return d.Connected()
	}, time.Minute, 50*time.Millisecond, "the daemon's objects removed from VPP")
}

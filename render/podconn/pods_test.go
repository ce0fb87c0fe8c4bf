package podconn_test

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/adapter/socketclient"
	"go.uber.org/goleak"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	"github.com/vswitchkit/vswitchkit/render/internal/rendertest"
	"github.com/vswitchkit/vswitchkit/render/podconn"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is one node's VPP for the pod tests: the stand-in or a real VPP,
// with the host ends of veth pairs that af_packet pods attach to.
type env struct {
	name       string
	newAdapter func() adapter.VppAPI
	rec        *vppdrivertest.RequestRecorder // sees what the agents send
	restart    func()                         // a VPP restart: all state lost
	hostIf     func(i int) string             // host end of pod i's veth pair
	netns      func(i int) string             // pod i's network namespace (path)
	tap        bool                           // tap pods can be created
	memifDir   string
	db         *nodesynctest.MemDB // the cluster-wide DB, kept over agent restarts
}

func simEnv(t *testing.T) env {
	hosts := []string{}
	var nss []string
	for i := range 8 {
		hosts = append(hosts, fmt.Sprintf("veth-pod%d", i))
		nss = append(nss, fmt.Sprintf("/var/run/netns/pod%d", i))
	}
	vpp := vppsim.New(vppsim.Config{HostInterfaces: hosts, VhostNet: true, Namespaces: nss})
	rec := &vppdrivertest.RequestRecorder{}
	return env{name: "stand-in", newAdapter: func() adapter.VppAPI { return rec.Wrap(vpp.NewAdapter()) }, rec: rec,
		restart: vpp.Restart, hostIf: func(i int) string { return hosts[i] }, netns: func(i int) string { return nss[i] },
		tap: true, memifDir: "/run/vpp", db: nodesynctest.NewMemDB()}
}

// realEnv starts a real VPP and makes veth pairs whose peers are in
// network namespaces of the test (pods without addresses: enough for VPP).
func realEnv(t *testing.T) env {
	vpp := vppdrivertest.StartRealVPP(t)
	id := strconv.Itoa(os.Getpid() % 10000)
	var hosts, nss []string
	for i := range 4 {
		ns := vppdrivertest.NewNetns(t, fmt.Sprintf("vsk-pc%d-%s", i, id))
		host := fmt.Sprintf("vskpc%d-%s", i, id)
		vppdrivertest.Veth(t, host, ns, "eth0")
		hosts, nss = append(hosts, host), append(nss, ns.Path())
	}
	sock := vpp.APISocket()
	rec := &vppdrivertest.RequestRecorder{}
	return env{name: "real VPP", newAdapter: func() adapter.VppAPI { return rec.Wrap(socketclient.NewVppClient(sock)) }, rec: rec,
		restart: vpp.Restart, hostIf: func(i int) string { return hosts[i] }, netns: func(i int) string { return nss[i] },
		memifDir: vpp.Dir(), db: nodesynctest.NewMemDB()}
}

func envs() []struct {
	name  string
	start func(*testing.T) env
} {
	return []struct {
		name  string
		start func(*testing.T) env
	}{{"stand-in", simEnv}, {"real VPP", realEnv}}
}

func startAgent(t *testing.T, e env, node *rendertest.Node, after ...controller.EventHandler) *rendertest.Agent {
	return rendertest.Start(t, rendertest.Options{Name: "node-1", DB: e.db, NewAdapter: e.newAdapter, Node: node,
		PodConn: podconn.Config{MemifSocketDir: e.memifDir}, After: after})
}

func podID(i int) kubemodel.PodID {
	return kubemodel.PodID{Namespace: "default", Name: fmt.Sprintf("pod%d", i)}
}

func addPodEvent(e env, i int, typ podiface.Type) *controller.AddPod {
	ev := controller.NewAddPodEvent(podID(i), fmt.Sprintf("c0ffee%d", i), e.netns(i))
	ev.InterfaceType = typ
	if typ == podiface.AfPacket || typ == podiface.Default {
		ev.HostIfName = e.hostIf(i)
	}
	return ev
}

// TestPodAddDelete: a pod connected with each interface type has its VPP
// interface (unnumbered to the gateway loopback, with a deterministic
// MAC), a host route and (af_packet, tap) a static neighbor; the AddPod
// results say what the pod side needs; DeletePod removes them and IPAM
// releases the address. tap runs on the stand-in only: this host has no
// /dev/vhost-net, so a real VPP cannot create tap interfaces here.
func TestPodAddDelete(t *testing.T) {
	for _, ec := range envs() {
		t.Run(ec.name, func(t *testing.T) {
			e := ec.start(t)
			a := startAgent(t, e, nil)
			types := []podiface.Type{podiface.AfPacket, podiface.Memif}
			if e.tap {
				types = append(types, podiface.Tap)
			} else {
				t.Log("tap pods are not tested on this VPP: no /dev/vhost-net on this host")
			}
			for i, typ := range types {
				t.Run(string(typ), func(t *testing.T) {
					ev := addPodEvent(e, i, typ)
					require.NoError(t, a.AddPod(t, ev))
					ip, ok := a.IPAM.PodAddr(podID(i))
					require.True(t, ok)
					host := netip.PrefixFrom(ip, 32).String()
					require.Len(t, ev.Interfaces, 1)
					pi := ev.Interfaces[0]
					assert.Equal(t, "eth0", pi.HostName)
					assert.Equal(t, typ, pi.Type)
					assert.Equal(t, []string{host}, pi.IPAddresses)
					assert.Equal(t, []podiface.Route{{Network: "0.0.0.0/0", Gateway: "10.1.1.1"}}, ev.Routes)
					name, ok := a.Pods.PodInterface(podID(i))
					require.True(t, ok)
					a.WaitConfigured(t)

					tables := rendertest.Tables(t, e.newAdapter)
					assert.Contains(t, tables["interface pod-gw"], "addrs=[10.1.1.1/32]")
					iface := tables["interface "+name]
					assert.Contains(t, iface, "up=true mac="+pi.GatewayMAC+" addrs=[] unnumbered=pod-gw")
					assert.Equal(t, "via "+name+" "+ip.String(), tables["route "+host])
					switch typ {
					case podiface.Memif:
						assert.Contains(t, iface, "memif ")
						assert.Empty(t, pi.MAC)
						assert.NotEmpty(t, pi.Socket)
						assert.NotContains(t, tables, "neighbor "+name+" "+ip.String())
					default:
						assert.NotEmpty(t, pi.MAC)
						assert.Equal(t, pi.MAC, tables["neighbor "+name+" "+ip.String()])
					}

					a.DeletePod(t, podID(i), ev.ContainerID)
					a.WaitConfigured(t)
					tables = rendertest.Tables(t, e.newAdapter)
					assert.NotContains(t, tables, "interface "+name)
					assert.NotContains(t, tables, "route "+host)
					assert.NotContains(t, tables, "neighbor "+name+" "+ip.String())
					_, ok = a.IPAM.PodAddr(podID(i))
					assert.False(t, ok, "the address is released")
					_, ok = a.Pods.PodInterface(podID(i))
					assert.False(t, ok)
				})
			}
		})
	}
}

var errLater = errors.New("a later handler fails")

// TestAddPodFailsLater: an AddPod that a handler registered after podconn
// fails leaves nothing: VPP's tables are as before, IPAM has no address
// for the pod, the event carries no results.
func TestAddPodFailsLater(t *testing.T) {
	for _, ec := range envs() {
		t.Run(ec.name, func(t *testing.T) {
			e := ec.start(t)
			var fail atomic.Bool
			failing := &controller.HandlerFuncs{Name: "fails-addpod",
				Handles: func(ev controller.Event) bool { _, ok := ev.(*controller.AddPod); return ok },
				UpdateFunc: func(controller.Event, controller.UpdateOperations) (string, error) {
					if fail.Load() {
						return "", errLater
					}
					return "", nil
				}}
			a := startAgent(t, e, nil, failing)
			require.NoError(t, a.AddPod(t, addPodEvent(e, 0, podiface.Memif)))
			a.WaitConfigured(t)
			before := rendertest.Tables(t, e.newAdapter)
			allocated := a.Allocated()
			e.rec.Take()

			ev := addPodEvent(e, 1, podiface.AfPacket)
			fail.Store(true)
			require.ErrorIs(t, a.AddPod(t, ev), errLater)
			a.Sync(t)
			assert.Equal(t, before, rendertest.Tables(t, e.newAdapter), "VPP is as before")
			assert.Empty(t, vppdrivertest.Writes(e.rec.Take()), "nothing was sent to VPP")
			assert.Equal(t, allocated, a.Allocated(), "IPAM released the address")
			_, ok := a.Pods.PodInterface(podID(1))
			assert.False(t, ok)
			assert.Empty(t, ev.Interfaces)
			assert.Empty(t, ev.Routes)
		})
	}
}

// TestRestarts: with pods of every type connected, a VPP restart brings
// every table back as it was; an agent restart on the populated VPP (the
// pod server's records and IPAM's store survive) sends nothing that
// writes.
func TestRestarts(t *testing.T) {
	for _, ec := range envs() {
		t.Run(ec.name, func(t *testing.T) {
			e := ec.start(t)
			node := &rendertest.Node{}
			a := startAgent(t, e, node)
			types := []podiface.Type{podiface.AfPacket, podiface.Memif, podiface.AfPacket}
			if e.tap {
				types = append(types, podiface.Tap)
			}
			for i, typ := range types {
				require.NoError(t, a.AddPod(t, addPodEvent(e, i, typ)))
			}
			a.WaitConfigured(t)
			before := rendertest.Tables(t, e.newAdapter)
			require.Len(t, podRoutes(before), len(types))

			e.restart()
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.Equal(c, before, rendertest.Tables(c, e.newAdapter))
			}, 30*time.Second, 50*time.Millisecond, "VPP restart")

			a.Stop()
			e.rec.Take()
			b := startAgent(t, e, node)
			b.WaitConfigured(t)
			b.Sync(t)
			assert.Empty(t, vppdrivertest.Writes(e.rec.Take()), "agent restart: nothing re-created")
			assert.Equal(t, before, rendertest.Tables(t, e.newAdapter))
			for i := range types {
				_, ok := b.Pods.PodInterface(podID(i))
				assert.True(t, ok, "pod %d known after the restart", i)
			}
		})
	}
}

func podRoutes(tables map[string]string) []string {
	var out []string
	for k := range tables {
		if len(k) > len("route 10.1.1.") && k[:len("route 10.1.1.")] == "route 10.1.1." {
			out = append(out, k)
		}
	}
	return out
}

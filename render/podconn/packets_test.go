package podconn_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/adapter/socketclient"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	"github.com/vswitchkit/vswitchkit/render/internal/rendertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
)

// ping pings dst from ns within d.
func ping(ns *vppdrivertest.Netns, dst netip.Addr, d time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return ns.Ping(ctx, dst)
}

// TestPodsPackets sends real packets through a real VPP: two pods
// (network namespaces with a veth pair each, af_packet in VPP, addresses
// and routes from IPAM through the handlers, the pod side configured from
// the AddPod results as the pod server does) ping each other and their
// gateway, over IPv4 and over IPv6 (an IPv6 pod range). Then VPP is
// restarted mid-test: the agent restores the configuration and the pods
// reach each other again (the time from VPP being up again, with the
// driver's default timers, is logged). A pod deleted is not
// reachable any more.
func TestPodsPackets(t *testing.T) {
	for _, tc := range []struct {
		name string
		ipam ipam.Config
		gw   string
	}{
		{"IPv4", ipam.Config{}, "10.1.1.1"},
		{"IPv6", ipam.Config{PodSubnetCIDR: netip.MustParsePrefix("fd00:10::/56"), PodSubnetOneNodePrefixLen: 64}, "fd00:10:0:1::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vpp := vppdrivertest.StartRealVPP(t)
			sock := vpp.APISocket()
			newAdapter := func() adapter.VppAPI { return socketclient.NewVppClient(sock) }
			a := rendertest.Start(t, rendertest.Options{Name: "node-1", DB: nodesynctest.NewMemDB(), NewAdapter: newAdapter, IPAM: tc.ipam,
				DriverDefaults: true})

			id := strconv.Itoa(os.Getpid() % 10000)
			var nss []*vppdrivertest.Netns
			var ips []netip.Addr
			for i := range 2 {
				ns := vppdrivertest.NewNetns(t, fmt.Sprintf("vsk-pp%d-%s", i, id))
				host := fmt.Sprintf("vskpp%d-%s", i, id)
				vppdrivertest.Veth(t, host, ns, "eth0") // as the pod server does before AddPod
				ev := controller.NewAddPodEvent(podID(i), fmt.Sprintf("c%d", i), ns.Path())
				ev.HostIfName = host
				start := time.Now()
				require.NoError(t, a.AddPod(t, ev))
				a.WaitConfigured(t)
				t.Logf("pod %d: AddPod and VPP configured in %v", i, time.Since(start).Round(time.Millisecond))
				rendertest.ConfigurePod(t, ns, ev)
				ip, ok := a.IPAM.PodAddr(podID(i))
				require.True(t, ok)
				nss, ips = append(nss, ns), append(ips, ip)
			}
			gw := netip.MustParseAddr(tc.gw)
			for i, ns := range nss {
				_, err := ping(ns, gw, 5*time.Second)
				require.NoError(t, err, "pod %d -> gateway", i)
				_, err = ping(ns, ips[1-i], 5*time.Second)
				require.NoError(t, err, "pod %d -> pod %d", i, 1-i)
			}

			start := time.Now()
			vpp.Restart()
			restarted := time.Since(start)
			took, err := ping(nss[0], ips[1], 30*time.Second)
			require.NoError(t, err, "after a VPP restart")
			t.Logf("VPP restart: %v to restart VPP (vpp.sh), then traffic flowed again %v later",
				restarted.Round(time.Millisecond), took.Round(time.Millisecond))
			_, err = ping(nss[1], ips[0], 5*time.Second)
			require.NoError(t, err)

			a.DeletePod(t, podID(1), "c1")
			_, err = ping(nss[0], ips[1], 500*time.Millisecond)
			require.Error(t, err, "a deleted pod is not reachable")
			_, err = ping(nss[0], gw, 5*time.Second)
			require.NoError(t, err, "the other pod still reaches its gateway")
		})
	}
}

// BenchmarkPodSetupRealVPP measures what connecting a pod costs on a real
// VPP (with VPP_SH, as root): AddPod through the loop (IPAM, podconn, the
// commit to the driver, which configures VPP before it returns) and
// DeletePod, on a veth pair made once. It reports ms/addpod and
// ms/deletepod.
func BenchmarkPodSetupRealVPP(b *testing.B) {
	vpp := vppdrivertest.StartRealVPP(b)
	sock := vpp.APISocket()
	a := rendertest.Start(b, rendertest.Options{Name: "node-1", DB: nodesynctest.NewMemDB(),
		NewAdapter: func() adapter.VppAPI { return socketclient.NewVppClient(sock) }})
	id := strconv.Itoa(os.Getpid() % 10000)
	ns := vppdrivertest.NewNetns(b, "vsk-pb-"+id)
	host := "vskpb-" + id
	vppdrivertest.Veth(b, host, ns, "eth0")
	var add, del []time.Duration
	b.ResetTimer()
	for i := range b.N {
		ev := controller.NewAddPodEvent(podID(0), fmt.Sprintf("c%d", i), ns.Path())
		ev.HostIfName = host
		start := time.Now()
		if err := a.AddPod(b, ev); err != nil {
			b.Fatal(err)
		}
		add = append(add, time.Since(start))
		start = time.Now()
		a.DeletePod(b, podID(0), ev.ContainerID)
		del = append(del, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(median(add).Microseconds())/1000, "ms/addpod")
	b.ReportMetric(float64(median(del).Microseconds())/1000, "ms/deletepod")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

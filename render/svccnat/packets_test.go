package svccnat_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/render/svccnat"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
)

// TestPacketsRealVPP sends real packets through a real VPP 26.06 (VPP_SH,
// root) in a dual-stack node (IPv4 IPAM plus an IPv6 one), between
// network namespaces the test makes: pods on af_packet interfaces, the
// uplink to an "external" namespace, the host interconnect to a "host"
// namespace. The partial agent (rendertest with services on cnat)
// programs VPP.
//
//   - an IPv6 cluster IP over two backend pods: both answer, they see the
//     client's address; a backend removed stops answering, with one VPP
//     request;
//   - a dual-stack service reached on both families;
//   - an IPv6 (and an IPv4) node port from the host namespace and from
//     the external one;
//   - a pod reaching a service backed by itself, on IPv6 and IPv4: the
//     pod sees the node's address;
//   - a hostPort reached from the host namespace, on both families;
//   - ClientIP affinity: one backend per client;
//   - pods reaching the outside world with the node's address, both
//     families, and the host with their own;
//   - Maglev: with one of four backends removed, the flows of the other
//     three keep their backend (counted, after a VPP restart has dropped
//     every session), where ecmp moves many.
func TestPacketsRealVPP(t *testing.T) {
	l := newLab(t, labOptions{ipam: defaultIPv4, dualStack: &ipv6Plan, external: true, host: true, nodes: 1})
	n := l.nodes[0]
	t.Cleanup(func() {
		if t.Failed() {
			n.vppState(t)
		}
	})
	client := l.addPod(n, "client")
	a := l.addPod(n, "a")
	b := l.addPod(n, "b")
	nodeIP, nodeIP6 := n.nodeIP(false), n.nodeIP(true)
	require.Eventually(t, func() bool {
		line, err := dial(client.ns, netip.AddrPortFrom(a.ip(true), tcpPort), time.Second)
		return err == nil && line == "a "+client.ip(true).String()
	}, 20*time.Second, 50*time.Millisecond, "the plain data path: client reaches a over IPv6")

	t.Run("an IPv6 cluster IP over two backends", func(t *testing.T) {
		vip := netip.AddrPortFrom(netip.MustParseAddr("fd00:96::10"), 80)
		l.setService(labService("web6", 0, vip.Addr().String()))
		l.setEndpoints("web6", a, b)
		got := answers(t, client.ns, vip, 12)
		assert.ElementsMatch(t, []string{"a " + client.ip(true).String(), "b " + client.ip(true).String()}, unique(got),
			"both answer, and see the client's address")
		before := n.requests.Counts()
		l.setEndpoints("web6", a)
		assert.Equal(t, map[string]uint64{"cnat_translation_update": 2}, writes(before, n.requests.Counts()),
			"a backend removed: one VPP request per translation that had it (the TCP and the UDP port)")
		assert.Equal(t, []string{"a " + client.ip(true).String()}, unique(answers(t, client.ns, vip, 8)), "b no longer answers")
	})

	t.Run("a dual-stack service on both families", func(t *testing.T) {
		l.setService(labService("dual", 0, "10.96.0.20", "fd00:96::20"))
		l.setEndpoints("dual", a, b)
		for _, vip := range []string{"10.96.0.20", "fd00:96::20"} {
			v6 := netip.MustParseAddr(vip).Is6()
			got := unique(answers(t, client.ns, netip.AddrPortFrom(netip.MustParseAddr(vip), 80), 12))
			assert.ElementsMatch(t, []string{"a " + client.ip(v6).String(), "b " + client.ip(v6).String()}, got, vip)
		}
	})

	t.Run("node ports from the host and from outside", func(t *testing.T) {
		l.setService(labService("np", 30080))
		l.setEndpoints("np", a, b)
		for _, v6 := range []bool{true, false} {
			dst := netip.AddrPortFrom(n.nodeIP(v6), 30080)
			host := n.hostAddr(v6).String()
			assert.ElementsMatch(t, []string{"a " + host, "b " + host}, unique(answers(t, n.host, dst, 12)),
				"from the host namespace to %s: local backends see the client", dst)
			ext := map[bool]string{false: "192.168.16.100", true: "fd00:16::100"}[v6]
			assert.ElementsMatch(t, []string{"a " + ext, "b " + ext}, unique(answers(t, n.ext, dst, 12)), "from outside to %s", dst)
		}
	})

	t.Run("a pod reaching a service backed by itself", func(t *testing.T) {
		l.setService(labService("self", 0, "10.96.0.30", "fd00:96::30"))
		l.setEndpoints("self", a)
		assert.Equal(t, []string{"a " + nodeIP6.String()}, unique(answers(t, a.ns, netip.MustParseAddrPort("[fd00:96::30]:80"), 3)),
			"IPv6 hairpin: source-NATed to the node's address")
		assert.Equal(t, []string{"a " + nodeIP.String()}, unique(answers(t, a.ns, netip.MustParseAddrPort("10.96.0.30:80"), 3)))
		assert.Equal(t, []string{"a " + client.ip(true).String()}, unique(answers(t, client.ns, netip.MustParseAddrPort("[fd00:96::30]:80"), 2)),
			"another pod keeps its address")
	})

	t.Run("a hostPort from the host", func(t *testing.T) {
		l.addPod(n, "hp", &kubemodel.ContainerPort{Name: "web", HostPort: 9080, ContainerPort: tcpPort, Protocol: kubemodel.Protocol_TCP})
		for _, v6 := range []bool{true, false} {
			dst := netip.AddrPortFrom(n.nodeIP(v6), 9080)
			host := n.hostAddr(v6).String()
			assert.Equal(t, []string{"hp " + host}, unique(answers(t, n.host, dst, 2)), "from the host to %s", dst)
			ext := map[bool]string{false: "192.168.16.100", true: "fd00:16::100"}[v6]
			assert.Equal(t, []string{"hp " + ext}, unique(answers(t, n.ext, dst, 2)), "from outside to %s", dst)
		}
		// The pod goes: so does its hostPort.
		l.kubeChange(kubemodel.PodResource, kubemodel.PodKey("default", "hp"), nil)
		_, err := dial(n.host, netip.AddrPortFrom(nodeIP6, 9080), time.Second)
		assert.Error(t, err, "no hostPort without the pod")
	})

	t.Run("ClientIP affinity", func(t *testing.T) {
		s := labService("sticky", 0, "10.96.0.40", "fd00:96::40")
		s.SessionAffinity = kubemodel.Service_CLIENT_IP
		l.setService(s)
		l.setEndpoints("sticky", a, b)
		for _, vip := range []string{"[fd00:96::40]:80", "10.96.0.40:80"} {
			assert.Len(t, unique(answers(t, client.ns, netip.MustParseAddrPort(vip), 10)), 1, "one backend for the client at %s", vip)
		}
	})

	t.Run("pods reach the outside world with the node's address", func(t *testing.T) {
		assert.Equal(t, []string{"ext " + nodeIP.String()}, answers(t, client.ns, netip.MustParseAddrPort("203.0.113.1:8080"), 1))
		assert.Equal(t, []string{"ext " + nodeIP6.String()}, answers(t, client.ns, netip.MustParseAddrPort("[2001:db8::1]:8080"), 1))
		// The host (the VPP-host subnet is excluded) sees the pod.
		for _, i := range n.ipams() {
			hostIP := i.HostInterconnectAddrInLinux()
			assert.Equal(t, []string{"host " + client.ip(hostIP.Is6()).String()},
				answers(t, client.ns, netip.AddrPortFrom(hostIP, tcpPort), 1))
		}
	})

	t.Run("Maglev: one of four backends removed", func(t *testing.T) {
		backends := []*labPod{l.addPod(n, "m1"), l.addPod(n, "m2"), l.addPod(n, "m3"), l.addPod(n, "m4")}
		vip := netip.MustParseAddrPort("[fd00:96::50]:53")
		const flows = 300
		moved := func(lb string) (stayed, movedOthers, total int) {
			t.Helper()
			s := labService("lb-"+lb, 0, vip.Addr().String())
			s.Annotations = map[string]string{svccnat.LBAnnotation: lb}
			l.setService(s)
			l.setEndpoints(s.Name, backends...)
			restart := func() {
				connects := n.agent.Driver.Stats().Connects
				n.vpp.Restart() // no session survives: every flow is picked afresh
				require.Eventually(t, func() bool { return n.agent.Driver.Stats().Connects > connects }, 30*time.Second, 10*time.Millisecond)
				n.agent.Sync(t)
				n.agent.WaitConfigured(t)
			}
			restart()
			first := l.flows(t, client, vip, flows)
			l.setEndpoints(s.Name, backends[:3]...)
			restart()
			second := l.flows(t, client, vip, flows)
			for i := range first {
				if first[i] == "m4" {
					assert.NotEqual(t, "m4", second[i])
					continue
				}
				total++
				if first[i] == second[i] {
					stayed++
				} else {
					movedOthers++
				}
			}
			counts := map[string]int{}
			for _, w := range first {
				counts[w]++
			}
			t.Logf("%s: %d flows over %v; after m4 went, of the %d flows of m1-m3 %d kept their backend, %d moved",
				lb, flows, counts, total, stayed, movedOthers)
			l.kubeChange(kubemodel.ServiceResource, kubemodel.ServiceKey("default", s.Name), nil)
			return stayed, movedOthers, total
		}
		_, movedOthers, total := moved(svccnat.LBMaglev)
		assert.Greater(t, total, flows/2)
		assert.LessOrEqual(t, movedOthers, total/20, "Maglev: at most 5%% of the other backends' flows move (%d of %d)", movedOthers, total)
		_, ecmpMoved, ecmpTotal := moved(svccnat.LBECMP)
		assert.Greater(t, ecmpMoved, ecmpTotal/5, "ecmp moves many of the other backends' flows (%d of %d)", ecmpMoved, ecmpTotal)
	})
}

// flows sends n UDP flows (source ports 40000 on) from pod c to dst and
// returns which backend answered each.
func (l *lab) flows(t *testing.T, c *labPod, dst netip.AddrPort, n int) []string {
	t.Helper()
	var got []string
	require.Eventually(t, func() bool {
		var err error
		got, err = udpFlows(c.ns, dst, 40000, n)
		require.NoError(t, err)
		return !slices.Contains(got, "")
	}, 30*time.Second, 100*time.Millisecond, "every flow answered")
	return got
}

// writes returns the requests that change VPP's state sent between two
// counts.
func writes(before, after map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range after {
		if v > before[k] && !vppdrivertest.ReadOnlyMessage(k) {
			out[k] = v - before[k]
		}
	}
	return out
}

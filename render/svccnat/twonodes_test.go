package svccnat_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTwoNodesIPv6RealVPP: two real VPPs (VPP_SH, root) as two nodes of an
// IPv6-only cluster (every range IPv6), their uplinks joined by a veth
// pair: the VXLAN mesh runs over the nodes' IPv6 addresses. A pod on node
// 1 reaches a pod on node 2 through it (ping and TCP, both ways); a
// service whose only backend is on node 2 is reached from node 1's pod
// and from node 1's host namespace (translated on node 1, the backend sees
// the client, whose reply comes back through the tunnel and is translated
// back on node 1); its node port on node 2 is reached from node 1's pod
// and host (source-NATed to node 1's address); node 1, without a local
// backend, does not serve its node port.
func TestTwoNodesIPv6RealVPP(t *testing.T) {
	l := newLab(t, labOptions{ipam: ipv6Plan, host: true, nodes: 2})
	n1, n2 := l.nodes[0], l.nodes[1]
	t.Cleanup(func() {
		if t.Failed() {
			n1.vppState(t)
			n2.vppState(t)
		}
	})
	for _, n := range l.nodes {
		require.Eventually(t, func() bool {
			return len(n.agent.Conn.Tunnels(map[string]string{"node-1": "node-2", "node-2": "node-1"}[n.name])) == 1
		},
			20*time.Second, 10*time.Millisecond, "%s has its tunnel", n.name)
		n.agent.WaitConfigured(t)
	}
	p1 := l.addPod(n1, "p1")
	p2 := l.addPod(n2, "p2")
	require.Len(t, p1.ips, 1)
	require.True(t, p1.ips[0].Is6())

	ping := func(from *labPod, to netip.Addr) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := from.ns.Ping(ctx, to)
		return err
	}
	require.Eventually(t, func() bool { return ping(p1, p2.ips[0]) == nil }, 20*time.Second, 100*time.Millisecond,
		"pod on node 1 -> pod on node 2 through the mesh over IPv6")
	require.NoError(t, ping(p2, p1.ips[0]), "pod on node 2 -> pod on node 1")
	assert.Equal(t, []string{"p2 " + p1.ips[0].String()}, answers(t, p1.ns, netip.AddrPortFrom(p2.ips[0], tcpPort), 1))
	assert.Equal(t, []string{"p1 " + p2.ips[0].String()}, answers(t, p2.ns, netip.AddrPortFrom(p1.ips[0], tcpPort), 1))

	l.setService(labService("remote", 30080, "fd00:96::10"))
	l.setEndpoints("remote", p2)
	vip := netip.MustParseAddrPort("[fd00:96::10]:80")
	assert.Equal(t, []string{"p2 " + p1.ips[0].String()}, unique(answers(t, p1.ns, vip, 8)),
		"a service whose backend is on the other node, from a pod: translated on node 1, the client's address kept")
	assert.Equal(t, []string{"p2 " + n1.hostAddr(true).String()}, unique(answers(t, n1.host, vip, 4)),
		"from node 1's host: its address kept too (the cluster routes it back to node 1)")
	assert.Equal(t, []string{"p2 " + n2.nodeIP(true).String()}, unique(answers(t, p2.ns, vip, 2)),
		"the backend reaching itself through the service on its own node: source-NATed to its node's address")
	// Many connections through the tunnel, each beyond its first packet.
	got, err := udpFlows(p1.ns, netip.MustParseAddrPort("[fd00:96::10]:53"), 41000, 50)
	require.NoError(t, err)
	assert.Equal(t, []string{"p2"}, unique(got), "UDP through the tunnel")

	// Its node port on node 2 (where the backend is), from node 1: the
	// pod's and the host's connections are source-NATed to node 1's
	// address, so that the reply comes back through the uplink, not the
	// tunnel; node 1 has no local backend, so its own node port is not
	// served.
	np := netip.AddrPortFrom(n2.nodeIP(true), 30080)
	assert.Equal(t, []string{"p2 " + n1.nodeIP(true).String()}, unique(answers(t, p1.ns, np, 4)), "a pod of node 1 to node 2's node port")
	assert.Equal(t, []string{"p2 " + n1.nodeIP(true).String()}, unique(answers(t, n1.host, np, 4)), "node 1's host to node 2's node port")
	_, err = dial(p1.ns, netip.AddrPortFrom(n1.nodeIP(true), 30080), time.Second)
	assert.Error(t, err, "node 1 has no backend of the service: its node port is not served")
}

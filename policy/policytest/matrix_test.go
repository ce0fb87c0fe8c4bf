package policytest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

func TestModel(t *testing.T) {
	for _, dual := range []bool{false, true} {
		c := Model(ModelOptions{DualStack: dual})
		require.NoError(t, c.Check())
		require.Len(t, c.Namespaces, 3)
		require.Len(t, c.Pods, 9)
		require.Len(t, c.Nodes, 2)
		assert.Equal(t, map[string]string{"ns": "y", NamespaceNameLabel: "y"}, c.Namespace("y").GetLabels())
		yb := c.Pod(pod("y", "b"))
		require.NotNil(t, yb)
		assert.Equal(t, map[string]string{"pod": "b"}, yb.GetLabels())
		assert.Equal(t, ModelNode1, yb.GetNodeName())
		assert.Equal(t, ModelNode2, c.Pod(pod("x", "b")).GetNodeName())
		assert.Equal(t, "10.244.1.14", yb.GetIpAddress())
		if dual {
			assert.Equal(t, []string{"10.244.1.14", "fd00:10:244:1::14"}, yb.GetIpAddresses())
			assert.Len(t, ModelProbes(ModelOptions{DualStack: true}), 8)
		} else {
			assert.Equal(t, []string{"10.244.1.14"}, yb.GetIpAddresses())
		}
		for _, pair := range [][2]any{{"serve-80-tcp", 80}, {"serve-81-udp", 81}} {
			proto := tcpProto
			if pair[0] == "serve-81-udp" {
				proto = udpProto
			}
			assert.True(t, hasNamedPort(yb, pair[0].(string), proto, pair[1].(int)), pair[0])
		}
		assert.Len(t, yb.GetContainers(), 4)
		assert.Equal(t, "cont-80-tcp", yb.GetContainers()[0].GetName())
	}
	assert.Equal(t, "10.244.2.11", ModelPodAddr(pod("x", "b"), false).String())
	assert.Equal(t, "fd00:10:244:2::11", ModelPodAddr(pod("x", "b"), true).String())
	assert.Equal(t, "10.244.1.18", ModelPodAddr(pod("z", "c"), false).String())
	assert.Equal(t, "192.168.0.2", ModelNodeAddr(ModelNode2, false).String())
	assert.Equal(t, []Probe{{tcpProto, 80, false}, {tcpProto, 81, false}, {udpProto, 80, false}, {udpProto, 81, false}},
		ModelProbes(ModelOptions{}))
	assert.Panics(t, func() { ModelPodAddr(pod("w", "a"), false) })
	assert.Panics(t, func() { ModelNodeAddr("node-3", false) })
}

func TestMatrixTable(t *testing.T) {
	ids := []kubemodel.PodID{pod("x", "a"), pod("x", "b"), pod("yy", "c")}
	probes := []Probe{{Protocol: tcpProto, Port: 80}, {Protocol: udpProto, Port: 8080, IPv6: true}}
	m := NewMatrix(ids, probes, func(from, to kubemodel.PodID, p Probe) bool {
		return from != to || p.IPv6 // the diagonal denied over IPv4 only
	})
	assert.Equal(t, ""+
		"TCP/80 x/a  x/b  yy/c\n"+
		"x/a      X    .    .\n"+
		"x/b      .    X    .\n"+
		"yy/c     .    .    X\n", m.Table(probes[0]))
	assert.Equal(t, ""+
		"UDP/8080 v6 x/a  x/b  yy/c\n"+
		"x/a           .    .    .\n"+
		"x/b           .    .    .\n"+
		"yy/c          .    .    .\n", m.Table(probes[1]))
	assert.Equal(t, m.Table(probes[0])+"\n"+m.Table(probes[1]), m.String())
	assert.Empty(t, m.Table(Probe{Protocol: sctpProto, Port: 1}))

	allowed, ok := m.Allowed(pod("x", "a"), pod("x", "b"), probes[0])
	assert.True(t, ok)
	assert.True(t, allowed)
	allowed, ok = m.Allowed(pod("x", "a"), pod("x", "a"), probes[0])
	assert.True(t, ok)
	assert.False(t, allowed)
	_, ok = m.Allowed(pod("x", "a"), pod("q", "q"), probes[0])
	assert.False(t, ok)
	assert.Equal(t, ids, m.Pods())
	assert.Equal(t, probes, m.Probes())
}

func TestMatrixDiff(t *testing.T) {
	ids := []kubemodel.PodID{pod("x", "a"), pod("x", "b")}
	probes := []Probe{{Protocol: tcpProto, Port: 80}}
	all := NewMatrix(ids, probes, func(_, _ kubemodel.PodID, _ Probe) bool { return true })
	some := NewMatrix(ids, probes, func(from, _ kubemodel.PodID, _ Probe) bool { return from.Name == "a" })
	assert.True(t, all.Equal(all))
	assert.Equal(t, "", Diff(all, all))
	assert.False(t, all.Equal(some))
	assert.Equal(t, "TCP/80 x/b -> x/a: want ., got X\nTCP/80 x/b -> x/b: want ., got X\n", Diff(all, some))
	assert.Contains(t, Diff(all, NewMatrix(ids[:1], probes, func(_, _ kubemodel.PodID, _ Probe) bool { return true })), "pods differ")
	assert.Contains(t, Diff(all, NewMatrix(ids, nil, nil)), "probes differ")
}

func TestClusterMatrixNeedsTheProbeFamily(t *testing.T) {
	c := smallCluster() // db/pg has no IPv6 address
	m := c.Matrix([]Probe{{Protocol: tcpProto, Port: 1, IPv6: true}})
	v6 := Probe{Protocol: tcpProto, Port: 1, IPv6: true}
	allowed, _ := m.Allowed(frontID, pgID, v6)
	assert.False(t, allowed, "pg has no IPv6 address")
	allowed, _ = m.Allowed(frontID, frontID, v6)
	assert.True(t, allowed)
	assert.Equal(t, []kubemodel.PodID{pgID, agentID, frontID}, m.Pods(), "sorted by namespace, then name")
}

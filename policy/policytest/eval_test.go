package policytest

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

func TestSelectorMatches(t *testing.T) {
	req := func(key, op string, values ...string) *kubemodel.LabelSelectorRequirement {
		return &kubemodel.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	sel := func(ml map[string]string, reqs ...*kubemodel.LabelSelectorRequirement) *kubemodel.LabelSelector {
		return &kubemodel.LabelSelector{MatchLabels: ml, MatchExpressions: reqs}
	}
	ab := map[string]string{"app": "web", "tier": "front"}
	tests := []struct {
		name   string
		sel    *kubemodel.LabelSelector
		labels map[string]string
		want   bool
	}{
		{"nil selector matches everything", nil, ab, true},
		{"empty selector matches no labels", all(), nil, true},
		{"empty selector matches any labels", all(), ab, true},
		{"matchLabels equal", sel(map[string]string{"app": "web"}), ab, true},
		{"matchLabels all pairs", sel(map[string]string{"app": "web", "tier": "front"}), ab, true},
		{"matchLabels one pair differs", sel(map[string]string{"app": "web", "tier": "back"}), ab, false},
		{"matchLabels key missing", sel(map[string]string{"zone": "a"}), ab, false},
		{"matchLabels empty value needs the key", sel(map[string]string{"zone": ""}), ab, false},
		{"matchLabels empty value present", sel(map[string]string{"zone": ""}), map[string]string{"zone": ""}, true},
		{"In value listed", sel(nil, req("app", OpIn, "db", "web")), ab, true},
		{"In value not listed", sel(nil, req("app", OpIn, "db")), ab, false},
		{"In key missing", sel(nil, req("zone", OpIn, "a")), ab, false},
		{"NotIn value listed", sel(nil, req("app", OpNotIn, "web")), ab, false},
		{"NotIn value not listed", sel(nil, req("app", OpNotIn, "db")), ab, true},
		{"NotIn key missing matches", sel(nil, req("zone", OpNotIn, "a")), ab, true},
		{"NotIn on no labels matches", sel(nil, req("zone", OpNotIn, "a")), nil, true},
		{"Exists present", sel(nil, req("app", OpExists)), ab, true},
		{"Exists present with empty value", sel(nil, req("zone", OpExists)), map[string]string{"zone": ""}, true},
		{"Exists missing", sel(nil, req("zone", OpExists)), ab, false},
		{"DoesNotExist missing", sel(nil, req("zone", OpDoesNotExist)), ab, true},
		{"DoesNotExist present", sel(nil, req("app", OpDoesNotExist)), ab, false},
		{"requirements AND: all hold", sel(nil, req("app", OpIn, "web"), req("tier", OpExists)), ab, true},
		{"requirements AND: one fails", sel(nil, req("app", OpIn, "web"), req("tier", OpDoesNotExist)), ab, false},
		{"matchLabels AND expressions: both hold", sel(map[string]string{"tier": "front"}, req("app", OpNotIn, "db")), ab, true},
		{"matchLabels AND expressions: expression fails", sel(map[string]string{"tier": "front"}, req("app", OpNotIn, "web")), ab, false},
		{"matchLabels AND expressions: label fails", sel(map[string]string{"tier": "back"}, req("app", OpNotIn, "db")), ab, false},
		{"unknown operator matches nothing", sel(nil, req("app", "Equals", "web")), ab, false},
		{"operators are case-sensitive", sel(nil, req("app", "in", "web")), ab, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, selectorMatches(tt.sel, tt.labels))
		})
	}
}

func TestIPBlockContains(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		name string
		cidr string
		exc  []string
		addr netip.Addr
		want bool
	}{
		{"inside", "10.0.0.0/8", nil, a("10.1.2.3"), true},
		{"outside", "10.0.0.0/8", nil, a("11.0.0.1"), false},
		{"network address", "10.0.0.0/8", nil, a("10.0.0.0"), true},
		{"last address", "10.0.0.0/8", nil, a("10.255.255.255"), true},
		{"host route", "10.1.2.3/32", nil, a("10.1.2.3"), true},
		{"host route other", "10.1.2.3/32", nil, a("10.1.2.4"), false},
		{"excepted", "10.0.0.0/8", []string{"10.1.0.0/16"}, a("10.1.2.3"), false},
		{"not excepted", "10.0.0.0/8", []string{"10.1.0.0/16"}, a("10.2.0.1"), true},
		{"second except", "10.0.0.0/8", []string{"10.1.0.0/16", "10.2.0.0/16"}, a("10.2.0.1"), false},
		{"non-canonical cidr means its network", "10.1.2.3/8", nil, a("10.200.0.1"), true},
		{"non-canonical except means its network", "10.0.0.0/8", []string{"10.1.2.3/16"}, a("10.1.200.1"), false},
		{"all IPv4", "0.0.0.0/0", nil, a("192.0.2.1"), true},
		{"IPv4 block, IPv6 address", "0.0.0.0/0", nil, a("2001:db8::1"), false},
		{"IPv6 inside", "2001:db8::/32", nil, a("2001:db8::1"), true},
		{"IPv6 excepted", "2001:db8::/32", []string{"2001:db8::/64"}, a("2001:db8::1"), false},
		{"IPv6 block, IPv4 address", "::/0", nil, a("10.0.0.1"), false},
		{"bad cidr contains nothing", "10.0.0.0/33", nil, a("10.0.0.1"), false},
		{"bare address is no cidr", "10.0.0.1", nil, a("10.0.0.1"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &kubemodel.IPBlock{Cidr: tt.cidr, Except: tt.exc}
			assert.Equal(t, tt.want, ipBlockContains(b, tt.addr))
		})
	}
}

func TestPortMatches(t *testing.T) {
	web := &kubemodel.Pod{Containers: []*kubemodel.Container{
		{Name: "a", Ports: []*kubemodel.ContainerPort{containerPort("http", tcpProto, 8080)}},
		{Name: "b", Ports: []*kubemodel.ContainerPort{containerPort("dns", udpProto, 53), containerPort("dns-tcp", tcpProto, 53)}},
	}}
	tests := []struct {
		name  string
		port  *kubemodel.NetworkPolicyPort
		dst   *kubemodel.Pod
		proto kubemodel.Protocol
		n     int
		want  bool
	}{
		{"protocol defaults to TCP", &kubemodel.NetworkPolicyPort{Port: 80}, nil, tcpProto, 80, true},
		{"TCP port, UDP connection", tcp(80), nil, udpProto, 80, false},
		{"UDP port", udp(80), nil, udpProto, 80, true},
		{"SCTP port, TCP connection", num(sctpProto, 80), nil, tcpProto, 80, false},
		{"other number", tcp(80), nil, tcpProto, 81, false},
		{"every port of the protocol", anyPort(udpProto), nil, udpProto, 12345, true},
		{"every port of another protocol", anyPort(udpProto), nil, tcpProto, 12345, false},
		{"range start", portRange(tcpProto, 80, 90), nil, tcpProto, 80, true},
		{"range end", portRange(tcpProto, 80, 90), nil, tcpProto, 90, true},
		{"range inside", portRange(tcpProto, 80, 90), nil, tcpProto, 85, true},
		{"below range", portRange(tcpProto, 80, 90), nil, tcpProto, 79, false},
		{"above range", portRange(tcpProto, 80, 90), nil, tcpProto, 91, false},
		{"range of one", portRange(tcpProto, 80, 80), nil, tcpProto, 80, true},
		{"range, other protocol", portRange(tcpProto, 80, 90), nil, udpProto, 85, false},
		{"named port", named(tcpProto, "http"), web, tcpProto, 8080, true},
		{"named port, other number", named(tcpProto, "http"), web, tcpProto, 80, false},
		{"named port, protocol of the rule differs", named(udpProto, "http"), web, udpProto, 8080, false},
		{"named port in a second container", named(udpProto, "dns"), web, udpProto, 53, true},
		{"named port, container protocol differs", named(tcpProto, "dns"), web, tcpProto, 53, false},
		{"named port the pod lacks", named(tcpProto, "https"), web, tcpProto, 8080, false},
		{"named port, destination not a pod", named(tcpProto, "http"), nil, tcpProto, 8080, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, portMatches(tt.port, tt.dst, tt.proto, tt.n))
		})
	}
	assert.True(t, portsMatch(nil, nil, sctpProto, 9), "no ports: every port of every protocol")
	assert.True(t, portsMatch(ports(tcp(1), udp(2)), nil, udpProto, 2), "ports are ORed")
	assert.False(t, portsMatch(ports(tcp(1), udp(2)), nil, udpProto, 1))
}

func TestAffects(t *testing.T) {
	tests := []struct {
		name            string
		np              *kubemodel.NetworkPolicy
		ingress, egress bool
	}{
		{"no types, no rules: Ingress", newPolicy("x", "p", all()).build(), true, false},
		{"no types, ingress rules: Ingress", newPolicy("x", "p", all()).ingress(nil, nil).build(), true, false},
		{"no types, egress rules: both", newPolicy("x", "p", all()).egress(nil, nil).build(), true, true},
		{"Ingress", newPolicy("x", "p", all()).types(ingressType).egress(nil, nil).build(), true, false},
		{"Egress", newPolicy("x", "p", all()).types(egressType).ingress(nil, nil).build(), false, true},
		{"Egress without rules", newPolicy("x", "p", all()).types(egressType).build(), false, true},
		{"both", newPolicy("x", "p", all()).types(egressType, ingressType).build(), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.ingress, affects(tt.np, ingressType), "ingress")
			assert.Equal(t, tt.egress, affects(tt.np, egressType), "egress")
		})
	}
}

// smallCluster: namespaces "web" (team=a) and "db" (team=b), pods web/front
// (node n1, named port "http" TCP 8080) and db/pg (node n2, "pg" TCP 5432),
// a host-network pod web/agent on n1, nodes n1 and n2.
func smallCluster() *Cluster {
	return &Cluster{
		Nodes: []Node{
			{Name: "n1", Addrs: []netip.Addr{netip.MustParseAddr("192.168.1.1")}},
			{Name: "n2", Addrs: []netip.Addr{netip.MustParseAddr("192.168.1.2")}},
		},
		Namespaces: []*kubemodel.Namespace{
			{Name: "web", Labels: map[string]string{"team": "a"}},
			{Name: "db", Labels: map[string]string{"team": "b"}},
		},
		Pods: []*kubemodel.Pod{
			{Namespace: "web", Name: "front", Labels: map[string]string{"app": "front"}, NodeName: "n1",
				IpAddresses: []string{"10.0.1.1", "fd00::1:1"},
				Containers:  []*kubemodel.Container{{Name: "c", Ports: []*kubemodel.ContainerPort{containerPort("http", tcpProto, 8080)}}}},
			{Namespace: "db", Name: "pg", Labels: map[string]string{"app": "pg"}, NodeName: "n2",
				IpAddress:  "10.0.2.1", // the primary address only
				Containers: []*kubemodel.Container{{Name: "c", Ports: []*kubemodel.ContainerPort{containerPort("pg", tcpProto, 5432)}}}},
			{Namespace: "web", Name: "agent", Labels: map[string]string{"app": "front"}, NodeName: "n1", HostNetwork: true,
				IpAddresses: []string{"192.168.1.1"},
				Containers:  []*kubemodel.Container{{Name: "c", Ports: []*kubemodel.ContainerPort{containerPort("metrics", tcpProto, 9100)}}}},
		},
	}
}

var (
	frontID = pod("web", "front")
	pgID    = pod("db", "pg")
	agentID = pod("web", "agent")
	front   = PodEndpoint(frontID, netip.MustParseAddr("10.0.1.1"))
	front6  = PodEndpoint(frontID, netip.MustParseAddr("fd00::1:1"))
	pg      = PodEndpoint(pgID, netip.MustParseAddr("10.0.2.1"))
	agent   = PodEndpoint(agentID, netip.MustParseAddr("192.168.1.1"))
	node1   = NodeEndpoint("n1", netip.MustParseAddr("192.168.1.1"))
	node2   = NodeEndpoint("n2", netip.MustParseAddr("192.168.1.2"))
	outside = ExternalEndpoint(netip.MustParseAddr("203.0.113.9"))
)

func TestAllowedWithoutPolicies(t *testing.T) {
	c := smallCluster()
	require.NoError(t, c.Check())
	for _, src := range []Endpoint{front, front6, pg, agent, node1, node2, outside} {
		for _, dst := range []Endpoint{front, pg, agent, node2, outside} {
			assert.True(t, c.Allowed(src, dst, tcpProto, 1), "%s -> %s", src, dst)
		}
	}
	assert.False(t, c.Isolated(frontID, ingressType))
}

func TestAllowedIngress(t *testing.T) {
	c := smallCluster()
	// pg accepts TCP 5432 ("pg" by name) from the pods of namespaces with
	// team=a, and anything from 203.0.113.0/24.
	c.PutPolicy(newPolicy("db", "pg", match("app", "pg")).types(ingressType).
		ingress(peers(namespaces(match("team", "a"))), ports(named(tcpProto, "pg"))).
		ingress(peers(block("203.0.113.0/24")), nil).build())

	assert.True(t, c.Isolated(pgID, ingressType))
	assert.False(t, c.Isolated(pgID, egressType))
	assert.False(t, c.Isolated(frontID, ingressType), "a policy of db does not select pods of web")

	assert.True(t, c.Allowed(front, pg, tcpProto, 5432), "peer namespace, named port")
	assert.True(t, c.Allowed(front6, pg, tcpProto, 5432), "selectors match whichever address the pod uses")
	assert.False(t, c.Allowed(front, pg, tcpProto, 5433), "other port")
	assert.False(t, c.Allowed(front, pg, udpProto, 5432), "other protocol")
	assert.True(t, c.Allowed(outside, pg, udpProto, 1), "ipBlock, every port")
	assert.False(t, c.Allowed(ExternalEndpoint(netip.MustParseAddr("198.51.100.1")), pg, tcpProto, 5432), "external, outside the block")
	assert.False(t, c.Allowed(agent, pg, tcpProto, 5432), "a host-network pod is no pod: namespaceSelector does not select it")
	assert.False(t, c.Allowed(node1, pg, tcpProto, 5432), "another node is not the pod's node")
	assert.True(t, c.Allowed(node2, pg, tcpProto, 5432), "the pod's own node is always allowed")
	assert.True(t, c.Allowed(node2, pg, udpProto, 9), "the pod's own node is always allowed")
	assert.True(t, c.Allowed(pg, front, tcpProto, 8080), "ingress of pg says nothing about its connections to others")
}

func TestAllowedEgress(t *testing.T) {
	c := smallCluster()
	// front may connect to pods with app=pg in any namespace on "pg", to
	// the nodes' network on 10250, and nothing else.
	c.PutPolicy(newPolicy("web", "front", match("app", "front")).types(egressType).
		egress(peers(podsIn(match("app", "pg"), all())), ports(named(tcpProto, "pg"))).
		egress(peers(block("192.168.1.0/24")), ports(tcp(10250), named(tcpProto, "metrics"))).build())

	assert.True(t, c.Isolated(frontID, egressType))
	assert.False(t, c.Isolated(agentID, egressType), "host-network pods are never isolated")
	assert.True(t, c.Allowed(front, pg, tcpProto, 5432), "named port resolved against the destination")
	assert.False(t, c.Allowed(front, pg, tcpProto, 8080), "the source's own named port means nothing for egress")
	assert.True(t, c.Allowed(front, node2, tcpProto, 10250), "ipBlock to a node")
	assert.False(t, c.Allowed(front, node2, tcpProto, 9100), "a named port never matches a non-pod destination")
	assert.False(t, c.Allowed(front, agent, tcpProto, 9100), "a host-network pod's named ports match nothing")
	assert.True(t, c.Allowed(front, agent, tcpProto, 10250), "a host-network pod is its node's address")
	assert.False(t, c.Allowed(front, outside, tcpProto, 443))
	assert.False(t, c.Allowed(front6, pg, tcpProto, 22))
	assert.True(t, c.Allowed(agent, outside, tcpProto, 443), "policies selecting app=front do not select a host-network pod")
	assert.True(t, c.Allowed(pg, front, tcpProto, 8080), "egress of front says nothing about connections to it")
	assert.True(t, c.IngressAllowed(front, outside, tcpProto, 443), "no ingress side outside the cluster")
}

func TestAllowedIPBlockMatchesPods(t *testing.T) {
	c := smallCluster()
	// pg allows 10.0.1.1/32: front's IPv4 address, whatever its labels.
	c.PutPolicy(newPolicy("db", "pg", all()).types(ingressType).ingress(peers(block("10.0.1.1/32")), nil).build())
	assert.True(t, c.Allowed(front, pg, tcpProto, 1))
	assert.False(t, c.Allowed(front6, pg, tcpProto, 1), "IPv6 address of the same pod is not in the block")
}

func TestAllowedIngressAndEgressBothNeeded(t *testing.T) {
	c := smallCluster()
	c.PutPolicy(newPolicy("web", "deny-egress", all()).types(egressType).build())
	c.PutPolicy(newPolicy("db", "allow-all", all()).types(ingressType).ingress(nil, nil).build())
	assert.False(t, c.Allowed(front, pg, tcpProto, 5432), "egress denies although ingress allows")
	assert.False(t, c.EgressAllowed(front, pg, tcpProto, 5432))
	assert.True(t, c.IngressAllowed(front, pg, tcpProto, 5432))
}

func TestInvalidPolicyIgnored(t *testing.T) {
	c := smallCluster()
	c.PutPolicy(newPolicy("db", "bad", all()).types(ingressType).ingress(peers(block("10.0.0.0/33")), nil).build())
	assert.False(t, c.Isolated(pgID, ingressType), "an invalid policy isolates nothing")
	assert.True(t, c.Allowed(front, pg, tcpProto, 1))
}

func TestAllowedPanicsOnUnknownEndpoints(t *testing.T) {
	c := smallCluster()
	assert.PanicsWithValue(t, "policytest: endpoint web/nope@10.0.1.1: no such pod", func() {
		c.Allowed(PodEndpoint(pod("web", "nope"), netip.MustParseAddr("10.0.1.1")), pg, tcpProto, 1)
	})
	assert.PanicsWithValue(t, "policytest: endpoint web/front@10.9.9.9: not an address of the pod", func() {
		c.Allowed(PodEndpoint(frontID, netip.MustParseAddr("10.9.9.9")), pg, tcpProto, 1)
	})
}

func TestEndpointOf(t *testing.T) {
	c := smallCluster()
	assert.Equal(t, front, c.EndpointOf(netip.MustParseAddr("10.0.1.1")))
	assert.Equal(t, front6, c.EndpointOf(netip.MustParseAddr("fd00::1:1")))
	assert.Equal(t, pg, c.EndpointOf(netip.MustParseAddr("10.0.2.1")))
	assert.Equal(t, node1, c.EndpointOf(netip.MustParseAddr("192.168.1.1")), "a host-network pod's address is its node's")
	assert.Equal(t, outside, c.EndpointOf(netip.MustParseAddr("203.0.113.9")))
	assert.Equal(t, "web/front@10.0.1.1", front.String())
	assert.Equal(t, "node n1@192.168.1.1", node1.String())
	assert.Equal(t, "external@203.0.113.9", outside.String())
}

func TestClusterCheck(t *testing.T) {
	require.NoError(t, smallCluster().Check())
	require.NoError(t, Model(ModelOptions{DualStack: true}).Check())

	tests := []struct {
		name   string
		change func(c *Cluster)
		want   string
	}{
		{"pod without namespace", func(c *Cluster) { c.Pods[0].Namespace = "nope" }, `namespace "nope" is not in the cluster`},
		{"duplicate pod", func(c *Cluster) { c.Pods = append(c.Pods, c.Pods[0]) }, "duplicate name"},
		{"bad address", func(c *Cluster) { c.Pods[0].IpAddresses = []string{"10.0.0.300"} }, `address "10.0.0.300"`},
		{"shared address", func(c *Cluster) { c.Pods[1].IpAddress = "10.0.1.1" }, "is also pod web/front's"},
		{"duplicate namespace", func(c *Cluster) { c.Namespaces = append(c.Namespaces, c.Namespaces[0]) }, `namespace "web"`},
		{"duplicate node", func(c *Cluster) { c.Nodes = append(c.Nodes, c.Nodes[0]) }, `node "n1"`},
		{"duplicate policy", func(c *Cluster) {
			np := newPolicy("web", "p", all()).build()
			c.Policies = append(c.Policies, np, np)
		}, "policy web/p: duplicate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := smallCluster()
			tt.change(c)
			err := c.Check()
			require.ErrorIs(t, err, ErrInvalidCluster)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestClusterChangesReplaceObjects(t *testing.T) {
	c := smallCluster()
	before := c.Pod(frontID)
	require.NoError(t, c.SetPodLabels(frontID, map[string]string{"app": "back"}))
	assert.Equal(t, map[string]string{"app": "front"}, before.GetLabels(), "the old object is unchanged")
	assert.Equal(t, map[string]string{"app": "back"}, c.Pod(frontID).GetLabels())

	require.NoError(t, c.SetPodPorts(frontID, []*kubemodel.ContainerPort{containerPort("web", udpProto, 80)}))
	assert.True(t, hasNamedPort(c.Pod(frontID), "web", udpProto, 80))
	assert.False(t, hasNamedPort(c.Pod(frontID), "http", tcpProto, 8080))
	assert.True(t, hasNamedPort(before, "http", tcpProto, 8080))

	ns := c.Namespace("db")
	require.NoError(t, c.SetNamespaceLabels("db", map[string]string{"team": "c"}))
	assert.Equal(t, "b", ns.GetLabels()["team"])
	assert.Equal(t, "c", c.Namespace("db").GetLabels()["team"])

	np := newPolicy("db", "p", all()).build()
	c.PutPolicy(np)
	np.Name = "changed-after-put"
	assert.NotNil(t, c.Policy(kubemodel.PolicyID{Namespace: "db", Name: "p"}), "PutPolicy keeps a copy")
	c.PutPolicy(newPolicy("db", "p", all()).types(egressType).build())
	assert.Len(t, c.Policies, 1, "same namespace/name replaces")
	require.NoError(t, c.DeletePolicy(kubemodel.PolicyID{Namespace: "db", Name: "p"}))
	assert.Empty(t, c.Policies)

	require.NoError(t, c.DeletePod(pgID))
	assert.Nil(t, c.Pod(pgID))

	for _, err := range []error{
		c.DeletePolicy(kubemodel.PolicyID{Namespace: "db", Name: "p"}),
		c.DeletePod(pgID),
		c.SetPodLabels(pgID, nil),
		c.SetPodPorts(pgID, nil),
		c.SetNamespaceLabels("nope", nil),
	} {
		assert.ErrorIs(t, err, ErrInvalidCluster)
	}
}

func TestClone(t *testing.T) {
	c := smallCluster()
	c.PutPolicy(newPolicy("db", "p", all()).build())
	d := c.Clone()
	d.Pods[0].Labels["app"] = "changed"
	d.Policies[0].Name = "changed"
	d.Nodes[0].Addrs[0] = netip.MustParseAddr("1.1.1.1")
	assert.Equal(t, "front", c.Pods[0].Labels["app"])
	assert.Equal(t, "p", c.Policies[0].Name)
	assert.Equal(t, "192.168.1.1", c.Nodes[0].Addrs[0].String())
}

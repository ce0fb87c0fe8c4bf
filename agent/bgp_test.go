package agent_test

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// bgpNode configures an agent with BGP on its own loopback address
// (next hops, router ID, and where it listens) and a short status period.
func bgpNode(addr netip.Addr) func(*agent.Config) {
	return func(c *agent.Config) {
		c.BGP = agent.BGPConfig{IPv4: addr, ListenAddresses: []netip.Addr{addr}, StatusInterval: 100 * time.Millisecond}
	}
}

// readStatus returns the BGP status a node published in etcd (nil if none).
func readStatus(t *testing.T, cli *clientv3.Client, node string) *bgpmodel.NodeStatus {
	t.Helper()
	resp, err := cli.Get(context.Background(), bgpmodel.StatusKey("", node))
	require.NoError(t, err)
	if len(resp.Kvs) == 0 {
		return nil
	}
	var m bgpmodel.NodeStatus
	require.NoError(t, proto.Unmarshal(resp.Kvs[0].Value, &m))
	return &m
}

func peerStatusOf(m *bgpmodel.NodeStatus, instance, peer string) *bgpmodel.PeerStatus {
	for _, in := range m.GetBgpInstances() {
		if in.GetName() != instance {
			continue
		}
		for _, p := range in.GetPeers() {
			if p.GetName() == peer {
				return p
			}
		}
	}
	return nil
}

func conditionTypes(cs []*bgpmodel.Condition) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.GetType())
	}
	return out
}

// TestV2ClusterConfigTwoOfThreeNodes: three agents; a v2 cluster config
// selects the two labelled bgp=on; its peer config makes them wait for the
// peer (a GoBGP router in a child process), which connects to each
// selected node's local port; node-2's override changes its router ID
// and local port. The peer has sessions with node-1 and node-2 (node-2
// under its override's router ID, on its override's port) and their pod
// CIDRs with the advertisement's community; node-3 has no BGP. Each node
// publishes its status under its own etcd key.
func TestV2ClusterConfigTwoOfThreeNodes(t *testing.T) {
	names := []string{"node-1", "node-2", "node-3"}
	cli := startEtcd(t, names...)
	addrs := []netip.Addr{netip.MustParseAddr("127.0.0.91"), netip.MustParseAddr("127.0.0.92"), netip.MustParseAddr("127.0.0.93")}
	port := gobgptest.FreePort(t, addrs[0])
	port2 := gobgptest.FreePort(t, addrs[1])
	for port2 == port {
		port2 = gobgptest.FreePort(t, addrs[1])
	}
	rr := gobgptest.StartPeer(t, gobgptest.PeerConfig{Address: netip.MustParseAddr("127.0.0.90"), ASN: 65090})
	for i, a := range addrs {
		p := port
		if i == 1 {
			p = port2
		}
		rr.AddNeighbor(t, gobgptest.Neighbor{Address: a, ASN: 65091, Active: true, Port: p, Families: []bgp.Family{bgp.IPv4Unicast}})
	}
	put(t, cli, bgpmodel.ObjectKey(bgpmodel.ClusterConfigResourceName, "cc"), &bgpmodel.ClusterConfig{Name: "cc",
		NodeSelector: &bgpmodel.LabelSelector{MatchLabels: map[string]string{"bgp": "on"}},
		BgpInstances: []*bgpmodel.ClusterInstance{{Name: "main", LocalAsn: 65091, LocalPort: uint32(port), Peers: []*bgpmodel.ClusterPeer{
			{Name: "rr", PeerAddress: "127.0.0.90", PeerAsn: 65090, PeerConfigRef: &bgpmodel.PeerConfigReference{Name: "rr"}}}}}})
	put(t, cli, bgpmodel.ObjectKey(bgpmodel.PeerConfigResourceName, "rr"), &bgpmodel.PeerConfig{Name: "rr",
		Transport: &bgpmodel.PeerTransport{Passive: true}, Timers: &bgpmodel.PeerTimers{HoldTimeSeconds: 9, KeepAliveTimeSeconds: 3},
		Families: []*bgpmodel.PeerFamily{{Afi: "ipv4", Safi: "unicast", Advertisements: &bgpmodel.LabelSelector{MatchLabels: map[string]string{"adv": "pods"}}}}})
	put(t, cli, bgpmodel.ObjectKey(bgpmodel.AdvertisementResourceName, "pods"), &bgpmodel.Advertisement{Name: "pods",
		Labels: map[string]string{"adv": "pods"}, Advertisements: []*bgpmodel.AdvertisementEntry{{AdvertisementType: "PodCIDR",
			Attributes: &bgpmodel.Attributes{Communities: &bgpmodel.Communities{Standard: []string{"65091:1"}}}}}})
	put(t, cli, bgpmodel.ObjectKey(bgpmodel.NodeConfigOverrideResourceName, "node-2"), &bgpmodel.NodeConfigOverride{Name: "node-2",
		BgpInstances: []*bgpmodel.OverrideInstance{{Name: "main", RouterId: "10.255.0.2", LocalPort: uint32(port2)}}})

	nodes := make([]*simNode, len(names))
	for i, name := range names {
		nodes[i] = startNode(t, cli, name, bgpNode(addrs[i]))
	}
	// The selected nodes start their speakers one at a time (GoBGP's
	// package-level options: see package gobgp).
	for i := range 2 {
		put(t, cli, kubemodel.NodeKey(names[i]), &kubemodel.Node{Name: names[i], Labels: map[string]string{"bgp": "on"}})
		require.Eventually(t, func() bool {
			s := nodes[i].agent.BGP.Controller.Status()
			return s.Source == "BGPClusterConfig/cc" && s.LastError == nil
		}, time.Minute, 10*time.Millisecond, "%s applies the cluster config: %v", names[i], nodes[i].agent.BGP.Controller.Status())
	}

	require.Eventually(t, func() bool {
		return rr.Neighbor(t, addrs[0]).State == bgp.SessionEstablished && rr.Neighbor(t, addrs[1]).State == bgp.SessionEstablished
	}, time.Minute, 50*time.Millisecond, "sessions with the two selected nodes")
	assert.Equal(t, addrs[0], rr.Neighbor(t, addrs[0]).RouterID, "node-1: the router ID of its address")
	assert.Equal(t, netip.MustParseAddr("10.255.0.2"), rr.Neighbor(t, addrs[1]).RouterID, "node-2: the override's router ID (on the override's port)")
	require.Eventually(t, func() bool { return len(rr.Routes(t, bgp.IPv4Unicast)) == 2 }, time.Minute, 50*time.Millisecond)
	routes := rr.Routes(t, bgp.IPv4Unicast)
	for i := range 2 {
		pfx := nodes[i].agent.IPAM.PodSubnetThisNodePrefix()
		r, ok := routes[pfx]
		require.True(t, ok, "%s's pod CIDR %v: %v", names[i], pfx, routes)
		assert.Equal(t, addrs[i], r.NextHop)
		assert.Equal(t, []string{"65091:1"}, r.Communities)
	}
	assert.NotEqual(t, bgp.SessionEstablished, rr.Neighbor(t, addrs[2]).State, "node-3 is not selected")
	assert.Empty(t, nodes[2].agent.BGP.Controller.Status().Source)

	// Each node's status, under its own key.
	require.Eventually(t, func() bool {
		p := peerStatusOf(readStatus(t, cli, "node-2"), "main", "rr")
		return p != nil && p.GetPeeringState() == "Established" && len(p.GetRouteCount()) == 1 && p.GetRouteCount()[0].GetAdvertised() == 1
	}, time.Minute, 50*time.Millisecond, "node-2's status: %v", readStatus(t, cli, "node-2"))
	st := readStatus(t, cli, "node-2")
	assert.Equal(t, "BGPClusterConfig/cc", st.GetSource())
	assert.Equal(t, "10.255.0.2", st.GetBgpInstances()[0].GetRouterId())
	assert.Equal(t, uint32(port2), st.GetBgpInstances()[0].GetLocalPort())
	p := peerStatusOf(st, "main", "rr")
	assert.Equal(t, uint32(9), p.GetTimers().GetAppliedHoldTimeSeconds(), "the negotiated hold time")
	assert.NotEmpty(t, p.GetEstablishedTime())
	require.Eventually(t, func() bool { return readStatus(t, cli, "node-3") != nil }, time.Minute, 50*time.Millisecond)
	assert.Empty(t, readStatus(t, cli, "node-3").GetSource(), "node-3 publishes an empty status")
}

// logBuffer collects an agent's logs.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestV2StatusConditionsAndBadInput: one node's cluster config names a
// peer config that does not exist, a peer config whose auth secret does
// not exist, and a good one; advertisements include one with a bad
// community string. The good peer's session comes up with its routes;
// the published status reports MissingPeerConfig and MissingAuthSecret
// on the two peers (NotConfigured) and InvalidObject for the bad
// advertisement, which the agent also logs; when the secret appears, its
// peer is configured.
func TestV2StatusConditionsAndBadInput(t *testing.T) {
	cli := startEtcd(t, "node-1")
	addr := netip.MustParseAddr("127.0.0.94")
	peer := gobgptest.StartPeer(t, gobgptest.PeerConfig{Address: netip.MustParseAddr("127.0.0.95"), ASN: 65095})
	peer.AddNeighbor(t, gobgptest.Neighbor{Address: addr, ASN: 65094, Families: []bgp.Family{bgp.IPv4Unicast}})
	put(t, cli, bgpmodel.ObjectKey(bgpmodel.ClusterConfigResourceName, "cc"), &bgpmodel.ClusterConfig{Name: "cc",
		BgpInstances: []*bgpmodel.ClusterInstance{{Name: "main", LocalAsn: 65094, Peers: []*bgpmodel.ClusterPeer{
			{Name: "good", PeerAddress: "127.0.0.95", PeerAsn: 65095, PeerConfigRef: &bgpmodel.PeerConfigReference{Name: "good"}},
			{Name: "nocfg", PeerAddress: "127.0.0.96", PeerAsn: 65096, PeerConfigRef: &bgpmodel.PeerConfigReference{Name: "missing"}},
			{Name: "md5", PeerAddress: "127.0.0.97", PeerAsn: 65097, PeerConfigRef: &bgpmodel.PeerConfigReference{Name: "secured"}},
		}}}})
	put(t, cli, bgpmodel.ObjectKey(bgpmodel.PeerConfigResourceName, "good"), &bgpmodel.PeerConfig{Name: "good",
		Transport: &bgpmodel.PeerTransport{PeerPort: uint32(peer.Port())}, Timers: &bgpmodel.PeerTimers{ConnectRetryTimeSeconds: 2},
		Families: []*bgpmodel.PeerFamily{{Afi: "ipv4", Safi: "unicast", Advertisements: &bgpmodel.LabelSelector{}}}})
	put(t, cli, bgpmodel.ObjectKey(bgpmodel.PeerConfigResourceName, "secured"), &bgpmodel.PeerConfig{Name: "secured", AuthSecretRef: "md5",
		Timers: &bgpmodel.PeerTimers{ConnectRetryTimeSeconds: 2}})
	put(t, cli, bgpmodel.ObjectKey(bgpmodel.AdvertisementResourceName, "pods"), &bgpmodel.Advertisement{Name: "pods",
		Advertisements: []*bgpmodel.AdvertisementEntry{{AdvertisementType: "PodCIDR"}}})
	// The session's source address: the peer knows the node by it.
	put(t, cli, bgpmodel.ObjectKey(bgpmodel.NodeConfigOverrideResourceName, "node-1"), &bgpmodel.NodeConfigOverride{Name: "node-1",
		BgpInstances: []*bgpmodel.OverrideInstance{{Name: "main", Peers: []*bgpmodel.OverridePeer{{Name: "good", LocalAddress: addr.String()}}}}})
	put(t, cli, bgpmodel.ObjectKey(bgpmodel.AdvertisementResourceName, "bad"), &bgpmodel.Advertisement{Name: "bad",
		Advertisements: []*bgpmodel.AdvertisementEntry{{AdvertisementType: "PodCIDR",
			Attributes: &bgpmodel.Attributes{Communities: &bgpmodel.Communities{Standard: []string{"65536:1"}}}}}})

	logs := &logBuffer{}
	n := startNodeLogged(t, cli, "node-1", slog.New(slog.NewTextHandler(logs, nil)), nil, bgpNode(addr))
	defer func() {
		if t.Failed() {
			ns, err := n.agent.BGP.Controller.NodeStatus(context.Background())
			t.Logf("controller: %+v\nstatus: %+v %v\npublisher: %+v", n.agent.BGP.Controller.Status(), ns, err, n.agent.BGP.Status.Stats())
		}
	}()
	require.Eventually(t, func() bool {
		st := readStatus(t, cli, "node-1")
		p := peerStatusOf(st, "main", "good")
		return p != nil && p.GetPeeringState() == "Established"
	}, time.Minute, 50*time.Millisecond, "the good peer comes up")
	require.Eventually(t, func() bool { return len(peer.Routes(t, bgp.IPv4Unicast)) == 1 }, time.Minute, 50*time.Millisecond,
		"and gets the pod CIDR: the bad advertisement does not stop the rest")
	st := readStatus(t, cli, "node-1")
	assert.Equal(t, []string{"InvalidObject"}, conditionTypes(st.GetConditions()))
	assert.Equal(t, "BGPAdvertisement/bad", st.GetConditions()[0].GetObject())
	assert.Contains(t, st.GetConditions()[0].GetMessage(), "communities.standard[0]")
	nocfg := peerStatusOf(st, "main", "nocfg")
	assert.Equal(t, "NotConfigured", nocfg.GetPeeringState())
	assert.Equal(t, []string{"MissingPeerConfig"}, conditionTypes(nocfg.GetConditions()))
	assert.Equal(t, "BGPPeerConfig/missing", nocfg.GetConditions()[0].GetObject())
	md5 := peerStatusOf(st, "main", "md5")
	assert.Equal(t, "NotConfigured", md5.GetPeeringState())
	assert.Equal(t, []string{"MissingAuthSecret"}, conditionTypes(md5.GetConditions()))
	assert.Equal(t, "Secret/md5", md5.GetConditions()[0].GetObject())

	put(t, cli, bgpmodel.ObjectKey(bgpmodel.AuthSecretResourceName, "md5"), &bgpmodel.AuthSecret{Name: "md5", Password: "s3cret"})
	require.Eventually(t, func() bool {
		p := peerStatusOf(readStatus(t, cli, "node-1"), "main", "md5")
		return p != nil && p.GetPeeringState() != "NotConfigured" && !slices.Contains(conditionTypes(p.GetConditions()), "MissingAuthSecret")
	}, time.Minute, 50*time.Millisecond, "with its secret the peer is configured")
	assert.True(t, slices.Contains(conditionTypes(readStatus(t, cli, "node-1").GetConditions()), "InvalidObject"))
	assert.Equal(t, 1, strings.Count(logs.String(), `msg="ignoring invalid BGP object"`), "logged once, naming the object: %s", logs.String())
	assert.Contains(t, logs.String(), "key=k8s/bgpadvertisement/bad")
}

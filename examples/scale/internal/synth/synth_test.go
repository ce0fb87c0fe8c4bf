package synth

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/nodesync"
	nsmodel "github.com/vswitchkit/vswitchkit/nodesync/nodesyncmodel"
)

func localPods(n int) []netip.Addr {
	var out []netip.Addr
	for i := range n {
		out = append(out, nth(PodSubnet(MeasuredNodeID), uint64(i)+2))
	}
	return out
}

// TestProportions: Kubernetes' limits at 5000 nodes.
func TestProportions(t *testing.T) {
	s := New(5000, localPods(110))
	assert.Equal(t, 150080, s.Pods())
	assert.Equal(t, 10000, s.Services)
	avg := float64(s.Endpoints()) / float64(s.Services)
	assert.InDelta(t, 10, avg, 0.2, "endpoints per service")
	assert.Equal(t, MaxEndpointsPerSlice, s.EndpointCount(99))
}

// TestPodOrder: the interleaved order names every pod once.
func TestPodOrder(t *testing.T) {
	s := New(7, localPods(40))
	seen := map[podRef]bool{}
	for k := range s.Pods() {
		r := s.podAt(k)
		require.False(t, seen[r], "pod %v twice", r)
		seen[r] = true
		if r.node == 0 {
			require.Less(t, r.j, 40)
		} else {
			require.Less(t, r.j, s.PodsPerNode)
			require.Less(t, r.node, 7)
		}
	}
	assert.Len(t, seen, s.Pods())
	assert.Equal(t, s.podAt(0), s.podAt(s.Pods()), "wraps around")
}

// TestClusterKeys: every object is stored under the key the reflector and
// nodesync use, and its value names the same object; IDs are unique; the
// addresses fit the agent's address plan.
func TestClusterKeys(t *testing.T) {
	s := New(30, localPods(110))
	s.NetworkPolicies = true
	counts := map[string]int{}
	ids := map[uint32]string{}
	nodePorts := map[int32]string{}
	teams := map[string][]string{} // team → namespaces
	for kv := range s.Cluster {
		rel, ok := strings.CutPrefix(kv.Key, kubemodel.DefaultPrefix)
		require.True(t, ok, kv.Key)
		switch v := kv.Value.(type) {
		case *kubemodel.Pod:
			node, id, err := kubemodel.ParseNodePodKey(rel) // the reflector's layout: per node
			require.NoError(t, err)
			assert.Equal(t, id, v.ID())
			assert.Equal(t, node, v.NodeName)
			ip := netip.MustParseAddr(v.IpAddress)
			assert.True(t, PodSubnetCIDR.Contains(ip), "%v", ip)
			counts["pod"]++
		case *kubemodel.PodPeer:
			id, err := kubemodel.ParsePodPeerKey(rel)
			require.NoError(t, err)
			assert.Equal(t, id, v.ID())
			counts["podpeer"]++
		case *kubemodel.Service:
			id, err := kubemodel.ParseServiceKey(rel)
			require.NoError(t, err)
			assert.Equal(t, id, v.ID())
			assert.True(t, ServiceCIDR.Contains(netip.MustParseAddr(v.ClusterIps[0])))
			for _, p := range v.Ports {
				if p.NodePort != 0 {
					require.Empty(t, nodePorts[p.NodePort], "node port %d of %s and %s", p.NodePort, v.Name, nodePorts[p.NodePort])
					nodePorts[p.NodePort] = v.Name
				}
			}
			counts["service"]++
		case *kubemodel.Endpoints:
			id, err := kubemodel.ParseEndpointsKey(rel)
			require.NoError(t, err)
			assert.Equal(t, id, v.ID())
			require.Len(t, v.Subsets, 1)
			addrs := v.Subsets[0].Addresses
			for i := 1; i < len(addrs); i++ {
				require.Negative(t, netip.MustParseAddr(addrs[i-1].Ip).Compare(netip.MustParseAddr(addrs[i].Ip)), "sorted, no duplicates")
			}
			counts["endpoints"]++
		case *kubemodel.Node:
			name, err := kubemodel.ParseNodeKey(rel)
			require.NoError(t, err)
			assert.Equal(t, name, v.Name)
			counts["node"]++
		case *kubemodel.Namespace:
			name, err := kubemodel.ParseNamespaceKey(rel)
			require.NoError(t, err)
			assert.Equal(t, name, v.Name)
			assert.Equal(t, name, v.Labels["kubernetes.io/metadata.name"])
			require.NotEmpty(t, v.Labels["team"])
			teams[v.Labels["team"]] = append(teams[v.Labels["team"]], name)
			counts["namespace"]++
		case *kubemodel.NetworkPolicy:
			id, err := kubemodel.ParseNetworkPolicyKey(rel)
			require.NoError(t, err)
			assert.Equal(t, id, v.ID())
			require.NotNil(t, v.PodSelector, "selects every pod of its namespace")
			assert.Empty(t, v.PodSelector.MatchLabels)
			counts["networkpolicy"]++
		case *nsmodel.NodeIDClaim:
			assert.Equal(t, nodesync.DefaultPrefix+"id/"+strings.TrimPrefix(kv.Key, nodesync.DefaultPrefix+"id/"), kv.Key)
			require.Empty(t, ids[v.Id], "ID %d twice", v.Id)
			ids[v.Id] = v.Name
			assert.NotEqual(t, uint32(MeasuredNodeID), v.Id, "the measured node's ID is left for it")
		case *nsmodel.VswitchNode:
			assert.Equal(t, nodesync.DefaultPrefix+"node/"+v.Name, kv.Key)
			assert.Equal(t, ids[v.Id], v.Name, "record and claim agree")
			assert.True(t, NodeInterconnectCIDR.Contains(netip.MustParseAddr(v.IpAddresses[0].Address)))
		default:
			t.Fatalf("unexpected %T under %s", v, kv.Key)
		}
	}
	assert.Equal(t, map[string]int{"pod": s.Pods(), "podpeer": s.Pods(), "service": s.Services, "endpoints": s.Services, "node": 29,
		"namespace": s.Namespaces + 1, "networkpolicy": 2 * (s.Namespaces + 1)}, counts)
	assert.Equal(t, s.NetworkPolicyCount(), counts["networkpolicy"])
	assert.Contains(t, teams["t0"], LocalPodNamespace, "the measured node's pods are in a team too")
	assert.Len(t, teams, min(s.Namespaces, 10))
	assert.Len(t, ids, 29)

	objs := s.MeasuredNodeObjects()
	require.Len(t, objs, 3)
	assert.Equal(t, kubemodel.EtcdKey("", kubemodel.NodeKey(MeasuredNode)), objs[0].Key)
	assert.Equal(t, kubemodel.EtcdKey("", bgpmodel.PolicyKey(PolicyName)), objs[1].Key)
	assert.Equal(t, kubemodel.EtcdKey("", kubemodel.LayoutKey), objs[2].Key)
	assert.Equal(t, kubemodel.FormatLayout(kubemodel.LayoutNodePods), objs[2].Raw)

	// The flat layout: pods under their keys, no layout key.
	s.Layout = kubemodel.LayoutFlat
	require.Len(t, s.MeasuredNodeObjects(), 2)
	for kv := range s.Cluster {
		if p, ok := kv.Value.(*kubemodel.Pod); ok {
			require.Equal(t, kubemodel.EtcdKey("", kubemodel.PodKey(p.Namespace, p.Name)), kv.Key)
		}
	}
}

func TestEndpointsWithExtra(t *testing.T) {
	s := New(10, localPods(5))
	base := s.EndpointsOf(3, nil)
	extra := PodIP(1, 200)
	more := s.EndpointsOf(3, []netip.Addr{extra})
	assert.Len(t, more.Subsets[0].Addresses, len(base.Subsets[0].Addresses)+1)
	assert.Equal(t, s.EndpointCount(3), len(base.Subsets[0].Addresses))
}

// TestAddressPlan: the addresses synth computes are those the agent's
// IPAM computes from the same plan.
func TestAddressPlan(t *testing.T) {
	im, err := ipam.New(ipam.NodeIDFunc(func() uint32 { return MeasuredNodeID }), IPAMConfig())
	require.NoError(t, err)
	for _, id := range []uint32{1, 2, 255, 256, 5000, 5200} {
		p, err := im.PodSubnetOtherNode(id)
		require.NoError(t, err)
		assert.Equal(t, p.String(), PodSubnet(id).String(), "pod subnet of %d", id)
		h, err := im.HostInterconnectSubnetOtherNode(id)
		require.NoError(t, err)
		assert.Equal(t, h.String(), HostSubnet(id).String(), "host subnet of %d", id)
		ip, _, err := im.NodeIPAddress(id)
		require.NoError(t, err)
		assert.Equal(t, ip.String(), NodeIP(id).String(), "node IP of %d", id)
	}

	assert.Equal(t, netip.MustParsePrefix("10.128.1.0/24"), PodSubnet(1))
	assert.Equal(t, netip.MustParsePrefix("10.147.136.0/24"), PodSubnet(5000))
	assert.Equal(t, netip.MustParsePrefix("172.16.0.64/26"), HostSubnet(1))
	assert.Equal(t, netip.MustParseAddr("10.16.19.136"), NodeIP(5000))
	assert.Equal(t, netip.MustParseAddr("10.128.1.2"), localPods(1)[0])
}

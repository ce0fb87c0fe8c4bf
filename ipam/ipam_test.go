package ipam_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

// newReady returns an IPAM for node id that has had its start-up resync
// with an empty Kubernetes state.
func newReady(t testing.TB, id uint32, cfg ipam.Config) *ipam.IPAM {
	t.Helper()
	i, err := ipam.New(ipamtest.NewNodeID(id), cfg)
	require.NoError(t, err)
	require.NoError(t, i.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, controllertest.NewTxn()))
	return i
}

func pod(name string) podID { return podID{Namespace: "default", Name: name} }

func TestWorkedExample(t *testing.T) {
	i := newReady(t, 5, ipam.Config{})

	assert.Equal(t, "10.1.5.0/24", i.PodSubnetThisNode().String())
	assert.Equal(t, "10.1.0.0/16", i.PodSubnetAllNodes().String())
	assert.Equal(t, "10.1.5.1", i.PodGatewayIP().String())
	assert.Equal(t, "172.30.5.0/24", i.HostInterconnectSubnetThisNode().String())
	assert.Equal(t, "172.30.0.0/16", i.HostInterconnectSubnetAllNodes().String())
	assert.Equal(t, "172.30.5.1", i.HostInterconnectIPInVPP().String())
	assert.Equal(t, "172.30.5.2", i.HostInterconnectIPInLinux().String())
	assert.Equal(t, "172.30.5.254", i.NatLoopbackIP().String())
	assert.Equal(t, "10.96.0.0/12", i.ServiceNetwork().String())
	assert.Equal(t, uint32(5), i.NodeID())

	ip, nw, err := i.NodeIPAddress(5)
	require.NoError(t, err)
	assert.Equal(t, "192.168.16.5", ip.String())
	assert.Equal(t, "192.168.16.0/24", nw.String())
	ip, nw, err = i.VxlanIPAddress(5)
	require.NoError(t, err)
	assert.Equal(t, "192.168.30.5", ip.String())
	assert.Equal(t, "192.168.30.0/24", nw.String())

	other, err := i.PodSubnetOtherNode(7)
	require.NoError(t, err)
	assert.Equal(t, "10.1.7.0/24", other.String())
	other, err = i.HostInterconnectSubnetOtherNode(7)
	require.NoError(t, err)
	assert.Equal(t, "172.30.7.0/24", other.String())

	// Pod IPs 10.1.5.2 - 10.1.5.254, then exhaustion.
	for n := 2; n <= 254; n++ {
		ip, err := i.AllocatePodIP(pod(fmt.Sprint("p", n)), "", "")
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("10.1.5.%d", n), ip.String())
	}
	_, err = i.AllocatePodIP(pod("one-too-many"), "", "")
	require.ErrorIs(t, err, ipam.ErrPoolExhausted)
	assert.Equal(t, "10.1.5.2/24", i.GetPodIP(pod("p2")).String())
	assert.Equal(t, "10.1.5.254/24", i.GetPodIP(pod("p254")).String())
}

func TestNotReadyBeforeResync(t *testing.T) {
	i, err := ipam.New(ipamtest.NewNodeID(0), ipam.Config{})
	require.NoError(t, err)
	assert.Nil(t, i.PodSubnetThisNode())
	assert.Nil(t, i.PodGatewayIP())
	assert.Nil(t, i.HostInterconnectIPInVPP())
	assert.Nil(t, i.HostInterconnectIPInLinux())
	assert.Nil(t, i.HostInterconnectSubnetThisNode())
	assert.Nil(t, i.NatLoopbackIP())
	assert.Nil(t, i.GetPodIP(pod("a")))
	_, err = i.AllocatePodIP(pod("a"), "", "")
	require.ErrorIs(t, err, ipam.ErrNotReady)
	// Configuration-only getters work.
	ip, _, err := i.NodeIPAddress(3)
	require.NoError(t, err)
	assert.Equal(t, "192.168.16.3", ip.String())

	// Node ID 0 from the source: Resync fails, nothing changes.
	err = i.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, controllertest.NewTxn())
	require.ErrorIs(t, err, ipam.ErrNotReady)
	assert.Nil(t, i.PodSubnetThisNode())
}

func TestAddressTable(t *testing.T) {
	cases := []struct {
		name string
		cfg  ipam.Config
		id   uint32
		// expected values; empty = not checked
		podThisNode, nodeIP, vxlanIP, hostThisNode, gateway, natLoop string
	}{
		{
			name: "defaults node 5", id: 5,
			podThisNode: "10.1.5.0/24", nodeIP: "192.168.16.5", vxlanIP: "192.168.30.5",
			hostThisNode: "172.30.5.0/24", gateway: "10.1.5.1", natLoop: "172.30.5.254",
		},
		{
			name: "pod /17 per-node /29 node 1", id: 1,
			cfg:         ipam.Config{PodSubnetCIDR: pfx("1.2.128.0/17"), PodSubnetOneNodePrefixLen: 29},
			podThisNode: "1.2.128.8/29", gateway: "1.2.128.9",
		},
		{
			name: "node interconnect /26 node 5", id: 5,
			cfg:    ipam.Config{NodeInterconnectCIDR: pfx("3.4.5.192/26")},
			nodeIP: "3.4.5.197",
		},
		{
			name: "vxlan /26 node 5", id: 5,
			cfg:     ipam.Config{VXLANCIDR: pfx("4.5.6.192/26")},
			vxlanIP: "4.5.6.197",
		},
		{
			name: "ipv6 pod /90 per-node /120 node 5", id: 5,
			cfg:         ipam.Config{PodSubnetCIDR: pfx("fe10:f00d::/90"), PodSubnetOneNodePrefixLen: 120},
			podThisNode: "fe10:f00d::500/120", gateway: "fe10:f00d::501",
		},
		{
			name: "ipv6 everywhere node 5", id: 5,
			cfg: ipam.Config{
				PodSubnetCIDR: pfx("fd00:1::/64"), PodSubnetOneNodePrefixLen: 80,
				VPPHostSubnetCIDR: pfx("fd00:2::/112"), VPPHostSubnetOneNodePrefixLen: 120,
				NodeInterconnectCIDR: pfx("fd00:3::/64"), VXLANCIDR: pfx("fd00:4::/64"), ServiceCIDR: pfx("fd00:5::/108"),
			},
			podThisNode: "fd00:1:0:0:5::/80", gateway: "fd00:1::5:0:0:1", nodeIP: "fd00:3::5", vxlanIP: "fd00:4::5",
			hostThisNode: "fd00:2::500/120", natLoop: "fd00:2::5fe",
		},
		{
			name: "default gateway below node IPs is skipped", id: 5,
			cfg:    ipam.Config{DefaultGateway: netip.MustParseAddr("192.168.16.1")},
			nodeIP: "192.168.16.6",
		},
		{
			name: "default gateway above node IP is irrelevant", id: 5,
			cfg:    ipam.Config{DefaultGateway: netip.MustParseAddr("192.168.16.254")},
			nodeIP: "192.168.16.5",
		},
		{
			name: "single CIDR /14 node 5", id: 5,
			cfg:         ipam.Config{SingleCIDR: pfx("10.128.0.0/14")},
			podThisNode: "10.128.2.128/25", hostThisNode: "10.129.2.128/25",
			nodeIP: "10.130.0.5", vxlanIP: "10.130.2.5", gateway: "10.128.2.129", natLoop: "10.129.2.254",
		},
		{
			name: "single CIDR with explicit node interconnect", id: 5,
			cfg:    ipam.Config{SingleCIDR: pfx("10.128.0.0/14"), NodeInterconnectCIDR: pfx("192.168.50.0/24")},
			nodeIP: "192.168.50.5", vxlanIP: "10.130.2.5",
		},
		{
			name: "single CIDR ipv6 /100 node 5", id: 5,
			cfg:         ipam.Config{SingleCIDR: pfx("fd00::/100")},
			podThisNode: "fd00::280/121", hostThisNode: "fd00::1:280/121",
			nodeIP: "fd00::2:5", vxlanIP: "fd00::2:205",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i := newReady(t, tc.id, tc.cfg)
			if tc.podThisNode != "" {
				assert.Equal(t, tc.podThisNode, i.PodSubnetThisNode().String())
				other, err := i.PodSubnetOtherNode(tc.id)
				require.NoError(t, err)
				assert.Equal(t, tc.podThisNode, other.String())
			}
			if tc.gateway != "" {
				assert.Equal(t, tc.gateway, i.PodGatewayIP().String())
			}
			if tc.hostThisNode != "" {
				assert.Equal(t, tc.hostThisNode, i.HostInterconnectSubnetThisNode().String())
			}
			if tc.natLoop != "" {
				assert.Equal(t, tc.natLoop, i.NatLoopbackIP().String())
			}
			if tc.nodeIP != "" {
				ip, _, err := i.NodeIPAddress(tc.id)
				require.NoError(t, err)
				assert.Equal(t, tc.nodeIP, ip.String())
			}
			if tc.vxlanIP != "" {
				ip, _, err := i.VxlanIPAddress(tc.id)
				require.NoError(t, err)
				assert.Equal(t, tc.vxlanIP, ip.String())
			}
		})
	}
}

func TestNodeInterconnectDHCP(t *testing.T) {
	i := newReady(t, 5, ipam.Config{NodeInterconnectDHCP: true})
	_, _, err := i.NodeIPAddress(5)
	require.ErrorIs(t, err, ipam.ErrNoNodeInterconnect)
	i = newReady(t, 5, ipam.Config{SingleCIDR: pfx("10.128.0.0/14"), NodeInterconnectDHCP: true})
	_, _, err = i.NodeIPAddress(5)
	require.ErrorIs(t, err, ipam.ErrNoNodeInterconnect)
}

func TestPodIPCount(t *testing.T) {
	cases := []struct {
		name    string
		cfg     ipam.Config
		want    int
		first   string
		last    string
		gateway string
	}{
		{"ipv4 /24", ipam.Config{}, 253, "10.1.5.2", "10.1.5.254", "10.1.5.1"},
		{"ipv4 /22", ipam.Config{PodSubnetCIDR: pfx("10.0.0.0/14"), PodSubnetOneNodePrefixLen: 22}, 1021, "10.0.20.2", "10.0.23.254", "10.0.20.1"},
		{"ipv4 /30", ipam.Config{PodSubnetCIDR: pfx("10.0.0.0/24"), PodSubnetOneNodePrefixLen: 30}, 1, "10.0.0.22", "10.0.0.22", "10.0.0.21"},
		{"ipv6 /120", ipam.Config{PodSubnetCIDR: pfx("fe10:f00d::/90"), PodSubnetOneNodePrefixLen: 120}, 253, "fe10:f00d::502", "fe10:f00d::5fe", "fe10:f00d::501"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i := newReady(t, 5, tc.cfg)
			require.Equal(t, ipam.PoolUsage{Subnet: i.PodSubnetThisNodePrefix(), Capacity: uint64(tc.want)}, i.PoolUsage())
			seen := map[string]bool{}
			var first, last string
			for n := 0; ; n++ {
				ip, err := i.AllocatePodIP(pod(fmt.Sprint("p", n)), "", "")
				if err != nil {
					require.ErrorIs(t, err, ipam.ErrPoolExhausted)
					break
				}
				require.False(t, seen[ip.String()], "duplicate %s", ip)
				require.NotEqual(t, tc.gateway, ip.String())
				seen[ip.String()] = true
				if first == "" {
					first = ip.String()
				}
				last = ip.String()
			}
			assert.Len(t, seen, tc.want)
			assert.Equal(t, uint64(tc.want), i.PoolUsage().Allocated, "the pool is full")
			assert.Equal(t, tc.first, first)
			assert.Equal(t, tc.last, last)
		})
	}
}

// TestPoolUsage: no pool before the node's subnet is known; allocations
// and releases are counted; a /64 slice reports the offsets the pool uses.
func TestPoolUsage(t *testing.T) {
	i, err := ipam.New(ipamtest.NewNodeID(5), ipam.Config{})
	require.NoError(t, err)
	assert.Equal(t, ipam.PoolUsage{}, i.PoolUsage(), "before the first resync")
	require.NoError(t, i.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, controllertest.NewTxn()))
	for _, name := range []string{"a", "b", "c"} {
		_, err := i.AllocatePodIP(pod(name), "", "")
		require.NoError(t, err)
	}
	require.NoError(t, i.ReleasePodIP(pod("b")))
	assert.Equal(t, ipam.PoolUsage{Subnet: pfx("10.1.5.0/24"), Capacity: 253, Allocated: 2}, i.PoolUsage())

	v6 := newReady(t, 5, ipam.Config{PodSubnetCIDR: pfx("fd00::/48"), PodSubnetOneNodePrefixLen: 64})
	assert.Equal(t, ipam.PoolUsage{Subnet: pfx("fd00:0:0:5::/64"), Capacity: ^uint64(0) - 2}, v6.PoolUsage())
}

func TestNextAfterLast(t *testing.T) {
	i := newReady(t, 1, ipam.Config{PodSubnetCIDR: pfx("10.0.0.0/24"), PodSubnetOneNodePrefixLen: 29})
	// Node 1: 10.0.0.8/29, pods .10 - .14.
	alloc := func(name string) string {
		ip, err := i.AllocatePodIP(pod(name), "", "")
		require.NoError(t, err)
		return ip.String()
	}
	assert.Equal(t, "10.0.0.10", alloc("a"))
	assert.Equal(t, "10.0.0.11", alloc("b"))
	assert.Equal(t, "10.0.0.12", alloc("c"))
	assert.Equal(t, "10.0.0.10", alloc("a"), "idempotent")
	require.NoError(t, i.ReleasePodIP(pod("a")))
	require.NoError(t, i.ReleasePodIP(pod("a")), "release twice is fine")
	require.NoError(t, i.ReleasePodIP(pod("never")), "release of unknown pod is fine")
	assert.Nil(t, i.GetPodIP(pod("a")))
	// .10 is free again but is reused only after wrap-around.
	assert.Equal(t, "10.0.0.13", alloc("d"))
	assert.Equal(t, "10.0.0.14", alloc("e"))
	assert.Equal(t, "10.0.0.10", alloc("f"), "wrap-around reuses the released address")
	_, err := i.AllocatePodIP(pod("g"), "", "")
	require.ErrorIs(t, err, ipam.ErrPoolExhausted)
	require.NoError(t, i.ReleasePodIP(pod("c")))
	assert.Equal(t, "10.0.0.12", alloc("g"))

	want := []ipam.Allocation{
		{Pod: pod("f"), Addr: netip.MustParseAddr("10.0.0.10")},
		{Pod: pod("b"), Addr: netip.MustParseAddr("10.0.0.11")},
		{Pod: pod("g"), Addr: netip.MustParseAddr("10.0.0.12")},
		{Pod: pod("d"), Addr: netip.MustParseAddr("10.0.0.13")},
		{Pod: pod("e"), Addr: netip.MustParseAddr("10.0.0.14")},
	}
	assert.Equal(t, want, i.Allocations())
}

func TestExternalIPAMData(t *testing.T) {
	i := newReady(t, 5, ipam.Config{})
	ip, err := i.AllocatePodIP(pod("a"), "host-local", "10.1.5.77")
	require.NoError(t, err)
	assert.Equal(t, "10.1.5.77", ip.String())
	ip, err = i.AllocatePodIP(pod("b"), "host-local", "10.1.5.78/24")
	require.NoError(t, err)
	assert.Equal(t, "10.1.5.78", ip.String())
	ip, err = i.AllocatePodIP(pod("c"), "host-local", `{"cniVersion":"1.0.0","ips":[{"address":"10.1.5.79/24","gateway":"10.1.5.1"}]}`)
	require.NoError(t, err)
	assert.Equal(t, "10.1.5.79", ip.String())

	_, err = i.AllocatePodIP(pod("d"), "host-local", "10.1.5.77")
	var conflict *ipam.ConflictError
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, pod("a"), conflict.Owner)
	for _, bad := range []string{"", "garbage", "10.1.6.5", "10.1.5.1", "10.1.5.255", "10.1.5.0", `{"ips":[]}`} {
		_, err = i.AllocatePodIP(pod("d"), "host-local", bad)
		require.ErrorIs(t, err, ipam.ErrInvalidIPAMData, "ipamData %q", bad)
	}
	// The built-in allocator skips claimed addresses.
	ip, err = i.AllocatePodIP(pod("e"), "", "")
	require.NoError(t, err)
	assert.Equal(t, "10.1.5.2", ip.String())

	_, err = i.AllocatePodIP(podID{Namespace: "x"}, "", "")
	require.ErrorIs(t, err, ipam.ErrInvalidPodID)
}

func TestOtherNodeErrors(t *testing.T) {
	i := newReady(t, 5, ipam.Config{})
	for _, id := range []uint32{0, 256, 1 << 31} {
		_, err := i.PodSubnetOtherNode(id)
		require.ErrorIs(t, err, ipam.ErrInvalidNodeID, "id %d", id)
		_, err = i.HostInterconnectSubnetOtherNode(id)
		require.ErrorIs(t, err, ipam.ErrInvalidNodeID, "id %d", id)
		_, _, err = i.VxlanIPAddress(id)
		require.ErrorIs(t, err, ipam.ErrInvalidNodeID, "id %d", id)
	}
	_, _, err := i.NodeIPAddress(255)
	require.ErrorContains(t, err, "broadcast address 192.168.16.255")
	_, _, err = i.NodeIPAddress(300)
	require.ErrorContains(t, err, "falls outside NodeInterconnectCIDR 192.168.16.0/24")
	p, err := i.PodSubnetOtherNode(255)
	require.NoError(t, err)
	assert.Equal(t, "10.1.255.0/24", p.String())
}

func TestAllocateReleaseDoesNotAllocate(t *testing.T) {
	i := newReady(t, 5, ipam.Config{})
	p := pod("churn")
	allocs := testing.AllocsPerRun(2000, func() {
		if _, err := i.AllocatePodAddr(p); err != nil {
			t.Fatal(err)
		}
		if err := i.ReleasePodIP(p); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

// TestNetipForms: every getter of the reference API (net.IP, *net.IPNet)
// has a netip form beside it that gives the same answer, before and after
// the first Resync.
func TestNetipForms(t *testing.T) {
	str := func(v any) string { return fmt.Sprint(v) }
	ready := newReady(t, 5, ipam.Config{})
	unready, err := ipam.New(ipamtest.NewNodeID(5), ipam.Config{})
	require.NoError(t, err)
	for name, i := range map[string]*ipam.IPAM{"ready": ready, "before resync": unready} {
		t.Run(name, func(t *testing.T) {
			pairs := []struct {
				name      string
				net, nip  any
				wantValid bool
			}{
				{"PodSubnetAllNodes", i.PodSubnetAllNodes(), i.PodSubnetAllNodesPrefix(), true},
				{"PodSubnetThisNode", i.PodSubnetThisNode(), i.PodSubnetThisNodePrefix(), i == ready},
				{"PodGatewayIP", i.PodGatewayIP(), i.PodGatewayAddr(), i == ready},
				{"HostInterconnectSubnetAllNodes", i.HostInterconnectSubnetAllNodes(), i.HostInterconnectSubnetAllNodesPrefix(), true},
				{"HostInterconnectSubnetThisNode", i.HostInterconnectSubnetThisNode(), i.HostInterconnectSubnetThisNodePrefix(), i == ready},
				{"HostInterconnectIPInVPP", i.HostInterconnectIPInVPP(), i.HostInterconnectAddrInVPP(), i == ready},
				{"HostInterconnectIPInLinux", i.HostInterconnectIPInLinux(), i.HostInterconnectAddrInLinux(), i == ready},
				{"NatLoopbackIP", i.NatLoopbackIP(), i.NatLoopbackAddr(), i == ready},
				{"ServiceNetwork", i.ServiceNetwork(), i.ServiceNetworkPrefix(), true},
			}
			for _, p := range pairs {
				if !p.wantValid {
					assert.Equal(t, "<nil>", str(p.net), p.name)
					assert.False(t, p.nip.(interface{ IsValid() bool }).IsValid(), p.name)
					continue
				}
				assert.Equal(t, str(p.net), str(p.nip), p.name)
			}
		})
	}

	ip, ipnet, err := ready.NodeIPAddress(7)
	require.NoError(t, err)
	addr, err := ready.NodeAddr(7)
	require.NoError(t, err)
	assert.Equal(t, "192.168.16.7/24", addr.String())
	assert.Equal(t, ip.String(), addr.Addr().String())
	assert.Equal(t, ipnet.String(), addr.Masked().String())

	ip, ipnet, err = ready.VxlanIPAddress(7)
	require.NoError(t, err)
	addr, err = ready.VxlanAddr(7)
	require.NoError(t, err)
	assert.Equal(t, "192.168.30.7/24", addr.String())
	assert.Equal(t, ip.String(), addr.Addr().String())
	assert.Equal(t, ipnet.String(), addr.Masked().String())

	sub, err := ready.PodSubnetOtherNode(9)
	require.NoError(t, err)
	p, err := ready.PodSubnetOtherNodePrefix(9)
	require.NoError(t, err)
	assert.Equal(t, sub.String(), p.String())
	sub, err = ready.HostInterconnectSubnetOtherNode(9)
	require.NoError(t, err)
	p, err = ready.HostInterconnectSubnetOtherNodePrefix(9)
	require.NoError(t, err)
	assert.Equal(t, sub.String(), p.String())
	_, err = ready.NodeAddr(0)
	assert.ErrorIs(t, err, ipam.ErrInvalidNodeID)
}

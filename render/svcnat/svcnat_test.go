package svcnat_test

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/render/svcnat"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// TestServicesStandIn runs the service scenario on the VPP stand-in.
func TestServicesStandIn(t *testing.T) { testServices(t, simVPP()) }

// TestServicesRealVPP runs the same scenario on a real VPP (VPP_SH, root),
// asserting on VPP's own dumps.
func TestServicesRealVPP(t *testing.T) { testServices(t, realVPP(t)) }

// nodeTables is what every step has besides the mappings: the plugin with
// forwarding, the twice-NAT pool of the NAT loopback, the uplink's address
// as the source-NAT pool, the uplink's output feature, the host
// interconnect inside and outside.
func nodeTables(ifs map[string]string, static, lb []string) vppdrivertest.NAT44 {
	all := map[string]string{uplink: "output", hostIC: "in out"}
	maps.Copy(all, ifs)
	return vppdrivertest.NAT44{
		Sessions: 64512, Forwarding: true, Interfaces: all,
		Pools:  []string{"172.30.1.254 twice-nat", nodeIP, "if:" + uplink},
		Static: static, LB: lb,
	}
}

// testServices: a ClusterIP service with 3 backends, then a backend
// removed (one VPP request), then a NodePort and an external IP added,
// then the Local traffic policy: after each step VPP's NAT44 tables are
// what the service needs. Then a VPP restart restores every table, and
// an agent restart on the populated VPP re-creates nothing.
func testServices(t *testing.T, vpp *testVPP) {
	state := newKubeState()
	a := startAgent(t, vpp, state, agentConfig{})
	client := a.addPod("client")
	pa := a.addPod("a")
	pb := a.addPod("b")
	require.Equal(t, []netip.Addr{netip.MustParseAddr("10.1.1.2"), netip.MustParseAddr("10.1.1.3"), netip.MustParseAddr("10.1.1.4")},
		[]netip.Addr{client, pa, pb})
	remote := netip.MustParseAddr("10.1.2.7") // a pod of node 2

	http := port{name: "http", proto: kubemodel.Protocol_TCP, port: 80, target: 8080}
	web := service("web", "10.96.0.10", http)
	a.setService(web)
	assert.Equal(t, nodeTables(map[string]string{"pod-client": "out", "pod-a": "out", "pod-b": "out"}, nil, nil),
		vpp.nat(t), "a service without endpoints: no mapping")

	a.setEndpoints(endpoints("web", []port{http}, ep{pa, "a"}, ep{pb, "b"}, ep{ip: remote}))
	backends := map[string]string{"pod-client": "out", "pod-a": "in out", "pod-b": "in out"}
	assert.Equal(t, nodeTables(backends, nil, []string{
		"tcp 10.96.0.10:80 -> 10.1.1.3:8080/2 10.1.1.4:8080/2 10.1.2.7:8080/2 out2in-only self-twice-nat",
	}), vpp.nat(t), "cluster IP: 3 backends")

	// One backend goes: one request to VPP.
	before := a.requests.Counts()
	a.setEndpoints(endpoints("web", []port{http}, ep{pa, "a"}, ep{pb, "b"}))
	assert.Equal(t, map[string]uint64{"nat44_lb_static_mapping_add_del_local": 1}, writes(before, a.requests.Counts()),
		"the backend change costs one VPP request")
	assert.Equal(t, nodeTables(backends, nil, []string{
		"tcp 10.96.0.10:80 -> 10.1.1.3:8080/2 10.1.1.4:8080/2 out2in-only self-twice-nat",
	}), vpp.nat(t), "a backend removed")

	// A node port (on this node's address only) and an external IP: the
	// Cluster policy source-NATs external clients to the NAT loopback
	// (twice-NAT), so that replies come back through this node.
	http.nodePort = 30080
	web = service("web", "10.96.0.10", http)
	web.ExternalIps = []string{"203.0.113.10"}
	a.setService(web)
	assert.Equal(t, nodeTables(backends, nil, []string{
		"tcp 10.96.0.10:80 -> 10.1.1.3:8080/2 10.1.1.4:8080/2 out2in-only self-twice-nat",
		"tcp 192.168.16.1:30080 -> 10.1.1.3:8080/2 10.1.1.4:8080/2 out2in-only twice-nat",
		"tcp 203.0.113.10:80 -> 10.1.1.3:8080/2 10.1.1.4:8080/2 out2in-only twice-nat",
	}), vpp.nat(t), "node port and external IP")

	// externalTrafficPolicy Local: external traffic goes to local backends
	// only, with the client's address kept; the cluster IP keeps every
	// backend (web gets a remote one again). A service without local
	// backends gets no external mapping at all.
	web.ExternalTrafficPolicy = svcprocessor.LocalTrafficPolicy
	a.setService(web)
	a.setEndpoints(endpoints("web", []port{http}, ep{pa, "a"}, ep{pb, "b"}, ep{ip: remote}))
	dns := port{name: "dns", proto: kubemodel.Protocol_UDP, port: 53, target: 5353, nodePort: 30053}
	far := service("far", "10.96.0.11", dns)
	far.ExternalTrafficPolicy = svcprocessor.LocalTrafficPolicy
	a.setService(far)
	a.setEndpoints(endpoints("far", []port{dns}, ep{ip: remote}))
	local := nodeTables(backends, []string{
		"udp 10.96.0.11:53 -> 10.1.2.7:5353 out2in-only self-twice-nat",
	}, []string{
		"tcp 10.96.0.10:80 -> 10.1.1.3:8080/2 10.1.1.4:8080/2 10.1.2.7:8080/2 out2in-only self-twice-nat",
		"tcp 192.168.16.1:30080 -> 10.1.1.3:8080/2 10.1.1.4:8080/2 out2in-only self-twice-nat",
		"tcp 203.0.113.10:80 -> 10.1.1.3:8080/2 10.1.1.4:8080/2 out2in-only self-twice-nat",
	})
	assert.Equal(t, local, vpp.nat(t), "Local policy")
	st := a.nat.Stats()
	assert.Equal(t, svcnat.Stats{Services: 2, Mappings: 4, Backends: 8, Interfaces: 3, TwiceNATPool: true, Renders: st.Renders, Resyncs: 1}, st)

	// VPP restarts: the driver reconnects, resyncs and restores every table.
	var tables []string
	if vpp.sim != nil {
		tables = simTables(vpp.sim.Snapshot())
	}
	connects := a.driver.Stats().Connects
	vpp.restart()
	require.Eventually(t, func() bool { return a.driver.Stats().Connects > connects }, 30*time.Second, 10*time.Millisecond)
	a.settle(0)
	assert.Equal(t, local, vpp.nat(t), "after a VPP restart")
	if vpp.sim != nil {
		assert.Equal(t, tables, simTables(vpp.sim.Snapshot()), "interfaces, tables and routes after a VPP restart")
	}

	// The agent restarts on the populated VPP: nothing is re-created.
	a.stop()
	b := startAgent(t, vpp, state, agentConfig{})
	assert.Empty(t, natWrites(nil, b.requests.Counts()), "NAT44 requests that change VPP")
	if vpp.sim != nil {
		// A real VPP reports an attached /32 route with the destination
		// as its next hop, which the driver's readback takes for a
		// neighbor's entry: it re-adds the test's pod routes (idempotent
		// in VPP). The stand-in reports them as added.
		assert.Zero(t, b.requests.WriteCount(), "requests that change VPP: %v", b.requests.Counts())
	}
	assert.Equal(t, local, vpp.nat(t), "after an agent restart")

	// And it goes on from there: the service goes, its mapping with it.
	b.kube(kubemodel.ServiceResource, kubemodel.ServiceKey("default", "far"), nil)
	local.Static = nil
	assert.Equal(t, local, vpp.nat(t), "service deleted")
	assert.Zero(t, b.loop.Stats().Failed)
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

// natWrites returns the NAT44 requests that change VPP's state sent between
// two counts.
func natWrites(before, after map[string]uint64) map[string]uint64 {
	out := writes(before, after)
	for k := range out {
		if !strings.HasPrefix(k, "nat44_") {
			delete(out, k)
		}
	}
	return out
}

// simTables describes the stand-in's interfaces, tables and routes with
// interfaces named by tag (sw_if_index may differ after a restart).
func simTables(s vppsim.Snapshot) []string {
	name := map[uint32]string{}
	for _, i := range s.Interfaces {
		name[i.SwIfIndex] = i.Tag
	}
	var out []string
	for _, i := range s.Interfaces {
		out = append(out, fmt.Sprintf("interface %q %s up=%v %v vrf %d host %q", i.Tag, i.DevType, i.AdminUp, i.Addresses, i.Vrf, i.HostIfName))
	}
	for _, tb := range s.Tables {
		out = append(out, fmt.Sprintf("table %d v6=%v %q", tb.ID, tb.IPv6, tb.Name))
	}
	for _, r := range s.Routes {
		line := fmt.Sprintf("route %d %s", r.Table, r.Prefix)
		for _, p := range r.Paths {
			line += fmt.Sprintf(" via %q %s/%d", name[p.SwIfIndex], p.NextHop, p.Weight)
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return out
}

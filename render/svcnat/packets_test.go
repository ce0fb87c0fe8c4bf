package svcnat_test

import (
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
)

// TestPacketsRealVPP sends real packets through a real VPP (VPP_SH, root),
// between network namespaces the test creates: pods on af_packet
// interfaces (veth pairs), the uplink to an "external" namespace and the
// VPP-host interconnect to a "host" namespace. Each pod runs a TCP server
// that answers with its name and the client address it sees.
//
//   - a pod connects to a ClusterIP service backed by two other pods: both
//     answer over repeated connects, and they see the client's address;
//   - a backend removed stops receiving;
//   - a NodePort reached from the host namespace (twice-NATed: the backend
//     sees the NAT loopback address);
//   - a pod reaches a service backed by itself (self-twice-NAT);
//   - ClientIP affinity keeps one backend;
//   - a pod reaches the external namespace with the node's address, the
//     host namespace with its own.
func TestPacketsRealVPP(t *testing.T) {
	vpp := realVPP(t)
	lab := newNetnsLab(t)

	// The node: uplink and host interconnect, with their namespaces.
	lab.link("ext", uplink)
	lab.addr("ext", extGateway+"/24")
	lab.link("host", hostIC)
	lab.addr("host", "172.30.1.2/24", []string{"192.168.16.0/24", "via", "172.30.1.1"}, []string{"10.0.0.0/8", "via", "172.30.1.1"})
	// Pods: the pod server creates the veth before AddPod, and configures
	// the pod side after it succeeded.
	for _, pod := range []string{"c", "a", "b"} {
		lab.link(pod, "pod-"+pod)
	}
	a := startAgent(t, vpp, newKubeState(), agentConfig{hostIf: lab.hostIf})
	ips := map[string]netip.Addr{}
	for _, pod := range []string{"c", "a", "b"} {
		ip := a.addPod(pod)
		ips[pod] = ip
		gw := gatewayOf(ip)
		lab.addr(pod, ip.String()+"/32", []string{gw, "dev", "eth0", "scope", "link"}, []string{"default", "via", gw})
		lab.serve(pod, pod, 8080)
	}
	lab.serve("ext", "ext", 9000)
	lab.serve("host", "host", 9000)

	// answers connects n times from namespace from to addr and returns
	// the answers.
	answers := func(t *testing.T, from, addr string, n int) []string {
		t.Helper()
		var out []string
		for range n {
			line, err := lab.dial(from, addr)
			require.NoError(t, err, "connect from %s to %s", from, addr)
			out = append(out, line)
		}
		return out
	}
	// The plain data path works before any NAT rule matters.
	if !assert.Eventually(t, func() bool {
		line, err := lab.dial("c", ips["a"].String()+":8080")
		return err == nil && line == "a "+ips["c"].String()
	}, 10*time.Second, 50*time.Millisecond, "pod c reaches pod a directly") {
		for _, cmd := range [][]string{{"show", "interface", "address"}, {"show", "ip", "neighbors"}, {"show", "errors"},
			{"show", "nat44", "interfaces"}} {
			t.Logf("VPP %v:\n%s", cmd, vpp.real.CLI(cmd...))
		}
		out, _ := exec.Command("ip", "netns", "exec", lab.ns("a"), "ip", "-s", "link").CombinedOutput()
		t.Logf("pod a: %s", out)
		t.FailNow()
	}

	http := port{name: "http", proto: kubemodel.Protocol_TCP, port: 80, target: 8080, nodePort: 30080}
	a.setService(service("web", "10.96.0.10", http))
	a.setEndpoints(endpoints("web", []port{http}, ep{ips["a"], "a"}, ep{ips["b"], "b"}))

	t.Run("cluster IP: both backends answer, client address kept", func(t *testing.T) {
		got := answers(t, "c", "10.96.0.10:80", 8)
		want := []string{"a " + ips["c"].String(), "b " + ips["c"].String()}
		assert.Subset(t, got, want)
		assert.Subset(t, want, got)
	})

	t.Run("node port from the host namespace", func(t *testing.T) {
		for _, line := range answers(t, "host", nodeIP+":30080", 4) {
			assert.Contains(t, []string{"a 172.30.1.254", "b 172.30.1.254"}, line, "twice-NATed to the NAT loopback")
		}
	})

	t.Run("source NAT to the node address", func(t *testing.T) {
		assert.Equal(t, []string{"ext " + nodeIP}, answers(t, "c", extGateway+":9000", 1))
		assert.Equal(t, []string{"ext " + nodeIP}, answers(t, "a", extGateway+":9000", 1), "from a backend too")
		// Traffic that stays in the cluster (here: to the host, through
		// the interconnect; other nodes' pods through the mesh) keeps the
		// pod's address.
		assert.Equal(t, []string{"host " + ips["c"].String()}, answers(t, "c", "172.30.1.2:9000", 1))
	})

	t.Run("a backend removed stops receiving", func(t *testing.T) {
		a.setEndpoints(endpoints("web", []port{http}, ep{ips["a"], "a"}))
		for _, line := range answers(t, "c", "10.96.0.10:80", 6) {
			assert.Equal(t, "a "+ips["c"].String(), line)
		}
		for _, line := range answers(t, "host", nodeIP+":30080", 2) {
			assert.Equal(t, "a 172.30.1.254", line)
		}
	})

	t.Run("a pod reaches a service backed by itself", func(t *testing.T) {
		self := port{name: "http", proto: kubemodel.Protocol_TCP, port: 80, target: 8080}
		a.setService(service("self", "10.96.0.20", self))
		a.setEndpoints(endpoints("self", []port{self}, ep{ips["c"], "c"}))
		assert.Equal(t, []string{"c 172.30.1.254", "c 172.30.1.254"}, answers(t, "c", "10.96.0.20:80", 2),
			"self-twice-NAT: the reply comes back through VPP")
		// A pod that backs a service with others reaches itself through it
		// too (VPP picks it: at most a few tries).
		a.setEndpoints(endpoints("web", []port{http}, ep{ips["a"], "a"}, ep{ips["b"], "b"}))
		seen := map[string]bool{}
		for _, line := range answers(t, "a", "10.96.0.10:80", 8) {
			seen[line] = true
		}
		assert.Subset(t, []string{"a 172.30.1.254", "b " + ips["a"].String()}, keys(seen))
		assert.True(t, seen["a 172.30.1.254"], "a reached itself: %v", keys(seen))
	})

	t.Run("ClientIP affinity keeps one backend", func(t *testing.T) {
		sticky := service("sticky", "10.96.0.30", port{name: "http", proto: kubemodel.Protocol_TCP, port: 80, target: 8080})
		sticky.SessionAffinity, sticky.SessionAffinityTimeout = kubemodel.Service_CLIENT_IP, 600
		a.setService(sticky)
		a.setEndpoints(endpoints("sticky", []port{http}, ep{ips["a"], "a"}, ep{ips["b"], "b"}))
		got := answers(t, "c", "10.96.0.30:80", 8)
		assert.Len(t, unique(got), 1, "one backend: %v", got)
		assert.Len(t, unique(answers(t, "c", "10.96.0.10:80", 8)), 2, "without affinity both (same client, same backends)")
	})

	t.Run("externalTrafficPolicy Local keeps the client address", func(t *testing.T) {
		web := service("web", "10.96.0.10", http)
		web.ExternalTrafficPolicy = svcprocessor.LocalTrafficPolicy
		a.setService(web)
		for _, line := range answers(t, "host", nodeIP+":30080", 4) {
			assert.Contains(t, []string{"a 172.30.1.2", "b 172.30.1.2"}, line)
		}
	})
	assert.Zero(t, a.loop.Stats().Failed)
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func unique(s []string) []string {
	seen := map[string]bool{}
	for _, x := range s {
		seen[x] = true
	}
	return keys(seen)
}

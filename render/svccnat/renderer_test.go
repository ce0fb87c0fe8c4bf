package svccnat_test

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/render/svccnat"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/svcprocessor/svcprocessortest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

func trKey(proto uint32, vip string, port uint32) string {
	return vppmodel.CnatTranslationKey(proto, netip.MustParseAddr(vip), port)
}

func protoEqual(t testing.TB, want, got proto.Message) {
	t.Helper()
	assert.True(t, proto.Equal(want, got), "want %v, got %v", want, got)
}

// TestRenderer checks single behaviours on the transactions.
func TestRenderer(t *testing.T) {
	http := port{name: "http", proto: kubemodel.Protocol_TCP, port: 80, target: 8080}
	web := trKey(vppmodel.ProtoTCP, "10.96.0.10", 80)
	web6 := trKey(vppmodel.ProtoTCP, "fd00:96::10", 80)
	p2, p3 := ep{"10.1.1.2", "p2"}, ep{"10.1.1.3", "p3"}
	p2v6, p3v6 := ep{"fd00:1:0:1::2", "p2"}, ep{"fd00:1:0:1::3", "p3"}
	remote := ep{ip: "10.1.2.7"}
	dual := []string{"10.96.0.10", "fd00:96::10"}

	t.Run("resync: the SNAT entry, the anchor, uplink and interconnect", func(t *testing.T) {
		r := newRig(t, baseConfig())
		equalState(t, controller.KeyValuePairs{
			vppmodel.CnatSnatKey: &vppmodel.CnatSnat{Ip4: nodeIP, Ip6: nodeIP6, Policy: vppmodel.CnatSnat_K8S, NoClient: true,
				ExcludedPrefixes: []string{"10.1.0.0/16", "10.96.0.0/12", "192.168.16.0/24", "fd00:1::/48", "fd00:96::/108"}},
			vppmodel.InterfaceKey(svccnat.AnchorInterface):     &vppmodel.Interface{Name: svccnat.AnchorInterface, Type: vppmodel.Interface_LOOPBACK},
			vppmodel.CnatInterfaceKey(svccnat.AnchorInterface): &vppmodel.CnatInterface{Interface: svccnat.AnchorInterface, SnatV4: true},
			vppmodel.CnatInterfaceKey(uplink):                  &vppmodel.CnatInterface{Interface: uplink, Feature: true},
			vppmodel.CnatInterfaceKey(hostIC):                  &vppmodel.CnatInterface{Interface: hostIC, Feature: true, SnatHost: true},
		}, r.applied)
		st := r.cn.Stats()
		assert.Equal(t, netip.MustParseAddr(nodeIP), st.SNAT4)
		assert.Equal(t, netip.MustParseAddr(nodeIP6), st.SNAT6)
	})

	t.Run("both families; one backend change is one key; no backend, no translation", func(t *testing.T) {
		r := newRig(t, baseConfig())
		r.service(service("web", dual, http))
		assert.Empty(t, translations(r.applied), "no endpoints: no translation")
		got := changed(r.endpoints(endpoints("web", []port{http}, p2, p2v6, remote)))
		assert.Equal(t, []string{"+" + web, "+" + web6}, got)
		assert.Equal(t, []string{
			"tcp 10.96.0.10:80 -> 10.1.1.2:8080 10.1.2.7:8080",
			"tcp [fd00:96::10]:80 -> [fd00:1:0:1::2]:8080",
		}, translations(r.applied))
		assert.Equal(t, []string{"+" + web}, changed(r.endpoints(endpoints("web", []port{http}, p2, p3, p2v6, remote))),
			"one backend more: one key")
		assert.Equal(t, []string{"+" + web6}, changed(r.endpoints(endpoints("web", []port{http}, p2, p3, p2v6, p3v6, remote))))
		assert.Equal(t, []string{"-" + web6}, changed(r.endpoints(endpoints("web", []port{http}, p2, p3, remote))),
			"the last IPv6 backend gone: the IPv6 translation is deleted (VPP dies on one without paths)")
		assert.Equal(t, []string{"-" + web}, changed(r.endpoints(endpoints("web", []port{http}))))
		st := r.cn.Stats()
		assert.Equal(t, 0, st.Translations)
		assert.Equal(t, 0, st.Services)
	})

	t.Run("unchanged service: nothing written", func(t *testing.T) {
		r := newRig(t, baseConfig())
		r.service(service("web", dual, http))
		r.endpoints(endpoints("web", []port{http}, p2, p3))
		s := service("web", dual, http)
		s.Labels = map[string]string{"a": "b"}
		assert.Empty(t, r.service(s))
	})

	t.Run("node ports on this node's addresses of each family; external IPs; traffic policies", func(t *testing.T) {
		r := newRig(t, baseConfig())
		np := http
		np.nodePort = 30080
		s := service("web", dual, np)
		s.ExternalIps = []string{"203.0.113.10", nodeIP}
		s.ExternalTrafficPolicy = kubemodel.Service_LOCAL
		r.service(s)
		r.endpoints(endpoints("web", []port{np}, p2, p3, p2v6, remote))
		assert.Equal(t, []string{
			"tcp 10.96.0.10:80 -> 10.1.1.2:8080 10.1.1.3:8080 10.1.2.7:8080",
			"tcp 192.168.16.1:30080 -> 10.1.1.2:8080 10.1.1.3:8080 real",
			"tcp 192.168.16.1:80 -> 10.1.1.2:8080 10.1.1.3:8080 real",
			"tcp 203.0.113.10:80 -> 10.1.1.2:8080 10.1.1.3:8080",
			"tcp [fd00:16::1]:30080 -> [fd00:1:0:1::2]:8080 real",
			"tcp [fd00:96::10]:80 -> [fd00:1:0:1::2]:8080",
		}, translations(r.applied), "Local: this node's backends only outside the cluster IP; an external IP that is this node's is real")
		s.ExternalTrafficPolicy, s.InternalTrafficPolicy = kubemodel.Service_CLUSTER, kubemodel.Service_LOCAL
		r.service(s)
		assert.Contains(t, translations(r.applied), "tcp 10.96.0.10:80 -> 10.1.1.2:8080 10.1.1.3:8080")
		assert.Contains(t, translations(r.applied), "tcp 203.0.113.10:80 -> 10.1.1.2:8080 10.1.1.3:8080",
			"external frontends: this node's backends with the Cluster policy too (VPP 26.06 cannot source-NAT into a tunnel)")
		only := service("far", []string{"10.96.0.11"}, port{name: "http", proto: kubemodel.Protocol_TCP, port: 80, target: 8080, nodePort: 30081})
		r.service(only)
		r.endpoints(endpoints("far", []port{{name: "http", proto: kubemodel.Protocol_TCP, target: 8080}}, remote))
		assert.Contains(t, translations(r.applied), "tcp 10.96.0.11:80 -> 10.1.2.7:8080")
		assert.NotContains(t, r.applied, trKey(vppmodel.ProtoTCP, nodeIP, 30081), "no local backend: no node port here")
		// This node's addresses change: the node ports and the real flag follow.
		got := changed(r.nodeIPsChanged([]netip.Addr{netip.MustParseAddr("192.168.16.9")}, netip.MustParseAddr(otherNode)))
		assert.Contains(t, got, "+"+trKey(vppmodel.ProtoTCP, "192.168.16.9", 30080))
		assert.Contains(t, got, "-"+trKey(vppmodel.ProtoTCP, nodeIP, 30080))
		assert.Contains(t, got, "-"+trKey(vppmodel.ProtoTCP, nodeIP6, 30080))
		assert.Contains(t, got, "+"+trKey(vppmodel.ProtoTCP, nodeIP, 80), "192.168.16.1 is no longer this node's: not real")
		assert.Equal(t, []svccnat.Problem{{Service: kubemodel.ServiceID{Namespace: "default", Name: "web"}, Reason: svccnat.NoNodeAddress, Detail: "IPv6"}},
			r.cn.Problems(), "an IPv6 node port without an IPv6 address on the node")
		assert.Contains(t, r.logs.String(), "IPv6 node ports and hostPorts are not exposed")
		protoEqual(t, &vppmodel.CnatSnat{Ip4: "192.168.16.9", Policy: vppmodel.CnatSnat_K8S, NoClient: true,
			ExcludedPrefixes: []string{"10.1.0.0/16", "10.96.0.0/12", "192.168.16.0/24", "fd00:1::/48", "fd00:96::/108"}}, r.applied[vppmodel.CnatSnatKey])
		assert.Empty(t, r.nodeIPsChanged([]netip.Addr{netip.MustParseAddr("192.168.16.9")}, netip.MustParseAddr("192.168.16.3")),
			"another node changes: nothing here")
	})

	t.Run("lb annotation, ClientIP affinity", func(t *testing.T) {
		r := newRig(t, baseConfig())
		s := service("web", dual, http)
		s.Annotations = map[string]string{svccnat.LBAnnotation: svccnat.LBMaglev}
		s.SessionAffinity, s.SessionAffinityTimeout = kubemodel.Service_CLIENT_IP, 600
		r.service(s)
		r.endpoints(endpoints("web", []port{http}, p2, p3, p2v6))
		assert.Equal(t, []string{
			"tcp 10.96.0.10:80 -> 10.1.1.2:8080 10.1.1.3:8080 maglev affinity",
			"tcp [fd00:96::10]:80 -> [fd00:1:0:1::2]:8080 maglev affinity",
		}, translations(r.applied))
		s.Annotations = map[string]string{svccnat.LBAnnotation: "round-robin"}
		r.service(s)
		assert.Equal(t, []string{
			"tcp 10.96.0.10:80 -> 10.1.1.2:8080 10.1.1.3:8080 affinity",
			"tcp [fd00:96::10]:80 -> [fd00:1:0:1::2]:8080 affinity",
		}, translations(r.applied), "an unknown value: ecmp")
		assert.Equal(t, []svccnat.Problem{{Service: kubemodel.ServiceID{Namespace: "default", Name: "web"}, Reason: svccnat.UnknownLB,
			Detail: "round-robin"}}, r.cn.Problems())
		r.endpoints(endpoints("web", []port{http}, p2, p2v6))
		r.resync()
		assert.Equal(t, 1, strings.Count(r.logs.String(), "round-robin"), "logged once: %s", r.logs.String())
		s.Annotations = map[string]string{svccnat.LBAnnotation: svccnat.LBECMP}
		r.service(s)
		assert.Empty(t, r.cn.Problems())
	})

	t.Run("SCTP is reported, not rendered", func(t *testing.T) {
		r := newRig(t, baseConfig())
		sctp := port{name: "sctp", proto: kubemodel.Protocol_SCTP, port: 9, target: 9}
		r.service(service("mixed", dual, http, sctp))
		r.endpoints(endpoints("mixed", []port{http, sctp}, p2, p3))
		assert.Equal(t, []string{"tcp 10.96.0.10:80 -> 10.1.1.2:8080 10.1.1.3:8080"}, translations(r.applied))
		assert.Equal(t, 1, r.cn.Stats().UnsupportedPorts)
		assert.Equal(t, []svccnat.Problem{{Service: kubemodel.ServiceID{Namespace: "default", Name: "mixed"}, Reason: svccnat.UnsupportedProtocol,
			Detail: "sctp/9"}}, r.cn.Problems())
		r.kube(kubemodel.ServiceResource, kubemodel.ServiceKey("default", "mixed"), nil)
		assert.Zero(t, r.cn.Stats().UnsupportedPorts)
		assert.Empty(t, r.cn.Problems())
	})

	t.Run("hostPorts: with the pod, on this node's addresses of its families", func(t *testing.T) {
		r := newRig(t, baseConfig())
		hp := &kubemodel.ContainerPort{HostPort: 8081, ContainerPort: 80, Protocol: kubemodel.Protocol_TCP}
		got := changed(r.podState("h1", hostPortPod("h1", []string{"10.1.1.20", "fd00:1:0:1::20"}, hp)))
		assert.Equal(t, []string{"+" + trKey(vppmodel.ProtoTCP, nodeIP, 8081), "+" + trKey(vppmodel.ProtoTCP, nodeIP6, 8081)}, got)
		assert.Equal(t, []string{"tcp 192.168.16.1:8081 -> 10.1.1.20:80 real", "tcp [fd00:16::1]:8081 -> [fd00:1:0:1::20]:80 real"},
			translations(r.applied))
		// Another pod with the same hostPort: the first by name has it.
		assert.Empty(t, r.podState("h2", hostPortPod("h2", []string{"10.1.1.21"}, hp)))
		assert.Equal(t, []svccnat.Problem{{Pod: kubemodel.PodID{Namespace: "default", Name: "h2"}, Reason: svccnat.FrontendTaken,
			Detail: "tcp 192.168.16.1:8081 (pod default/h1's)"}}, r.cn.Problems())
		assert.Equal(t, 1, r.cn.Stats().Conflicts)
		// A hostIP: that address only; one not of this node: reported.
		r.podState("h3", hostPortPod("h3", []string{"10.1.1.22", "fd00:1:0:1::22"},
			&kubemodel.ContainerPort{HostPort: 9000, ContainerPort: 90, Protocol: kubemodel.Protocol_UDP, HostIp: nodeIP},
			&kubemodel.ContainerPort{HostPort: 9001, ContainerPort: 90, HostIp: "198.51.100.1"}))
		assert.Contains(t, translations(r.applied), "udp 192.168.16.1:9000 -> 10.1.1.22:90 real")
		assert.NotContains(t, r.applied, trKey(vppmodel.ProtoUDP, nodeIP6, 9000))
		assert.Contains(t, r.cn.Problems(), svccnat.Problem{Pod: kubemodel.PodID{Namespace: "default", Name: "h3"},
			Reason: svccnat.HostIPNotLocal, Detail: "198.51.100.1"})
		// The first pod goes: the second gets the hostPort.
		assert.Equal(t, []string{"+" + trKey(vppmodel.ProtoTCP, nodeIP, 8081), "-" + trKey(vppmodel.ProtoTCP, nodeIP6, 8081)},
			changed(r.podState("h1", nil)))
		assert.Contains(t, translations(r.applied), "tcp 192.168.16.1:8081 -> 10.1.1.21:80 real")
		assert.Equal(t, 0, r.cn.Stats().Conflicts)
		// A pod of another node, or in the host's network: nothing.
		other := hostPortPod("h4", []string{"10.1.2.30"}, hp)
		other.NodeName = "node-2"
		assert.Empty(t, r.podState("h4", other))
		hn := hostPortPod("h5", []string{nodeIP}, &kubemodel.ContainerPort{HostPort: 7000, ContainerPort: 7000})
		hn.HostNetwork = true
		assert.Empty(t, r.podState("h5", hn))
		assert.Equal(t, 2, r.cn.Stats().HostPortPods)
	})

	t.Run("a service comes before a pod's hostPort", func(t *testing.T) {
		r := newRig(t, baseConfig())
		hp := &kubemodel.ContainerPort{HostPort: 30080, ContainerPort: 80}
		r.podState("h1", hostPortPod("h1", []string{"10.1.1.20"}, hp))
		np := http
		np.nodePort = 30080
		r.service(service("web", []string{"10.96.0.10"}, np))
		got := changed(r.endpoints(endpoints("web", []port{np}, p2)))
		assert.Contains(t, got, "+"+trKey(vppmodel.ProtoTCP, nodeIP, 30080))
		assert.Contains(t, translations(r.applied), "tcp 192.168.16.1:30080 -> 10.1.1.2:8080 real")
		assert.Equal(t, []svccnat.Problem{{Pod: kubemodel.PodID{Namespace: "default", Name: "h1"}, Reason: svccnat.FrontendTaken,
			Detail: "tcp 192.168.16.1:30080 (service default/web's)"}}, r.cn.Problems())
		r.kube(kubemodel.ServiceResource, kubemodel.ServiceKey("default", "web"), nil)
		assert.Contains(t, translations(r.applied), "tcp 192.168.16.1:30080 -> 10.1.1.20:80 real", "the pod gets it back")
		assert.Empty(t, r.cn.Problems())
	})

	t.Run("interfaces follow the processor's sets", func(t *testing.T) {
		r := newRig(t, baseConfig())
		key := vppmodel.CnatInterfaceKey("pod-p2")
		assert.Equal(t, []string{"+" + key}, changed(r.addPod("p2")))
		protoEqual(t, &vppmodel.CnatInterface{Interface: "pod-p2", Feature: true, SnatPod: true, SnatV4: true, SnatV6: true}, r.applied[key])
		r.service(service("web", dual, http))
		assert.Equal(t, []string{"+" + web}, changed(r.endpoints(endpoints("web", []port{http}, p2))), "a frontend becoming a backend changes nothing")
		assert.Equal(t, []string{"-" + key}, changed(r.deletePod("p2")))
		assert.Equal(t, 0, r.cn.Stats().Interfaces)

		off := baseConfig()
		off.DisableSNAT = true
		r = newRig(t, off)
		r.addPod("p3")
		protoEqual(t, &vppmodel.CnatInterface{Interface: "pod-p3", Feature: true, SnatPod: true}, r.applied[vppmodel.CnatInterfaceKey("pod-p3")])
	})

	t.Run("without a source-NAT address: features only, until one comes", func(t *testing.T) {
		r := newRig(t, baseConfig())
		r.nodeIPsChanged(nil, netip.MustParseAddr(otherNode))
		assert.NotContains(t, r.applied, vppmodel.CnatSnatKey)
		assert.NotContains(t, r.applied, vppmodel.CnatInterfaceKey(svccnat.AnchorInterface))
		assert.NotContains(t, r.applied, vppmodel.InterfaceKey(svccnat.AnchorInterface))
		r.addPod("p2")
		protoEqual(t, &vppmodel.CnatInterface{Interface: "pod-p2", Feature: true}, r.applied[vppmodel.CnatInterfaceKey("pod-p2")])
		protoEqual(t, &vppmodel.CnatInterface{Interface: hostIC, Feature: true}, r.applied[vppmodel.CnatInterfaceKey(hostIC)])
		assert.Contains(t, r.logs.String(), "no source-NAT address")
		r.nodeIPsChanged([]netip.Addr{netip.MustParseAddr(nodeIP)}, netip.MustParseAddr(otherNode))
		protoEqual(t, &vppmodel.CnatInterface{Interface: "pod-p2", Feature: true, SnatPod: true, SnatV4: true, SnatV6: true},
			r.applied[vppmodel.CnatInterfaceKey("pod-p2")])
		assert.Contains(t, r.applied, vppmodel.CnatInterfaceKey(svccnat.AnchorInterface))
		want, _, _ := r.fresh(baseConfig())
		equalState(t, want, r.applied)
	})

	t.Run("without a transaction the record follows", func(t *testing.T) {
		r := newRig(t, baseConfig())
		r.service(service("web", dual, http))
		r.endpoints(endpoints("web", []port{http}, p2, p3))
		id := kubemodel.PodID{Namespace: "default", Name: "p4"}
		r.pods.Connect(id, "pod-p4")
		add := controller.NewAddPodEvent(id, "c", "/ns")
		txn := controllertest.NewTxn()
		_, err := r.sp.Handler().Update(add, txn)
		require.NoError(t, err)
		assert.Contains(t, txn.Values(), vppmodel.CnatInterfaceKey("pod-p4"))
		require.NoError(t, r.sp.Handler().Revert(add))
		r.pods.Disconnect(id)
		assert.Equal(t, 0, r.cn.Stats().Interfaces)
		want, _, _ := r.fresh(baseConfig())
		equalState(t, want, r.applied)
	})
}

// TestNew checks the configuration.
func TestNew(t *testing.T) {
	ips := svcprocessortest.NewNodeIPs()
	snat := svccnat.SNATAddrsFunc(func() []netip.Addr { return nil })
	_, err := svccnat.New(nil, nil, svccnat.Config{})
	assert.ErrorContains(t, err, "NodeIPs source is nil")
	assert.ErrorContains(t, err, "SNATAddrs source is nil")
	_, err = svccnat.New(ips, snat, svccnat.Config{Uplink: strings.Repeat("u", 100), InterconnectInterfaces: []string{"x", "x", svccnat.AnchorInterface},
		ExcludedPrefixes: []netip.Prefix{{}}})
	for _, want := range []string{"Config.Uplink", "listed twice", "renderer's own loopback", "ExcludedPrefixes[0]"} {
		assert.ErrorContains(t, err, want)
	}
	var logs bytes.Buffer
	r, err := svccnat.New(ips, snat, svccnat.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	require.NoError(t, r.Render(svcprocessor.RenderEvent{Kind: svcprocessor.Resync, Snapshot: &svcprocessor.Snapshot{}}))
	assert.Contains(t, logs.String(), "component=svccnat")
}

package svctest

import (
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
)

// Cases returns the scenarios, fresh for each run (their steps share a
// service value between them).
func Cases() []Case {
	return []Case{lifecycle(), families(), protocols()}
}

// lifecycle: a dual-stack ClusterIP service without endpoints, then with
// three backends of each family (one of them on another node), one
// removed (one VPP request), a node port and an external IP, the Local
// traffic policy; then a VPP restart restores everything, an agent restart
// on the populated VPP writes nothing, and the service goes.
func lifecycle() Case {
	http := Port{Name: "http", Proto: kubemodel.Protocol_TCP, Port: 80, Target: 8080}
	web := Service("web", []string{"10.96.0.10", "fd00:96::10"}, http)
	all := []string{"local:10.1.1.3", "local:10.1.1.4", "10.1.2.7", "local:fd00:1::103", "local:fd00:1::104", "fd00:1::207"}
	twoLocal := []string{"local:10.1.1.3", "local:10.1.1.4", "local:fd00:1::103", "local:fd00:1::104"}
	cluster := []string{
		"tcp 10.96.0.10:80 -> 10.1.1.3:8080 10.1.1.4:8080",
		"tcp [fd00:96::10]:80 -> [fd00:1::103]:8080 [fd00:1::104]:8080",
	}
	external := append([]string{
		"tcp 192.168.16.1:30080 -> 10.1.1.3:8080 10.1.1.4:8080",
		"tcp 203.0.113.10:80 -> 10.1.1.3:8080 10.1.1.4:8080",
	}, cluster...)
	local := Lines(
		"tcp 10.96.0.10:80 -> 10.1.1.3:8080 10.1.1.4:8080 10.1.2.7:8080",
		"tcp [fd00:96::10]:80 -> [fd00:1::103]:8080 [fd00:1::104]:8080 [fd00:1::207]:8080",
		"tcp 192.168.16.1:30080 -> 10.1.1.3:8080 10.1.1.4:8080",
		"tcp [fd00:16::1]:30080 -> [fd00:1::103]:8080 [fd00:1::104]:8080",
		"tcp 203.0.113.10:80 -> 10.1.1.3:8080 10.1.1.4:8080")
	return Case{Name: "lifecycle", Steps: []Step{
		{Name: "a service without endpoints", Apply: func(c *Cluster) { c.SetService(web) }},
		{Name: "three backends of each family", Apply: func(c *Cluster) { c.SetEndpoints("web", []Port{http}, all...) },
			Want: Lines(
				"tcp 10.96.0.10:80 -> 10.1.1.3:8080 10.1.1.4:8080 10.1.2.7:8080",
				"tcp [fd00:96::10]:80 -> [fd00:1::103]:8080 [fd00:1::104]:8080 [fd00:1::207]:8080")},
		{Name: "a backend of each family removed", Apply: func(c *Cluster) { c.SetEndpoints("web", []Port{http}, twoLocal...) },
			Want: Lines(cluster...), Requests: 2, Requests6: 1},
		{Name: "a node port and an external IP", Apply: func(c *Cluster) {
			http.NodePort = 30080
			web = Service("web", []string{"10.96.0.10", "fd00:96::10"}, http)
			web.ExternalIps = []string{"203.0.113.10"}
			c.SetService(web)
		}, Want: Lines(append(external, "tcp [fd00:16::1]:30080 -> [fd00:1::103]:8080 [fd00:1::104]:8080")...)},
		{Name: "a remote backend back", Apply: func(c *Cluster) { c.SetEndpoints("web", []Port{http}, all...) },
			Want: Lines(
				"tcp 10.96.0.10:80 -> 10.1.1.3:8080 10.1.1.4:8080 10.1.2.7:8080",
				"tcp [fd00:96::10]:80 -> [fd00:1::103]:8080 [fd00:1::104]:8080 [fd00:1::207]:8080",
				"tcp 192.168.16.1:30080 -> 10.1.1.3:8080 10.1.1.4:8080 10.1.2.7:8080",
				"tcp 203.0.113.10:80 -> 10.1.1.3:8080 10.1.1.4:8080 10.1.2.7:8080"),
			Differ: map[string]Difference{"cnat": {
				Why:  "cnat serves external frontends with this node's backends (its session state would rewrite the VXLAN packet to another node's)",
				Want: local,
			}}},
		{Name: "Local policy", Apply: func(c *Cluster) {
			web.ExternalTrafficPolicy = svcprocessor.LocalTrafficPolicy
			c.SetService(web)
		}, Want: local},
		{Name: "VPP restarts", Restart: "vpp", Want: local},
		{Name: "the agent restarts", Restart: "agent", Want: local},
		{Name: "the service goes", Apply: func(c *Cluster) { c.DeleteService("web") }},
	}}
}

// families: an IPv4-only, an IPv6-only and a dual-stack service side by
// side; each frontend gets the backends of its family only.
func families() Case {
	dns := Port{Name: "dns", Proto: kubemodel.Protocol_UDP, Port: 53, Target: 5353}
	eps := []string{"local:10.1.1.5", "10.1.2.8", "local:fd00:1::105", "fd00:1::208"}
	return Case{Name: "families", Steps: []Step{
		{Name: "three services", Apply: func(c *Cluster) {
			c.SetService(Service("v4", []string{"10.96.0.20"}, dns))
			c.SetService(Service("v6", []string{"fd00:96::20"}, dns))
			c.SetService(Service("dual", []string{"fd00:96::21", "10.96.0.21"}, dns))
			for _, s := range []string{"v4", "v6", "dual"} {
				c.SetEndpoints(s, []Port{dns}, eps...)
			}
		}, Want: Lines(
			"udp 10.96.0.20:53 -> 10.1.1.5:5353 10.1.2.8:5353",
			"udp [fd00:96::20]:53 -> [fd00:1::105]:5353 [fd00:1::208]:5353",
			"udp [fd00:96::21]:53 -> [fd00:1::105]:5353 [fd00:1::208]:5353",
			"udp 10.96.0.21:53 -> 10.1.1.5:5353 10.1.2.8:5353")},
		{Name: "the IPv6 backends go", Apply: func(c *Cluster) {
			for _, s := range []string{"v4", "v6", "dual"} {
				c.SetEndpoints(s, []Port{dns}, eps[:2]...)
			}
		}, Want: Lines(
			"udp 10.96.0.20:53 -> 10.1.1.5:5353 10.1.2.8:5353",
			"udp 10.96.0.21:53 -> 10.1.1.5:5353 10.1.2.8:5353")},
	}}
}

// protocols: a service with a TCP and a UDP port of one name each, target
// ports differing, then one port removed.
func protocols() Case {
	tcp := Port{Name: "a", Proto: kubemodel.Protocol_TCP, Port: 443, Target: 8443}
	udp := Port{Name: "b", Proto: kubemodel.Protocol_UDP, Port: 443, Target: 8444}
	eps := []string{"local:10.1.1.6", "local:fd00:1::106"}
	return Case{Name: "protocols", Steps: []Step{
		{Name: "TCP and UDP", Apply: func(c *Cluster) {
			c.SetService(Service("quic", []string{"10.96.0.30", "fd00:96::30"}, tcp, udp))
			c.SetEndpoints("quic", []Port{tcp, udp}, eps...)
		}, Want: Lines(
			"tcp 10.96.0.30:443 -> 10.1.1.6:8443",
			"udp 10.96.0.30:443 -> 10.1.1.6:8444",
			"tcp [fd00:96::30]:443 -> [fd00:1::106]:8443",
			"udp [fd00:96::30]:443 -> [fd00:1::106]:8444")},
		{Name: "UDP removed", Apply: func(c *Cluster) {
			c.SetService(Service("quic", []string{"10.96.0.30", "fd00:96::30"}, tcp))
			c.SetEndpoints("quic", []Port{tcp}, eps...)
		}, Want: Lines(
			"tcp 10.96.0.30:443 -> 10.1.1.6:8443",
			"tcp [fd00:96::30]:443 -> [fd00:1::106]:8443")},
	}}
}

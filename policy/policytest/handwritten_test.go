package policytest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Matrices written by hand, not computed: they are what makes the
// evaluator trustworthy. Where the case follows an upstream e2e test
// (kubernetes/kubernetes test/e2e/network/netpol/network_policy.go), the
// table is transcribed from that test's expected reachability (its
// NewReachability(…, true) followed by Expect, ExpectPeer,
// ExpectAllIngress and ExpectAllEgress calls, quoted in the comment),
// spread over all nine pods of the model. Upstream ignores loopback
// (a pod to itself); here the diagonal follows the same calls.
//
// Rows are sources, columns destinations; "." allowed, "X" denied.
var handWritten = []struct {
	caseName string
	stage    int // 0: the policies; i: after step i
	upstream string
	probe    Probe
	table    string
}{
	{
		// ExpectPeer(&Peer{}, &Peer{Namespace: nsX}, false)
		caseName: "deny-ingress-to-namespace-x",
		upstream: "should support a 'default-deny-ingress' policy",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   X   X   .   .   .   .   .   .
x/b     X   X   X   .   .   .   .   .   .
x/c     X   X   X   .   .   .   .   .   .
y/a     X   X   X   .   .   .   .   .   .
y/b     X   X   X   .   .   .   .   .   .
y/c     X   X   X   .   .   .   .   .   .
z/a     X   X   X   .   .   .   .   .   .
z/b     X   X   X   .   .   .   .   .   .
z/c     X   X   X   .   .   .   .   .   .
`,
	},
	{
		// ExpectPeer(&Peer{Namespace: nsX}, &Peer{}, false)
		caseName: "deny-egress-from-namespace-x",
		upstream: "should deny egress from all pods in a namespace",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   X   X   X   X   X   X   X   X
x/b     X   X   X   X   X   X   X   X   X
x/c     X   X   X   X   X   X   X   X   X
y/a     .   .   .   .   .   .   .   .   .
y/b     .   .   .   .   .   .   .   .   .
y/c     .   .   .   .   .   .   .   .   .
z/a     .   .   .   .   .   .   .   .   .
z/b     .   .   .   .   .   .   .   .   .
z/c     .   .   .   .   .   .   .   .   .
`,
	},
	{
		// ExpectPeer(&Peer{}, &Peer{Namespace: nsX}, false)
		// ExpectPeer(&Peer{Namespace: nsX}, &Peer{}, false)
		caseName: "deny-all-in-namespace-x",
		upstream: "should support a 'default-deny-all' policy",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   X   X   X   X   X   X   X   X
x/b     X   X   X   X   X   X   X   X   X
x/c     X   X   X   X   X   X   X   X   X
y/a     X   X   X   .   .   .   .   .   .
y/b     X   X   X   .   .   .   .   .   .
y/c     X   X   X   .   .   .   .   .   .
z/a     X   X   X   .   .   .   .   .   .
z/b     X   X   X   .   .   .   .   .   .
z/c     X   X   X   .   .   .   .   .   .
`,
	},
	{
		// NewReachability(…, true), on port 80 and on port 81.
		caseName: "allow-all-ingress-in-namespace-x",
		upstream: "should support allow-all policy",
		probe:    Probe{Protocol: tcpProto, Port: 81},
		table: `TCP/81 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     .   .   .   .   .   .   .   .   .
x/b     .   .   .   .   .   .   .   .   .
x/c     .   .   .   .   .   .   .   .   .
y/a     .   .   .   .   .   .   .   .   .
y/b     .   .   .   .   .   .   .   .   .
y/c     .   .   .   .   .   .   .   .   .
z/a     .   .   .   .   .   .   .   .   .
z/b     .   .   .   .   .   .   .   .   .
z/c     .   .   .   .   .   .   .   .   .
`,
	},
	{
		// ExpectPeer(&Peer{Namespace: nsY}, &Peer{Namespace: nsX}, false)
		// ExpectPeer(&Peer{Namespace: nsZ}, &Peer{Namespace: nsX}, false)
		caseName: "allow-ingress-from-same-namespace",
		upstream: "should deny ingress from pods on other namespaces",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     .   .   .   .   .   .   .   .   .
x/b     .   .   .   .   .   .   .   .   .
x/c     .   .   .   .   .   .   .   .   .
y/a     X   X   X   .   .   .   .   .   .
y/b     X   X   X   .   .   .   .   .   .
y/c     X   X   X   .   .   .   .   .   .
z/a     X   X   X   .   .   .   .   .   .
z/b     X   X   X   .   .   .   .   .   .
z/c     X   X   X   .   .   .   .   .   .
`,
	},
	{
		// ExpectAllIngress(NewPodString(nsX, "a"), false)
		// Expect(NewPodString(nsX, "b"), NewPodString(nsX, "a"), true)
		caseName: "allow-x-a-from-pod-b",
		upstream: "should enforce policy to allow traffic from pods within server namespace based on PodSelector",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   .   .   .   .   .   .   .   .
x/b     .   .   .   .   .   .   .   .   .
x/c     X   .   .   .   .   .   .   .   .
y/a     X   .   .   .   .   .   .   .   .
y/b     X   .   .   .   .   .   .   .   .
y/c     X   .   .   .   .   .   .   .   .
z/a     X   .   .   .   .   .   .   .   .
z/b     X   .   .   .   .   .   .   .   .
z/c     X   .   .   .   .   .   .   .   .
`,
	},
	{
		// ExpectPeer(&Peer{Namespace: nsX}, &Peer{Namespace: nsX, Pod: "a"}, false)
		// ExpectPeer(&Peer{Namespace: nsZ}, &Peer{Namespace: nsX, Pod: "a"}, false)
		caseName: "allow-x-a-from-namespace-y",
		upstream: "should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   .   .   .   .   .   .   .   .
x/b     X   .   .   .   .   .   .   .   .
x/c     X   .   .   .   .   .   .   .   .
y/a     .   .   .   .   .   .   .   .   .
y/b     .   .   .   .   .   .   .   .   .
y/c     .   .   .   .   .   .   .   .   .
z/a     X   .   .   .   .   .   .   .   .
z/b     X   .   .   .   .   .   .   .   .
z/c     X   .   .   .   .   .   .   .   .
`,
	},
	{
		// ExpectAllIngress(NewPodString(nsX, "a"), false)
		// Expect(NewPodString(nsY, "b"), NewPodString(nsX, "a"), true)
		// Expect(NewPodString(nsZ, "b"), NewPodString(nsX, "a"), true)
		caseName: "allow-x-a-from-pod-b-and-not-namespace-x",
		upstream: "should enforce policy based on PodSelector and NamespaceSelector",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   .   .   .   .   .   .   .   .
x/b     X   .   .   .   .   .   .   .   .
x/c     X   .   .   .   .   .   .   .   .
y/a     X   .   .   .   .   .   .   .   .
y/b     .   .   .   .   .   .   .   .   .
y/c     X   .   .   .   .   .   .   .   .
z/a     X   .   .   .   .   .   .   .   .
z/b     .   .   .   .   .   .   .   .   .
z/c     X   .   .   .   .   .   .   .   .
`,
	},
	{
		// Expect(NewPodString(nsX, "a"), NewPodString(nsX, "a"), false)
		// Expect(NewPodString(nsX, "c"), NewPodString(nsX, "a"), false)
		caseName: "allow-x-a-from-pod-b-or-not-namespace-x",
		upstream: "should enforce policy based on PodSelector or NamespaceSelector",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   .   .   .   .   .   .   .   .
x/b     .   .   .   .   .   .   .   .   .
x/c     X   .   .   .   .   .   .   .   .
y/a     .   .   .   .   .   .   .   .   .
y/b     .   .   .   .   .   .   .   .   .
y/c     .   .   .   .   .   .   .   .   .
z/a     .   .   .   .   .   .   .   .   .
z/b     .   .   .   .   .   .   .   .   .
z/c     .   .   .   .   .   .   .   .   .
`,
	},
	{
		// ExpectAllEgress(NewPodString(nsX, "a"), false)
		// Expect(NewPodString(nsX, "a"), NewPodString(nsY, "b"), true)
		caseName: "ipblock-egress-to-one-pod",
		upstream: "should allow egress access to server in CIDR block",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   X   X   X   .   X   X   X   X
x/b     .   .   .   .   .   .   .   .   .
x/c     .   .   .   .   .   .   .   .   .
y/a     .   .   .   .   .   .   .   .   .
y/b     .   .   .   .   .   .   .   .   .
y/c     .   .   .   .   .   .   .   .   .
z/a     .   .   .   .   .   .   .   .   .
z/b     .   .   .   .   .   .   .   .   .
z/c     .   .   .   .   .   .   .   .   .
`,
	},
	{
		// Expect(NewPodString(nsX, "a"), NewPodString(nsX, "b"), false)
		caseName: "ipblock-egress-except-one-pod",
		upstream: "should enforce except clause while egress access to server in CIDR block",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     .   X   .   .   .   .   .   .   .
x/b     .   .   .   .   .   .   .   .   .
x/c     .   .   .   .   .   .   .   .   .
y/a     .   .   .   .   .   .   .   .   .
y/b     .   .   .   .   .   .   .   .   .
y/c     .   .   .   .   .   .   .   .   .
z/a     .   .   .   .   .   .   .   .   .
z/b     .   .   .   .   .   .   .   .   .
z/c     .   .   .   .   .   .   .   .   .
`,
	},
	{
		// reachabilityAllow.ExpectAllEgress(NewPodString(nsX, "a"), false)
		// reachabilityAllow.Expect(NewPodString(nsX, "a"), NewPodString(nsX, "b"), true)
		caseName: "ipblock-egress-except-then-replaced-by-the-excepted-address",
		stage:    1,
		upstream: "should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   .   X   X   X   X   X   X   X
x/b     .   .   .   .   .   .   .   .   .
x/c     .   .   .   .   .   .   .   .   .
y/a     .   .   .   .   .   .   .   .   .
y/b     .   .   .   .   .   .   .   .   .
y/c     .   .   .   .   .   .   .   .   .
z/a     .   .   .   .   .   .   .   .   .
z/b     .   .   .   .   .   .   .   .   .
z/c     .   .   .   .   .   .   .   .   .
`,
	},
	{
		// reachabilityPort81 := NewReachability(…, true)
		caseName: "named-port-ingress",
		upstream: "should allow ingress access on one named port",
		probe:    Probe{Protocol: tcpProto, Port: 81},
		table: `TCP/81 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     .   .   .   .   .   .   .   .   .
x/b     .   .   .   .   .   .   .   .   .
x/c     .   .   .   .   .   .   .   .   .
y/a     .   .   .   .   .   .   .   .   .
y/b     .   .   .   .   .   .   .   .   .
y/c     .   .   .   .   .   .   .   .   .
z/a     .   .   .   .   .   .   .   .   .
z/b     .   .   .   .   .   .   .   .   .
z/c     .   .   .   .   .   .   .   .   .
`,
	},
	{
		// reachabilityPort80.ExpectPeer(&Peer{}, &Peer{Namespace: nsX}, false)
		caseName: "named-port-ingress",
		upstream: "should allow ingress access on one named port",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   X   X   .   .   .   .   .   .
x/b     X   X   X   .   .   .   .   .   .
x/c     X   X   X   .   .   .   .   .   .
y/a     X   X   X   .   .   .   .   .   .
y/b     X   X   X   .   .   .   .   .   .
y/c     X   X   X   .   .   .   .   .   .
z/a     X   X   X   .   .   .   .   .   .
z/b     X   X   X   .   .   .   .   .   .
z/c     X   X   X   .   .   .   .   .   .
`,
	},
	{
		// ExpectPeer(&Peer{Namespace: nsX}, &Peer{Namespace: nsX, Pod: "a"}, false)
		// ExpectPeer(&Peer{Namespace: nsY}, &Peer{Namespace: nsX, Pod: "a"}, true)
		// ExpectPeer(&Peer{Namespace: nsZ}, &Peer{Namespace: nsX, Pod: "a"}, false)
		caseName: "allow-x-a-from-namespace-y-on-port-81",
		upstream: "should enforce policy based on Ports",
		probe:    Probe{Protocol: tcpProto, Port: 81},
		table: `TCP/81 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   .   .   .   .   .   .   .   .
x/b     X   .   .   .   .   .   .   .   .
x/c     X   .   .   .   .   .   .   .   .
y/a     .   .   .   .   .   .   .   .   .
y/b     .   .   .   .   .   .   .   .   .
y/c     .   .   .   .   .   .   .   .   .
z/a     X   .   .   .   .   .   .   .   .
z/b     X   .   .   .   .   .   .   .   .
z/c     X   .   .   .   .   .   .   .   .
`,
	},
	{
		// reachabilityDENY.ExpectAllIngress(NewPodString(nsX, "a"), false)
		// (the stacked-policies test, before the port 80 policy is added)
		caseName: "stacked-policies-one-per-port",
		upstream: "should enforce multiple, stacked policies with overlapping podSelectors",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   .   .   .   .   .   .   .   .
x/b     X   .   .   .   .   .   .   .   .
x/c     X   .   .   .   .   .   .   .   .
y/a     X   .   .   .   .   .   .   .   .
y/b     X   .   .   .   .   .   .   .   .
y/c     X   .   .   .   .   .   .   .   .
z/a     X   .   .   .   .   .   .   .   .
z/b     X   .   .   .   .   .   .   .   .
z/c     X   .   .   .   .   .   .   .   .
`,
	},
	{
		// After the port 80 policy: reachabilityALLOW on port 80.
		caseName: "stacked-policies-one-per-port",
		stage:    1,
		upstream: "should enforce multiple, stacked policies with overlapping podSelectors",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   .   .   .   .   .   .   .   .
x/b     X   .   .   .   .   .   .   .   .
x/c     X   .   .   .   .   .   .   .   .
y/a     .   .   .   .   .   .   .   .   .
y/b     .   .   .   .   .   .   .   .   .
y/c     .   .   .   .   .   .   .   .   .
z/a     X   .   .   .   .   .   .   .   .
z/b     X   .   .   .   .   .   .   .   .
z/c     X   .   .   .   .   .   .   .   .
`,
	},
	{
		// reachabilityUDP.ExpectPeer(&Peer{}, &Peer{Namespace: nsX, Pod: "a"}, false)
		caseName: "protocol-tcp-any-port",
		upstream: "should enforce ingress policy allowing any port traffic to a server on a specific protocol",
		probe:    Probe{Protocol: udpProto, Port: 80},
		table: `UDP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   .   .   .   .   .   .   .   .
x/b     X   .   .   .   .   .   .   .   .
x/c     X   .   .   .   .   .   .   .   .
y/a     X   .   .   .   .   .   .   .   .
y/b     X   .   .   .   .   .   .   .   .
y/c     X   .   .   .   .   .   .   .   .
z/a     X   .   .   .   .   .   .   .   .
z/b     X   .   .   .   .   .   .   .   .
z/c     X   .   .   .   .   .   .   .   .
`,
	},
	{
		// ExpectPeer(&Peer{Namespace: nsX, Pod: "a"}, &Peer{}, false)
		// ExpectPeer(&Peer{}, &Peer{Namespace: nsY, Pod: "a"}, false)
		// ExpectPeer(&Peer{Namespace: nsX, Pod: "a"}, &Peer{Namespace: nsY, Pod: "a"}, true)
		// ExpectPeer(&Peer{}, &Peer{Namespace: nsY, Pod: "b"}, false)
		caseName: "egress-denies-what-ingress-allows",
		upstream: "should support denying of egress traffic on the client side (even if the server explicitly allows this traffic)",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   X   X   .   X   X   X   X   X
x/b     .   .   .   X   X   .   .   .   .
x/c     .   .   .   X   X   .   .   .   .
y/a     .   .   .   X   X   .   .   .   .
y/b     .   .   .   X   X   .   .   .   .
y/c     .   .   .   X   X   .   .   .   .
z/a     .   .   .   X   X   .   .   .   .
z/b     .   .   .   X   X   .   .   .   .
z/c     .   .   .   X   X   .   .   .   .
`,
	},
	{
		// reachabilityPort81.ExpectAllIngress(NewPodString(nsX, "a"), false)
		// reachabilityPort81.ExpectAllEgress(NewPodString(nsX, "a"), false)
		// reachabilityPort81.Expect(NewPodString(nsX, "b"), NewPodString(nsX, "a"), true)
		caseName: "policy-types-ingress-and-egress",
		upstream: "should work with Ingress, Egress specified together",
		probe:    Probe{Protocol: tcpProto, Port: 81},
		table: `TCP/81 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   X   X   X   X   X   X   X   X
x/b     .   .   .   .   .   .   .   .   .
x/c     X   .   .   .   .   .   .   .   .
y/a     X   .   .   .   .   .   .   .   .
y/b     X   .   .   .   .   .   .   .   .
y/c     X   .   .   .   .   .   .   .   .
z/a     X   .   .   .   .   .   .   .   .
z/b     X   .   .   .   .   .   .   .   .
z/c     X   .   .   .   .   .   .   .   .
`,
	},
	{
		// reachabilityWithLabel.ExpectAllIngress(NewPodString(nsX, "a"), false)
		// reachabilityWithLabel.ExpectPeer(&Peer{Namespace: nsY}, &Peer{}, true)
		caseName: "update-namespace-label",
		stage:    1,
		upstream: "should allow ingress access from updated namespace",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   .   .   .   .   .   .   .   .
x/b     X   .   .   .   .   .   .   .   .
x/c     X   .   .   .   .   .   .   .   .
y/a     .   .   .   .   .   .   .   .   .
y/b     .   .   .   .   .   .   .   .   .
y/c     .   .   .   .   .   .   .   .   .
z/a     X   .   .   .   .   .   .   .   .
z/b     X   .   .   .   .   .   .   .   .
z/c     X   .   .   .   .   .   .   .   .
`,
	},
	{
		// reachabilityIsolated.ExpectAllIngress(NewPodString(nsX, "a"), false)
		caseName: "update-pod-label-into-policy-selector",
		stage:    1,
		upstream: "should deny ingress access to updated pod",
		probe:    Probe{Protocol: tcpProto, Port: 80},
		table: `TCP/80 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     X   .   .   .   .   .   .   .   .
x/b     X   .   .   .   .   .   .   .   .
x/c     X   .   .   .   .   .   .   .   .
y/a     X   .   .   .   .   .   .   .   .
y/b     X   .   .   .   .   .   .   .   .
y/c     X   .   .   .   .   .   .   .   .
z/a     X   .   .   .   .   .   .   .   .
z/b     X   .   .   .   .   .   .   .   .
z/c     X   .   .   .   .   .   .   .   .
`,
	},
	{
		// No upstream test: y/a may connect only to pods with a named port
		// "http" on it, x/b (TCP 80) and y/c (TCP 81); this is TCP/81.
		caseName: "named-port-on-some-pods-egress",
		probe:    Probe{Protocol: tcpProto, Port: 81},
		table: `TCP/81 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     .   .   .   .   .   .   .   .   .
x/b     .   .   .   .   .   .   .   .   .
x/c     .   .   .   .   .   .   .   .   .
y/a     X   X   X   X   X   .   X   X   X
y/b     .   .   .   .   .   .   .   .   .
y/c     .   .   .   .   .   .   .   .   .
z/a     .   .   .   .   .   .   .   .   .
z/b     .   .   .   .   .   .   .   .   .
z/c     .   .   .   .   .   .   .   .   .
`,
	},
	{
		// No upstream test: x/a allows the /24 of node-1's pods (x/a, x/c,
		// y/b, z/a, z/c).
		caseName: "ipblock-ingress-from-pod-cidr-of-node-1",
		probe:    Probe{Protocol: udpProto, Port: 81},
		table: `UDP/81 x/a x/b x/c y/a y/b y/c z/a z/b z/c
x/a     .   .   .   .   .   .   .   .   .
x/b     X   .   .   .   .   .   .   .   .
x/c     .   .   .   .   .   .   .   .   .
y/a     X   .   .   .   .   .   .   .   .
y/b     .   .   .   .   .   .   .   .   .
y/c     X   .   .   .   .   .   .   .   .
z/a     .   .   .   .   .   .   .   .   .
z/b     X   .   .   .   .   .   .   .   .
z/c     .   .   .   .   .   .   .   .   .
`,
	},
}

func TestEvaluatorAgreesWithHandWrittenMatrices(t *testing.T) {
	byName := map[string]Case{}
	for _, cs := range Cases() {
		byName[cs.Name] = cs
	}
	for _, hw := range handWritten {
		t.Run(hw.caseName, func(t *testing.T) {
			cs, ok := byName[hw.caseName]
			require.True(t, ok, "no case %q", hw.caseName)
			assert.Equal(t, hw.upstream, cs.Upstream, "the upstream test the case follows")
			matrices, err := cs.Expect(ModelOptions{})
			require.NoError(t, err)
			require.Less(t, hw.stage, len(matrices))
			assert.Equal(t, hw.table, matrices[hw.stage].Table(hw.probe), "stage %d, %s", hw.stage, hw.probe)
		})
	}
}

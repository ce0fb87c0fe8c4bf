package policytest

import (
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Cases returns the truth-table cases on the [Model], new values on every
// call. Where a case follows an upstream e2e test its Upstream field names
// the test, and its policies are the upstream ones (the upstream helpers
// set policyTypes explicitly: Ingress for a policy built with ingress
// rules, Egress for one built with egress rules). The expected matrices
// are the evaluator's ([Case.Expect]); the package's tests check two dozen
// of their tables against tables written by hand.
func Cases() []Case {
	var cases []Case
	add := func(c ...Case) { cases = append(cases, c...) }
	add(isolationCases()...)
	add(selectorCases()...)
	add(ipBlockCases()...)
	add(portCases()...)
	add(egressCases()...)
	add(policyTypeCases()...)
	add(updateCases()...)
	add(invalidCases()...)
	return cases
}

// isolationCases: deny-all and allow-all, in each direction, and policies
// adding up.
func isolationCases() []Case {
	return []Case{
		{
			Name:     "deny-ingress-to-namespace-x",
			Upstream: "should support a 'default-deny-ingress' policy",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "deny-ingress", all()).types(ingressType).build(),
			},
		},
		{
			Name: "deny-ingress-to-namespace-x-inferred-type",
			Policies: []*kubemodel.NetworkPolicy{
				// No policyTypes and no rules: Ingress is inferred.
				newPolicy("x", "deny-ingress", all()).build(),
			},
		},
		{
			Name:     "deny-egress-from-namespace-x",
			Upstream: "should deny egress from all pods in a namespace",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "deny-egress-ns-x", all()).types(egressType).build(),
			},
		},
		{
			Name:     "deny-egress-from-x-a",
			Upstream: "should deny egress from pods based on PodSelector",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "deny-egress-pod-a", match("pod", "a")).types(egressType).build(),
			},
		},
		{
			Name:     "deny-all-in-namespace-x",
			Upstream: "should support a 'default-deny-all' policy",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "deny-all", all()).types(ingressType, egressType).build(),
			},
		},
		{
			Name:     "allow-all-ingress-in-namespace-x",
			Upstream: "should support allow-all policy",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-all", all()).types(ingressType).ingress(nil, nil).build(),
			},
		},
		{
			Name: "allow-all-egress-in-namespace-x",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-all-egress", all()).types(egressType).egress(nil, nil).build(),
			},
			Steps: []Step{
				// The same policy without its rule: egress of x denied.
				PutPolicy{newPolicy("x", "allow-all-egress", all()).types(egressType).build()},
			},
		},
		{
			Name:     "allow-all-ingress-adds-to-port-80-policy",
			Upstream: "should enforce multiple ingress policies with ingress allow-all policy taking precedence",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-ingress-port-80", all()).types(ingressType).ingress(nil, ports(tcp(80))).build(),
			},
			Steps: []Step{
				PutPolicy{newPolicy("x", "allow-ingress", all()).types(ingressType).ingress(nil, nil).build()},
			},
		},
		{
			Name:     "allow-all-egress-adds-to-port-80-policy",
			Upstream: "should enforce multiple egress policies with egress allow-all policy taking precedence",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-egress-port-80", all()).types(egressType).egress(nil, ports(tcp(80))).build(),
			},
			Steps: []Step{
				PutPolicy{newPolicy("x", "allow-egress", all()).types(egressType).egress(nil, nil).build()},
			},
		},
		{
			Name:     "allow-ingress-to-x-a-beside-deny-all",
			Upstream: "should enforce policy to allow ingress traffic for a target",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "deny-all", all()).types(ingressType).build(),
				newPolicy("x", "allow-all-to-a", match("pod", "a")).types(ingressType).
					ingress(peers(podsIn(all(), all())), nil).build(),
			},
		},
		{
			Name: "two-policies-on-x-a-add-up",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "a-from-b", match("pod", "a")).types(ingressType).
					ingress(peers(pods(match("pod", "b"))), nil).build(),
				newPolicy("x", "a-from-z", match("pod", "a")).types(ingressType).
					ingress(peers(namespaces(match("ns", "z"))), nil).build(),
			},
		},
		{
			Name: "policy-selecting-no-pods",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "deny-nobody", match("pod", "nobody")).types(ingressType, egressType).build(),
			},
			Steps: []Step{
				// x/a takes the label the policy selects: now isolated both ways.
				SetPodLabels{pod("x", "a"), map[string]string{"pod": "nobody"}},
			},
		},
		{
			Name: "policies-of-namespace-y-select-only-pods-of-y",
			Policies: []*kubemodel.NetworkPolicy{
				// pod=a selects y/a only, not x/a or z/a.
				newPolicy("y", "deny-a", match("pod", "a")).types(ingressType).build(),
				// A peer podSelector without namespaceSelector: y/c only.
				newPolicy("y", "b-from-c", match("pod", "b")).types(ingressType).
					ingress(peers(pods(match("pod", "c"))), nil).build(),
			},
		},
	}
}

// selectorCases: pod and namespace selectors, their combinations, and
// matchExpressions.
func selectorCases() []Case {
	return []Case{
		{
			Name:     "allow-ingress-from-same-namespace",
			Upstream: "should deny ingress from pods on other namespaces",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "deny-empty-policy", all()).types(ingressType).
					ingress(peers(pods(all())), nil).build(),
			},
		},
		{
			Name:     "allow-x-a-from-pod-b",
			Upstream: "should enforce policy to allow traffic from pods within server namespace based on PodSelector",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "x-a-allows-x-b", match("pod", "a")).types(ingressType).
					ingress(peers(pods(match("pod", "b"))), nil).build(),
			},
		},
		{
			Name:     "allow-x-a-from-namespace-y",
			Upstream: "should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-client-a-via-ns-selector", match("pod", "a")).types(ingressType).
					ingress(peers(namespaces(nsName("y"))), nil).build(),
			},
		},
		{
			Name: "allow-x-a-from-namespace-label-ns-y",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-ns-label-y", match("pod", "a")).types(ingressType).
					ingress(peers(namespaces(match("ns", "y"))), nil).build(),
			},
		},
		{
			Name:     "allow-x-a-from-all-namespaces",
			Upstream: "should enforce policy to allow ingress traffic from pods in all namespaces",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-from-another-ns", match("pod", "a")).types(ingressType).
					ingress(peers(namespaces(all())), nil).build(),
			},
		},
		{
			Name:     "allow-x-a-from-pod-b-and-not-namespace-x",
			Upstream: "should enforce policy based on PodSelector and NamespaceSelector",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-ns-y-podselector-and-nsselector", match("pod", "a")).types(ingressType).
					ingress(peers(podsIn(match("pod", "b"), expr(NamespaceNameLabel, OpNotIn, "x"))), nil).build(),
			},
		},
		{
			Name:     "allow-x-a-from-pod-b-or-not-namespace-x",
			Upstream: "should enforce policy based on PodSelector or NamespaceSelector",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-ns-y-match-selector", match("pod", "a")).types(ingressType).
					ingress(peers(namespaces(expr(NamespaceNameLabel, OpNotIn, "x")), pods(match("pod", "b"))), nil).build(),
			},
		},
		{
			Name:     "allow-x-a-from-pods-b-c-not-in-namespace-x",
			Upstream: "should enforce policy based on Multiple PodSelectors and NamespaceSelectors",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-ns-y-z-pod-b-c", match("pod", "a")).types(ingressType).
					ingress(peers(podsIn(expr("pod", OpIn, "b", "c"), expr(NamespaceNameLabel, OpNotIn, "x"))), nil).build(),
			},
		},
		{
			Name:     "allow-x-a-from-pod-b-or-pod-c",
			Upstream: "should enforce policy based on any PodSelectors",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-ns-x-pod-b-c", match("pod", "a")).types(ingressType).
					ingress(peers(pods(match("pod", "b")), pods(match("pod", "c"))), nil).build(),
			},
		},
		{
			Name:     "allow-x-a-from-y-a",
			Upstream: "should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-ns-y-pod-a-via-namespace-pod-selector", match("pod", "a")).types(ingressType).
					ingress(peers(podsIn(match("pod", "a"), nsName("y"))), nil).build(),
			},
		},
		{
			Name:     "match-expressions-in-pod-selector",
			Upstream: "should enforce policy based on PodSelector with MatchExpressions",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "x-a-allows-x-b", match("pod", "a")).types(ingressType).
					ingress(peers(pods(expr("pod", OpIn, "b"))), nil).build(),
			},
		},
		{
			Name:     "match-expressions-in-namespace-selector",
			Upstream: "should enforce policy based on NamespaceSelector with MatchExpressions",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-ns-y-match-selector", match("pod", "a")).types(ingressType).
					ingress(peers(namespaces(expr(NamespaceNameLabel, OpIn, "y"))), nil).build(),
			},
		},
		{
			Name: "match-expressions-not-in-matches-pods-without-the-key",
			Policies: []*kubemodel.NetworkPolicy{
				// No pod has "env": every pod of x is a peer.
				newPolicy("x", "from-not-prod", all()).types(ingressType).
					ingress(peers(pods(expr("env", OpNotIn, "prod"))), nil).build(),
			},
			Steps: []Step{
				SetPodLabels{pod("x", "b"), map[string]string{"pod": "b", "env": "prod"}},
				SetPodLabels{pod("x", "b"), map[string]string{"pod": "b", "env": "dev"}},
			},
		},
		{
			Name: "match-expressions-exists",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "a-from-any-team", match("pod", "a")).types(ingressType).
					ingress(peers(podsIn(expr("team", OpExists), all())), nil).build(),
			},
			Steps: []Step{
				SetPodLabels{pod("y", "c"), map[string]string{"pod": "c", "team": "blue"}},
				SetPodLabels{pod("y", "c"), map[string]string{"pod": "c"}},
			},
		},
		{
			Name: "match-expressions-does-not-exist-in-policy-pod-selector",
			Policies: []*kubemodel.NetworkPolicy{
				// Selects every pod of x without "quarantine" (all of them
				// at first) and lets in only the pods of x.
				newPolicy("x", "same-namespace-unless-quarantined", expr("quarantine", OpDoesNotExist)).types(ingressType).
					ingress(peers(pods(all())), nil).build(),
			},
			Steps: []Step{
				// x/c leaves the policy's selection: open to all again.
				SetPodLabels{pod("x", "c"), map[string]string{"pod": "c", "quarantine": "true"}},
			},
		},
		{
			Name: "match-expressions-does-not-exist-in-peer",
			Policies: []*kubemodel.NetworkPolicy{
				// Every pod has "pod": no peer matches at first.
				newPolicy("x", "from-unlabelled-pods", all()).types(ingressType).
					ingress(peers(podsIn(expr("pod", OpDoesNotExist), all())), nil).build(),
			},
			Steps: []Step{
				SetPodLabels{pod("y", "a"), map[string]string{}},
			},
		},
		{
			Name:     "match-expressions-not-in-default-namespace-label-egress",
			Upstream: "should enforce policy based on NamespaceSelector with MatchExpressions using default ns label",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-ns-y-match-selector-for-immutable-ns-label", match("pod", "a")).types(egressType).
					egress(peers(namespaces(expr(NamespaceNameLabel, OpNotIn, "y"))), nil).build(),
			},
		},
		{
			Name: "match-labels-and-expressions-together",
			Policies: []*kubemodel.NetworkPolicy{
				// matchLabels pod=b AND ns In (y, z) AND ns NotIn (z): y/b.
				newPolicy("x", "a-from-y-b", match("pod", "a")).types(ingressType).
					ingress(peers(podsIn(match("pod", "b"), &kubemodel.LabelSelector{
						MatchLabels: map[string]string{"ns": "y"},
						MatchExpressions: []*kubemodel.LabelSelectorRequirement{
							{Key: "ns", Operator: OpIn, Values: []string{"y", "z"}},
							{Key: "ns", Operator: OpNotIn, Values: []string{"z"}},
						},
					})), nil).build(),
			},
		},
	}
}

// ipBlockCases: ipBlock peers, with and without except, matched against
// the model's pod addresses.
func ipBlockCases() []Case {
	xb := pod("x", "b")
	return []Case{
		{
			Name: "ipblock-ingress-from-one-pod",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "a-from-y-b-address", match("pod", "a")).types(ingressType).
					ingress(hostBlocks(pod("y", "b")), nil).build(),
			},
		},
		{
			Name: "ipblock-ingress-from-all-but-one-pod",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "a-from-pods-but-y-b", match("pod", "a")).types(ingressType).
					ingress(peers(
						block("10.244.0.0/16", ModelPodAddr(pod("y", "b"), false).String()+"/32"),
						block("fd00:10:244::/48", ModelPodAddr(pod("y", "b"), true).String()+"/128"),
					), nil).build(),
			},
		},
		{
			Name: "ipblock-ingress-from-pod-cidr-of-node-1",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "a-from-node-1-pods", match("pod", "a")).types(ingressType).
					ingress(peers(block("10.244.1.0/24"), block("fd00:10:244:1::/64")), nil).build(),
			},
		},
		{
			Name: "ipblock-ipv4-only",
			Policies: []*kubemodel.NetworkPolicy{
				// In a dual-stack model, IPv6 connections to x/a match no
				// rule: x/a is isolated and allows nothing over IPv6.
				newPolicy("x", "a-from-ipv4", match("pod", "a")).types(ingressType).
					ingress(peers(block("10.0.0.0/8")), nil).build(),
			},
		},
		{
			Name:     "ipblock-egress-to-one-pod",
			Upstream: "should allow egress access to server in CIDR block",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-client-a-via-cidr-egress-rule", match("pod", "a")).types(egressType).
					egress(hostBlocks(pod("y", "b")), nil).build(),
			},
		},
		{
			Name:     "ipblock-egress-except-one-pod",
			Upstream: "should enforce except clause while egress access to server in CIDR block",
			Policies: []*kubemodel.NetworkPolicy{
				// Upstream's CIDR is the /4 holding the pod's address.
				newPolicy("x", "allow-client-a-via-cidr-egress-rule", match("pod", "a")).types(egressType).
					egress(peers(
						block("0.0.0.0/4", ModelPodAddr(xb, false).String()+"/32"),
						block("f000::/4", ModelPodAddr(xb, true).String()+"/128"),
					), nil).build(),
			},
		},
		{
			Name:     "ipblock-egress-except-then-replaced-by-the-excepted-address",
			Upstream: "should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-client-a-via-cidr-egress-rule", match("pod", "a")).types(egressType).
					egress(peers(
						block("0.0.0.0/4", ModelPodAddr(xb, false).String()+"/32"),
						block("f000::/4", ModelPodAddr(xb, true).String()+"/128"),
					), nil).build(),
			},
			Steps: []Step{
				// Upstream updates the same policy: x/a may reach x/b only.
				PutPolicy{newPolicy("x", "allow-client-a-via-cidr-egress-rule", match("pod", "a")).types(egressType).
					egress(hostBlocks(xb), nil).build()},
			},
		},
		{
			Name: "ipblock-except-overlapped-by-second-policy",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "egress-all-but-x-b", match("pod", "a")).types(egressType).
					egress(peers(
						block("0.0.0.0/4", ModelPodAddr(xb, false).String()+"/32"),
						block("f000::/4", ModelPodAddr(xb, true).String()+"/128"),
					), nil).build(),
			},
			Steps: []Step{
				// A second policy allows the excepted address: policies add up.
				PutPolicy{newPolicy("x", "egress-x-b", match("pod", "a")).types(egressType).
					egress(hostBlocks(xb), nil).build()},
			},
		},
		{
			Name: "ipblock-and-selector-peers-in-one-rule",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "a-from-z-c-or-y-b", match("pod", "a")).types(ingressType).
					ingress(append(hostBlocks(pod("z", "c")), podsIn(match("pod", "b"), nsName("y"))), ports(tcp(80))).build(),
			},
		},
	}
}

// portCases: numbered ports, ranges, named ports, protocols.
func portCases() []Case {
	// x/b serves TCP 80 as "http"; y/c serves TCP 81 as "http".
	namedSetup := []Step{
		SetPodPorts{pod("x", "b"), []*kubemodel.ContainerPort{
			containerPort("http", tcpProto, 80), containerPort("serve-80-udp", udpProto, 80),
			containerPort("serve-81-tcp", tcpProto, 81), containerPort("serve-81-udp", udpProto, 81),
		}},
		SetPodPorts{pod("y", "c"), []*kubemodel.ContainerPort{
			containerPort("serve-80-tcp", tcpProto, 80), containerPort("serve-80-udp", udpProto, 80),
			containerPort("http", tcpProto, 81), containerPort("serve-81-udp", udpProto, 81),
		}},
	}
	return []Case{
		{
			Name:     "allow-x-a-from-namespace-y-on-port-81",
			Upstream: "should enforce policy based on Ports",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-client-a-via-ns-selector", match("pod", "a")).types(ingressType).
					ingress(peers(namespaces(nsName("y"))), ports(tcp(81))).build(),
			},
		},
		{
			Name:     "stacked-policies-one-per-port",
			Upstream: "should enforce multiple, stacked policies with overlapping podSelectors",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-client-a-via-ns-selector", match("pod", "a")).types(ingressType).
					ingress(peers(namespaces(nsName("y"))), ports(tcp(81))).build(),
			},
			Steps: []Step{
				PutPolicy{newPolicy("x", "allow-client-a-via-ns-selector-80", match("pod", "a")).types(ingressType).
					ingress(peers(namespaces(nsName("y"))), ports(tcp(80))).build()},
			},
		},
		{
			Name: "port-range-80-81-tcp",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "tcp-80-81", all()).types(ingressType).
					ingress(nil, ports(portRange(tcpProto, 80, 81))).build(),
			},
		},
		{
			Name: "port-range-81-90-udp",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "udp-81-90", match("pod", "a")).types(ingressType).
					ingress(nil, ports(portRange(udpProto, 81, 90))).build(),
			},
		},
		{
			Name: "port-range-outside-the-served-ports",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "tcp-82-1024", all()).types(ingressType).
					ingress(nil, ports(portRange(tcpProto, 82, 1024), portRange(tcpProto, 1, 79))).build(),
			},
		},
		{
			Name: "port-range-egress",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("y", "egress-79-80", all()).types(egressType).
					egress(nil, ports(portRange(tcpProto, 79, 80), portRange(udpProto, 80, 80))).build(),
			},
		},
		{
			Name:     "named-port-ingress",
			Upstream: "should allow ingress access on one named port",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-all", all()).types(ingressType).
					ingress(nil, ports(named(tcpProto, "serve-81-tcp"))).build(),
			},
		},
		{
			Name:     "named-port-ingress-from-namespace",
			Upstream: "should allow ingress access from namespace on one named port",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-client-a-via-ns-selector-80", match("pod", "a")).types(ingressType).
					ingress(peers(namespaces(nsName("y"))), ports(named(tcpProto, "serve-80-tcp"))).build(),
			},
		},
		{
			Name:     "named-port-egress",
			Upstream: "should allow egress access on one named port",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-egress", all()).types(egressType).
					egress(nil, ports(named(tcpProto, "serve-80-tcp"))).build(),
			},
		},
		{
			Name: "named-port-udp-with-empty-pod-selector",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "udp-80-by-name", all()).types(ingressType).
					ingress(nil, ports(named(udpProto, "serve-80-udp"))).build(),
			},
		},
		{
			Name:  "named-port-on-some-pods-ingress",
			Setup: namedSetup,
			Policies: []*kubemodel.NetworkPolicy{
				// Only x/b has "http" (TCP 80): x/a and x/c allow nothing.
				newPolicy("x", "http", all()).types(ingressType).
					ingress(nil, ports(named(tcpProto, "http"))).build(),
			},
			Steps: []Step{
				// x/c is recreated serving "http" on TCP 81 (and nothing else).
				SetPodPorts{pod("x", "c"), []*kubemodel.ContainerPort{containerPort("http", tcpProto, 81)}},
			},
		},
		{
			Name:  "named-port-on-some-pods-egress",
			Setup: namedSetup,
			Policies: []*kubemodel.NetworkPolicy{
				// y/a may reach x/b on TCP 80 and y/c on TCP 81.
				newPolicy("y", "egress-http", match("pod", "a")).types(egressType).
					egress(nil, ports(named(tcpProto, "http"))).build(),
			},
		},
		{
			Name: "named-port-protocol-must-match",
			Policies: []*kubemodel.NetworkPolicy{
				// "serve-80-tcp" is a TCP port: with protocol UDP it matches
				// nothing. "serve-81-udp" with UDP matches UDP 81.
				newPolicy("x", "udp-names", all()).types(ingressType).
					ingress(nil, ports(named(udpProto, "serve-80-tcp"), named(udpProto, "serve-81-udp"))).build(),
			},
		},
		{
			Name: "named-port-no-pod-has",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "no-such-port", match("pod", "a")).types(ingressType).
					ingress(nil, ports(named(tcpProto, "no-such-port"))).build(),
			},
		},
		{
			Name:     "protocol-tcp-any-port",
			Upstream: "should enforce ingress policy allowing any port traffic to a server on a specific protocol",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-ingress-by-proto", match("pod", "a")).types(ingressType).
					ingress(nil, ports(anyPort(tcpProto))).build(),
			},
		},
		{
			Name:     "protocol-udp-only",
			Upstream: "should not allow access by TCP when a policy specifies only UDP",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-only-udp-ingress-on-port-81", match("pod", "a")).types(ingressType).
					ingress(nil, ports(udp(81))).build(),
			},
		},
		{
			Name:     "protocol-sctp-only-isolates",
			Upstream: "should properly isolate pods that are selected by a policy allowing SCTP, even if the plugin doesn't support SCTP",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-only-sctp-ingress-on-port-80", match("pod", "a")).types(ingressType).
					ingress(nil, ports(num(sctpProto, 80))).build(),
			},
		},
		{
			Name:     "protocol-sctp-is-not-tcp",
			Upstream: "should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP', even if the plugin doesn't support SCTP",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "deny-ingress", all()).types(ingressType).build(),
				newPolicy("x", "allow-only-sctp-ingress-on-port-81", match("pod", "a")).types(ingressType).
					ingress(nil, ports(num(sctpProto, 81))).build(),
			},
		},
	}
}

// egressCases: egress rules to pods, namespaces and DNS-style ports.
func egressCases() []Case {
	dns := ports(udp(53), tcp(53))
	return []Case{
		{
			Name: "egress-dns-only",
			Policies: []*kubemodel.NetworkPolicy{
				// DNS to namespace z only: every probe on 80/81 from x is denied.
				newPolicy("x", "allow-dns", all()).types(egressType).
					egress(peers(namespaces(match("ns", "z"))), dns).build(),
			},
		},
		{
			Name: "egress-dns-and-tcp-80-to-pod-b",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-dns", all()).types(egressType).
					egress(peers(namespaces(match("ns", "z"))), dns).build(),
				newPolicy("x", "allow-b-80", all()).types(egressType).
					egress(peers(podsIn(match("pod", "b"), all())), ports(tcp(80))).build(),
			},
		},
		{
			Name: "egress-to-pod-selector-stays-in-namespace",
			Policies: []*kubemodel.NetworkPolicy{
				// pod=b without namespaceSelector: x/b only, not y/b or z/b.
				newPolicy("x", "a-to-b", match("pod", "a")).types(egressType).
					egress(peers(pods(match("pod", "b"))), nil).build(),
			},
		},
		{
			Name:     "egress-to-pod-in-other-namespace",
			Upstream: "should enforce egress policy allowing traffic to a server in a different namespace based on PodSelector and NamespaceSelector",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-to-ns-y-pod-a", match("pod", "a")).types(egressType).
					egress(peers(podsIn(match("pod", "a"), nsName("y"))), nil).build(),
			},
		},
		{
			Name:     "egress-denies-what-ingress-allows",
			Upstream: "should support denying of egress traffic on the client side (even if the server explicitly allows this traffic)",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-to-ns-y-pod-a", match("pod", "a")).types(egressType).
					egress(peers(podsIn(match("pod", "a"), nsName("y"))), nil).build(),
				newPolicy("y", "allow-from-xa-on-ya-match-selector", match("pod", "a")).types(ingressType).
					ingress(peers(podsIn(match("pod", "a"), nsName("x"))), nil).build(),
				newPolicy("y", "allow-from-xa-on-yb-match-selector", match("pod", "b")).types(ingressType).
					ingress(peers(podsIn(match("pod", "a"), nsName("x"))), nil).build(),
			},
		},
	}
}

// policyTypeCases: explicit and inferred policyTypes.
func policyTypeCases() []Case {
	return []Case{
		{
			Name: "policy-types-ingress-ignores-egress-rules",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "ingress-only", match("pod", "a")).types(ingressType).
					ingress(peers(pods(match("pod", "b"))), nil).
					egress(nil, ports(tcp(80))).build(),
			},
		},
		{
			Name: "policy-types-egress-ignores-ingress-rules",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "egress-only", match("pod", "a")).types(egressType).
					ingress(peers(pods(match("pod", "b"))), nil).
					egress(peers(namespaces(match("ns", "y"))), nil).build(),
			},
		},
		{
			Name:     "policy-types-ingress-and-egress",
			Upstream: "should work with Ingress, Egress specified together",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-client-a-via-pod-selector", match("pod", "a")).types(egressType, ingressType).
					ingress(peers(pods(match("pod", "b"))), nil).
					egress(nil, ports(tcp(80))).build(),
			},
		},
		{
			Name: "policy-types-inferred-from-egress-rules",
			Policies: []*kubemodel.NetworkPolicy{
				// No policyTypes: Ingress (no rules: deny all) and Egress
				// (TCP 80 only).
				newPolicy("x", "egress-80", match("pod", "a")).egress(nil, ports(tcp(80))).build(),
			},
		},
		{
			Name: "policy-types-inferred-from-ingress-rules",
			Policies: []*kubemodel.NetworkPolicy{
				// No policyTypes and no egress rules: Ingress only.
				newPolicy("x", "ingress-from-b", match("pod", "a")).ingress(peers(pods(match("pod", "b"))), nil).build(),
			},
		},
	}
}

// updateCases: policies, pods and namespaces changing in place.
func updateCases() []Case {
	return []Case{
		{
			Name:     "update-policy-from-allow-all-to-deny-all",
			Upstream: "should enforce updated policy",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-all-mutate-to-deny-all", all()).types(ingressType).ingress(nil, nil).build(),
			},
			Steps: []Step{
				PutPolicy{newPolicy("x", "allow-all-mutate-to-deny-all", all()).types(ingressType).build()},
			},
		},
		{
			Name: "update-policy-rule-peer-and-port",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "a-ingress", match("pod", "a")).types(ingressType).
					ingress(peers(pods(match("pod", "b"))), ports(tcp(80))).build(),
			},
			Steps: []Step{
				PutPolicy{newPolicy("x", "a-ingress", match("pod", "a")).types(ingressType).
					ingress(peers(namespaces(nsName("z"))), ports(udp(81))).build()},
				PutPolicy{newPolicy("x", "a-ingress", match("pod", "c")).types(ingressType).
					ingress(peers(namespaces(nsName("z"))), ports(udp(81))).build()},
			},
		},
		{
			Name:     "update-pod-label-into-peer-selector",
			Upstream: "should allow ingress access from updated pod",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-client-a-via-pod-selector", match("pod", "a")).types(ingressType).
					ingress(peers(pods(match("pod", "b", "pod2", "updated"))), nil).build(),
			},
			Steps: []Step{
				SetPodLabels{pod("x", "b"), map[string]string{"pod": "b", "pod2": "updated"}},
				SetPodLabels{pod("x", "b"), map[string]string{"pod": "b"}},
			},
		},
		{
			Name:     "update-pod-label-into-policy-selector",
			Upstream: "should deny ingress access to updated pod",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "deny-ingress-via-label-selector", match("target", "isolated")).types(ingressType).build(),
			},
			Steps: []Step{
				SetPodLabels{pod("x", "a"), map[string]string{"pod": "a", "target": "isolated"}},
				SetPodLabels{pod("x", "a"), map[string]string{"pod": "a"}},
			},
		},
		{
			Name:     "update-namespace-label",
			Upstream: "should allow ingress access from updated namespace",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-client-a-via-ns-selector", match("pod", "a")).types(ingressType).
					ingress(peers(namespaces(match("ns2", "updated"))), nil).build(),
			},
			Steps: []Step{
				SetNamespaceLabels{"y", map[string]string{"ns": "y", NamespaceNameLabel: "y", "ns2": "updated"}},
				SetNamespaceLabels{"y", map[string]string{"ns": "y", NamespaceNameLabel: "y"}},
			},
		},
		{
			Name:     "delete-policy",
			Upstream: "should stop enforcing policies after they are deleted",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "deny-all", all()).types(ingressType, egressType).build(),
			},
			Steps: []Step{
				DeletePolicy{kubemodel.PolicyID{Namespace: "x", Name: "deny-all"}},
			},
		},
		{
			Name:     "ingress-and-egress-controlled-independently",
			Upstream: "should enforce policies to check ingress and egress policies can be controlled independently based on PodSelector",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "allow-egress-for-target", match("pod", "a")).types(egressType).egress(nil, nil).build(),
			},
			Steps: []Step{
				PutPolicy{newPolicy("x", "deny-ingress-via-label-selector", match("pod", "a")).types(ingressType).build()},
			},
		},
		{
			Name: "delete-peer-pod",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "a-from-b", match("pod", "a")).types(ingressType).
					ingress(peers(podsIn(match("pod", "b"), all())), nil).build(),
			},
			Steps: []Step{
				DeletePod{pod("y", "b")},
				DeletePod{pod("x", "a")},
			},
		},
	}
}

// invalidCases: policies the API server would reject, which the evaluator
// (and the processor) ignore, while the other policies keep working.
func invalidCases() []Case {
	return []Case{
		{
			Name: "invalid-cidr-ignored",
			Policies: []*kubemodel.NetworkPolicy{
				// Invalid: would otherwise deny ingress to x from everything
				// but 10.0.0.0/33.
				newPolicy("x", "bad-cidr", all()).types(ingressType).
					ingress(peers(block("10.0.0.0/33")), nil).build(),
				newPolicy("y", "deny-a", match("pod", "a")).types(ingressType).build(),
			},
		},
		{
			Name: "invalid-operator-ignored-until-fixed",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "bad-operator", all()).types(ingressType).
					ingress(peers(pods(expr("pod", "Equals", "a"))), nil).build(),
			},
			Steps: []Step{
				PutPolicy{newPolicy("x", "bad-operator", all()).types(ingressType).
					ingress(peers(pods(expr("pod", OpIn, "a"))), nil).build()},
			},
		},
		{
			Name: "invalid-end-port-ignored",
			Policies: []*kubemodel.NetworkPolicy{
				newPolicy("x", "bad-range", all()).types(ingressType).
					ingress(nil, ports(portRange(tcpProto, 81, 80))).build(),
				newPolicy("x", "udp-only", match("pod", "c")).types(ingressType).
					ingress(nil, ports(anyPort(udpProto))).build(),
			},
		},
	}
}

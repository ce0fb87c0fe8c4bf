package policy_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/policy"
)

// harness drives a processor with Kubernetes state changes, keeps the
// state it was given and what the renderer was told.
type harness struct {
	t        testing.TB
	p        *policy.Processor
	ksd      controller.KubeStateData
	rendered map[kubemodel.PodID]*policy.PodPolicy
	events   []policy.RenderEvent
	node     string
}

func newHarness(t testing.TB, node string) *harness {
	h := &harness{t: t, ksd: controller.NewKubeStateData(), rendered: map[kubemodel.PodID]*policy.PodPolicy{}, node: node}
	p, err := policy.New(policy.Config{NodeName: node})
	require.NoError(t, err)
	require.NoError(t, p.RegisterRenderer(policy.RendererFunc(h.render)))
	h.p = p
	require.NoError(t, p.Handler().Resync(controller.NewDBResync(), h.ksd, 1, nil))
	return h
}

func (h *harness) render(ev policy.RenderEvent) error {
	h.events = append(h.events, ev)
	switch ev.Kind {
	case policy.Resync:
		clear(h.rendered)
		for _, v := range ev.Snapshot {
			h.rendered[v.Pod] = v
		}
	case policy.Changed:
		for _, c := range ev.Changes {
			if c.New == nil {
				delete(h.rendered, c.Old.Pod)
			} else {
				require.Equal(h.t, h.rendered[c.New.Pod], c.Old, "the old view is what was rendered")
				h.rendered[c.New.Pod] = c.New
			}
		}
	}
	return nil
}

func (h *harness) put(resource, key string, v proto.Message) {
	h.t.Helper()
	if h.ksd[resource] == nil {
		h.ksd[resource] = controller.KeyValuePairs{}
	}
	prev := h.ksd[resource][key]
	h.ksd[resource][key] = v
	_, err := h.p.Handler().Update(&controller.KubeStateChange{Key: key, Resource: resource, PrevValue: prev, NewValue: v}, nil)
	require.NoError(h.t, err)
}

func (h *harness) del(resource, key string) {
	h.t.Helper()
	prev := h.ksd[resource][key]
	if prev == nil {
		return
	}
	delete(h.ksd[resource], key)
	_, err := h.p.Handler().Update(&controller.KubeStateChange{Key: key, Resource: resource, PrevValue: prev}, nil)
	require.NoError(h.t, err)
}

func (h *harness) namespace(name string, labels map[string]string) {
	h.put(kubemodel.NamespaceResource, kubemodel.NamespaceKey(name), &kubemodel.Namespace{Name: name, Labels: labels})
}

// pod adds a pod: its peer record, and its full record when it runs on
// the harness's node.
func (h *harness) pod(ns, name, node, ip string, labels map[string]string, ports ...*kubemodel.NamedPort) {
	h.put(kubemodel.PodPeerResource, kubemodel.PodPeerKey(ns, name), &kubemodel.PodPeer{
		Namespace: ns, Name: name, NodeName: node, IpAddresses: []string{ip}, Labels: labels, Ports: ports})
	if node == h.node {
		var cports []*kubemodel.ContainerPort
		for _, p := range ports {
			cports = append(cports, &kubemodel.ContainerPort{Name: p.Name, ContainerPort: p.Port, Protocol: p.Protocol})
		}
		h.put(kubemodel.PodResource, kubemodel.PodKey(ns, name), &kubemodel.Pod{Namespace: ns, Name: name, NodeName: node,
			IpAddresses: []string{ip}, Labels: labels, Containers: []*kubemodel.Container{{Name: "c", Ports: cports}}})
	}
}

func (h *harness) policy(np *kubemodel.NetworkPolicy) {
	h.put(kubemodel.NetworkPolicyResource, kubemodel.NetworkPolicyKey(np.Namespace, np.Name), np)
}

// checkResync checks that a processor given the whole state at once
// computes what the incremental one rendered.
func (h *harness) checkResync() {
	h.t.Helper()
	p, err := policy.New(policy.Config{NodeName: h.node})
	require.NoError(h.t, err)
	var snap []*policy.PodPolicy
	require.NoError(h.t, p.RegisterRenderer(policy.RendererFunc(func(ev policy.RenderEvent) error {
		snap = ev.Snapshot
		return nil
	})))
	require.NoError(h.t, p.Handler().Resync(controller.NewDBResync(), h.ksd, 1, nil))
	want := map[kubemodel.PodID]*policy.PodPolicy{}
	for _, v := range snap {
		want[v.Pod] = v
	}
	require.Equal(h.t, len(want), len(h.rendered), "pods")
	for id, v := range want {
		require.True(h.t, v.Equal(h.rendered[id]), "pod %s: incremental\n%s\nresync\n%s", id, describe(h.rendered[id]), describe(v))
	}
}

func describe(v *policy.PodPolicy) string {
	if v == nil {
		return "<nil>"
	}
	s := fmt.Sprintf("%s addrs %v policies %v\n", v.Pod, v.Addrs, v.Policies)
	for _, d := range []struct {
		n string
		d policy.Direction
	}{{"ingress", v.Ingress}, {"egress", v.Egress}} {
		s += fmt.Sprintf("  %s isolated=%v\n", d.n, d.d.Isolated)
		for _, r := range d.d.Rules {
			s += "    " + r.String() + "\n"
		}
	}
	return s
}

func sel(kv ...string) *kubemodel.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &kubemodel.LabelSelector{MatchLabels: m}
}

func labels(kv ...string) map[string]string { return sel(kv...).MatchLabels }

func tcp(port int32) *kubemodel.NetworkPolicyPort {
	return &kubemodel.NetworkPolicyPort{Protocol: kubemodel.Protocol_TCP, Port: port}
}

func TestProcessorBasics(t *testing.T) {
	h := newHarness(t, "n1")
	h.namespace("x", labels("ns", "x"))
	h.namespace("y", labels("ns", "y"))
	h.pod("x", "a", "n1", "10.1.1.2", labels("pod", "a"), &kubemodel.NamedPort{Name: "http", Port: 8080})
	h.pod("x", "b", "n1", "10.1.1.3", labels("pod", "b"))
	h.pod("y", "a", "n2", "10.1.2.2", labels("pod", "a"))
	h.pod("y", "b", "n2", "10.1.2.3", labels("pod", "b"))
	a := kubemodel.PodID{Namespace: "x", Name: "a"}
	b := kubemodel.PodID{Namespace: "x", Name: "b"}
	require.Len(t, h.rendered, 2, "the local pods")
	assert.False(t, h.rendered[a].Isolated(), "no policy: open")

	// Deny all ingress to x/a.
	h.policy(&kubemodel.NetworkPolicy{Namespace: "x", Name: "deny", PodSelector: sel("pod", "a")})
	v := h.rendered[a]
	assert.True(t, v.Ingress.Isolated)
	assert.False(t, v.Egress.Isolated)
	assert.Empty(t, v.Ingress.Rules)
	assert.False(t, h.rendered[b].Isolated(), "b is not selected")
	h.checkResync()

	// Allow from namespace y on the named port http.
	h.policy(&kubemodel.NetworkPolicy{Namespace: "x", Name: "from-y", PodSelector: sel("pod", "a"),
		Ingress: []*kubemodel.NetworkPolicyIngressRule{{
			From:  []*kubemodel.NetworkPolicyPeer{{NamespaceSelector: sel("ns", "y")}},
			Ports: []*kubemodel.NetworkPolicyPort{{PortName: "http"}},
		}}})
	v = h.rendered[a]
	require.Len(t, v.Ingress.Rules, 1)
	assert.Equal(t, "10.1.2.2/31 tcp/8080", v.Ingress.Rules[0].String(), "y's pods aggregated; http resolved on x/a")
	assert.True(t, v.Ingress.Allows(netip.MustParseAddr("10.1.2.3"), kubemodel.Protocol_TCP, 8080))
	assert.False(t, v.Ingress.Allows(netip.MustParseAddr("10.1.2.3"), kubemodel.Protocol_TCP, 80))
	assert.False(t, v.Ingress.Allows(netip.MustParseAddr("10.1.1.3"), kubemodel.Protocol_TCP, 8080))
	assert.Equal(t, []kubemodel.PolicyID{{Namespace: "x", Name: "deny"}, {Namespace: "x", Name: "from-y"}}, v.Policies)
	h.checkResync()

	// A new pod in y joins the peer set; a pod leaving y's label set too.
	h.pod("y", "c", "n2", "10.1.2.4", labels("pod", "c"))
	assert.Equal(t, "10.1.2.2/31,10.1.2.4/32 tcp/8080", h.rendered[a].Ingress.Rules[0].String())
	h.namespace("y", labels("ns", "other"))
	assert.Empty(t, h.rendered[a].Ingress.Rules, "y no longer selected")
	h.namespace("y", labels("ns", "y"))
	h.checkResync()

	// Egress of x/b to pods with label pod=a anywhere, on their named port.
	h.policy(&kubemodel.NetworkPolicy{Namespace: "x", Name: "b-out", PodSelector: sel("pod", "b"),
		PolicyTypes: []kubemodel.PolicyType{kubemodel.PolicyType_EGRESS},
		Egress: []*kubemodel.NetworkPolicyEgressRule{{
			To:    []*kubemodel.NetworkPolicyPeer{{NamespaceSelector: &kubemodel.LabelSelector{}, PodSelector: sel("pod", "a")}},
			Ports: []*kubemodel.NetworkPolicyPort{{PortName: "http"}, tcp(53)},
		}}})
	vb := h.rendered[b]
	assert.False(t, vb.Ingress.Isolated)
	assert.True(t, vb.Egress.Isolated)
	assert.Equal(t, []string{"10.1.1.2/32 tcp/8080", "10.1.1.2/32,10.1.2.2/32 tcp/53"}, ruleStrings(vb.Egress.Rules),
		"53 to both a pods, http only where it is declared")
	h.checkResync()

	// Deleting the policies opens the pods again.
	for _, n := range []string{"deny", "from-y", "b-out"} {
		h.del(kubemodel.NetworkPolicyResource, kubemodel.NetworkPolicyKey("x", n))
	}
	assert.False(t, h.rendered[a].Isolated())
	assert.False(t, h.rendered[b].Isolated())
	h.checkResync()

	// A deleted local pod is gone from the views.
	h.del(kubemodel.PodResource, kubemodel.PodKey("x", "b"))
	assert.NotContains(t, h.rendered, b)
	h.checkResync()
}

func ruleStrings(rs []policy.Rule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.String())
	}
	slices.Sort(out)
	return out
}

func TestInvalidPoliciesReportedAndIgnored(t *testing.T) {
	h := newHarness(t, "n1")
	h.pod("x", "a", "n1", "10.1.1.2", labels("pod", "a"))
	for _, tc := range []struct {
		name string
		np   *kubemodel.NetworkPolicy
		want string
	}{
		{"bad operator", &kubemodel.NetworkPolicy{PodSelector: &kubemodel.LabelSelector{MatchExpressions: []*kubemodel.LabelSelectorRequirement{{Key: "a", Operator: "Like"}}}}, `unknown operator "Like"`},
		{"bad cidr", &kubemodel.NetworkPolicy{Ingress: []*kubemodel.NetworkPolicyIngressRule{{From: []*kubemodel.NetworkPolicyPeer{{IpBlock: &kubemodel.IPBlock{Cidr: "10.0.0.0/33"}}}}}}, "cidr"},
		{"except outside", &kubemodel.NetworkPolicy{Ingress: []*kubemodel.NetworkPolicyIngressRule{{From: []*kubemodel.NetworkPolicyPeer{{IpBlock: &kubemodel.IPBlock{Cidr: "10.0.0.0/24", Except: []string{"10.0.1.0/25"}}}}}}}, "not strictly inside"},
		{"except equal", &kubemodel.NetworkPolicy{Ingress: []*kubemodel.NetworkPolicyIngressRule{{From: []*kubemodel.NetworkPolicyPeer{{IpBlock: &kubemodel.IPBlock{Cidr: "10.0.0.0/24", Except: []string{"10.0.0.0/24"}}}}}}}, "not strictly inside"},
		{"port range", &kubemodel.NetworkPolicy{Ingress: []*kubemodel.NetworkPolicyIngressRule{{Ports: []*kubemodel.NetworkPolicyPort{{Port: 70000}}}}}, "out of range"},
		{"end port", &kubemodel.NetworkPolicy{Ingress: []*kubemodel.NetworkPolicyIngressRule{{Ports: []*kubemodel.NetworkPolicyPort{{Port: 80, EndPort: 79}}}}}, "endPort 79"},
		{"named end port", &kubemodel.NetworkPolicy{Ingress: []*kubemodel.NetworkPolicyIngressRule{{Ports: []*kubemodel.NetworkPolicyPort{{PortName: "http", EndPort: 90}}}}}, "named port"},
		{"bad port name", &kubemodel.NetworkPolicy{Ingress: []*kubemodel.NetworkPolicyIngressRule{{Ports: []*kubemodel.NetworkPolicyPort{{PortName: "HTTP"}}}}}, "invalid character"},
		{"In without values", &kubemodel.NetworkPolicy{Ingress: []*kubemodel.NetworkPolicyIngressRule{{From: []*kubemodel.NetworkPolicyPeer{{PodSelector: &kubemodel.LabelSelector{MatchExpressions: []*kubemodel.LabelSelectorRequirement{{Key: "a", Operator: "In"}}}}}}}}, "needs values"},
		{"empty peer", &kubemodel.NetworkPolicy{Ingress: []*kubemodel.NetworkPolicyIngressRule{{From: []*kubemodel.NetworkPolicyPeer{{}}}}}, "empty peer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.np.Namespace, tc.np.Name = "x", "bad-"+strconv.Itoa(len(tc.name))
			h.policy(tc.np)
			err := h.p.PolicyErrors()[tc.np.ID()]
			require.Error(t, err)
			assert.ErrorContains(t, err, tc.want)
			var pe *policy.PolicyError
			assert.ErrorAs(t, err, &pe)
			assert.False(t, h.rendered[kubemodel.PodID{Namespace: "x", Name: "a"}].Isolated(), "an invalid policy is ignored")
			h.del(kubemodel.NetworkPolicyResource, kubemodel.NetworkPolicyKey("x", tc.np.Name))
			assert.NotContains(t, h.p.PolicyErrors(), tc.np.ID(), "a deleted policy is no longer reported")
		})
	}
	// The valid ones keep working beside an invalid one.
	h.policy(&kubemodel.NetworkPolicy{Namespace: "x", Name: "bad", PodSelector: &kubemodel.LabelSelector{MatchExpressions: []*kubemodel.LabelSelectorRequirement{{Key: "a", Operator: "Like"}}}})
	h.policy(&kubemodel.NetworkPolicy{Namespace: "x", Name: "deny", PodSelector: &kubemodel.LabelSelector{}})
	assert.True(t, h.rendered[kubemodel.PodID{Namespace: "x", Name: "a"}].Ingress.Isolated)
	st := h.p.Stats()
	assert.Equal(t, 1, st.Policies)
	assert.Equal(t, 1, st.InvalidPolicies)
	h.checkResync()
}

// TestIncrementalEqualsResync applies random changes of pods, labels,
// namespaces and policies; after each, the views rendered incrementally
// equal a full resync's. The seed is logged; SEED=n reproduces a run.
func TestIncrementalEqualsResync(t *testing.T) {
	seed := rand.Uint64()
	if s := os.Getenv("SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (SEED=%d reproduces)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 1))
	h := newHarness(t, "n1")
	nss := []string{"x", "y", "z"}
	vals := []string{"a", "b", "c"}
	randLabels := func() map[string]string {
		m := map[string]string{}
		for _, k := range []string{"app", "tier"} {
			if r.IntN(3) > 0 {
				m[k] = vals[r.IntN(len(vals))]
			}
		}
		return m
	}
	randSel := func() *kubemodel.LabelSelector {
		switch r.IntN(5) {
		case 0:
			return nil
		case 1:
			return &kubemodel.LabelSelector{}
		case 2:
			return &kubemodel.LabelSelector{MatchExpressions: []*kubemodel.LabelSelectorRequirement{{Key: "app", Operator: []string{"In", "NotIn", "Exists", "DoesNotExist"}[r.IntN(4)], Values: []string{vals[r.IntN(3)]}}}}
		}
		return &kubemodel.LabelSelector{MatchLabels: randLabels()}
	}
	fixExprs := func(s *kubemodel.LabelSelector) *kubemodel.LabelSelector {
		for _, e := range s.GetMatchExpressions() {
			if e.Operator == "Exists" || e.Operator == "DoesNotExist" {
				e.Values = nil
			}
		}
		return s
	}
	randPeer := func() *kubemodel.NetworkPolicyPeer {
		if r.IntN(6) == 0 {
			return &kubemodel.NetworkPolicyPeer{IpBlock: &kubemodel.IPBlock{Cidr: "10.1.0.0/16", Except: []string{"10.1." + strconv.Itoa(r.IntN(4)) + ".0/24"}}}
		}
		for {
			p := &kubemodel.NetworkPolicyPeer{PodSelector: fixExprs(randSel()), NamespaceSelector: fixExprs(randSel())}
			if p.PodSelector != nil || p.NamespaceSelector != nil {
				return p
			}
		}
	}
	randPorts := func() []*kubemodel.NetworkPolicyPort {
		var out []*kubemodel.NetworkPolicyPort
		for range r.IntN(3) {
			switch r.IntN(4) {
			case 0:
				out = append(out, &kubemodel.NetworkPolicyPort{PortName: []string{"http", "dns"}[r.IntN(2)], Protocol: kubemodel.Protocol(r.IntN(2))})
			case 1:
				out = append(out, &kubemodel.NetworkPolicyPort{Port: 80, EndPort: 90})
			default:
				out = append(out, &kubemodel.NetworkPolicyPort{Port: int32(80 + r.IntN(3)), Protocol: kubemodel.Protocol(r.IntN(3))})
			}
		}
		return out
	}
	isolated, rules := 0, 0
	for step := range 400 {
		ns := nss[r.IntN(3)]
		name := "p" + strconv.Itoa(r.IntN(12))
		switch r.IntN(6) {
		case 0:
			h.namespace(ns, randLabels())
		case 1, 2:
			node := []string{"n1", "n2"}[r.IntN(2)]
			if old, ok := h.ksd[kubemodel.PodPeerResource][kubemodel.PodPeerKey(ns, name)].(*kubemodel.PodPeer); ok {
				node = old.NodeName // pods do not move
			}
			ip := fmt.Sprintf("10.1.%d.%d", r.IntN(4), 2+r.IntN(20))
			h.pod(ns, name, node, ip, randLabels(), &kubemodel.NamedPort{Name: "http", Port: int32(8000 + r.IntN(3))},
				&kubemodel.NamedPort{Name: "dns", Port: 53, Protocol: kubemodel.Protocol_UDP})
		case 3:
			h.del(kubemodel.PodPeerResource, kubemodel.PodPeerKey(ns, name))
			h.del(kubemodel.PodResource, kubemodel.PodKey(ns, name))
		case 4:
			np := &kubemodel.NetworkPolicy{Namespace: ns, Name: "np" + strconv.Itoa(r.IntN(5)), PodSelector: fixExprs(randSel())}
			if r.IntN(3) == 0 {
				np.PolicyTypes = []kubemodel.PolicyType{kubemodel.PolicyType(r.IntN(2))}
			}
			for range r.IntN(3) {
				var from []*kubemodel.NetworkPolicyPeer
				for range r.IntN(3) {
					from = append(from, randPeer())
				}
				np.Ingress = append(np.Ingress, &kubemodel.NetworkPolicyIngressRule{From: from, Ports: randPorts()})
			}
			for range r.IntN(3) {
				var to []*kubemodel.NetworkPolicyPeer
				for range r.IntN(3) {
					to = append(to, randPeer())
				}
				np.Egress = append(np.Egress, &kubemodel.NetworkPolicyEgressRule{To: to, Ports: randPorts()})
			}
			h.policy(np)
			require.Empty(t, h.p.PolicyErrors(), "step %d: generated policies are valid", step)
		case 5:
			h.del(kubemodel.NetworkPolicyResource, kubemodel.NetworkPolicyKey(ns, "np"+strconv.Itoa(r.IntN(5))))
		}
		h.checkResync()
		for _, v := range h.rendered {
			if v.Isolated() {
				isolated++
			}
			rules += len(v.Ingress.Rules) + len(v.Egress.Rules)
		}
	}
	t.Logf("views isolated %d times, %d rules seen, %d policies recomputed", isolated, rules, h.p.Stats().Recomputed)
	require.NotZero(t, isolated, "the random policies isolate pods")
	require.NotZero(t, rules, "and allow some traffic")
}

func TestPolicyStatuses(t *testing.T) {
	h := newHarness(t, "n1")
	h.pod("x", "a", "n1", "10.1.1.2", labels("app", "a"), &kubemodel.NamedPort{Name: "http", Port: 8080})
	h.pod("x", "b", "n2", "10.1.2.2", labels("app", "b"))
	h.policy(&kubemodel.NetworkPolicy{Namespace: "x", Name: "p", PodSelector: sel("app", "a"),
		Ingress: []*kubemodel.NetworkPolicyIngressRule{{Ports: []*kubemodel.NetworkPolicyPort{{PortName: "http"}, {PortName: "metrics"}}}},
		Egress: []*kubemodel.NetworkPolicyEgressRule{{To: []*kubemodel.NetworkPolicyPeer{{PodSelector: sel("app", "b")}},
			Ports: []*kubemodel.NetworkPolicyPort{{PortName: "grpc"}}}}})
	h.policy(&kubemodel.NetworkPolicy{Namespace: "x", Name: "bad", PodSelector: &kubemodel.LabelSelector{
		MatchExpressions: []*kubemodel.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}})
	st := h.p.PolicyStatuses()
	require.Len(t, st, 2)
	p := st[kubemodel.PolicyID{Namespace: "x", Name: "p"}]
	assert.NoError(t, p.Err)
	assert.Equal(t, 1, p.LocalPods)
	assert.Equal(t, []string{"egress grpc", "ingress metrics"}, p.UnresolvedPorts, "named ports no pod declares are reported, not errors")
	assert.Error(t, st[kubemodel.PolicyID{Namespace: "x", Name: "bad"}].Err)
}

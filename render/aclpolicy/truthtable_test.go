package aclpolicy

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/policy"
	"github.com/vswitchkit/vswitchkit/policy/policytest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// kubeState returns the Kubernetes state an agent's watcher would deliver
// for cluster c: namespaces, policies, every pod's peer record and the
// full records of the pods (each processor keeps those of its node).
func kubeState(c *policytest.Cluster) controller.KubeStateData {
	ksd := controller.NewKubeStateData()
	put := func(res, key string, v proto.Message) {
		if ksd[res] == nil {
			ksd[res] = controller.KeyValuePairs{}
		}
		ksd[res][key] = v
	}
	for _, ns := range c.Namespaces {
		put(kubemodel.NamespaceResource, kubemodel.NamespaceKey(ns.GetName()), ns)
	}
	for _, np := range c.Policies {
		put(kubemodel.NetworkPolicyResource, kubemodel.NetworkPolicyKey(np.GetNamespace(), np.GetName()), np)
	}
	for _, p := range c.Pods {
		put(kubemodel.PodResource, kubemodel.PodKey(p.GetNamespace(), p.GetName()), p)
		if p.GetHostNetwork() || len(p.GetIpAddresses()) == 0 {
			continue
		}
		peer := &kubemodel.PodPeer{Namespace: p.GetNamespace(), Name: p.GetName(), IpAddresses: p.GetIpAddresses(),
			Labels: p.GetLabels(), NodeName: p.GetNodeName()}
		for _, ct := range p.GetContainers() {
			for _, cp := range ct.GetPorts() {
				if cp.GetName() != "" {
					peer.Ports = append(peer.Ports, &kubemodel.NamedPort{Name: cp.GetName(), Protocol: cp.GetProtocol(), Port: cp.GetContainerPort()})
				}
			}
		}
		put(kubemodel.PodPeerResource, kubemodel.PodPeerKey(p.GetNamespace(), p.GetName()), peer)
	}
	return ksd
}

// changes returns the KubeStateChange events that turn old into cur.
func changes(old, cur controller.KubeStateData) []*controller.KubeStateChange {
	var out []*controller.KubeStateChange
	for _, res := range []string{kubemodel.NamespaceResource, kubemodel.PodPeerResource, kubemodel.PodResource, kubemodel.NetworkPolicyResource} {
		for k, v := range cur[res] {
			if o := old[res][k]; o == nil || !proto.Equal(o, v) {
				out = append(out, &controller.KubeStateChange{Resource: res, Key: k, PrevValue: o, NewValue: v})
			}
		}
		for k, o := range old[res] {
			if cur[res][k] == nil {
				out = append(out, &controller.KubeStateChange{Resource: res, Key: k, PrevValue: o})
			}
		}
	}
	return out
}

// agentNode is one node's policy processor and ACL renderer.
type agentNode struct {
	name string
	p    *policy.Processor
	r    *Renderer
}

type ifaceNames struct{}

func (ifaceNames) PodInterface(id kubemodel.PodID) (string, bool) {
	return "pod-" + id.Namespace + "-" + id.Name, true
}

var serviceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/108")}

func newAgentNode(t *testing.T, node policytest.Node) *agentNode {
	p, err := policy.New(policy.Config{NodeName: node.Name})
	require.NoError(t, err)
	var hosts []netip.Prefix
	for _, a := range node.Addrs {
		hosts = append(hosts, netip.PrefixFrom(a, a.BitLen()))
	}
	r, err := New(ifaceNames{}, Config{
		HostPrefixes:    func() []netip.Prefix { return hosts },
		ServicePrefixes: serviceCIDRs,
		ExitInterfaces:  func() []string { return []string{"vxlan-other"} },
	})
	require.NoError(t, err)
	require.NoError(t, p.RegisterRenderer(r))
	return &agentNode{name: node.Name, p: p, r: r}
}

// matrixOf computes the reachability that the nodes' rendered ACLs give,
// packet by packet. A pod's connection to its own address never reaches
// VPP (the pod's kernel answers it), so those cells are not VPP's to
// decide: they are taken from want.
//
// viaService sends every connection to a service address in front of the
// destination pod (translated to the pod's address where VPP translates
// it), so that the checks after translation are the ones that decide.
func matrixOf(c *policytest.Cluster, nodes map[string]*agentNode, want *policytest.Matrix, viaService bool) *policytest.Matrix {
	vips := map[kubemodel.PodID]int{}
	for i, id := range want.Pods() {
		vips[id] = i + 1
	}
	return policytest.NewMatrix(want.Pods(), want.Probes(), func(from, to kubemodel.PodID, pr policytest.Probe) bool {
		if from == to {
			ok, _ := want.Allowed(from, to, pr)
			return ok
		}
		src, okS := endpointOf(c, nodes, from, pr.IPv6)
		dst, okD := endpointOf(c, nodes, to, pr.IPv6)
		if !okS || !okD {
			return false
		}
		sim := map[*agentNode]*simNode{}
		for _, n := range nodes {
			sim[n] = newSimNode(n.r.cur)
		}
		src.node, dst.node = sim[src.agent], sim[dst.agent]
		var vip netip.Addr
		if viaService {
			vip = netip.AddrFrom4([4]byte{10, 96, 0, byte(vips[to])})
			if pr.IPv6 {
				vip = netip.MustParseAddr(fmt.Sprintf("fd00:96::%x", vips[to]))
			}
		}
		return simCluster{tunnel: func(_, _ *simNode) string { return "vxlan-other" }}.
			connect(src.simEndpoint, dst.simEndpoint, vip, ipProto(pr.Protocol), uint16(pr.Port))
	})
}

type ep struct {
	simEndpoint
	agent *agentNode
}

func endpointOf(c *policytest.Cluster, nodes map[string]*agentNode, id kubemodel.PodID, v6 bool) (ep, bool) {
	addr, ok := c.PodAddr(id, v6)
	if !ok {
		return ep{}, false
	}
	n := nodes[c.Pod(id).GetNodeName()]
	iface, _ := ifaceNames{}.PodInterface(id)
	return ep{simEndpoint: simEndpoint{iface: iface, addr: addr}, agent: n}, true
}

// TestTruthTables runs every case of policytest through the policy
// processor (the first stage by a resync, every step incrementally) and
// this renderer on each node of the model, evaluates the rendered ACLs
// packet by packet (request and reply, across nodes through the exit
// interfaces; to the pods' addresses, and again through a service address
// in front of each pod) and compares the reachability with the
// evaluator's.
func TestTruthTables(t *testing.T) {
	for _, dual := range []bool{false, true} {
		opts := policytest.ModelOptions{DualStack: dual}
		for _, cs := range policytest.Cases() {
			t.Run(fmt.Sprintf("%s/dual=%v", cs.Name, dual), func(t *testing.T) {
				c, err := cs.Start(opts)
				require.NoError(t, err)
				want, err := cs.Expect(opts)
				require.NoError(t, err)
				nodes := map[string]*agentNode{}
				for _, n := range c.Nodes {
					nodes[n.Name] = newAgentNode(t, n)
				}
				ksd := kubeState(c)
				for _, n := range nodes {
					require.NoError(t, n.p.Handler().Resync(controller.NewDBResync(), ksd, 1, nil))
				}
				check := func(stage int, what string) {
					t.Helper()
					for _, n := range nodes {
						requireSameState(t, n.r)
					}
					require.Empty(t, policytest.Diff(want[stage], matrixOf(c, nodes, want[stage], false)), "stage %d (%s)", stage, what)
					require.Empty(t, policytest.Diff(want[stage], matrixOf(c, nodes, want[stage], true)), "stage %d (%s) through services", stage, what)
				}
				check(0, "policies added")
				for i, step := range cs.Steps {
					require.NoError(t, step.Apply(c))
					next := kubeState(c)
					for _, ch := range changes(ksd, next) {
						for _, n := range nodes {
							_, err := n.p.Handler().Update(ch, nil)
							require.NoError(t, err)
						}
					}
					ksd = next
					check(i+1, step.String())
				}
			})
		}
	}
}

// requireSameState checks that the renderer's incrementally built state
// means what a fresh build from its pods' policies means: the same rules
// in and out of every interface (the names of shared ACLs depend on the
// order in which pods came).
func requireSameState(t *testing.T, r *Renderer) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var pods []pod
	for _, id := range slices.SortedFunc(maps.Keys(r.views), kubemodel.PodID.Compare) {
		p := pod{view: r.views[id]}
		p.iface, _ = r.pods.PodInterface(id)
		pods = append(pods, p)
	}
	fresh := build(pods, r.env)
	require.Equal(t, len(fresh.attach), len(r.cur.attach), "interfaces with ACLs")
	// rules returns the rules a list applies: a pod's own ACL when it has
	// rules (without the deny of everything that ends it), else the
	// shared ACL's.
	rules := func(st state, names []string) []*vppmodel.ACLRule {
		require.Len(t, names, 2, "a pod's own ACL, then the shared one")
		if own := st.acls[names[0]].GetRules(); len(own) > 0 {
			d := denyAll()
			require.True(t, proto.Equal(&vppmodel.ACL{Rules: d}, &vppmodel.ACL{Rules: own[len(own)-len(d):]}), "%s ends in a deny of everything", names[0])
			return own[:len(own)-len(d)]
		}
		return st.acls[names[1]].GetRules()
	}
	for iface, a := range fresh.attach {
		b := r.cur.attach[iface]
		require.NotNil(t, b, "interface %s", iface)
		if !strings.HasPrefix(iface, "pod-") {
			require.Equal(t, a, b, "exit interface %s", iface)
			continue
		}
		for _, dir := range []struct {
			name string
			x, y []string
		}{{"input", a.Input, b.Input}, {"output", a.Output, b.Output}} {
			x, y := rules(fresh, dir.x), rules(r.cur, dir.y)
			require.True(t, proto.Equal(&vppmodel.ACL{Rules: x}, &vppmodel.ACL{Rules: y}), "%s %s differs from a fresh build", iface, dir.name)
		}
	}
	for name, a := range r.cur.acls {
		require.Equal(t, contentKey(a.GetRules()), r.cur.keys[name], "%s: its key is its rules'", name)
	}
}

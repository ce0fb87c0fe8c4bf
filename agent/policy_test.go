package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd"
	"github.com/vswitchkit/vswitchkit/render/aclpolicy"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// aclsOf returns, from the stand-in, the ACL tags on the output of the
// interface tagged iface (nil without ACLs).
func (n *simNode) aclsOf(iface string) []string {
	snap := n.vpp.Snapshot()
	var idx uint32
	found := false
	for _, i := range snap.Interfaces {
		if i.Tag == "vsk:"+iface {
			idx, found = i.SwIfIndex, true
		}
	}
	if !found {
		return nil
	}
	tags := map[uint32]string{}
	for _, a := range snap.ACLs {
		tags[a.Index] = a.Tag
	}
	for _, l := range snap.ACLInterfaces {
		if l.SwIfIndex == idx {
			var out []string
			for _, a := range l.Output {
				out = append(out, tags[a])
			}
			return out
		}
	}
	return nil
}

func ruleCount(snap vppsim.Snapshot) int {
	n := 0
	for _, a := range snap.ACLs {
		n += len(a.Rules)
	}
	return n
}

// TestNetworkPolicy: the full agent enforces a NetworkPolicy on the VPP
// stand-in: a pod selected by a deny-all-ingress policy gets ACLs on its
// interface, its neighbour without a policy gets none; a policy that
// allows the neighbour changes the ACL's rules; deleting the policies
// removes every ACL. An invalid policy is reported, the rest keeps
// working.
func TestNetworkPolicy(t *testing.T) {
	ctx := context.Background()
	etcd, err := embedetcd.Start(ctx, embedetcd.Config{UnsafeNoFsync: true})
	require.NoError(t, err)
	defer etcd.Close()
	cli, err := etcd.Client()
	require.NoError(t, err)
	defer cli.Close()
	put(t, cli, kubemodel.NodeKey("node-1"), &kubemodel.Node{Name: "node-1"})
	put(t, cli, kubemodel.NamespaceKey("default"), &kubemodel.Namespace{Name: "default", Labels: map[string]string{"kubernetes.io/metadata.name": "default"}})
	n := startNode(t, cli, "node-1")

	// Two pods, as the CNI plugin and the reflector make them.
	pods := map[string]string{}
	for _, name := range []string{"db", "web"} {
		put(t, cli, kubemodel.PodKey("default", name), &kubemodel.Pod{Namespace: "default", Name: name, NodeName: "node-1",
			Labels: map[string]string{"app": name}})
		ip := n.addPod(t, name)
		pods[name] = ip.String()
		put(t, cli, kubemodel.PodPeerKey("default", name), &kubemodel.PodPeer{Namespace: "default", Name: name, NodeName: "node-1",
			IpAddresses: []string{ip.String()}, Labels: map[string]string{"app": name}})
	}
	dbIf, ok := n.agent.PodConn.PodInterface(kubemodel.PodID{Namespace: "default", Name: "db"})
	require.True(t, ok)
	webIf, _ := n.agent.PodConn.PodInterface(kubemodel.PodID{Namespace: "default", Name: "web"})
	require.Empty(t, n.aclsOf(dbIf), "no policy, no ACL")

	put(t, cli, kubemodel.NetworkPolicyKey("default", "db-deny"), &kubemodel.NetworkPolicy{Namespace: "default", Name: "db-deny",
		PodSelector: &kubemodel.LabelSelector{MatchLabels: map[string]string{"app": "db"}}})
	require.Eventually(t, func() bool { return len(n.aclsOf(dbIf)) == 2 }, time.Minute, 10*time.Millisecond, "db isolated: its own ACL and a shared one")
	assert.Empty(t, n.aclsOf(webIf), "web is not selected")
	denyRules := ruleCount(n.vpp.Snapshot())

	put(t, cli, kubemodel.NetworkPolicyKey("default", "db-from-web"), &kubemodel.NetworkPolicy{Namespace: "default", Name: "db-from-web",
		PodSelector: &kubemodel.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		Ingress: []*kubemodel.NetworkPolicyIngressRule{{
			From:  []*kubemodel.NetworkPolicyPeer{{PodSelector: &kubemodel.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
			Ports: []*kubemodel.NetworkPolicyPort{{Port: 5432}},
		}}})
	require.Eventually(t, func() bool { return ruleCount(n.vpp.Snapshot()) > denyRules }, time.Minute, 10*time.Millisecond,
		"the ACL allows web")
	v, ok := n.agent.Policy.PodPolicy(kubemodel.PodID{Namespace: "default", Name: "db"})
	require.True(t, ok)
	require.Len(t, v.Ingress.Rules, 1)
	assert.Equal(t, pods["web"]+"/32 tcp/5432", v.Ingress.Rules[0].String())

	// An invalid policy is reported; the others keep working.
	put(t, cli, kubemodel.NetworkPolicyKey("default", "bad"), &kubemodel.NetworkPolicy{Namespace: "default", Name: "bad",
		Ingress: []*kubemodel.NetworkPolicyIngressRule{{From: []*kubemodel.NetworkPolicyPeer{{IpBlock: &kubemodel.IPBlock{Cidr: "300.0.0.0/8"}}}}}})
	require.Eventually(t, func() bool { return len(n.agent.Policy.PolicyErrors()) == 1 }, time.Minute, 10*time.Millisecond)
	assert.Empty(t, n.aclsOf(webIf), "the invalid policy is ignored")

	for _, name := range []string{"db-deny", "db-from-web", "bad"} {
		_, err := cli.Delete(ctx, kubemodel.EtcdKey("", kubemodel.NetworkPolicyKey("default", name)))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return len(n.vpp.Snapshot().ACLs) == 0 }, time.Minute, 10*time.Millisecond, "every ACL removed")
	st := n.agent.ACLs.Stats()
	assert.Zero(t, st.ACLs)
	assert.Positive(t, st.Writes)
	assert.Equal(t, aclpolicy.Stats{Writes: st.Writes, LastRender: st.LastRender}, st)
}

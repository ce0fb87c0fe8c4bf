package policy_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/policy"
	"github.com/vswitchkit/vswitchkit/policy/policytest"
)

// scaleState is the Kubernetes state of node-1's agent in a synthetic
// cluster: every namespace, policy and peer record, and node-1's pods.
func scaleState(o policytest.ScaleOptions) controller.KubeStateData {
	ksd := controller.NewKubeStateData()
	for _, obj := range policytest.Scale(o) {
		if p, ok := obj.Value.(*kubemodel.Pod); ok && p.GetNodeName() != "node-1" {
			continue
		}
		if ksd[obj.Resource] == nil {
			ksd[obj.Resource] = controller.KeyValuePairs{}
		}
		ksd[obj.Resource][obj.Key] = obj.Value
	}
	return ksd
}

func newScaleProcessor(b testing.TB, ksd controller.KubeStateData) (*policy.Processor, *int) {
	p, err := policy.New(policy.Config{NodeName: "node-1"})
	require.NoError(b, err)
	changed := 0
	require.NoError(b, p.RegisterRenderer(policy.RendererFunc(func(ev policy.RenderEvent) error {
		changed += len(ev.Changes)
		return nil
	})))
	require.NoError(b, p.Handler().Resync(controller.NewDBResync(), ksd, 1, nil))
	return p, &changed
}

// BenchmarkResync: one node's full computation with 5000 nodes' pods
// (150k) as peers and 10k policies in 5000 namespaces.
func BenchmarkResync(b *testing.B) {
	ksd := scaleState(policytest.ScaleOptions{})
	b.ResetTimer()
	for b.Loop() {
		newScaleProcessor(b, ksd)
	}
	b.StopTimer()
	p, _ := newScaleProcessor(b, ksd)
	st := p.Stats()
	b.ReportMetric(float64(st.LocalPods), "local-pods")
	b.ReportMetric(float64(st.Peers), "peers")
	b.ReportMetric(float64(st.Policies), "policies")
}

// BenchmarkPodAdded: a pod of this node is added (its record, as the
// watcher delivers it, then its peer record) and deleted again, with 10k
// policies and 150k peers: the cost of a new pod getting its policy.
func BenchmarkPodAdded(b *testing.B) {
	ksd := scaleState(policytest.ScaleOptions{})
	p, changed := newScaleProcessor(b, ksd)
	h := p.Handler()
	pod := &kubemodel.Pod{Namespace: "ns-7", Name: "new", NodeName: "node-1", IpAddresses: []string{"10.0.1.200"},
		Labels:     map[string]string{"app": "backend"},
		Containers: []*kubemodel.Container{{Name: "c", Ports: []*kubemodel.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}
	peer := &kubemodel.PodPeer{Namespace: "ns-7", Name: "new", NodeName: "node-1", IpAddresses: []string{"10.0.1.200"},
		Labels: pod.Labels, Ports: []*kubemodel.NamedPort{{Name: "http", Port: 8080}}}
	podKey, peerKey := kubemodel.PodKey("ns-7", "new"), kubemodel.PodPeerKey("ns-7", "new")
	b.ResetTimer()
	for b.Loop() {
		for _, ev := range []*controller.KubeStateChange{
			{Resource: kubemodel.PodResource, Key: podKey, NewValue: pod},
			{Resource: kubemodel.PodPeerResource, Key: peerKey, NewValue: peer},
		} {
			if _, err := h.Update(ev, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		for _, ev := range []*controller.KubeStateChange{
			{Resource: kubemodel.PodPeerResource, Key: peerKey, PrevValue: peer},
			{Resource: kubemodel.PodResource, Key: podKey, PrevValue: pod},
		} {
			if _, err := h.Update(ev, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(*changed)/float64(b.N)/2, "views-changed/op")
}

// BenchmarkLabelChange: a pod on another node changes its app label in
// and out of a peer set (app=frontend of its namespace); the local pods
// whose policy uses that set are recomputed.
func BenchmarkLabelChange(b *testing.B) {
	for _, policies := range []int{1, 2} {
		b.Run(fmt.Sprint("policiesPerNamespace=", policies), func(b *testing.B) {
			ksd := scaleState(policytest.ScaleOptions{PoliciesPerNamespace: policies})
			p, changed := newScaleProcessor(b, ksd)
			h := p.Handler()
			// A frontend pod on another node, in the namespace of a backend
			// pod of node-1: the backend's allow-backend policy names it.
			var ns string
			for _, v := range ksd[kubemodel.PodResource] {
				if pod := v.(*kubemodel.Pod); pod.GetLabels()["app"] == "backend" {
					ns = pod.GetNamespace()
					break
				}
			}
			var key string
			var peer *kubemodel.PodPeer
			for k, v := range ksd[kubemodel.PodPeerResource] {
				pp := v.(*kubemodel.PodPeer)
				if pp.GetNamespace() == ns && pp.GetLabels()["app"] == "frontend" && pp.GetNodeName() != "node-1" {
					key, peer = k, pp
					break
				}
			}
			require.NotNil(b, peer)
			moved := &kubemodel.PodPeer{Namespace: peer.Namespace, Name: peer.Name, NodeName: peer.NodeName,
				IpAddresses: peer.IpAddresses, Ports: peer.Ports, Labels: map[string]string{"app": "batch"}}
			*changed = 0
			recomputed := p.Stats().Recomputed
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				prev, next := peer, moved
				if i%2 == 1 {
					prev, next = moved, peer
				}
				if _, err := h.Update(&controller.KubeStateChange{Resource: kubemodel.PodPeerResource, Key: key, PrevValue: prev, NewValue: next}, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(*changed)/float64(b.N), "views-changed/op")
			b.ReportMetric(float64(p.Stats().Recomputed-recomputed)/float64(b.N), "views-recomputed/op")
		})
	}
}

// TestScaleMemory reports the processor's live heap with 150k peers and
// 10k policies (run with -v; skipped with -short).
func TestScaleMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 150k-pod state")
	}
	ksd := scaleState(policytest.ScaleOptions{})
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p, err := policy.New(policy.Config{NodeName: "node-1"})
	require.NoError(t, err)
	require.NoError(t, p.Handler().Resync(controller.NewDBResync(), ksd, 1, nil))
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := p.Stats()
	t.Logf("processor heap %.1f MiB for %d peers, %d policies, %d selectors, %d local pods (isolated %d)",
		float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), st.Peers, st.Policies, st.PeerSelectors, st.LocalPods, st.IsolatedIngress)
	runtime.KeepAlive(ksd)
	runtime.KeepAlive(p)
}

// TestAggregationRatio reports how far aggregation shrinks the peers of a
// rule that allows every pod of the cluster (5000 nodes × 30 pods, each
// node's pods numbered from .2 in its /24, as IPAM hands them out) and of
// the synthetic cluster's own rules: addresses before, prefixes after.
func TestAggregationRatio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 150k-pod state")
	}
	ksd := scaleState(policytest.ScaleOptions{})
	ksd[kubemodel.NetworkPolicyResource][kubemodel.NetworkPolicyKey("ns-0", "from-everywhere")] = &kubemodel.NetworkPolicy{
		Namespace: "ns-0", Name: "from-everywhere", PodSelector: &kubemodel.LabelSelector{},
		Ingress: []*kubemodel.NetworkPolicyIngressRule{{From: []*kubemodel.NetworkPolicyPeer{{NamespaceSelector: &kubemodel.LabelSelector{}}}}},
	}
	p, _ := newScaleProcessor(t, ksd)
	addrs, prefixes := 0, 0
	for _, obj := range ksd[kubemodel.PodResource] {
		pod := obj.(*kubemodel.Pod)
		v, ok := p.PodPolicy(pod.ID())
		require.True(t, ok)
		for _, r := range v.Ingress.Rules {
			prefixes += len(r.Peers)
			for _, pr := range r.Peers {
				addrs += 1 << (32 - pr.Bits())
			}
		}
	}
	t.Logf("node-1's 30 pods: their ingress rules cover %d peer addresses with %d prefixes (%.1fx fewer rules)",
		addrs, prefixes, float64(addrs)/float64(prefixes))
	v, _ := p.PodPolicy(kubemodel.PodID{Namespace: "ns-0", Name: "pod-0"})
	for _, r := range v.Ingress.Rules {
		if !r.AnyPeer && len(r.Peers) > 1000 {
			n := 0
			for _, pr := range r.Peers {
				n += 1 << (32 - pr.Bits())
			}
			t.Logf("the rule from every namespace: %d pods as %d prefixes (%.1fx)", n, len(r.Peers), float64(n)/float64(len(r.Peers)))
			assert.Less(t, len(r.Peers), n/4, "aggregation merges each node's consecutive pod addresses")
		}
	}
}

package aclpolicy

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/policy"
	"github.com/vswitchkit/vswitchkit/policy/policytest"
)

// scaleNode is node-1's processor and renderer in a synthetic cluster of
// 5000 nodes (150k pods, 10k policies in 5000 namespaces).
func scaleNode(b testing.TB) (*policy.Processor, *Renderer) {
	ksd := controller.NewKubeStateData()
	for _, obj := range policytest.Scale(policytest.ScaleOptions{}) {
		if p, ok := obj.Value.(*kubemodel.Pod); ok && p.GetNodeName() != "node-1" {
			continue
		}
		if ksd[obj.Resource] == nil {
			ksd[obj.Resource] = controller.KeyValuePairs{}
		}
		ksd[obj.Resource][obj.Key] = obj.Value
	}
	p, err := policy.New(policy.Config{NodeName: "node-1"})
	require.NoError(b, err)
	r, err := New(ifaceNames{}, Config{ServicePrefixes: serviceCIDRs, ExitInterfaces: func() []string { return []string{"vxlan-2"} }})
	require.NoError(b, err)
	require.NoError(b, p.RegisterRenderer(r))
	require.NoError(b, p.Handler().Resync(controller.NewDBResync(), ksd, 1, controllertest.NewTxn()))
	require.NoError(b, r.Resync(controller.NewDBResync(), ksd, 1, controllertest.NewTxn()))
	return p, r
}

// BenchmarkPodAdded: a pod of this node appears (its record, then its peer
// record) with 10k policies and 150k peers installed: the processor
// computes its policy and the renderer its ACLs; the writes are counted.
// Each op deletes it again untimed.
func BenchmarkPodAdded(b *testing.B) {
	p, _ := scaleNode(b)
	h := p.Handler()
	pod := &kubemodel.Pod{Namespace: "ns-7", Name: "new", NodeName: "node-1", IpAddresses: []string{"10.0.1.200"},
		Labels:     map[string]string{"app": "backend"},
		Containers: []*kubemodel.Container{{Name: "c", Ports: []*kubemodel.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}
	peer := &kubemodel.PodPeer{Namespace: "ns-7", Name: "new", NodeName: "node-1", IpAddresses: []string{"10.0.1.200"},
		Labels: pod.Labels, Ports: []*kubemodel.NamedPort{{Name: "http", Port: 8080}}}
	changes := func(add bool) []*controller.KubeStateChange {
		pk, rk := kubemodel.PodKey("ns-7", "new"), kubemodel.PodPeerKey("ns-7", "new")
		if add {
			return []*controller.KubeStateChange{{Resource: kubemodel.PodResource, Key: pk, NewValue: pod}, {Resource: kubemodel.PodPeerResource, Key: rk, NewValue: peer}}
		}
		return []*controller.KubeStateChange{{Resource: kubemodel.PodPeerResource, Key: rk, PrevValue: peer}, {Resource: kubemodel.PodResource, Key: pk, PrevValue: pod}}
	}
	writes := 0
	b.ResetTimer()
	for b.Loop() {
		txn := controllertest.NewTxn()
		for _, ev := range changes(true) {
			if _, err := h.Update(ev, txn); err != nil {
				b.Fatal(err)
			}
		}
		writes += len(txn.Values())
		b.StopTimer()
		for _, ev := range changes(false) {
			if _, err := h.Update(ev, controllertest.NewTxn()); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
}

// BenchmarkRenderResync: the renderer's whole state for node-1's 30 pods
// from their policies (the processor's resync excluded).
func BenchmarkRenderResync(b *testing.B) {
	p, r := scaleNode(b)
	snap := p.PodPolicies()
	b.ResetTimer()
	for b.Loop() {
		txn := controllertest.NewTxn()
		if err := r.RenderPolicy(policy.RenderEvent{Kind: policy.Resync, Snapshot: snap, ResyncTxn: txn}); err != nil {
			b.Fatal(err)
		}
	}
	st := r.Stats()
	b.ReportMetric(float64(st.ACLs), "acls")
	b.ReportMetric(float64(st.Rules), "rules")
	size := 0
	for _, v := range r.State() {
		size += proto.Size(v)
	}
	b.ReportMetric(float64(size), "bytes")
}

package svccnat

import (
	"fmt"
	"slices"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// String returns "svccnat".
func (r *Renderer) String() string { return "svccnat" }

// HandlesEvent selects resyncs and changes of pods (their hostPorts).
func (r *Renderer) HandlesEvent(ev controller.Event) bool {
	if ch, ok := ev.(*controller.KubeStateChange); ok {
		return ch.Resource == kubemodel.PodResource
	}
	m := ev.Method()
	return m == controller.FullResync || m == controller.UpstreamResync
}

// Resync rebuilds the hostPorts of this node's pods from the Kubernetes
// state and writes every translation the renderer wants (the services'
// too: whichever of the processor's handler and this one comes last
// leaves the whole state in txn).
func (r *Renderer) Resync(_ controller.Event, ksd controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
	w := writer{Res: txn}
	want := map[kubemodel.PodID]*hostPod{}
	for _, v := range ksd[kubemodel.PodResource] {
		if p, ok := v.(*kubemodel.Pod); ok {
			if hp := hostPodOf(p, r.cfg.NodeName); hp != nil {
				want[hp.id] = hp
			}
		}
	}
	// Bring the pods in line without writing, then write the whole state.
	for id := range r.pods {
		if want[id] == nil {
			r.pod(id, nil, writer{})
		}
	}
	for _, id := range sortedHostPods(want) {
		r.pod(id, want[id], writer{})
	}
	for fe, owners := range r.claims.All() {
		t := owners[0].find(fe)
		w.Put(t.key, t.msg)
	}
	r.known = nil
	r.publish()
	return nil
}

// Update renders the hostPorts of a pod that changed.
func (r *Renderer) Update(ev controller.Event, txn controller.UpdateOperations) (string, error) {
	ch, ok := ev.(*controller.KubeStateChange)
	if !ok || ch.Resource != kubemodel.PodResource {
		return "", nil
	}
	r.known = nil
	var id kubemodel.PodID
	var cur *hostPod
	if p, ok := ch.NewValue.(*kubemodel.Pod); ok && p != nil {
		id, cur = p.ID(), hostPodOf(p, r.cfg.NodeName)
	} else if p, ok := ch.PrevValue.(*kubemodel.Pod); ok && p != nil {
		id = p.ID()
	} else if pid, err := kubemodel.ParsePodKey(ch.Key); err == nil {
		id = pid
	} else {
		return "", nil
	}
	old := r.pods[id]
	if (old == nil && cur == nil) || (old != nil && old.pod.equal(cur)) {
		return "", nil
	}
	before := r.cur.Translations
	r.pod(id, cur, writer{Upd: txn})
	r.publish()
	return fmt.Sprintf("hostPorts of pod %s: %d translations (%+d)", id, len(r.pods[id].trsOrNil()), r.cur.Translations-before), nil
}

// Revert does nothing: pod changes are best-effort events, and the
// renderer's record follows what it wrote.
func (r *Renderer) Revert(controller.Event) error { return nil }

func (s *rendered) trsOrNil() []*translation {
	if s == nil {
		return nil
	}
	return s.trs
}

func sortedHostPods(m map[kubemodel.PodID]*hostPod) []kubemodel.PodID {
	out := make([]kubemodel.PodID, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b kubemodel.PodID) int { return cmpOwner(podOwner(a), podOwner(b)) })
	return out
}

package policy

import (
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Handler plugs a [Processor] into a controller event loop as a
// [controller.EventHandler]. Renderers get the loop's transaction in
// [RenderEvent.Txn] / [RenderEvent.ResyncTxn]. Register it after IPAM (a
// new pod's address is then known in its AddPod) and after the pod
// handler, whose keys the renderer's refer to.
//
// Handler is safe for concurrent use (it only forwards to the processor).
type Handler struct{ p *Processor }

var _ controller.EventHandler = (*Handler)(nil)

// Handler returns the event-loop handler of p.
func (p *Processor) Handler() *Handler { return &Handler{p: p} }

// String returns "policy".
func (h *Handler) String() string { return "policy" }

// HandlesEvent selects every resync event, KubeStateChange of pods, pod
// peers, namespaces and network policies, AddPod and DeletePod.
func (h *Handler) HandlesEvent(event controller.Event) bool {
	if event.Method() != controller.Update {
		return true
	}
	switch ev := event.(type) {
	case *controller.KubeStateChange:
		switch ev.Resource {
		case kubemodel.PodResource, kubemodel.PodPeerResource, kubemodel.NamespaceResource, kubemodel.NetworkPolicyResource:
			return true
		}
	case *controller.AddPod, *controller.DeletePod:
		return true
	}
	return false
}

// Resync rebuilds the processor's state from the Kubernetes state and
// gives every renderer the complete snapshot.
func (h *Handler) Resync(_ controller.Event, ksd controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
	return h.p.resync(ksd, txn)
}

// Update applies one change and tells the renderers which local pods'
// policies changed.
func (h *Handler) Update(event controller.Event, txn controller.UpdateOperations) (string, error) {
	return h.p.update(event, txn)
}

// Revert recomputes the pod of a failed AddPod (its address is released
// again) and tells the renderers, without a transaction.
func (h *Handler) Revert(event controller.Event) error {
	ev, ok := event.(*controller.AddPod)
	if !ok {
		return nil
	}
	p := h.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refreshLocal(ev.Pod)
	if ch := p.flush(); len(ch) > 0 {
		return p.render(RenderEvent{Kind: Changed, Changes: ch})
	}
	return nil
}

func (p *Processor) resync(ksd controller.KubeStateData, txn controller.ResyncOperations) error {
	start := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	prevInvalid := p.invalid
	p.reset()
	for key, v := range ksd[kubemodel.NamespaceResource] {
		if ns, ok := v.(*kubemodel.Namespace); ok {
			name := ns.GetName()
			if name == "" {
				name, _ = kubemodel.ParseNamespaceKey(key)
			}
			labels := ns.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			p.namespaces[name] = labels
		}
	}
	for _, v := range ksd[kubemodel.PodPeerResource] {
		if m, ok := v.(*kubemodel.PodPeer); ok && m.GetName() != "" {
			pi := peerInfo(m)
			p.peerRecs[pi.id] = pi
			addTo(p.nsPods, pi.id.Namespace, pi.id)
		}
	}
	for _, v := range ksd[kubemodel.PodResource] {
		if m, ok := v.(*kubemodel.Pod); ok && m.GetName() != "" && p.isLocal(m) {
			pi := p.withIPAMAddrs(localInfo(m))
			p.localRecs[pi.id] = pi
			addTo(p.nsLocals, pi.id.Namespace, pi.id)
			addTo(p.nsPods, pi.id.Namespace, pi.id)
		}
	}
	for _, v := range ksd[kubemodel.NetworkPolicyResource] {
		np, ok := v.(*kubemodel.NetworkPolicy)
		if !ok {
			continue
		}
		pol, err := compilePolicy(np)
		if err != nil {
			p.invalid[np.ID()] = err
			if prev, ok := prevInvalid[np.ID()]; !ok || prev.Error() != err.Error() {
				p.log.Warn("network policy ignored", slog.String("policy", np.ID().String()), slog.Any("error", err))
			}
			continue
		}
		p.install(pol)
	}
	for id := range p.localRecs {
		p.views[id] = p.compute(id)
	}
	err := p.render(RenderEvent{Kind: Resync, Snapshot: p.snapshot(), ResyncTxn: txn})
	p.stats.LastRender = time.Since(start)
	return err
}

func (p *Processor) update(event controller.Event, txn controller.UpdateOperations) (string, error) {
	start := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev := event.(type) {
	case *controller.KubeStateChange:
		if err := p.kubeChange(ev); err != nil {
			return "", err
		}
	case *controller.AddPod:
		p.refreshLocal(ev.Pod)
	case *controller.DeletePod:
		p.refreshLocal(ev.Pod)
	default:
		return "", nil
	}
	changes := p.flush()
	if len(changes) == 0 {
		return "", nil
	}
	err := p.render(RenderEvent{Kind: Changed, Changes: changes, Txn: txn})
	p.stats.LastRender = time.Since(start)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("policies of %d pods changed", len(changes)), nil
}

// refreshLocal re-reads the addresses of a local pod (Config.PodAddrs):
// after an AddPod, a DeletePod or the revert of an AddPod.
func (p *Processor) refreshLocal(id kubemodel.PodID) {
	pi := p.localRecs[id]
	if pi == nil {
		return
	}
	// The record's own addresses stay; Config.PodAddrs fills in while it
	// has none. A changed result changes the peer view of the pod too.
	p.dirty[id] = struct{}{}
	if cur := p.withIPAMAddrs(pi); cur != pi {
		old := p.peer(id)
		p.localRecs[id] = cur
		p.peerChanged(id, old, p.peer(id))
	}
}

// kubeChange applies one Kubernetes state change.
func (p *Processor) kubeChange(ev *controller.KubeStateChange) error {
	switch ev.Resource {
	case kubemodel.NamespaceResource:
		name, err := kubemodel.ParseNamespaceKey(ev.Key)
		if err != nil {
			return controller.NewPermanentError(fmt.Errorf("policy: %w", err))
		}
		ns, _ := ev.NewValue.(*kubemodel.Namespace)
		p.setNamespace(name, ns.GetLabels(), ns != nil)
	case kubemodel.PodPeerResource:
		id, err := kubemodel.ParsePodPeerKey(ev.Key)
		if err != nil {
			return controller.NewPermanentError(fmt.Errorf("policy: %w", err))
		}
		var pi *podInfo
		if m, ok := ev.NewValue.(*kubemodel.PodPeer); ok {
			pi = peerInfo(m)
			pi.id = id
		}
		p.setPeerRecord(id, pi)
	case kubemodel.PodResource:
		id, err := kubemodel.ParsePodKey(ev.Key)
		if err != nil {
			return controller.NewPermanentError(fmt.Errorf("policy: %w", err))
		}
		var pi *podInfo
		if m, ok := ev.NewValue.(*kubemodel.Pod); ok && p.isLocal(m) {
			pi = localInfo(m)
			pi.id = id
			pi = p.withIPAMAddrs(pi) // IPAM's addresses until Kubernetes reports them
		}
		if pi == nil && p.localRecs[id] == nil {
			return nil
		}
		p.setLocalRecord(id, pi)
	case kubemodel.NetworkPolicyResource:
		id, err := kubemodel.ParseNetworkPolicyKey(ev.Key)
		if err != nil {
			return controller.NewPermanentError(fmt.Errorf("policy: %w", err))
		}
		np, _ := ev.NewValue.(*kubemodel.NetworkPolicy)
		if np != nil && np.ID() != id {
			np = cloneWithID(np, id)
		}
		p.setPolicy(id, np)
	}
	return nil
}

// cloneWithID returns a copy of np named id (the key wins over the value).
func cloneWithID(np *kubemodel.NetworkPolicy, id kubemodel.PolicyID) *kubemodel.NetworkPolicy {
	c := proto.Clone(np).(*kubemodel.NetworkPolicy)
	c.Namespace, c.Name = id.Namespace, id.Name
	return c
}

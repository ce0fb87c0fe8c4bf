package svcprocessor

import (
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Handler plugs a [ServiceProcessor] into a controller event loop as a
// [controller.EventHandler]. Renderers get the loop's transaction in
// [RenderEvent.Txn] / [RenderEvent.ResyncTxn].
//
// Handler is safe for concurrent use (it only forwards to the processor).
type Handler struct {
	sp *ServiceProcessor
}

var _ controller.EventHandler = (*Handler)(nil)

// Handler returns the event-loop handler of sp.
func (sp *ServiceProcessor) Handler() *Handler { return &Handler{sp: sp} }

// String returns "svcprocessor".
func (h *Handler) String() string { return "svcprocessor" }

// HandlesEvent selects every resync event, KubeStateChange of services,
// endpoints and nodes, AddPod, DeletePod and node events (see
// [Config.IsNodeEvent]).
func (h *Handler) HandlesEvent(event controller.Event) bool {
	if event.Method() != controller.Update {
		return true
	}
	switch ev := event.(type) {
	case *controller.KubeStateChange:
		switch ev.Resource {
		case kubemodel.ServiceResource, kubemodel.EndpointsResource, kubemodel.NodeResource:
			return true
		}
		return false
	case *controller.AddPod, *controller.DeletePod:
		return true
	}
	return h.sp.cfg.IsNodeEvent(event)
}

// Resync replaces the processor state with kubeStateData
// ([ServiceProcessor.Resync]).
func (h *Handler) Resync(_ controller.Event, kubeStateData controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
	return h.sp.resync(kubeStateData, txn)
}

// Update applies one change ([ServiceProcessor.Update]) and describes it.
func (h *Handler) Update(event controller.Event, txn controller.UpdateOperations) (string, error) {
	return h.sp.update(event, txn)
}

// Revert undoes a failed AddPod ([ServiceProcessor.Revert]).
func (h *Handler) Revert(event controller.Event) error { return h.sp.Revert(event) }

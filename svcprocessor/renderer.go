package svcprocessor

import (
	"fmt"
	"iter"
	"net/netip"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// RenderKind tells what a [RenderEvent] is about.
type RenderKind int

const (
	// ServiceAdded: a service got its combined view (NewService is set).
	ServiceAdded RenderKind = iota + 1
	// ServiceUpdated: the combined view of a service changed (OldService and
	// NewService are set, and differ).
	ServiceUpdated
	// ServiceDeleted: a service lost its combined view (OldService is set).
	ServiceDeleted
	// NodeIPsChanged: the IPs of the cluster nodes, on which NodePort
	// services are exposed, changed (OldNodeIPs, NewNodeIPs). The NodePort
	// services are listed by [ServiceView.NodePortServices].
	NodeIPsChanged
	// FrontendsChanged: the set of local frontend interfaces changed
	// (OldInterfaces, NewInterfaces).
	FrontendsChanged
	// BackendsChanged: the set of local backend interfaces changed
	// (OldInterfaces, NewInterfaces).
	BackendsChanged
	// Resync: Snapshot holds the complete state; the renderer replaces
	// everything it rendered before.
	Resync
)

// String returns the name of the kind.
func (k RenderKind) String() string {
	switch k {
	case ServiceAdded:
		return "ServiceAdded"
	case ServiceUpdated:
		return "ServiceUpdated"
	case ServiceDeleted:
		return "ServiceDeleted"
	case NodeIPsChanged:
		return "NodeIPsChanged"
	case FrontendsChanged:
		return "FrontendsChanged"
	case BackendsChanged:
		return "BackendsChanged"
	case Resync:
		return "Resync"
	}
	return fmt.Sprintf("RenderKind(%d)", int(k))
}

// RenderEvent is one notification to a renderer. Which fields are set
// depends on Kind. Everything it references (services, slices, the
// snapshot) is shared between renderers and must be treated as read-only;
// services and slices may be kept after the call (they are never modified
// by the processor once delivered), Services and the transactions may not.
type RenderEvent struct {
	Kind RenderKind

	// OldService and NewService are set for the service kinds.
	OldService, NewService *ContivService

	// OldNodeIPs and NewNodeIPs are set for NodeIPsChanged: sorted, unique.
	OldNodeIPs, NewNodeIPs []netip.Addr

	// OldInterfaces and NewInterfaces are set for FrontendsChanged and
	// BackendsChanged: sorted interface names.
	OldInterfaces, NewInterfaces []string

	// Snapshot is set for Resync.
	Snapshot *Snapshot

	// Services is a read-only view of the processor state after the change
	// (all services, node IPs, interface sets). Valid only during the call.
	Services ServiceView

	// Txn is the transaction of the controller event being processed when
	// the processor runs under a controller loop through [Handler], for
	// renderers that express their output as desired state. It is nil for
	// Resync, when the processor is called directly, and during Revert.
	// Valid only during the call.
	Txn controller.UpdateOperations

	// ResyncTxn is the resync transaction for Resync under a controller
	// loop; nil otherwise. Valid only during the call.
	ResyncTxn controller.ResyncOperations
}

// ServiceRendererAPI is implemented by renderers: components that turn the
// combined service views into data-plane configuration (NAT mappings, load
// balancer entries, BGP advertisements, ...).
//
// # Contract
//
// Render is called on the goroutine that drives the processor (the event
// loop), with the processor's lock held: calls never overlap, and Render must
// not call methods of the [ServiceProcessor] (use [RenderEvent.Services]
// instead) and must not block on the event loop. The event and everything
// it references are read-only (see [RenderEvent]).
//
// One processor operation may produce several events; they come in this
// order: the service event, NodeIPsChanged, then the interface-set events,
// where an interface moving between the sets appears in its new set before
// it leaves the old one (BackendsChanged before FrontendsChanged when a pod
// becomes a backend, the reverse when it stops being one).
//
// A returned error is reported to the caller of the processor method (joined
// with the errors of other renderers, as [RendererError]); the processor's
// own state keeps the change and the other renderers are still notified. The
// usual remedy is a resync, which the controller loop schedules after a
// failed best-effort event.
type ServiceRendererAPI interface {
	Render(ev RenderEvent) error
}

// RendererFunc adapts a function into a [ServiceRendererAPI].
type RendererFunc func(ev RenderEvent) error

// Render calls f.
func (f RendererFunc) Render(ev RenderEvent) error { return f(ev) }

var _ ServiceRendererAPI = RendererFunc(nil)

// Snapshot is the complete rendered state, given to renderers on resync.
// It is immutable once delivered: safe for concurrent use by readers.
type Snapshot struct {
	// Services are all services with a combined view, sorted by ID.
	Services []*ContivService
	// NodeIPs are the IPs of all nodes (NodePort addresses), sorted, unique.
	NodeIPs []netip.Addr
	// Frontends and Backends are the local interface sets, sorted.
	Frontends, Backends []string
}

// ServiceView gives renderers read-only access to the processor state while
// they are being notified. It is valid only during the Render call that
// received it; it is not safe for concurrent use (it reads the processor
// state under the lock held by the caller of Render). The zero value is an
// empty view.
type ServiceView struct {
	sp *ServiceProcessor
}

// Service returns the combined view of the service id, or nil.
func (v ServiceView) Service(id kubemodel.ServiceID) *ContivService {
	if v.sp == nil {
		return nil
	}
	if s := v.sp.services[id]; s != nil {
		return s.contiv
	}
	return nil
}

// Len returns the number of services with a combined view.
func (v ServiceView) Len() int {
	if v.sp == nil {
		return 0
	}
	return v.sp.numContiv
}

// All yields every service with a combined view, in no particular order.
func (v ServiceView) All() iter.Seq[*ContivService] {
	return func(yield func(*ContivService) bool) {
		if v.sp == nil {
			return
		}
		for _, s := range v.sp.services {
			if s.contiv != nil && !yield(s.contiv) {
				return
			}
		}
	}
}

// NodePortServices yields the services that have at least one node port,
// in no particular order. It costs time proportional to their number only.
func (v ServiceView) NodePortServices() iter.Seq[*ContivService] {
	return func(yield func(*ContivService) bool) {
		if v.sp == nil {
			return
		}
		for id := range v.sp.nodePort {
			if !yield(v.sp.services[id].contiv) {
				return
			}
		}
	}
}

// NodeIPs returns the IPs of all nodes, sorted (read-only).
func (v ServiceView) NodeIPs() []netip.Addr {
	if v.sp == nil {
		return nil
	}
	return v.sp.nodeIPs
}

// Frontends returns the local frontend interfaces, sorted (read-only).
func (v ServiceView) Frontends() []string {
	if v.sp == nil {
		return nil
	}
	return v.sp.frontends.sorted()
}

// Backends returns the local backend interfaces, sorted (read-only).
func (v ServiceView) Backends() []string {
	if v.sp == nil {
		return nil
	}
	return v.sp.backends.sorted()
}

package svcprocessortest

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
)

// Recorder is a renderer that records every [svcprocessor.RenderEvent] it
// receives and maintains the state they add up to: services by ID, node IPs
// and the frontend/backend interface sets. A Resync event replaces that
// state. It is safe for concurrent use; the zero value is ready to use.
type Recorder struct {
	// Fail, if set, is called first for every event; a non-nil result is
	// returned from Render, the event is recorded in Failed and not applied
	// to the state. Set it before the recorder is registered.
	Fail func(ev svcprocessor.RenderEvent) error

	mu        sync.Mutex
	events    []svcprocessor.RenderEvent
	failed    []svcprocessor.RenderEvent
	services  map[kubemodel.ServiceID]*svcprocessor.ContivService
	nodeIPs   []netip.Addr
	frontends []string
	backends  []string
	inconsist []string
}

var _ svcprocessor.ServiceRendererAPI = (*Recorder)(nil)

// Render records ev and applies it to the recorded state.
func (r *Recorder) Render(ev svcprocessor.RenderEvent) error {
	ev.Services, ev.Txn, ev.ResyncTxn = svcprocessor.ServiceView{}, nil, nil
	if r.Fail != nil {
		if err := r.Fail(ev); err != nil {
			r.mu.Lock()
			r.failed = append(r.failed, ev)
			r.mu.Unlock()
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	if r.services == nil {
		r.services = make(map[kubemodel.ServiceID]*svcprocessor.ContivService)
	}
	switch ev.Kind {
	case svcprocessor.ServiceAdded:
		if _, dup := r.services[ev.NewService.ID]; dup {
			r.inconsist = append(r.inconsist, "add of known service "+ev.NewService.ID.String())
		}
		r.services[ev.NewService.ID] = ev.NewService
	case svcprocessor.ServiceUpdated:
		if cur := r.services[ev.OldService.ID]; !cur.Equal(ev.OldService) {
			r.inconsist = append(r.inconsist, "update with stale old value of "+ev.OldService.ID.String())
		}
		r.services[ev.NewService.ID] = ev.NewService
	case svcprocessor.ServiceDeleted:
		if _, ok := r.services[ev.OldService.ID]; !ok {
			r.inconsist = append(r.inconsist, "delete of unknown service "+ev.OldService.ID.String())
		}
		delete(r.services, ev.OldService.ID)
	case svcprocessor.NodeIPsChanged:
		if !slices.Equal(r.nodeIPs, ev.OldNodeIPs) {
			r.inconsist = append(r.inconsist, "node IP change with stale old value")
		}
		r.nodeIPs = ev.NewNodeIPs
	case svcprocessor.FrontendsChanged:
		if !slices.Equal(r.frontends, ev.OldInterfaces) {
			r.inconsist = append(r.inconsist, "frontend change with stale old value")
		}
		r.frontends = ev.NewInterfaces
	case svcprocessor.BackendsChanged:
		if !slices.Equal(r.backends, ev.OldInterfaces) {
			r.inconsist = append(r.inconsist, "backend change with stale old value")
		}
		r.backends = ev.NewInterfaces
	case svcprocessor.Resync:
		clear(r.services)
		for _, s := range ev.Snapshot.Services {
			r.services[s.ID] = s
		}
		r.nodeIPs = ev.Snapshot.NodeIPs
		r.frontends = ev.Snapshot.Frontends
		r.backends = ev.Snapshot.Backends
	}
	return nil
}

// Events returns a copy of the recorded (successful) events, oldest first.
func (r *Recorder) Events() []svcprocessor.RenderEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Kinds returns the kinds of the recorded events, oldest first; nil if none.
func (r *Recorder) Kinds() []svcprocessor.RenderKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []svcprocessor.RenderKind
	for _, ev := range r.events {
		out = append(out, ev.Kind)
	}
	return out
}

// Failed returns a copy of the events for which Fail returned an error.
func (r *Recorder) Failed() []svcprocessor.RenderEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.failed)
}

// Inconsistencies lists notifications that did not fit the recorded state
// (an add of a known service, an update whose old value is not the current
// one, ...). A correct processor produces none.
func (r *Recorder) Inconsistencies() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.inconsist)
}

// Service returns the recorded state of one service, or nil.
func (r *Recorder) Service(id kubemodel.ServiceID) *svcprocessor.ContivService {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.services[id]
}

// State returns the recorded state in the form of a resync snapshot
// (services sorted by ID).
func (r *Recorder) State() *svcprocessor.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	snap := &svcprocessor.Snapshot{
		Services:  make([]*svcprocessor.ContivService, 0, len(r.services)),
		NodeIPs:   r.nodeIPs,
		Frontends: r.frontends,
		Backends:  r.backends,
	}
	for _, s := range r.services {
		snap.Services = append(snap.Services, s)
	}
	slices.SortFunc(snap.Services, func(a, b *svcprocessor.ContivService) int {
		return cmp.Or(strings.Compare(a.ID.Namespace, b.ID.Namespace), strings.Compare(a.ID.Name, b.ID.Name))
	})
	return snap
}

// Reset forgets the recorded events and state.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events, r.failed, r.inconsist = nil, nil, nil
	r.services = nil
	r.nodeIPs, r.frontends, r.backends = nil, nil, nil
}

// ClearEvents forgets the recorded events (successful and failed) but keeps
// the recorded state.
func (r *Recorder) ClearEvents() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events, r.failed = nil, nil
}

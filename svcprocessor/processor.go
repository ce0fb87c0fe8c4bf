package svcprocessor

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Config holds the optional settings of a [ServiceProcessor]. The zero value
// is valid.
type Config struct {
	// Logger receives warnings about skipped malformed input (bad IPs or
	// ports in a service, each once: see [ServiceProcessor.Skipped]) and
	// debug messages. Default: discard.
	Logger *slog.Logger

	// NodeName is the Kubernetes name of this node. Endpoint addresses
	// whose node name equals it are local even outside this node's pod
	// subnet (host-network pods of this node). Default "": only the pod
	// subnet decides.
	NodeName string

	// FrontendInterfaces are VPP interfaces that are always in the frontend
	// set (uplinks, the host interconnect, ...). Default: none.
	FrontendInterfaces []string

	// IsNodeEvent reports whether an event that is not one of the
	// processor's own (KubeStateChange, DBResync, AddPod, DeletePod) may
	// change the node IPs; for such events the processor re-reads
	// [NodeIPs] and notifies renderers of a change. Default: events whose
	// GetName is "Node Update" (the node sync NodeUpdate event).
	// KubeStateChange events of the "node" resource always re-read node IPs.
	IsNodeEvent func(controller.Event) bool
}

// ServiceProcessorAPI is the API of the service processor as the reference
// design documents it, over this module's event types: the reference's
// datasync change and resync events become a controller.Event and the
// Kubernetes state data of a resync. [ServiceProcessor] implements it; code
// that only feeds a processor and registers renderers can depend on this
// interface instead.
type ServiceProcessorAPI interface {
	// Update processes a change event associated with the state data of
	// Kubernetes services, endpoints, nodes and pods (see
	// [ServiceProcessor.Update]). The change is stored into the cache and
	// all registered renderers are notified about any changes related to
	// services.
	Update(event controller.Event) error

	// Resync processes a resync of the Kubernetes state data: the cache
	// content is fully replaced and all registered renderers receive a full
	// snapshot of the services at the present state to be (re)installed.
	Resync(kubeStateData controller.KubeStateData) error

	// RegisterRenderer registers a new service renderer. The renderer will
	// be receiving updates for all services on the cluster.
	RegisterRenderer(renderer ServiceRendererAPI) error
}

var _ ServiceProcessorAPI = (*ServiceProcessor)(nil)

// NodeUpdateEventName is the event name that [Config.IsNodeEvent] matches
// by default.
const NodeUpdateEventName = "Node Update"

// ServiceProcessor pairs Kubernetes services with their endpoints, computes
// one [ContivService] per service and delivers changes to the registered
// renderers. It also keeps the sets of local frontend and backend interfaces.
//
// ServiceProcessor is safe for concurrent use: every method takes its lock.
// Renderers are called with the lock held (see [ServiceRendererAPI]). In an
// application it is driven by one goroutine, the controller event loop,
// through [ServiceProcessor.Handler].
type ServiceProcessor struct {
	subnets PodSubnets
	nodes   NodeIPs
	pods    PodInterfaces
	cfg     Config
	log     *slog.Logger

	mu sync.Mutex
	// Everything below is guarded by mu.
	closed    bool
	renderers []ServiceRendererAPI
	env       env
	services  map[kubemodel.ServiceID]*Service
	numContiv int                              // services with a combined view
	nodePort  map[kubemodel.ServiceID]struct{} // services whose view has a node port
	localEps  map[kubemodel.PodID]*LocalEndpoint
	frontends ifSet
	backends  ifSet
	nodeIPs   []netip.Addr
	// The malformed parts skipped, of the services that have some; their
	// number per reason; the parts reported since New.
	skipped     map[kubemodel.ServiceID][]SkippedError
	skipCounts  [numSkipReasons + 1]int
	skipReports uint64
	// Revert of the AddPod being processed: the pod's endpoint before it
	// (nil if it was not connected).
	revertEv   controller.Event
	revertPrev *LocalEndpoint
}

// New returns a processor that takes pod subnets, node IPs and pod
// interfaces from the given sources (all required). It does no I/O and
// starts no goroutines; the processor is usable at once, holding an empty
// state until the first Resync.
func New(subnets PodSubnets, nodes NodeIPs, pods PodInterfaces, cfg Config) (*ServiceProcessor, error) {
	var errs []error
	if subnets == nil {
		errs = append(errs, errors.New("svcprocessor: PodSubnets source is nil"))
	}
	if nodes == nil {
		errs = append(errs, errors.New("svcprocessor: NodeIPs source is nil"))
	}
	if pods == nil {
		errs = append(errs, errors.New("svcprocessor: PodInterfaces source is nil"))
	}
	for i, name := range cfg.FrontendInterfaces {
		if name == "" {
			errs = append(errs, fmt.Errorf("svcprocessor: Config.FrontendInterfaces[%d] is empty", i))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg.FrontendInterfaces = slices.Clone(cfg.FrontendInterfaces)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.IsNodeEvent == nil {
		cfg.IsNodeEvent = func(ev controller.Event) bool { return ev.GetName() == NodeUpdateEventName }
	}
	sp := &ServiceProcessor{
		subnets:  subnets,
		nodes:    nodes,
		pods:     pods,
		cfg:      cfg,
		log:      cfg.Logger.With(slog.String("component", "svcprocessor")),
		services: make(map[kubemodel.ServiceID]*Service),
		nodePort: make(map[kubemodel.ServiceID]struct{}),
		localEps: make(map[kubemodel.PodID]*LocalEndpoint),
		skipped:  make(map[kubemodel.ServiceID][]SkippedError),
	}
	for _, name := range cfg.FrontendInterfaces {
		sp.frontends.add(name)
	}
	return sp, nil
}

// RegisterRenderer registers a new service renderer. The renderer will be
// receiving updates for all services on the cluster, in registration order
// with the other renderers. Register renderers before the first Resync; a
// renderer registered later immediately receives a Resync with the current
// state, and its error is returned (the renderer stays registered).
func (sp *ServiceProcessor) RegisterRenderer(renderer ServiceRendererAPI) error {
	if renderer == nil {
		return ErrNilRenderer
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		return ErrClosed
	}
	sp.renderers = append(sp.renderers, renderer)
	if len(sp.services) == 0 && len(sp.nodeIPs) == 0 && len(sp.localEps) == 0 {
		return nil
	}
	ev := RenderEvent{Kind: Resync, Snapshot: sp.snapshot(), Services: ServiceView{sp}}
	if err := renderer.Render(ev); err != nil {
		return &RendererError{Index: len(sp.renderers) - 1, Kind: Resync, Err: err}
	}
	return nil
}

// Close deallocates resources held by the processor. Afterwards every
// method returns [ErrClosed]. Close is idempotent.
func (sp *ServiceProcessor) Close() error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.closed = true
	sp.renderers = nil
	sp.services = nil
	sp.nodePort = nil
	sp.localEps = nil
	sp.frontends = ifSet{}
	sp.backends = ifSet{}
	sp.nodeIPs = nil
	sp.numContiv = 0
	sp.skipped = nil
	sp.skipCounts = [numSkipReasons + 1]int{}
	return nil
}

// Resync processes a resync event. The cache content is fully replaced and
// all registered renderers receive a full snapshot of the services at the
// present state to be (re)installed. Values of an unexpected type, and
// services or endpoints without namespace/name, make Resync fail with
// [ErrUnexpectedValue] before any state is changed. A service or endpoints
// value under a key that does not follow the key scheme or names another
// service is skipped: the rest is applied and Resync returns one
// [controller.KeyError] per skipped key (joined), each wrapping
// ErrUnexpectedValue.
func (sp *ServiceProcessor) Resync(kubeStateData controller.KubeStateData) error {
	return sp.resync(kubeStateData, nil)
}

// Update processes an incremental event:
//   - KubeStateChange of the "service" and "endpoints" resources (other
//     resources are ignored, except "node", which re-reads node IPs). The
//     key names the service; a value of the wrong type, a key that does
//     not follow the key scheme, or a value that names another service
//     (namespace/name) is rejected: nothing changes and Update returns a
//     [controller.KeyError] for the key wrapping [ErrUnexpectedValue];
//   - AddPod and DeletePod (as ProcessNewPod and ProcessDeletingPod);
//   - node events as selected by [Config.IsNodeEvent].
//
// Other events are ignored. The work done is proportional to the size of the
// changed service, not to the number of services.
func (sp *ServiceProcessor) Update(event controller.Event) error {
	_, err := sp.update(event, nil)
	return err
}

// Revert is called for a failed AddPod event: it undoes ProcessNewPod. A
// pod that was connected before the event (an AddPod of a new sandbox of a
// running pod) stays connected as it was. For other events it does
// nothing.
func (sp *ServiceProcessor) Revert(event controller.Event) error {
	ev, ok := event.(*controller.AddPod)
	if !ok {
		return nil
	}
	sp.mu.Lock()
	prev := sp.revertPrev
	if sp.revertEv != event {
		prev = nil
	}
	sp.revertEv, sp.revertPrev = nil, nil
	if prev != nil {
		if ep := sp.localEps[ev.Pod]; ep != nil && ep.ifName == prev.ifName {
			ep.sandbox = prev.sandbox
			sp.mu.Unlock()
			return nil
		}
	}
	sp.mu.Unlock()
	return sp.ProcessDeletingPod(ev.Pod.Namespace, ev.Pod.Name)
}

// ProcessNewPod is called when connectivity to a pod is being established:
// the pod's VPP interface joins the backend set if the pod is already a
// backend of some service (also when its endpoints arrived first), else the
// frontend set. It fails with [ErrPodNotConnected] if [PodInterfaces] does
// not know the pod.
func (sp *ServiceProcessor) ProcessNewPod(podNamespace string, podName string) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		return ErrClosed
	}
	var o op
	sp.begin(&o, nil)
	if err := sp.processNewPod(kubemodel.PodID{Namespace: podNamespace, Name: podName}, ""); err != nil {
		return err
	}
	return sp.finish(&o)
}

// ProcessDeletingPod is called during pod removal: the pod's interface
// leaves the frontend or backend set. Unknown pods are ignored. (The
// DeletePod event carries the sandbox: through Update, a DeletePod of a
// sandbox that no longer holds the pod, replaced by a newer AddPod, leaves
// the pod connected.)
func (sp *ServiceProcessor) ProcessDeletingPod(podNamespace string, podName string) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		return ErrClosed
	}
	var o op
	sp.begin(&o, nil)
	sp.processDeletingPod(kubemodel.PodID{Namespace: podNamespace, Name: podName}, "")
	return sp.finish(&o)
}

// Service returns the current combined view of service id, or nil.
func (sp *ServiceProcessor) Service(id kubemodel.ServiceID) *ContivService {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return ServiceView{sp}.Service(id)
}

// LocalEndpoint returns what the processor knows about a local pod.
func (sp *ServiceProcessor) LocalEndpoint(pod kubemodel.PodID) (LocalEndpoint, bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if ep := sp.localEps[pod]; ep != nil {
		return *ep, true
	}
	return LocalEndpoint{}, false
}

// Snapshot returns the complete current state, as renderers get it on
// resync. It costs time proportional to the number of services.
func (sp *ServiceProcessor) Snapshot() *Snapshot {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.snapshot()
}

func (sp *ServiceProcessor) snapshot() *Snapshot {
	snap := &Snapshot{
		Services:  make([]*ContivService, 0, sp.numContiv),
		NodeIPs:   sp.nodeIPs,
		Frontends: sp.frontends.sorted(),
		Backends:  sp.backends.sorted(),
	}
	for _, s := range sp.services {
		if s.contiv != nil {
			snap.Services = append(snap.Services, s.contiv)
		}
	}
	slices.SortFunc(snap.Services, func(a, b *ContivService) int {
		return cmp.Or(strings.Compare(a.ID.Namespace, b.ID.Namespace), strings.Compare(a.ID.Name, b.ID.Name))
	})
	return snap
}

// op collects the notifications of one processor operation.
type op struct {
	txn              controller.UpdateOperations
	oldFront         []string
	oldBack          []string
	svc              RenderEvent // Kind 0 = none
	oldNode, newNode []netip.Addr
	nodeChanged      bool
	desc             string
}

func (sp *ServiceProcessor) captureEnv() { sp.env = sp.currentEnv() }

// currentEnv reads the sources; it touches no guarded state.
func (sp *ServiceProcessor) currentEnv() env {
	return env{
		thisNode: sp.subnets.PodSubnetThisNode().Masked(),
		allNodes: sp.subnets.PodSubnetAllNodes().Masked(),
		nodeName: sp.cfg.NodeName,
		log:      sp.log,
	}
}

func (sp *ServiceProcessor) begin(o *op, txn controller.UpdateOperations) {
	sp.captureEnv()
	o.txn = txn
	o.oldFront = sp.frontends.sorted()
	o.oldBack = sp.backends.sorted()
}

// finish notifies every renderer of everything o collected.
func (sp *ServiceProcessor) finish(o *op) error {
	if len(sp.renderers) == 0 {
		// Keep the cached sorted sets fresh only when somebody reads them.
		return nil
	}
	var errs []error
	view := ServiceView{sp}
	if o.svc.Kind != 0 {
		o.svc.Services, o.svc.Txn = view, o.txn
		errs = sp.notify(errs, o.svc)
	}
	if o.nodeChanged {
		errs = sp.notify(errs, RenderEvent{Kind: NodeIPsChanged, OldNodeIPs: o.oldNode, NewNodeIPs: o.newNode, Services: view, Txn: o.txn})
	}
	nf, nb := sp.frontends.sorted(), sp.backends.sorted()
	frontChanged := !slices.Equal(nf, o.oldFront)
	backChanged := !slices.Equal(nb, o.oldBack)
	// An interface moving between the sets shows up in its new set before
	// it leaves the old one: new backends first, else frontends first.
	if backChanged && !subsetSorted(nb, o.oldBack) {
		errs = sp.notify(errs, RenderEvent{Kind: BackendsChanged, OldInterfaces: o.oldBack, NewInterfaces: nb, Services: view, Txn: o.txn})
		backChanged = false
	}
	if frontChanged {
		errs = sp.notify(errs, RenderEvent{Kind: FrontendsChanged, OldInterfaces: o.oldFront, NewInterfaces: nf, Services: view, Txn: o.txn})
	}
	if backChanged {
		errs = sp.notify(errs, RenderEvent{Kind: BackendsChanged, OldInterfaces: o.oldBack, NewInterfaces: nb, Services: view, Txn: o.txn})
	}
	return errors.Join(errs...)
}

// subsetSorted reports whether every element of a is in b (both sorted).
func subsetSorted(a, b []string) bool {
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j == len(b) || b[j] != x {
			return false
		}
		j++
	}
	return true
}

func (sp *ServiceProcessor) notify(errs []error, ev RenderEvent) []error {
	for i, r := range sp.renderers {
		if err := r.Render(ev); err != nil {
			errs = append(errs, &RendererError{Index: i, Kind: ev.Kind, Err: err})
		}
	}
	return errs
}

func (sp *ServiceProcessor) update(event controller.Event, txn controller.UpdateOperations) (string, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		return "", ErrClosed
	}
	var o op
	sp.begin(&o, txn)
	switch ev := event.(type) {
	case *controller.KubeStateChange:
		switch ev.Resource {
		case kubemodel.ServiceResource:
			id, meta, err := serviceObjectChange[*kubemodel.Service](ev, kubemodel.ServiceKeyPrefix)
			if err != nil {
				return "", err
			}
			sp.changeService(&o, id, true, meta, false, nil)
		case kubemodel.EndpointsResource:
			id, eps, err := serviceObjectChange[*kubemodel.Endpoints](ev, kubemodel.EndpointsKeyPrefix)
			if err != nil {
				return "", err
			}
			sp.changeService(&o, id, false, nil, true, eps)
		case kubemodel.NodeResource:
			sp.refreshNodeIPs(&o)
		default:
			return "", nil
		}
	case *controller.AddPod:
		sp.revertEv, sp.revertPrev = ev, nil
		if ep := sp.localEps[ev.Pod]; ep != nil && ep.ifName != "" {
			prev := *ep
			sp.revertPrev = &prev
		}
		if err := sp.processNewPod(ev.Pod, ev.ContainerID); err != nil {
			return "", err
		}
		o.desc = "pod connected"
	case *controller.DeletePod:
		if !sp.processDeletingPod(ev.Pod, ev.ContainerID) {
			return "kept pod " + ev.Pod.String() + ": connected by another sandbox than " + ev.ContainerID, nil
		}
		o.desc = "pod disconnected"
	default:
		if event == nil || !sp.cfg.IsNodeEvent(event) {
			return "", nil
		}
		sp.refreshNodeIPs(&o)
	}
	if o.nodeChanged {
		o.desc = "node IPs changed"
	}
	return o.desc, sp.finish(&o)
}

// serviceObject is a Kubernetes object that names a service: the service
// itself or its endpoints. Their protobuf getters are nil-safe.
type serviceObject interface {
	*kubemodel.Service | *kubemodel.Endpoints
	GetName() string
	GetNamespace() string
	ID() kubemodel.ServiceID
}

// serviceObjectChange extracts the service ID and the new value of a change
// of a service or endpoints object. The key names the service (after
// keyPrefix); a new value of the wrong type, or one that names another
// service, is bad input for that key (see badKey).
func serviceObjectChange[T serviceObject](ev *controller.KubeStateChange, keyPrefix string) (kubemodel.ServiceID, T, error) {
	var cur T
	if ev.NewValue != nil {
		v, ok := ev.NewValue.(T)
		if !ok {
			return kubemodel.ServiceID{}, cur, badKey(ev.Key, fmt.Errorf("want %T, got %T", cur, ev.NewValue))
		}
		cur = v
	}
	id, err := idFromKey(ev.Key, keyPrefix)
	if err != nil {
		return kubemodel.ServiceID{}, cur, badKey(ev.Key, err)
	}
	if ev.NewValue != nil {
		if err := checkNames(id, cur.GetNamespace(), cur.GetName()); err != nil {
			return kubemodel.ServiceID{}, cur, badKey(ev.Key, err)
		}
	}
	return id, cur, nil
}

// idFromKey parses a service or endpoints key; anything before the
// kubemodel prefix (an application's key prefix) is ignored.
func idFromKey(key, prefix string) (kubemodel.ServiceID, error) {
	i := strings.Index(key, prefix)
	if i < 0 {
		return kubemodel.ServiceID{}, fmt.Errorf("key has no %q segment", prefix)
	}
	ns, name, err := kubemodel.Resource{KeyPrefix: prefix, Namespaced: true}.ParseKey(key[i:])
	if err != nil {
		return kubemodel.ServiceID{}, err
	}
	return kubemodel.ServiceID{Namespace: ns, Name: name}, nil
}

// checkNames fails when a value names (with a non-empty namespace or name)
// another service than id, the one its key names. A value that names none
// belongs to id.
func checkNames(id kubemodel.ServiceID, namespace, name string) error {
	if (namespace == "" && name == "") || (namespace == id.Namespace && name == id.Name) {
		return nil
	}
	return fmt.Errorf("the key names %s but the value names %s/%s", id, namespace, name)
}

// badKey reports bad input for one key of the Kubernetes state: a
// [controller.KeyError] for the key, wrapping [ErrUnexpectedValue]. The
// event loop records it and reports the key as rejected until a change of
// that key is accepted; it does not heal it (a resync would find the same
// value).
func badKey(key string, err error) error {
	return &controller.KeyError{Key: key, Err: fmt.Errorf("%w: %w", ErrUnexpectedValue, err)}
}

// changeService applies new metadata and/or endpoints to one service and
// records the resulting notification in o.
func (sp *ServiceProcessor) changeService(o *op, id kubemodel.ServiceID, setMeta bool, meta *kubemodel.Service, setEps bool, eps *kubemodel.Endpoints) {
	s := sp.services[id]
	if s == nil {
		if (!setMeta || meta == nil) && (!setEps || eps == nil) {
			return
		}
		s = &Service{sp: sp, id: id}
		sp.services[id] = s
	}
	old, oldLocal := s.contiv, s.localBackends
	if setMeta {
		s.meta = meta
	}
	if setEps {
		s.eps = eps
	}
	sp.noteSkipped(sp.skipped[id], s.refresh(&sp.env))
	if s.meta == nil && s.eps == nil {
		delete(sp.services, id)
	}
	sp.account(id, old, s.contiv)
	sp.diffLocalBackends(oldLocal, s.localBackends)

	switch {
	case old == nil && s.contiv != nil:
		o.svc = RenderEvent{Kind: ServiceAdded, NewService: s.contiv}
		o.desc = "service added"
	case old != nil && s.contiv == nil:
		o.svc = RenderEvent{Kind: ServiceDeleted, OldService: old}
		o.desc = "service deleted"
	case old != nil && !old.Equal(s.contiv):
		o.svc = RenderEvent{Kind: ServiceUpdated, OldService: old, NewService: s.contiv}
		o.desc = "service updated"
	case old != nil:
		// Nothing visible changed: keep the published value so that
		// renderers and readers see one pointer per state.
		s.contiv = old
	}
}

// account keeps numContiv and the node-port index in step with one service.
func (sp *ServiceProcessor) account(id kubemodel.ServiceID, old, cur *ContivService) {
	if old != nil {
		sp.numContiv--
	}
	if cur != nil {
		sp.numContiv++
	}
	if cur.HasNodePort() {
		sp.nodePort[id] = struct{}{}
	} else if old.HasNodePort() {
		delete(sp.nodePort, id)
	}
}

// diffLocalBackends walks two sorted pod lists and adjusts service counts.
func (sp *ServiceProcessor) diffLocalBackends(old, cur []kubemodel.PodID) {
	i, j := 0, 0
	for i < len(old) || j < len(cur) {
		switch {
		case j == len(cur):
			sp.decBackend(old[i])
			i++
		case i == len(old):
			sp.incBackend(cur[j])
			j++
		default:
			switch c := comparePodID(old[i], cur[j]); {
			case c == 0:
				i++
				j++
			case c < 0:
				sp.decBackend(old[i])
				i++
			default:
				sp.incBackend(cur[j])
				j++
			}
		}
	}
}

func (sp *ServiceProcessor) incBackend(pod kubemodel.PodID) {
	ep := sp.localEps[pod]
	if ep == nil {
		ep = &LocalEndpoint{}
		sp.localEps[pod] = ep
	}
	ep.svcCount++
	if ep.svcCount == 1 && ep.ifName != "" {
		sp.frontends.remove(ep.ifName)
		sp.backends.add(ep.ifName)
	}
}

func (sp *ServiceProcessor) decBackend(pod kubemodel.PodID) {
	ep := sp.localEps[pod]
	if ep == nil || ep.svcCount == 0 {
		return // cannot happen: counts follow the services' local backends
	}
	ep.svcCount--
	if ep.svcCount > 0 {
		return
	}
	if ep.ifName == "" {
		delete(sp.localEps, pod)
		return
	}
	sp.backends.remove(ep.ifName)
	sp.addFrontend(ep.ifName)
}

func (sp *ServiceProcessor) addFrontend(name string) { sp.frontends.add(name) }

// removeIf removes a pod interface from both sets, keeping static frontends.
func (sp *ServiceProcessor) removeIf(name string) {
	sp.backends.remove(name)
	if !slices.Contains(sp.cfg.FrontendInterfaces, name) {
		sp.frontends.remove(name)
	}
}

// processNewPod connects pod; sandbox is the container ID of the AddPod
// ("" unknown), the holder that a later DeletePod must name.
func (sp *ServiceProcessor) processNewPod(pod kubemodel.PodID, sandbox string) error {
	ifName, ok := sp.pods.PodInterface(pod)
	if !ok || ifName == "" {
		return fmt.Errorf("process new pod %s: %w", pod, ErrPodNotConnected)
	}
	ep := sp.localEps[pod]
	if ep == nil {
		ep = &LocalEndpoint{}
		sp.localEps[pod] = ep
	}
	if ep.ifName != "" && ep.ifName != ifName {
		sp.removeIf(ep.ifName)
	}
	ep.ifName = ifName
	if sandbox != "" {
		ep.sandbox = sandbox
	}
	if ep.svcCount > 0 {
		sp.frontends.remove(ifName)
		sp.backends.add(ifName)
	} else {
		sp.addFrontend(ifName)
	}
	return nil
}

// processDeletingPod disconnects pod unless sandbox (a DeletePod's
// container ID) names another sandbox than the one that connected it (both
// known): then the DeletePod is late, for a sandbox that a newer AddPod
// replaced, and false is returned.
func (sp *ServiceProcessor) processDeletingPod(pod kubemodel.PodID, sandbox string) bool {
	ep := sp.localEps[pod]
	if ep == nil {
		return true
	}
	if sandbox != "" && ep.sandbox != "" && sandbox != ep.sandbox {
		return false
	}
	ep.sandbox = ""
	if ep.ifName != "" {
		sp.removeIf(ep.ifName)
		ep.ifName = ""
	}
	if ep.svcCount == 0 {
		delete(sp.localEps, pod)
	}
	return true
}

// readNodeIPs returns the node IPs from the source, sorted and unique.
func (sp *ServiceProcessor) readNodeIPs() []netip.Addr {
	src := sp.nodes.NodeIPs()
	out := make([]netip.Addr, 0, len(src))
	for _, a := range src {
		if a.IsValid() {
			out = append(out, a.Unmap())
		}
	}
	out = sortUniqueAddrs(out)
	if len(out) == 0 {
		return nil
	}
	return out
}

func (sp *ServiceProcessor) refreshNodeIPs(o *op) {
	cur := sp.readNodeIPs()
	if slices.Equal(cur, sp.nodeIPs) {
		return
	}
	o.oldNode, o.newNode, o.nodeChanged = sp.nodeIPs, cur, true
	sp.nodeIPs = cur
}

func (sp *ServiceProcessor) resync(ksd controller.KubeStateData, txn controller.ResyncOperations) error {
	data, skipped, err := parseResyncEventData(ksd, false)
	if err != nil {
		return err
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		return ErrClosed
	}
	sp.captureEnv()

	// All entries come from one slab: one allocation instead of one per service.
	slab := make([]Service, 0, len(data.Services)+len(data.Endpoints))
	services := make(map[kubemodel.ServiceID]*Service, max(len(data.Services), len(data.Endpoints)))
	entry := func(id kubemodel.ServiceID) *Service {
		s := services[id]
		if s == nil {
			slab = append(slab, Service{sp: sp, id: id})
			s = &slab[len(slab)-1]
			services[id] = s
		}
		return s
	}
	for _, m := range data.Services {
		entry(m.ID()).meta = m
	}
	for _, e := range data.Endpoints {
		entry(e.ID()).eps = e
	}

	localEps := make(map[kubemodel.PodID]*LocalEndpoint)
	connect := func(pod kubemodel.PodID) {
		if _, seen := localEps[pod]; seen {
			return
		}
		if ifName, ok := sp.pods.PodInterface(pod); ok && ifName != "" {
			localEps[pod] = &LocalEndpoint{ifName: ifName}
		}
	}
	for _, pod := range data.Pods {
		connect(pod)
	}
	for pod, ep := range sp.localEps {
		if ep.ifName != "" {
			connect(pod)
		}
	}

	numContiv := 0
	nodePort := make(map[kubemodel.ServiceID]struct{})
	// Skipped parts: those of services that are gone are dropped; the
	// others are reported when they are new.
	for id, old := range sp.skipped {
		if services[id] == nil {
			sp.noteSkipped(old, nil)
		}
	}
	for id, s := range services {
		sp.noteSkipped(sp.skipped[id], s.refresh(&sp.env))
		if s.contiv != nil {
			numContiv++
			if s.contiv.HasNodePort() {
				nodePort[id] = struct{}{}
			}
		}
		for _, pod := range s.localBackends {
			ep := localEps[pod]
			if ep == nil {
				ep = &LocalEndpoint{}
				localEps[pod] = ep
			}
			ep.svcCount++
		}
	}
	var front, back ifSet
	for _, name := range sp.cfg.FrontendInterfaces {
		front.add(name)
	}
	for _, ep := range localEps {
		switch {
		case ep.ifName == "":
		case ep.svcCount > 0:
			back.add(ep.ifName)
		default:
			front.add(ep.ifName)
		}
	}

	sp.services, sp.numContiv, sp.nodePort, sp.localEps = services, numContiv, nodePort, localEps
	sp.frontends, sp.backends = front, back
	sp.nodeIPs = sp.readNodeIPs()

	if len(sp.renderers) == 0 {
		return errors.Join(skipped...)
	}
	ev := RenderEvent{Kind: Resync, Snapshot: sp.snapshot(), Services: ServiceView{sp}, ResyncTxn: txn}
	return errors.Join(sp.notify(skipped, ev)...)
}

package podconn

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// IPAM is the part of the IPAM API the handler uses (*ipam.IPAM satisfies
// it): the address IPAM allocated to a pod (register IPAM's handler before
// this one, so that it has allocated it when AddPod reaches this handler)
// and the pod gateway. It is called on the event loop goroutine.
type IPAM interface {
	PodAddr(pod kubemodel.PodID) (netip.Addr, bool)
	PodGatewayAddr() netip.Addr
}

// Attachments lists the pods attached to this node: the requests of the
// AddPod events that connected them, as the pod server records them
// durably. PodAttachments is called from Resync, on the event loop
// goroutine; the slice is the caller's. A record whose InterfaceType is
// podiface.Default is given the type the annotation or Config chooses
// now: records should hold the type the pod was connected with.
type Attachments interface {
	PodAttachments() ([]podiface.Attachment, error)
}

// AttachmentsFunc adapts a function into [Attachments].
type AttachmentsFunc func() ([]podiface.Attachment, error)

// PodAttachments calls f.
func (f AttachmentsFunc) PodAttachments() ([]podiface.Attachment, error) { return f() }

var _ Attachments = AttachmentsFunc(nil)

// Errors of AddPod.
var (
	// ErrNoPodIP: IPAM has no address for the pod (its handler must run
	// before this one).
	ErrNoPodIP = errors.New("podconn: IPAM has no address for the pod")
	// ErrNoGateway: IPAM does not know the pod gateway yet (no pod subnet).
	ErrNoGateway = errors.New("podconn: IPAM has no pod gateway")
	// ErrBadRequest: the AddPod cannot be served as it is (e.g. af_packet
	// without the host end of a veth pair, tap without a network
	// namespace, an [AnnotationError]).
	ErrBadRequest = errors.New("podconn: bad AddPod request")
)

// AnnotationError reports a pod whose podiface.TypeAnnotation holds a
// value that is not an interface type. A pod that asked for what cannot be
// given is not given something else: [Handler.InterfaceTypeOf] and the
// pod's AddPod (without an InterfaceType of its own) fail with it until
// the annotation is fixed. It matches [ErrBadRequest] (errors.Is).
type AnnotationError struct {
	// Pod is the annotated pod.
	Pod kubemodel.PodID
	// Value is the annotation's value.
	Value string
}

func (e *AnnotationError) Error() string {
	return fmt.Sprintf("podconn: pod %s: annotation %s=%q is not an interface type (want tap, af_packet or memif)",
		e.Pod, podiface.TypeAnnotation, e.Value)
}

// Unwrap returns ErrBadRequest.
func (e *AnnotationError) Unwrap() error { return ErrBadRequest }

// Handler is the pod connectivity event handler: it connects pods to VPP
// (AddPod), disconnects them (DeletePod) and rebuilds them on resyncs,
// putting vppdriver/vppmodel values into the loop's transaction. It also
// tells the service processor which VPP interface connects a pod
// ([Handler.PodInterface], svcprocessor.PodInterfaces). See the package
// documentation.
//
// Handler is safe for concurrent use: its controller.EventHandler methods
// run on the event loop goroutine; PodInterface and Pods may be called
// from any goroutine.
type Handler struct {
	ipam IPAM
	cfg  Config
	log  *slog.Logger

	mu          sync.Mutex // guards the fields below
	pods        map[kubemodel.PodID]*pod
	annotations map[kubemodel.PodID]podiface.Type // pods with the type annotation
	badTypes    map[kubemodel.PodID]string        // pods whose annotation is no type: the value
	gw          gateways                          // the gateways the loopback was put with
	resynced    bool                              // a Resync knew the gateway and the pods
	// Revert of the AddPod being processed.
	revertEv  controller.Event
	revertOld *pod // nil: the pod was not attached before
	revertGW  gateways
	revertN   int // len(ev.Interfaces) before this handler appended
	revertR   int // len(ev.Routes) before
}

// pod is one attached pod: its attachment (type resolved, IfName set) and
// the values put for it.
type pod struct {
	att    podiface.Attachment
	name   string // logical name of its VPP interface
	values controller.KeyValuePairs
	iface  podiface.Interface
	routes []podiface.Route
}

// gateways are the pod gateways: the IPAM's, and with Config.DualStack
// the second family's (invalid otherwise).
type gateways [2]netip.Addr

func (g gateways) valid() bool { return g[0].IsValid() }

var _ controller.EventHandler = (*Handler)(nil)

// New returns a handler that takes pod addresses from addrs. New does no
// I/O.
func New(addrs IPAM, cfg Config) (*Handler, error) {
	if addrs == nil {
		return nil, errors.New("podconn: IPAM is required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Handler{ipam: addrs, cfg: cfg, log: cfg.Logger.With(slog.String("component", "podconn")),
		pods: map[kubemodel.PodID]*pod{}, annotations: map[kubemodel.PodID]podiface.Type{},
		badTypes: map[kubemodel.PodID]string{}}, nil
}

// String returns "podconn".
func (h *Handler) String() string { return "podconn" }

// HandlesEvent selects resyncs, AddPod, DeletePod and changes of pods in
// the Kubernetes state (for the interface type annotation).
func (h *Handler) HandlesEvent(ev controller.Event) bool {
	switch e := ev.(type) {
	case *controller.AddPod, *controller.DeletePod:
		return true
	case *controller.KubeStateChange:
		return e.Resource == kubemodel.PodResource
	}
	m := ev.Method()
	return m == controller.FullResync || m == controller.UpstreamResync
}

// PodInterface returns the logical name of the VPP interface that connects
// the pod (svcprocessor.PodInterfaces); ok is false for a pod not attached
// to this node.
func (h *Handler) PodInterface(id kubemodel.PodID) (ifName string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.pods[id]
	if p == nil {
		return "", false
	}
	return p.name, true
}

// InterfaceTypeOf returns the interface type that the pod's
// podiface.TypeAnnotation asks for, as last seen in the
// Kubernetes state, or Config.InterfaceType when the pod has none (or is
// not known yet). It returns an [*AnnotationError] when the annotation
// holds no interface type. The pod server calls it before it prepares a
// new pod (cniserver.Config.InterfaceTypeFor), so that an af_packet veth
// pair is made only for pods that will use it, and a pod with a bad
// annotation fails its ADD at once. It is safe for concurrent use.
func (h *Handler) InterfaceTypeOf(id kubemodel.PodID) (podiface.Type, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if v, bad := h.badTypes[id]; bad {
		return "", &AnnotationError{Pod: id, Value: v}
	}
	if t, ok := h.annotations[id]; ok {
		return t, nil
	}
	return h.cfg.InterfaceType, nil
}

// Pods returns the attachments of the pods the handler connected, sorted
// by pod (types resolved, IfName set).
func (h *Handler) Pods() []podiface.Attachment {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]podiface.Attachment, 0, len(h.pods))
	for _, p := range h.pods {
		out = append(out, p.att)
	}
	slices.SortFunc(out, func(a, b podiface.Attachment) int {
		if a.Pod.Namespace != b.Pod.Namespace {
			if a.Pod.Namespace < b.Pod.Namespace {
				return -1
			}
			return 1
		}
		switch {
		case a.Pod.Name < b.Pod.Name:
			return -1
		case a.Pod.Name > b.Pod.Name:
			return 1
		}
		return 0
	})
	return out
}

// Resync reads the interface type annotations of the pods in the
// Kubernetes state and rebuilds every pod: from Config.Attachments if
// set, otherwise from the pods attached so far. A pod that IPAM has no
// address for is left out (logged). If the attachments cannot be listed
// or IPAM knows no pod gateway, the pods attached so far are put and the
// error returned (the loop heals), so that the commit removes nothing;
// before the first successful resync the event is aborted instead
// (controller.AbortEventError: nothing is committed, the loop resyncs
// again soon), so that a starting agent does not remove every pod from
// VPP.
func (h *Handler) Resync(_ controller.Event, kube controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.annotations = map[kubemodel.PodID]podiface.Type{}
	oldBad := h.badTypes
	h.badTypes = map[kubemodel.PodID]string{}
	for key, v := range kube[kubemodel.PodResource] {
		if p, ok := v.(*kubemodel.Pod); ok {
			if id, err := kubemodel.ParsePodKey(key); err == nil {
				prev, wasBad := oldBad[id]
				h.noteAnnotation(id, p, prev, wasBad)
			}
		}
	}
	var errs []error
	var atts []podiface.Attachment
	if h.cfg.Attachments != nil {
		var err error
		if atts, err = h.cfg.Attachments.PodAttachments(); err != nil {
			err = fmt.Errorf("podconn: list pod attachments: %w", err)
			if !h.resynced {
				// Nothing known yet (an agent that starts): abort rather
				// than let the commit remove every pod from VPP.
				return controller.NewAbortEventError(err)
			}
			errs = append(errs, err)
			atts = nil
			for _, p := range h.pods {
				atts = append(atts, p.att)
			}
		}
	} else {
		for _, p := range h.pods {
			atts = append(atts, p.att)
		}
	}
	gw, err := h.gateway()
	if err != nil {
		if !h.resynced {
			return controller.NewAbortEventError(errors.Join(append(errs, err)...))
		}
		// No pod subnet (yet): keep what was configured.
		h.putAllLocked(txn)
		return errors.Join(append(errs, err)...)
	}
	h.gw, h.resynced = gw, true
	pods := make(map[kubemodel.PodID]*pod, len(atts))
	for _, a := range atts {
		p, err := h.build(a, gw)
		if err != nil {
			h.log.Warn("pod left out", slog.String("pod", a.Pod.String()), slog.Any("error", err))
			continue
		}
		pods[a.Pod] = p
	}
	h.pods = pods
	h.putAllLocked(txn)
	return errors.Join(errs...)
}

func (h *Handler) putAllLocked(txn controller.ResyncOperations) {
	if h.gw.valid() {
		k, v := h.gatewayValue(h.gw)
		txn.Put(k, v)
	}
	for _, p := range h.pods {
		controller.PutAll(txn, p.values)
	}
}

// Update handles AddPod (connect), DeletePod (disconnect) and pod changes
// of the Kubernetes state (annotations).
func (h *Handler) Update(ev controller.Event, txn controller.UpdateOperations) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch e := ev.(type) {
	case *controller.AddPod:
		return h.addPod(e, txn)
	case *controller.DeletePod:
		return h.deletePod(e, txn)
	case *controller.KubeStateChange:
		if e.Resource != kubemodel.PodResource {
			return "", nil
		}
		id, err := kubemodel.ParsePodKey(e.Key)
		if err != nil {
			return "", nil
		}
		p, _ := e.NewValue.(*kubemodel.Pod)
		prev, wasBad := h.badTypes[id]
		delete(h.annotations, id)
		delete(h.badTypes, id)
		h.noteAnnotation(id, p, prev, wasBad)
	}
	return "", nil
}

// noteAnnotation records the interface type annotation of pod p (nil:
// deleted). A value that is no interface type is recorded as bad and
// logged at Warn, unless it was already bad with that value (prev).
func (h *Handler) noteAnnotation(id kubemodel.PodID, p *kubemodel.Pod, prev string, wasBad bool) {
	s, ok := p.GetAnnotations()[podiface.TypeAnnotation]
	if !ok {
		return
	}
	t, err := podiface.ParseType(s)
	switch {
	case err != nil:
		h.badTypes[id] = s
		if !wasBad || prev != s {
			h.log.Warn("pod annotation names no interface type; the pod's ADD fails until it is fixed",
				slog.String("pod", id.String()), slog.String("annotation", podiface.TypeAnnotation), slog.String("value", s))
		}
	case t == podiface.Default:
		h.log.Debug("empty interface type annotation: the default type", slog.String("pod", id.String()))
	default:
		h.annotations[id] = t
	}
}

func (h *Handler) addPod(ev *controller.AddPod, txn controller.UpdateOperations) (string, error) {
	if v, bad := h.badTypes[ev.Pod]; bad && ev.InterfaceType == podiface.Default {
		return "", &AnnotationError{Pod: ev.Pod, Value: v}
	}
	gw, err := h.gateway()
	if err != nil {
		return "", err
	}
	p, err := h.build(ev.Attachment(), gw)
	if err != nil {
		return "", err
	}
	old := h.pods[ev.Pod]
	h.revertEv, h.revertOld, h.revertGW = ev, old, h.gw
	h.revertN, h.revertR = len(ev.Interfaces), len(ev.Routes)
	if gw != h.gw {
		k, v := h.gatewayValue(gw)
		txn.Put(k, v)
		h.gw = gw
	}
	var oldVals controller.KeyValuePairs // those of the pod's previous sandbox
	if old != nil {
		oldVals = old.values
	}
	controller.ReplaceAll(txn, oldVals, p.values)
	h.pods[ev.Pod] = p
	ev.Interfaces = append(ev.Interfaces, p.iface)
	ev.Routes = append(ev.Routes, p.routes...)
	return fmt.Sprintf("connected pod %s (%s, %s)", ev.Pod, p.att.InterfaceType, p.name), nil
}

func (h *Handler) deletePod(ev *controller.DeletePod, txn controller.UpdateOperations) (string, error) {
	p := h.pods[ev.Pod]
	if p == nil || (ev.ContainerID != "" && ev.ContainerID != p.att.ContainerID) {
		return "", nil // not attached, or an earlier sandbox of the pod
	}
	controller.DeleteAll(txn, p.values)
	delete(h.pods, ev.Pod)
	return fmt.Sprintf("disconnected pod %s", ev.Pod), nil
}

// Revert undoes what the AddPod being reverted changed in the handler
// (the data plane got nothing: the loop does not commit a reverted event)
// and removes the results it added to the event.
func (h *Handler) Revert(ev controller.Event) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	add, ok := ev.(*controller.AddPod)
	if !ok || ev != h.revertEv {
		return nil
	}
	if h.revertOld != nil {
		h.pods[add.Pod] = h.revertOld
	} else {
		delete(h.pods, add.Pod)
	}
	h.gw = h.revertGW
	if len(add.Interfaces) >= h.revertN {
		add.Interfaces = add.Interfaces[:h.revertN]
	}
	if len(add.Routes) >= h.revertR {
		add.Routes = add.Routes[:h.revertR]
	}
	h.revertEv, h.revertOld = nil, nil
	return nil
}

func (h *Handler) gateway() (gateways, error) {
	var gw gateways
	gw[0] = h.ipam.PodGatewayAddr().Unmap()
	if !gw[0].IsValid() {
		return gateways{}, ErrNoGateway
	}
	if h.cfg.DualStack != nil {
		if gw[1] = h.cfg.DualStack.PodGatewayAddr().Unmap(); !gw[1].IsValid() {
			return gateways{}, fmt.Errorf("%w (the second family's)", ErrNoGateway)
		}
	}
	return gw, nil
}

func (h *Handler) gatewayValue(gw gateways) (string, proto.Message) {
	v := &vppmodel.Interface{Name: h.cfg.GatewayName, Type: vppmodel.Interface_LOOPBACK, Enabled: true, MacAddress: gatewayMAC}
	for _, a := range gw {
		if a.IsValid() {
			v.IpAddresses = append(v.IpAddresses, netip.PrefixFrom(a, a.BitLen()).String())
		}
	}
	return vppmodel.InterfaceKey(h.cfg.GatewayName), v
}

// build resolves the attachment (interface type, IfName) and makes the
// values and results of the pod.
func (h *Handler) build(a podiface.Attachment, gw gateways) (*pod, error) {
	if a.IfName == "" {
		a.IfName = "eth0"
	}
	if a.InterfaceType == podiface.Default {
		a.InterfaceType = h.cfg.InterfaceType
		if t, ok := h.annotations[a.Pod]; ok {
			a.InterfaceType = t
		}
	}
	addr, ok := h.ipam.PodAddr(a.Pod)
	if !ok {
		return nil, fmt.Errorf("%w %s", ErrNoPodIP, a.Pod)
	}
	addrs := []netip.Addr{addr}
	if h.cfg.DualStack != nil {
		addr2, ok := h.cfg.DualStack.PodAddr(a.Pod)
		if !ok {
			return nil, fmt.Errorf("%w %s (of the second family)", ErrNoPodIP, a.Pod)
		}
		addrs = append(addrs, addr2)
	}
	id := identity(a.ContainerID, a.IfName)
	p := &pod{att: a, name: "pod-" + hex.EncodeToString(id[:6]), values: controller.KeyValuePairs{}}
	vppMAC, podMAC := mac(0xfe, id), mac(0xfd, id)
	var hosts []string
	for _, ip := range addrs {
		hosts = append(hosts, netip.PrefixFrom(ip, ip.BitLen()).String())
	}
	iface := &vppmodel.Interface{Name: p.name, Enabled: true, MacAddress: vppMAC, Unnumbered: h.cfg.GatewayName}
	p.iface = podiface.Interface{HostName: a.IfName, Type: a.InterfaceType, IPAddresses: hosts, GatewayMAC: vppMAC}
	switch a.InterfaceType {
	case podiface.AfPacket:
		if a.HostIfName == "" {
			return nil, fmt.Errorf("%w: pod %s: af_packet needs the host end of a veth pair (HostIfName)", ErrBadRequest, a.Pod)
		}
		iface.Type, iface.AfPacket = vppmodel.Interface_AF_PACKET, &vppmodel.AfPacketLink{HostIfName: a.HostIfName}
		p.iface.MAC = podMAC
	case podiface.Tap:
		if a.NetworkNamespace == "" {
			return nil, fmt.Errorf("%w: pod %s: tap needs the pod's network namespace", ErrBadRequest, a.Pod)
		}
		iface.Type, iface.Tap = vppmodel.Interface_TAP, &vppmodel.TapLink{HostIfName: a.IfName, HostNamespace: a.NetworkNamespace,
			HostMacAddress: podMAC, HostIpAddresses: hosts}
		p.iface.MAC = podMAC
	case podiface.Memif:
		sock := filepath.Join(h.cfg.MemifSocketDir, "memif-"+hex.EncodeToString(id[:6])+".sock")
		iface.Type, iface.Memif = vppmodel.Interface_MEMIF, &vppmodel.MemifLink{Master: true, SocketFilename: sock}
		p.iface.Socket = sock
	default:
		return nil, fmt.Errorf("%w: pod %s: unknown interface type %q", ErrBadRequest, a.Pod, a.InterfaceType)
	}
	vals := []proto.Message{iface}
	for i, ip := range addrs {
		vals = append(vals, &vppmodel.Route{DstNetwork: hosts[i], Paths: []*vppmodel.Path{{OutgoingInterface: p.name}}})
		if p.iface.MAC != "" {
			// The pod's MAC is known: VPP needs no ARP (and no IPv6
			// neighbor discovery, which an unnumbered interface does not
			// do) to reach it.
			vals = append(vals, &vppmodel.IPNeighbor{Interface: p.name, IpAddress: ip.String(), MacAddress: podMAC})
		}
	}
	for _, v := range vals {
		k, err := vppmodel.KeyOf(v)
		if err != nil {
			return nil, fmt.Errorf("%w: pod %s: %w", ErrBadRequest, a.Pod, err)
		}
		p.values[k] = v
	}
	for _, g := range gw {
		if !g.IsValid() {
			continue
		}
		r := podiface.Route{Network: "0.0.0.0/0", Gateway: g.String()}
		if g.Is6() {
			r.Network = "::/0"
		}
		p.routes = append(p.routes, r)
	}
	p.att = a
	return p, nil
}

// gatewayMAC is the MAC of the gateway loopback (never on the wire; fixed
// so that VPP's tables are the same after every restart).
const gatewayMAC = "06:fe:00:00:00:01"

// identity derives the names and MACs of a pod's interface from its
// container and interface name, so that the same attachment gets the
// same ones after any restart.
func identity(containerID, ifName string) [32]byte {
	return sha256.Sum256([]byte(containerID + "/" + ifName))
}

func mac(first byte, id [32]byte) string {
	return fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", first, id[6], id[7], id[8], id[9])
}

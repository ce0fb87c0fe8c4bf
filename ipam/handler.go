package ipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// String identifies the handler: "ipam".
func (i *IPAM) String() string { return "ipam" }

// HandlesEvent selects: every FullResync and UpstreamResync event; AddPod
// and DeletePod (IPAM allocates and releases the pod's address itself, so
// later handlers find it with GetPodIP); KubeStateChange deleting a pod;
// and, in external IPAM mode, KubeStateChange of this node's Kubernetes
// node object.
func (i *IPAM) HandlesEvent(event controller.Event) bool {
	switch ev := event.(type) {
	case *controller.AddPod, *controller.DeletePod:
		return true
	case *controller.KubeStateChange:
		switch ev.Resource {
		case kubemodel.PodResource:
			p, _ := ev.NewValue.(*kubemodel.Pod)
			return p == nil
		case kubemodel.NodeResource:
			return i.lay.external && ev.Key == kubemodel.NodeKey(i.nodeName)
		}
		return false
	}
	m := event.Method()
	return m == controller.FullResync || m == controller.UpstreamResync
}

// Resync reads this node's ID from the NodeIDSource, validates it against
// every range, (in external IPAM mode) takes this node's pod CIDR from its
// Kubernetes node object — keeping the current one if the object has none
// usable — and rebuilds the pod IP allocations from, in this order of
// precedence:
//
//  1. our own records: the allocations IPAM holds in memory and the
//     Store's records. They are newer than the Kubernetes state, which
//     lags behind (an address allocated just before a crash, a pod whose
//     sandbox was re-created with a new address);
//  2. pods of the Kubernetes state whose IP (ip_address, else the first
//     of ip_addresses in the subnet) lies in this node's pod subnet,
//     except host-network and terminating pods; a pod is identified by its
//     key. This recovers allocations when there is no Store (or it lost
//     records);
//  3. terminating pods of the Kubernetes state.
//
// Within one class, two pods claiming one address: the smaller
// namespace/name wins. A claim that loses, or whose address is not in the
// pod subnet, is dropped (and deleted from the Store). Records of pods
// missing from the state are kept until DeletePod releases them (kubelet
// repeats CNI DEL until it succeeds) or the pod's deletion from the
// Kubernetes state is seen (see Update). The Store is then brought in line
// with the result. Readers never see a half-built state. Resync puts
// nothing into txn.
func (i *IPAM) Resync(_ controller.Event, kubeStateData controller.KubeStateData, _ int, _ controller.ResyncOperations) error {
	i.ioMu.Lock()
	defer i.ioMu.Unlock()

	id := i.nodes.GetNodeID()
	if id == 0 {
		return fmt.Errorf("ipam resync: %w: node ID not allocated", ErrNotReady)
	}
	hostNet, err := i.checkNodeID(id)
	if err != nil {
		return fmt.Errorf("ipam resync: %w", err)
	}
	var podNet netip.Prefix
	if i.lay.external {
		var node *kubemodel.Node
		if v, ok := kubeStateData[kubemodel.NodeResource][kubemodel.NodeKey(i.nodeName)].(*kubemodel.Node); ok {
			node = v
		}
		podNet, err = i.nodePodCIDR(node)
		if err != nil {
			// Kubernetes data, not our config: do not fail the resync.
			i.log.Warn("ignoring the pod CIDR of this node", slog.String("node", i.nodeName), slog.Any("error", err))
			podNet = netip.Prefix{}
		}
		if !podNet.IsValid() {
			// No usable CIDR (node object missing or not yet assigned):
			// keep the current subnet, if any, as Update does.
			podNet = i.podNet
		}
	} else {
		podNet, err = nodeSlice("PodSubnetCIDR", i.lay.podAll, i.lay.podLen, id)
		if err != nil {
			return fmt.Errorf("ipam resync: %w", err)
		}
	}

	var stored []Allocation
	if i.store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), i.storeTimeout)
		stored, err = i.store.ListAllocations(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("ipam resync: list persisted allocations: %w", err)
		}
	}

	// Rebuild under mu: without a Store, allocations may run concurrently
	// and their results must not be lost.
	i.mu.Lock()
	var p *pool
	var byPod map[kubemodel.PodID]uint64
	if podNet.IsValid() {
		r := i.newRebuilder(podNet, kubeStateData[kubemodel.PodResource])
		i.addMemory(r)
		for _, a := range stored {
			r.record(a.Pod, a.Addr)
		}
		r.nextPass()
		r.fromKube()
		r.nextPass()
		r.claimTerminating()
		p, byPod = r.pool, r.byPod
		if i.pool != nil && i.podNet == podNet && i.pool.cursor >= p.lo && i.pool.cursor <= p.hi {
			p.cursor = i.pool.cursor
		} else {
			p.cursor = r.cursor()
		}
	} else {
		byPod = make(map[kubemodel.PodID]uint64)
	}

	i.nodeID, i.hostNet, i.pool, i.byPod = id, hostNet, p, byPod
	i.setPodNet(podNet)
	i.mu.Unlock()
	i.log.Debug("resynced", slog.Uint64("nodeID", uint64(id)), slog.Any("podSubnet", podNet), slog.Int("pods", len(byPod)))

	if i.store != nil {
		return i.syncStore(stored)
	}
	return nil
}

// checkNodeID validates id against every range and returns this node's
// VPP-host subnet. It reads only the immutable layout.
func (i *IPAM) checkNodeID(id uint32) (netip.Prefix, error) {
	var errs []error
	hostNet, err := nodeSlice("VPPHostSubnetCIDR", i.lay.hostAll, i.lay.hostLen, id)
	errs = append(errs, err)
	if !i.lay.external {
		_, err = nodeSlice("PodSubnetCIDR", i.lay.podAll, i.lay.podLen, id)
		errs = append(errs, err)
	}
	if i.lay.nodeNet.IsValid() {
		_, err = nodeHostAddr("NodeInterconnectCIDR", i.lay.nodeNet, i.lay.gateway, id)
		errs = append(errs, err)
	}
	_, err = nodeHostAddr("VXLANCIDR", i.lay.vxlan, netip.Addr{}, id)
	errs = append(errs, err)
	return hostNet, errors.Join(errs...)
}

// nodePodCIDR picks this node's pod CIDR from its Kubernetes node object:
// the first of PodCidrs inside PodSubnetCIDR. The invalid Prefix means none
// is assigned yet.
func (i *IPAM) nodePodCIDR(node *kubemodel.Node) (netip.Prefix, error) {
	if node == nil || len(node.GetPodCidrs()) == 0 {
		return netip.Prefix{}, nil
	}
	var problems []string
	for _, s := range node.GetPodCidrs() {
		p, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			problems = append(problems, err.Error())
		case p.Masked() != p:
			problems = append(problems, s+" has host bits set")
		case p.Bits() < i.lay.podAll.Bits() || !i.lay.podAll.Contains(p.Addr()):
			problems = append(problems, s+" is outside PodSubnetCIDR "+i.lay.podAll.String())
		case hostBits(p) < 2:
			problems = append(problems, s+" is too small for a pod")
		default:
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("no usable pod CIDR for node %s: %s", i.nodeName, strings.Join(problems, "; "))
}

// addMemory feeds the current in-memory allocations to r as records.
// Caller holds mu.
func (i *IPAM) addMemory(r *rebuilder) {
	if i.podNet != r.podNet {
		for pod, off := range i.byPod {
			r.record(pod, i.podAddr(off))
		}
		return
	}
	for pod, off := range i.byPod {
		r.claim(pod, off)
	}
}

// syncStore makes the Store hold exactly the current allocations. Caller
// holds ioMu (and a Store is set, so the state cannot change).
func (i *IPAM) syncStore(stored []Allocation) error {
	have := make(map[kubemodel.PodID]netip.Addr, len(stored))
	for _, a := range stored {
		have[a.Pod] = a.Addr
	}
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), i.storeTimeout)
	defer cancel()
	for pod, off := range i.byPod {
		a := i.podAddr(off)
		if have[pod] != a {
			if err := i.store.PutAllocation(ctx, Allocation{Pod: pod, Addr: a}); err != nil {
				errs = append(errs, err)
			}
		}
		delete(have, pod)
	}
	for pod := range have {
		if err := i.store.DeleteAllocation(ctx, pod); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ipam resync: persist allocations: %w", err)
	}
	return nil
}

// rebuilder recovers allocations into a new pool.
type rebuilder struct {
	log    *slog.Logger
	podNet netip.Prefix
	pods   controller.KeyValuePairs
	pool   *pool
	byPod  map[kubemodel.PodID]uint64
	maxOff uint64 // highest claimed offset, if hasMax
	hasMax bool
	pass   int                        // 0: records, 1: live pods, 2: terminating pods
	inPass *pool                      // offsets claimed in the current pass
	owner  map[uint64]kubemodel.PodID // built on the first conflict
	// noDup: no pod can have been claimed before (the first Kubernetes
	// pass with no records): the per-pod duplicate check is skipped.
	noDup bool
	// terminating pods of the Kubernetes state, claimed in pass 2
	terminating []Allocation
	// IPv4 fast path: podNet as integers
	is4          bool
	base4, mask4 uint32
}

func (i *IPAM) newRebuilder(podNet netip.Prefix, pods controller.KeyValuePairs) *rebuilder {
	lo, hi := podPoolRange(podNet)
	r := &rebuilder{
		log:    i.log,
		podNet: podNet,
		pods:   pods,
		pool:   newPool(lo, hi),
		byPod:  make(map[kubemodel.PodID]uint64, len(pods)),
		inPass: newPool(lo, hi),
		is4:    podNet.Addr().Is4(),
	}
	if r.is4 {
		r.base4 = uint32(addrBits(podNet.Addr()).lo)
		r.mask4 = ^uint32(0) << hostBits(podNet)
		if hostBits(podNet) == 32 {
			r.mask4 = 0
		}
	}
	return r
}

// parseIPv4 parses a dotted-quad IPv4 address the way netip.ParseAddr does
// (decimal, no leading zeros, each field at most 255). ok is false for
// anything else, including IPv6 forms.
func parseIPv4(s string) (v uint32, ok bool) {
	if len(s) < 7 || len(s) > 15 {
		return 0, false
	}
	var field, digits, dots uint32
	for k := 0; k < len(s); k++ {
		c := s[k]
		switch {
		case c >= '0' && c <= '9':
			if digits > 0 && field == 0 {
				return 0, false // leading zero
			}
			field = field*10 + uint32(c-'0')
			digits++
			if field > 255 {
				return 0, false
			}
		case c == '.':
			if digits == 0 || dots == 3 {
				return 0, false
			}
			v = v<<8 | field
			field, digits = 0, 0
			dots++
		default:
			return 0, false
		}
	}
	if digits == 0 || dots != 3 {
		return 0, false
	}
	return v<<8 | field, true
}

// fromKube claims the addresses of the non-terminating pods of the
// Kubernetes state and sets the terminating ones aside for claimTerminating.
// Pods are processed in small batches, stage by stage, so that the cache
// misses of independent pods overlap (the rebuild is memory-bound).
func (r *rebuilder) fromKube() {
	var buf [kubeBatch]kubeItem
	n := 0
	for key, v := range r.pods {
		pod, ok := v.(*kubemodel.Pod)
		if !ok || pod == nil {
			continue
		}
		buf[n] = kubeItem{key: key, pod: pod}
		if n++; n == kubeBatch {
			r.kubeItems(buf[:])
			n = 0
		}
	}
	r.kubeItems(buf[:n])
}

const kubeBatch = 16

type kubeItem struct {
	key        string
	pod        *kubemodel.Pod
	ip         string
	skip, term bool
	off        uint64
}

func (r *rebuilder) kubeItems(items []kubeItem) {
	for k := range items { // stage 1: the pod objects
		p := items[k].pod
		items[k].ip, items[k].skip, items[k].term = p.IpAddress, p.HostNetwork, p.Terminating
	}
	for k := range items { // stage 2: the address strings
		it := &items[k]
		if it.skip {
			continue
		}
		off, ok := r.podOffset(it.ip)
		if !ok {
			for _, s := range it.pod.GetIpAddresses() {
				if off, ok = r.podOffset(s); ok {
					break
				}
			}
		}
		it.off, it.skip = off, !ok
	}
	for k := range items { // stage 3: keys and claims
		it := &items[k]
		if it.skip {
			continue
		}
		// The key identifies the pod (keys are unique, so pods need no
		// duplicate check); the ID shares the key's memory.
		id, ok := podIDFromKey(it.key)
		if !ok {
			continue
		}
		if it.term {
			r.terminating = append(r.terminating, Allocation{Pod: id, Addr: nthAddr(r.podNet, u128{lo: it.off})})
			continue
		}
		r.claim(id, it.off)
	}
}

// podIDFromKey splits a key built by kubemodel.PodKey into the pod ID
// without validating the names (the watcher does). Splitting at the first
// '/' after the prefix is injective, so distinct keys give distinct IDs.
func podIDFromKey(key string) (kubemodel.PodID, bool) {
	rest, ok := strings.CutPrefix(key, kubemodel.PodKeyPrefix)
	if !ok {
		return kubemodel.PodID{}, false
	}
	ns, name, ok := strings.Cut(rest, "/")
	if !ok || ns == "" || name == "" {
		return kubemodel.PodID{}, false
	}
	return kubemodel.PodID{Namespace: ns, Name: name}, true
}

// claimTerminating claims the addresses of terminating pods, last.
func (r *rebuilder) claimTerminating() {
	for _, a := range r.terminating {
		r.record(a.Pod, a.Addr)
	}
}

// podOffset parses s and returns its offset if it is a pod address of the
// subnet.
func (r *rebuilder) podOffset(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	if r.is4 {
		if v, ok := parseIPv4(s); ok {
			if v&r.mask4 != r.base4 {
				return 0, false
			}
			off := uint64(v - r.base4)
			return off, off >= r.pool.lo && off <= r.pool.hi
		}
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return 0, false
	}
	return r.addrOffset(a.Unmap())
}

func (r *rebuilder) addrOffset(a netip.Addr) (uint64, bool) {
	off, ok := offsetIn(r.podNet, a)
	if !ok || off < r.pool.lo || off > r.pool.hi {
		return 0, false
	}
	return off, true
}

// record claims the address of a persisted or in-memory allocation.
func (r *rebuilder) record(pod kubemodel.PodID, a netip.Addr) {
	off, ok := r.addrOffset(a)
	if !ok {
		r.log.Warn("dropping a pod IP allocation outside the pod subnet",
			slog.String("pod", pod.String()), slog.Any("addr", a), slog.Any("podSubnet", r.podNet))
		return
	}
	r.claim(pod, off)
}

// nextPass starts the next precedence class.
func (r *rebuilder) nextPass() {
	r.pass++
	r.inPass = newPool(r.pool.lo, r.pool.hi)
	// Kubernetes keys are unique: in the live-pod pass a pod can only
	// have been claimed before by a record.
	r.noDup = r.pass == 1 && len(r.byPod) == 0
}

// claim gives off to pod id unless id already has an address or off is
// taken by a claim of higher precedence (an earlier pass) or, in the same
// pass, by a pod with a smaller namespace/name.
func (r *rebuilder) claim(id kubemodel.PodID, off uint64) {
	if !r.noDup {
		if _, dup := r.byPod[id]; dup {
			return // a pod keeps its first (highest-precedence) claim
		}
	}
	if r.pool.claim(off) {
		r.take(id, off)
		return
	}
	if r.owner == nil {
		r.owner = make(map[uint64]kubemodel.PodID, len(r.byPod))
		for pod, o := range r.byPod {
			r.owner[o] = pod
		}
	}
	cur := r.owner[off]
	if !r.inPass.used(off) || comparePodID(cur, id) < 0 {
		r.log.Warn("two pods claim one address; keeping the first",
			slog.String("kept", cur.String()), slog.String("dropped", id.String()), slog.Uint64("offset", off))
		return
	}
	r.log.Warn("two pods claim one address; keeping the first",
		slog.String("kept", id.String()), slog.String("dropped", cur.String()), slog.Uint64("offset", off))
	delete(r.byPod, cur)
	r.byPod[id] = off
	r.owner[off] = id
}

func (r *rebuilder) take(id kubemodel.PodID, off uint64) {
	r.byPod[id] = off
	if r.owner != nil {
		r.owner[off] = id
	}
	r.inPass.claim(off)
	if !r.hasMax || off > r.maxOff {
		r.maxOff, r.hasMax = off, true
	}
}

// cursor returns where the allocator continues after a rebuild: after the
// highest recovered address, or from the start of the range.
func (r *rebuilder) cursor() uint64 {
	if r.hasMax {
		return r.maxOff
	}
	return r.pool.hi
}

// Update handles AddPod (allocate), DeletePod (release), deletions of pods
// from the Kubernetes state (release, see below) and, in external IPAM
// mode, changes of this node's Kubernetes node object: when its pod
// CIDR really changes, the pod subnet is switched (allocations outside the
// new subnet are dropped) and a [PodCIDRChange] is pushed.
func (i *IPAM) Update(event controller.Event, _ controller.UpdateOperations) (string, error) {
	switch ev := event.(type) {
	case *controller.AddPod:
		a, isNew, err := i.allocate(ev.Pod, ev.IPAMType, ev.IPAMData)
		if err != nil {
			return "", err
		}
		if isNew {
			i.mu.Lock()
			i.revertEv, i.revertPod = event, ev.Pod
			i.mu.Unlock()
			return fmt.Sprintf("allocated %s for pod %s", a, ev.Pod), nil
		}
		return fmt.Sprintf("pod %s already has %s", ev.Pod, a), nil
	case *controller.DeletePod:
		a, err := i.release(ev.Pod, netip.Addr{})
		if err != nil {
			return "", err
		}
		if !a.IsValid() {
			return "", nil
		}
		return fmt.Sprintf("released %s of pod %s", a, ev.Pod), nil
	case *controller.KubeStateChange:
		if !i.HandlesEvent(ev) {
			return "", nil
		}
		if ev.Resource == kubemodel.PodResource {
			return i.podDeleted(ev)
		}
		return i.nodeChanged(ev)
	}
	return "", nil
}

// podDeleted releases the address of a pod removed from the Kubernetes
// state, if IPAM still holds it: normally DeletePod released it already,
// but an allocation recovered from a lagging state (the pod was torn down
// before its deletion was reflected) would otherwise leak. Only the
// address the deleted object had is released, so a late deletion event of
// a pod re-created under the same name does not touch the new pod.
func (i *IPAM) podDeleted(ev *controller.KubeStateChange) (string, error) {
	id, ok := podIDFromKey(ev.Key)
	prev, _ := ev.PrevValue.(*kubemodel.Pod)
	if !ok || prev == nil {
		return "", nil
	}
	for _, s := range append([]string{prev.GetIpAddress()}, prev.GetIpAddresses()...) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		released, err := i.release(id, a.Unmap())
		if err != nil {
			return "", err
		}
		if released.IsValid() {
			return fmt.Sprintf("released %s of pod %s deleted from Kubernetes", released, id), nil
		}
	}
	return "", nil
}

func (i *IPAM) nodeChanged(ev *controller.KubeStateChange) (string, error) {
	i.ioMu.Lock()
	defer i.ioMu.Unlock()
	node, _ := ev.NewValue.(*kubemodel.Node)
	podNet, err := i.nodePodCIDR(node)
	if err != nil {
		return "", fmt.Errorf("ipam: node %s: %w", i.nodeName, err)
	}
	i.mu.Lock()
	prev := i.podNet
	if !podNet.IsValid() || podNet == prev {
		i.mu.Unlock()
		return "", nil // no CIDR (yet / any more), or no change: keep what we have
	}
	r := i.newRebuilder(podNet, nil)
	if i.pool != nil {
		i.addMemory(r)
	}
	r.pool.cursor = r.cursor()
	i.pool, i.byPod = r.pool, r.byPod
	i.setPodNet(podNet)
	i.mu.Unlock()
	if err := i.loop.PushEvent(&PodCIDRChange{PrevPodCIDR: prev, LocalPodCIDR: podNet}); err != nil {
		return "", fmt.Errorf("ipam: push PodCIDRChange: %w", err)
	}
	return fmt.Sprintf("pod CIDR of this node changed to %s", podNet), nil
}

// Revert releases the address allocated by the AddPod event being reverted
// (if the event allocated it); for other events it does nothing.
func (i *IPAM) Revert(event controller.Event) error {
	i.mu.Lock()
	ev, pod := i.revertEv, i.revertPod
	if ev == event {
		i.revertEv = nil
	}
	i.mu.Unlock()
	if ev == nil || ev != event {
		return nil
	}
	return i.ReleasePodIP(pod)
}

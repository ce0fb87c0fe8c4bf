package ipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
// usable — and rebuilds the pod IP allocations.
//
// # Precedence
//
// A pod holds an address if IPAM handed it out (and has not released it),
// if a record of the Store says so, or if the Kubernetes state shows the
// pod running with it. These sources can disagree: the Kubernetes state
// lags behind CNI ADD and DEL, and a record can be stale. Resync claims
// the addresses in this order; an address already claimed by an earlier
// class is never taken away by a later one, and a pod keeps its first
// claim:
//
//  1. the allocations IPAM holds in memory: they are what this process
//     handed out, every other source lags behind them, so a Resync never
//     moves an address away from a pod that got it from this process;
//  2. the Store's records: written before an address is handed out and
//     deleted only after a successful release, they are the only source
//     that knows an address allocated just before a crash (not yet in
//     the Kubernetes state) or a pod's new address after its sandbox was
//     re-created just before a crash. Two records of one address (only a
//     faulty store or an older agent can leave them): the one the
//     Kubernetes state confirms (the same pod with that address) wins,
//     else the smaller namespace/name;
//  3. pods of the Kubernetes state whose IP (ip_address, else the first
//     of ip_addresses in the subnet) lies in this node's pod subnet,
//     except host-network and terminating pods; a pod is identified by its
//     key. This recovers allocations when there is no Store (or it lost
//     records). Two pods with one address: the smaller namespace/name;
//  4. terminating pods of the Kubernetes state.
//
// A claim that loses, or whose address is not in the pod subnet, is
// dropped (and its record deleted from the Store). Records of pods missing
// from the state are kept until DeletePod releases them (kubelet repeats
// CNI DEL until it succeeds) or the pod's deletion from the Kubernetes
// state is seen (see Update). A recovered allocation keeps the holding
// sandbox of the claim that won it (see Update): from memory, else from
// its record; the pods of the Kubernetes state have an unknown holder.
// The Store is then brought in line with the result: missing or different
// records (address or holder) are written (which settles the records of
// allocations whose last write failed), the others deleted.
//
// # Missing input
//
// Missing input never destroys an allocation or a record: when the pod
// subnet is not known (external IPAM and a state without this node's pod
// CIDR), Resync leaves the allocations and the Store untouched and
// AllocatePodIP fails with [ErrNotReady] until a Resync or a change of
// the node object provides the CIDR. Readers never see a half-built
// state. Resync puts nothing into txn.
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
	if i.store == nil && !i.warnedNoStore {
		i.warnedNoStore = true
		i.log.Warn("no Store configured: an address allocated just before a crash, not yet in the Kubernetes state, can be handed out twice after the restart")
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
	if !podNet.IsValid() {
		// External IPAM and this node's pod CIDR was never known: nothing
		// to rebuild, and the records must wait for the CIDR (they cannot
		// be checked against a subnet).
		i.mu.Lock()
		i.nodeID, i.hostNet = id, hostNet
		i.mu.Unlock()
		i.log.Info("waiting for the pod CIDR of this node", slog.String("node", i.nodeName), slog.Uint64("nodeID", uint64(id)))
		return nil
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
	r := i.newRebuilder(podNet, kubeStateData[kubemodel.PodResource])
	if i.pool != nil {
		i.addMemory(r)
	}
	r.nextPass()
	for _, a := range stored {
		r.record(a.Pod, a.Addr, a.ContainerID)
	}
	r.nextPass()
	r.fromKube()
	r.nextPass()
	r.claimTerminating()
	p, byPod := r.pool, r.byPod
	if i.pool != nil && i.podNet == podNet && i.pool.cursor >= p.lo && i.pool.cursor <= p.hi {
		p.cursor = i.pool.cursor
	} else {
		p.cursor = r.cursor()
	}
	i.nodeID, i.hostNet, i.pool, i.byPod, i.holder = id, hostNet, p, byPod, r.holder
	i.setPodNet(podNet)
	i.waitResync = false
	n := len(byPod)
	i.mu.Unlock()
	i.log.Debug("resynced", slog.Uint64("nodeID", uint64(id)), slog.Any("podSubnet", podNet), slog.Int("pods", n))

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

// addMemory feeds the current in-memory allocations (with their holders)
// to r, which has claimed nothing yet, in its first pass. In the same
// subnet they cannot conflict with each other: r starts from a copy of
// them, and takes the holder map over without copying it — in the same
// subnet no memory claim is dropped, so the later passes only add and
// remove the holders of the pods they claim, and the caller, holding mu
// throughout, replaces i's state with r's. Caller holds mu.
func (i *IPAM) addMemory(r *rebuilder) {
	if i.podNet != r.podNet {
		for pod, off := range i.byPod {
			r.record(pod, i.podAddr(off), i.holder[pod])
		}
		return
	}
	r.pool, r.byPod, r.holder = i.pool.clone(), maps.Clone(i.byPod), i.holder
	r.maxOff, r.hasMax = r.pool.max()
}

// syncStore makes the Store hold exactly the current allocations: it
// writes every allocation whose record is missing or differs (settling
// the unsure ones) and deletes the other records. An allocation whose
// write fails stays unsure. Caller holds ioMu (and a Store is set, so the
// state cannot change).
func (i *IPAM) syncStore(stored []Allocation) error {
	have := make(map[kubemodel.PodID]Allocation, len(stored))
	for _, a := range stored {
		have[a.Pod] = a
	}
	var errs []error
	var failed []kubemodel.PodID
	ctx, cancel := context.WithTimeout(context.Background(), i.storeTimeout)
	defer cancel()
	for pod, off := range i.byPod {
		a := Allocation{Pod: pod, Addr: i.podAddr(off), ContainerID: i.holder[pod]}
		if have[pod] != a {
			if err := i.store.PutAllocation(ctx, a); err != nil {
				errs = append(errs, err)
				failed = append(failed, pod)
			}
		}
		delete(have, pod)
	}
	i.mu.Lock()
	clear(i.unsure)
	for _, pod := range failed {
		i.markUnsure(pod)
	}
	i.mu.Unlock()
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

// The precedence classes of a rebuild (see Resync), one pass each.
const (
	passMemory = iota
	passRecords
	passKube
	passTerminating
)

// rebuilder recovers allocations into a new pool.
type rebuilder struct {
	log    *slog.Logger
	podNet netip.Prefix
	pods   controller.KeyValuePairs
	pool   *pool
	byPod  map[kubemodel.PodID]uint64
	holder map[kubemodel.PodID]string // known holders of the pods of byPod; nil until needed
	maxOff uint64                     // highest claimed offset, if hasMax
	hasMax bool
	pass   int                        // passMemory, passRecords, passKube or passTerminating
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

// newRebuilder returns a rebuilder for podNet and the pods of the
// Kubernetes state. Caller holds mu.
func (i *IPAM) newRebuilder(podNet netip.Prefix, pods controller.KeyValuePairs) *rebuilder {
	lo, hi := podPoolRange(podNet)
	hint := len(pods)
	if i.pool != nil && i.podNet == podNet {
		hint = 0 // addMemory replaces the map with a copy of byPod
	}
	r := &rebuilder{
		log:    i.log,
		podNet: podNet,
		pods:   pods,
		pool:   newPool(lo, hi),
		byPod:  make(map[kubemodel.PodID]uint64, hint),
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
		r.claim(id, it.off, "") // the Kubernetes state knows no sandbox
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
		r.record(a.Pod, a.Addr, "")
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

// record claims the address of a persisted or in-memory allocation held
// by the sandbox holder ("" if unknown).
func (r *rebuilder) record(pod kubemodel.PodID, a netip.Addr, holder string) {
	off, ok := r.addrOffset(a)
	if !ok {
		r.log.Warn("dropping a pod IP allocation outside the pod subnet",
			slog.String("pod", pod.String()), slog.Any("addr", a), slog.Any("podSubnet", r.podNet))
		return
	}
	r.claim(pod, off, holder)
}

// nextPass starts the next precedence class.
func (r *rebuilder) nextPass() {
	r.pass++
	if r.inPass.n > 0 {
		r.inPass = newPool(r.pool.lo, r.pool.hi)
	}
	// Kubernetes keys are unique: in the live-pod pass a pod can only
	// have been claimed before by a record or from memory.
	r.noDup = r.pass == passKube && len(r.byPod) == 0
}

// confirmed reports whether the Kubernetes state shows pod id with the
// address at offset off (slow path, for conflicts only).
func (r *rebuilder) confirmed(id kubemodel.PodID, off uint64) bool {
	p, ok := r.pods[kubemodel.PodKey(id.Namespace, id.Name)].(*kubemodel.Pod)
	if !ok || p == nil || p.HostNetwork {
		return false
	}
	if o, ok := r.podOffset(p.IpAddress); ok && o == off {
		return true
	}
	for _, s := range p.GetIpAddresses() {
		if o, ok := r.podOffset(s); ok && o == off {
			return true
		}
	}
	return false
}

// wins reports whether id beats cur, the pod that claimed off earlier in
// the same pass: among records the one the Kubernetes state confirms,
// else (and in the other passes) the smaller namespace/name.
func (r *rebuilder) wins(id, cur kubemodel.PodID, off uint64) bool {
	if r.pass == passRecords {
		if ci, cc := r.confirmed(id, off), r.confirmed(cur, off); ci != cc {
			return ci
		}
	}
	return comparePodID(id, cur) < 0
}

// claim gives off, held by the sandbox holder ("" if unknown), to pod id
// unless id already has an address or off is taken by a claim of higher
// precedence (an earlier pass) or, in the same pass, by a pod that wins
// over id (see wins). The holder comes with the claim that wins.
func (r *rebuilder) claim(id kubemodel.PodID, off uint64, holder string) {
	if !r.noDup {
		if _, dup := r.byPod[id]; dup {
			return // a pod keeps its first (highest-precedence) claim
		}
	}
	if r.pool.claim(off) {
		r.take(id, off, holder)
		return
	}
	if r.owner == nil {
		r.owner = make(map[uint64]kubemodel.PodID, len(r.byPod))
		for pod, o := range r.byPod {
			r.owner[o] = pod
		}
	}
	cur := r.owner[off]
	if !r.inPass.used(off) || !r.wins(id, cur, off) {
		r.log.Warn("two pods claim one address; keeping the first",
			slog.String("kept", cur.String()), slog.String("dropped", id.String()), slog.Uint64("offset", off))
		return
	}
	r.log.Warn("two pods claim one address; keeping the first",
		slog.String("kept", id.String()), slog.String("dropped", cur.String()), slog.Uint64("offset", off))
	delete(r.byPod, cur)
	delete(r.holder, cur)
	r.byPod[id] = off
	setHolder(&r.holder, id, holder)
	r.owner[off] = id
}

func (r *rebuilder) take(id kubemodel.PodID, off uint64, holder string) {
	r.byPod[id] = off
	if holder != "" {
		setHolder(&r.holder, id, holder)
	}
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
//
// # Sandboxes
//
// IPAM records which pod sandbox holds a pod's address: the ContainerID
// of the AddPod that allocated it (see [Allocation.ContainerID]). Kubelet
// re-creates a pod's sandbox with a new container ID, and the CNI DEL (or
// CNI GC) of the old sandbox may arrive after the CNI ADD of the new one:
//
//   - an AddPod of a pod that holds an address already returns that
//     address; if its ContainerID is set and differs from the holder, the
//     new sandbox becomes the holder (with a Store, persisted before
//     Update returns; a failed write fails the AddPod, as for a new
//     allocation). An AddPod without a ContainerID keeps the holder;
//   - a DeletePod whose ContainerID is set and differs from the known
//     holder does not release the address: it is the DEL of a sandbox
//     the pod has replaced. Update returns nil and a change description
//     saying so ("kept ... held by sandbox ..."), and logs it at Debug;
//   - a DeletePod without a ContainerID (a caller that does not know it),
//     or with the holder's, releases the address, and so does any
//     DeletePod when the holder is unknown (the pod was recovered from the
//     Kubernetes state, or allocated without a container ID), as IPAM
//     cannot tell its sandboxes apart;
//   - the deletion of a pod from the Kubernetes state releases the address
//     the deleted object had only while its holder is unknown: a known
//     sandbox keeps it until its own DEL, since it may be the sandbox of
//     a pod re-created under the same name whose AddPod took the address
//     over before the agent saw the old object's deletion.
//
// The holder is kept with the allocation (in memory and in the Store's
// record), so it survives a Resync and, with a Store, a restart. Without
// a Store a restart recovers the pods from the Kubernetes state with
// unknown holders: a DEL of a sandbox replaced before the restart then
// releases the address, which is one more reason to configure a Store.
// With a Store, a DeletePod naming a sandbox of a pod whose record is not
// loaded yet (external IPAM waiting for this node's pod CIDR) fails with
// [ErrNotReady] instead of deleting the record: the record may name the
// pod's current sandbox (kubelet retries the DEL).
//
// Revert of an AddPod releases the address it allocated, or gives the
// address back to the sandbox it moved it from.
func (i *IPAM) Update(event controller.Event, _ controller.UpdateOperations) (string, error) {
	switch ev := event.(type) {
	case *controller.AddPod:
		r, err := i.allocate(ev.Pod, ev.ContainerID, ev.IPAMType, ev.IPAMData)
		if err != nil {
			return "", err
		}
		switch r.outcome {
		case allocNew:
			i.mu.Lock()
			i.revertEv, i.revertPod, i.revertMoved = event, ev.Pod, false
			i.mu.Unlock()
			return fmt.Sprintf("allocated %s for pod %s", r.addr, ev.Pod), nil
		case allocMoved:
			i.mu.Lock()
			i.revertEv, i.revertPod, i.revertMoved, i.revertTo, i.revertPrev = event, ev.Pod, true, ev.ContainerID, r.prev
			i.mu.Unlock()
			return fmt.Sprintf("pod %s keeps %s, now held by sandbox %s (was %s)", ev.Pod, r.addr, ev.ContainerID, sandboxName(r.prev)), nil
		}
		return fmt.Sprintf("pod %s already has %s", ev.Pod, r.addr), nil
	case *controller.DeletePod:
		r, err := i.release(ev.Pod, netip.Addr{}, ev.ContainerID)
		if err != nil {
			return "", err
		}
		if r.kept.IsValid() {
			i.log.Debug("DeletePod of a replaced sandbox: the pod's address stays with its current sandbox",
				slog.String("pod", ev.Pod.String()), slog.Any("addr", r.kept),
				slog.String("container", ev.ContainerID), slog.String("holder", r.holder))
			return fmt.Sprintf("kept %s of pod %s: held by sandbox %s, not by %s", r.kept, ev.Pod, r.holder, ev.ContainerID), nil
		}
		if !r.addr.IsValid() {
			return "", nil
		}
		return fmt.Sprintf("released %s of pod %s", r.addr, ev.Pod), nil
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

// kubeDeletion stands for the sandbox of a pod deleted from the
// Kubernetes state in release: no real sandbox, so an address held by a
// known sandbox is kept, and one whose holder is unknown is released.
const kubeDeletion = "\x00deleted from Kubernetes"

// podDeleted releases the address of a pod removed from the Kubernetes
// state, if IPAM still holds it with an unknown holder: normally DeletePod
// released it already, but an allocation recovered from a lagging state
// (the pod was torn down before its deletion was reflected) would
// otherwise leak. Only the address the deleted object had is released, so
// a late deletion event of a pod re-created under the same name does not
// touch the new pod's new address; and an address a known sandbox holds
// stays with it until that sandbox's DEL (or CNI GC): the sandbox may be
// the re-created pod's, which took the address over (see [IPAM.Update]).
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
		r, err := i.release(id, a.Unmap(), kubeDeletion)
		if err != nil {
			return "", err
		}
		if r.addr.IsValid() {
			return fmt.Sprintf("released %s of pod %s deleted from Kubernetes", r.addr, id), nil
		}
		if r.kept.IsValid() {
			i.log.Debug("pod deleted from Kubernetes: its address stays with the sandbox that holds it",
				slog.String("pod", id.String()), slog.String("address", r.kept.String()), slog.String("sandbox", r.holder))
			return fmt.Sprintf("pod %s deleted from Kubernetes: %s stays with sandbox %s until its DEL", id, r.kept, r.holder), nil
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
	i.pool, i.byPod, i.holder = r.pool, r.byPod, r.holder
	for pod := range i.unsure {
		if _, ok := r.byPod[pod]; !ok {
			delete(i.unsure, pod)
		}
	}
	i.setPodNet(podNet)
	// The records and the running pods of the new subnet are not known
	// here: allocate only after the Resync that PodCIDRChange triggers.
	i.waitResync = true
	i.mu.Unlock()
	if err := i.loop.PushEvent(&PodCIDRChange{PrevPodCIDR: prev, LocalPodCIDR: podNet}); err != nil {
		return "", fmt.Errorf("ipam: push PodCIDRChange: %w", err)
	}
	return fmt.Sprintf("pod CIDR of this node changed to %s", podNet), nil
}

// Revert undoes the AddPod event being reverted: it releases the address
// the event allocated, or, if the event moved the pod's address to its
// sandbox, gives it back to the previous holder. For other events (and
// an AddPod that changed nothing) it does nothing.
func (i *IPAM) Revert(event controller.Event) error {
	i.mu.Lock()
	ev, pod, moved, to, prev := i.revertEv, i.revertPod, i.revertMoved, i.revertTo, i.revertPrev
	if ev == event {
		i.revertEv = nil
	}
	i.mu.Unlock()
	if ev == nil || ev != event {
		return nil
	}
	if moved {
		return i.restoreHolder(pod, to, prev)
	}
	return i.ReleasePodIP(pod)
}

// restoreHolder makes prev ("" for unknown) the holder of pod's address
// again if the sandbox container still holds it. With a Store the record
// is rewritten; if that fails it is settled later like any failed write.
func (i *IPAM) restoreHolder(pod kubemodel.PodID, container, prev string) error {
	if i.store != nil {
		i.ioMu.Lock()
		defer i.ioMu.Unlock()
	}
	i.mu.Lock()
	off, ok := i.byPod[pod]
	if !ok || i.holder[pod] != container {
		i.mu.Unlock()
		return nil // released or moved on since
	}
	setHolder(&i.holder, pod, prev)
	a := i.podAddr(off)
	i.mu.Unlock()
	if i.store == nil {
		return nil
	}
	if err := i.put(pod, a, prev); err != nil {
		return fmt.Errorf("give %s of pod %s back to sandbox %s: persist: %w", a, pod, sandboxName(prev), err)
	}
	return nil
}

// sandboxName names a holder for messages.
func sandboxName(container string) string {
	if container == "" {
		return "unknown"
	}
	return container
}

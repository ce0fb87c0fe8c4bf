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
func (i *IPAM) Resync(_ controller.Event, kubeStateData controller.KubeStateData, _ int, txn controller.ResyncOperations) error {
	ctx := controller.ContextOf(txn)
	id := i.nodes.GetNodeID()
	if id == 0 {
		return fmt.Errorf("%w: resync: node ID not allocated", ErrNotReady)
	}
	hostNet, err := i.checkNodeID(id)
	if err != nil {
		return err // each joined error is an ErrInvalidNodeID naming the range
	}
	i.begin()
	defer i.mu.Unlock()
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
			return err
		}
	}
	if !podNet.IsValid() {
		// External IPAM and this node's pod CIDR was never known: nothing
		// to rebuild, and the records must wait for the CIDR (they cannot
		// be checked against a subnet).
		i.nodeID, i.hostNet = id, hostNet
		i.log.Info("waiting for the pod CIDR of this node", slog.String("node", i.nodeName), slog.Uint64("nodeID", uint64(id)))
		return nil
	}

	var stored []Allocation
	if i.store != nil {
		i.unlock()
		lctx, cancel := context.WithTimeout(ctx, i.storeTimeout)
		stored, err = i.store.ListAllocations(lctx)
		cancel()
		i.relock()
		if err != nil {
			return fmt.Errorf("ipam: resync: list persisted allocations: %w", err)
		}
	}

	// Rebuild under mu: readers must not see a half-built state (in the
	// same subnet the rebuilder changes the holder map in place, see
	// addMemory).
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
	i.log.Debug("resynced", slog.Uint64("nodeID", uint64(id)), slog.Any("podSubnet", podNet), slog.Int("pods", n))

	if i.store != nil {
		return i.syncStore(ctx, stored)
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

// syncStore makes the Store hold exactly the current allocations: it
// writes every allocation whose record is missing or differs (settling
// the unsure ones) and deletes the other records. An allocation whose
// write fails stays unsure. Caller is in an operation.
func (i *IPAM) syncStore(ctx context.Context, stored []Allocation) error {
	have := make(map[kubemodel.PodID]Allocation, len(stored))
	for _, a := range stored {
		have[a.Pod] = a
	}
	var puts []Allocation
	for pod, off := range i.byPod {
		a := Allocation{Pod: pod, Addr: i.podAddr(off), ContainerID: i.holder[pod]}
		if have[pod] != a {
			puts = append(puts, a)
		}
		delete(have, pod)
	}
	var errs []error
	var failed []kubemodel.PodID
	i.unlock()
	ctx, cancel := context.WithTimeout(ctx, i.storeTimeout)
	for _, a := range puts {
		if err := i.store.PutAllocation(ctx, a); err != nil {
			errs = append(errs, err)
			failed = append(failed, a.Pod)
		}
	}
	for pod := range have {
		if err := i.store.DeleteAllocation(ctx, pod); err != nil {
			errs = append(errs, err)
		}
	}
	cancel()
	i.relock()
	clear(i.unsure)
	for _, pod := range failed {
		i.markUnsure(pod)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ipam: resync: persist allocations: %w", err)
	}
	return nil
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
func (i *IPAM) Update(event controller.Event, txn controller.UpdateOperations) (string, error) {
	ctx := controller.ContextOf(txn)
	i.begin()
	defer i.mu.Unlock()
	switch ev := event.(type) {
	case *controller.AddPod:
		r, err := i.allocate(ctx, ev.Pod, ev.ContainerID, ev.IPAMType, ev.IPAMData)
		if err != nil {
			return "", err
		}
		switch r.outcome {
		case allocNew:
			i.revert = pendingRevert{ev: event, pod: ev.Pod}
			return fmt.Sprintf("allocated %s for pod %s", r.addr, ev.Pod), nil
		case allocMoved:
			i.revert = pendingRevert{ev: event, pod: ev.Pod, moved: true, to: ev.ContainerID, prev: r.prev}
			return fmt.Sprintf("pod %s keeps %s, now held by sandbox %s (was %s)", ev.Pod, r.addr, ev.ContainerID, sandboxName(r.prev)), nil
		}
		return fmt.Sprintf("pod %s already has %s", ev.Pod, r.addr), nil
	case *controller.DeletePod:
		r, err := i.release(ctx, ev.Pod, netip.Addr{}, releaseCause{sandbox: ev.ContainerID})
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
			return i.podDeleted(ctx, ev)
		}
		return i.nodeChanged(ev)
	}
	return "", nil
}

// podDeleted releases the address of a pod removed from the Kubernetes
// state, if IPAM still holds it with an unknown holder: normally DeletePod
// released it already, but an allocation recovered from a lagging state
// (the pod was torn down before its deletion was reflected) would
// otherwise leak. Only the address the deleted object had is released, so
// a late deletion event of a pod re-created under the same name does not
// touch the new pod's new address; and an address a known sandbox holds
// stays with it until that sandbox's DEL (or CNI GC): the sandbox may be
// the re-created pod's, which took the address over (see [IPAM.Update]).
func (i *IPAM) podDeleted(ctx context.Context, ev *controller.KubeStateChange) (string, error) {
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
		r, err := i.release(ctx, id, a.Unmap(), releaseCause{kubeDeletion: true})
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

// nodeChanged switches the pod subnet to the one of this node's changed
// node object. Caller is in an operation.
func (i *IPAM) nodeChanged(ev *controller.KubeStateChange) (string, error) {
	node, _ := ev.NewValue.(*kubemodel.Node)
	podNet, err := i.nodePodCIDR(node)
	if err != nil {
		return "", fmt.Errorf("ipam: node %s: %w", i.nodeName, err)
	}
	prev := i.podNet
	if !podNet.IsValid() || podNet == prev {
		return "", nil // no CIDR (yet / any more), or no change: keep what we have
	}
	r := i.newRebuilder(podNet, nil)
	if i.pool != nil {
		i.addMemory(r)
	}
	r.pool.cursor = r.cursor()
	i.pool, i.byPod, i.holder = r.pool, r.byPod, r.holder
	i.setPodNet(podNet)
	for pod := range i.unsure {
		if _, ok := r.byPod[pod]; !ok {
			delete(i.unsure, pod)
		}
	}
	// The records and the running pods of the new subnet are not known
	// here: allocate only after the Resync that PodCIDRChange triggers.
	i.waitResync = true
	i.unlock()
	err = i.loop.PushEvent(&PodCIDRChange{PrevPodCIDR: prev, LocalPodCIDR: podNet})
	i.relock()
	if err != nil {
		return "", fmt.Errorf("ipam: push PodCIDRChange: %w", err)
	}
	return fmt.Sprintf("pod CIDR of this node changed to %s", podNet), nil
}

// Revert undoes the AddPod event being reverted: it releases the address
// the event allocated, or, if the event moved the pod's address to its
// sandbox, gives it back to the previous holder. For other events (and
// an AddPod that changed nothing) it does nothing.
func (i *IPAM) Revert(event controller.Event) error {
	// Revert gets no transaction, so no event context: its Store call is
	// bounded by Config.StoreTimeout only.
	ctx := context.Background()
	i.begin()
	defer i.mu.Unlock()
	r := i.revert
	if r.ev == nil || r.ev != event {
		return nil
	}
	i.revert = pendingRevert{}
	if r.moved {
		return i.restoreHolder(ctx, r.pod, r.to, r.prev)
	}
	_, err := i.release(ctx, r.pod, netip.Addr{}, releaseCause{})
	return err
}

// restoreHolder makes prev ("" for unknown) the holder of pod's address
// again if the sandbox container still holds it. With a Store the record
// is rewritten; if that fails it is settled later like any failed write.
// Caller is in an operation.
func (i *IPAM) restoreHolder(ctx context.Context, pod kubemodel.PodID, container, prev string) error {
	off, ok := i.byPod[pod]
	if !ok || i.holder[pod] != container {
		return nil // released or moved on since
	}
	setHolder(&i.holder, pod, prev)
	if i.store == nil {
		return nil
	}
	a := i.podAddr(off)
	if err := i.put(ctx, pod, a, prev); err != nil {
		return fmt.Errorf("ipam: give %s of pod %s back to sandbox %s: persist: %w", a, pod, sandboxName(prev), err)
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

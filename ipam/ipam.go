package ipam

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// IPAM computes this node's subnets and addresses from the node ID and
// allocates pod IPs from this node's pod subnet. It implements [API] and
// [controller.EventHandler].
//
// IPAM is safe for concurrent use: getters may be called from any
// goroutine, also while Resync or Update run on the event loop goroutine.
// The zero value is not usable; create one with [New].
type IPAM struct {
	lay          layout
	nodes        NodeIDSource
	store        Store
	storeTimeout time.Duration
	loop         controller.EventLoop
	nodeName     string
	log          *slog.Logger

	// mu guards every field below; one rule, whatever the configuration.
	// An operation that changes the allocations — Resync, Update, Revert,
	// AllocatePodIP (AllocatePodAddr), ReleasePodIP — runs from begin to
	// end with mu held, except across its calls out of IPAM (the Store,
	// the event loop): for those it sets busy and releases mu (unlock),
	// touches no field, and takes mu back (relock). Meanwhile the other
	// operations wait in begin until busy is clear, and the getters, which
	// hold mu only to read, go on. So operations run one at a time, and a
	// getter never waits for the Store.
	mu   sync.Mutex
	idle sync.Cond // L is &mu; signalled when busy is cleared
	busy bool      // an operation waits for a call out of IPAM

	nodeID  uint32       // 0 until the first successful Resync
	hostNet netip.Prefix // this node's VPP-host subnet
	podNet  netip.Prefix // this node's pod subnet, invalid if unknown
	pool    *pool        // nil when podNet is invalid
	byPod   map[kubemodel.PodID]uint64
	podBase u128 // network address of podNet
	podIs4  bool // podNet is IPv4
	// holder maps the pods of byPod whose holder is known to the
	// container ID of the sandbox that holds their address; a pod of
	// byPod missing here has an unknown holder. Its keys are a subset of
	// byPod's. Nil until needed.
	holder map[kubemodel.PodID]string
	// unsure holds the pods of byPod whose record in the Store may differ
	// from the allocation: a Put or Delete of theirs failed, so it may or
	// may not have been applied. Their addresses stay allocated until a
	// later Store call settles the record (see allocate, release and
	// syncStore). Nil until needed.
	unsure map[kubemodel.PodID]struct{}
	// waitResync: the pod subnet was switched by a change of the node
	// object (nodeChanged); allocation waits until a Resync has recovered
	// the records and the pods of the new subnet.
	waitResync bool
	// warnedNoStore: the missing Store was logged.
	warnedNoStore bool
	// revert is what Revert undoes for the AddPod event being processed.
	revert pendingRevert
}

// pendingRevert is what Revert undoes for one AddPod event: the
// allocation of the pod's address, or the move of the address to the
// event's sandbox. The zero value means nothing to undo. It is a value.
type pendingRevert struct {
	ev  controller.Event // the AddPod event; nil: nothing to undo
	pod kubemodel.PodID
	// moved: the event moved the pod's address from the sandbox prev
	// ("" if unknown) to its own, to; otherwise it allocated the address.
	moved    bool
	to, prev string
}

var (
	_ API                     = (*IPAM)(nil)
	_ controller.EventHandler = (*IPAM)(nil)
)

// New validates cfg and returns an IPAM. nodes provides this node's ID; it
// is read on every Resync. New does no I/O and starts no goroutines. Every
// invalid Config field is reported, joined into one error (see
// [ConfigError]).
//
// Until the first successful Resync the node-specific getters return nil
// and AllocatePodIP returns [ErrNotReady]; the getters that depend only on
// the configuration (NodeIPAddress, VxlanIPAddress, the AllNodes and
// OtherNode subnets, ServiceNetwork) work right away.
func New(nodes NodeIDSource, cfg Config) (*IPAM, error) {
	if nodes == nil {
		return nil, errors.New("ipam: nil NodeIDSource")
	}
	lay, err := resolveConfig(cfg)
	if err != nil {
		return nil, err
	}
	i := &IPAM{
		lay:          lay,
		nodes:        nodes,
		store:        cfg.Store,
		storeTimeout: lay.storeTimeout,
		loop:         cfg.EventLoop,
		nodeName:     cfg.NodeName,
		log:          cfg.Logger,
		byPod:        make(map[kubemodel.PodID]uint64),
	}
	i.idle.L = &i.mu
	if i.log == nil {
		i.log = slog.New(slog.DiscardHandler)
	}
	i.log = i.log.With(slog.String("component", "ipam"))
	return i, nil
}

// ---- configuration-only getters ----

// NodeIPAddress computes the node interconnect IP address of the node with
// the given ID: the network address of NodeInterconnectCIDR plus nodeID
// (plus one more from the default gateway's offset upward). It returns the
// address and the interconnect subnet. With NodeInterconnectDHCP it returns
// [ErrNoNodeInterconnect]; an ID that gives the broadcast address or falls
// outside the subnet gives [ErrInvalidNodeID].
func (i *IPAM) NodeIPAddress(nodeID uint32) (net.IP, *net.IPNet, error) {
	a, err := i.NodeAddr(nodeID)
	if err != nil {
		return nil, nil, err
	}
	return toNetIP(a.Addr()), toIPNet(a.Masked()), nil
}

// NodeAddr is NodeIPAddress as a netip.Prefix: the node interconnect
// address with the prefix length of NodeInterconnectCIDR (192.168.16.5/24).
func (i *IPAM) NodeAddr(nodeID uint32) (netip.Prefix, error) {
	if !i.lay.nodeNet.IsValid() {
		return netip.Prefix{}, ErrNoNodeInterconnect
	}
	a, err := nodeHostAddr("NodeInterconnectCIDR", i.lay.nodeNet, i.lay.gateway, nodeID)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, i.lay.nodeNet.Bits()), nil
}

// VxlanIPAddress computes the IP address of the VXLAN interface of the node
// with the given ID (network address of VXLANCIDR plus nodeID) and returns
// it with the VXLAN subnet.
func (i *IPAM) VxlanIPAddress(nodeID uint32) (net.IP, *net.IPNet, error) {
	a, err := i.VxlanAddr(nodeID)
	if err != nil {
		return nil, nil, err
	}
	return toNetIP(a.Addr()), toIPNet(a.Masked()), nil
}

// VxlanAddr is VxlanIPAddress as a netip.Prefix: the VXLAN address with the
// prefix length of VXLANCIDR (192.168.30.5/24).
func (i *IPAM) VxlanAddr(nodeID uint32) (netip.Prefix, error) {
	a, err := nodeHostAddr("VXLANCIDR", i.lay.vxlan, netip.Addr{}, nodeID)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, i.lay.vxlan.Bits()), nil
}

// HostInterconnectSubnetAllNodes returns the range of the VPP-to-host links
// of all nodes.
func (i *IPAM) HostInterconnectSubnetAllNodes() *net.IPNet { return toIPNet(i.lay.hostAll) }

// HostInterconnectSubnetAllNodesPrefix is HostInterconnectSubnetAllNodes
// as a netip.Prefix.
func (i *IPAM) HostInterconnectSubnetAllNodesPrefix() netip.Prefix { return i.lay.hostAll }

// HostInterconnectSubnetOtherNode returns the VPP-host subnet of the node
// with the given ID.
func (i *IPAM) HostInterconnectSubnetOtherNode(nodeID uint32) (*net.IPNet, error) {
	p, err := i.HostInterconnectSubnetOtherNodePrefix(nodeID)
	if err != nil {
		return nil, err
	}
	return toIPNet(p), nil
}

// HostInterconnectSubnetOtherNodePrefix is HostInterconnectSubnetOtherNode
// as a netip.Prefix.
func (i *IPAM) HostInterconnectSubnetOtherNodePrefix(nodeID uint32) (netip.Prefix, error) {
	return nodeSlice("VPPHostSubnetCIDR", i.lay.hostAll, i.lay.hostLen, nodeID)
}

// PodSubnetAllNodes returns the pod range of all nodes.
func (i *IPAM) PodSubnetAllNodes() *net.IPNet { return toIPNet(i.lay.podAll) }

// PodSubnetAllNodesPrefix is PodSubnetAllNodes as a netip.Prefix.
func (i *IPAM) PodSubnetAllNodesPrefix() netip.Prefix { return i.lay.podAll }

// PodSubnetOtherNode returns the pod subnet of the node with the given ID.
// In external IPAM mode it returns [ErrExternalIPAM].
func (i *IPAM) PodSubnetOtherNode(nodeID uint32) (*net.IPNet, error) {
	p, err := i.PodSubnetOtherNodePrefix(nodeID)
	if err != nil {
		return nil, err
	}
	return toIPNet(p), nil
}

// PodSubnetOtherNodePrefix is PodSubnetOtherNode as a netip.Prefix.
func (i *IPAM) PodSubnetOtherNodePrefix(nodeID uint32) (netip.Prefix, error) {
	if i.lay.external {
		return netip.Prefix{}, ErrExternalIPAM
	}
	return nodeSlice("PodSubnetCIDR", i.lay.podAll, i.lay.podLen, nodeID)
}

// ServiceNetwork returns the service range.
func (i *IPAM) ServiceNetwork() *net.IPNet { return toIPNet(i.lay.service) }

// ServiceNetworkPrefix is ServiceNetwork as a netip.Prefix.
func (i *IPAM) ServiceNetworkPrefix() netip.Prefix { return i.lay.service }

// ---- this node's getters ----

// NodeID returns this node's ID as of the last successful Resync, or 0.
func (i *IPAM) NodeID() uint32 {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.nodeID
}

// HostInterconnectSubnetThisNode returns this node's VPP-host subnet, or
// nil before the first successful Resync.
func (i *IPAM) HostInterconnectSubnetThisNode() *net.IPNet {
	return toIPNet(i.HostInterconnectSubnetThisNodePrefix())
}

// HostInterconnectSubnetThisNodePrefix is HostInterconnectSubnetThisNode as
// a netip.Prefix; the invalid Prefix before the first successful Resync.
func (i *IPAM) HostInterconnectSubnetThisNodePrefix() netip.Prefix {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.hostNet
}

// HostInterconnectIPInVPP returns the VPP end of this node's VPP-host link:
// the first address after the network address of its subnet. Nil before the
// first successful Resync.
func (i *IPAM) HostInterconnectIPInVPP() net.IP { return toNetIP(i.HostInterconnectAddrInVPP()) }

// HostInterconnectAddrInVPP is HostInterconnectIPInVPP as a netip.Addr; the
// invalid Addr before the first successful Resync.
func (i *IPAM) HostInterconnectAddrInVPP() netip.Addr { return i.hostAddr(1) }

// HostInterconnectIPInLinux returns the host (Linux) end of this node's
// VPP-host link: the second address of its subnet. Nil before the first
// successful Resync.
func (i *IPAM) HostInterconnectIPInLinux() net.IP { return toNetIP(i.HostInterconnectAddrInLinux()) }

// HostInterconnectAddrInLinux is HostInterconnectIPInLinux as a netip.Addr;
// the invalid Addr before the first successful Resync.
func (i *IPAM) HostInterconnectAddrInLinux() netip.Addr { return i.hostAddr(2) }

// NatLoopbackIP returns the address of the virtual NAT loopback. It is the
// last address before the broadcast address of this node's VPP-host subnet
// (172.30.5.254 for node 5 with the defaults): a vswitch-internal address,
// so it never takes a pod IP. Nil before the first successful Resync.
func (i *IPAM) NatLoopbackIP() net.IP { return toNetIP(i.NatLoopbackAddr()) }

// NatLoopbackAddr is NatLoopbackIP as a netip.Addr; the invalid Addr before
// the first successful Resync.
func (i *IPAM) NatLoopbackAddr() netip.Addr {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.hostNet.IsValid() {
		return netip.Addr{}
	}
	return lastAddr(i.hostNet).Prev()
}

func (i *IPAM) hostAddr(n uint64) netip.Addr {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.hostNet.IsValid() {
		return netip.Addr{}
	}
	return nthAddr(i.hostNet, u128{lo: n})
}

// PodSubnetThisNode returns this node's pod subnet: slice number nodeID of
// PodSubnetCIDR, or with external IPAM the pod CIDR Kubernetes assigned to
// the node. Nil while unknown.
func (i *IPAM) PodSubnetThisNode() *net.IPNet {
	i.mu.Lock()
	defer i.mu.Unlock()
	return toIPNet(i.podNet)
}

// PodSubnetThisNodePrefix is PodSubnetThisNode as a netip.Prefix; the
// invalid Prefix while unknown.
func (i *IPAM) PodSubnetThisNodePrefix() netip.Prefix {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.podNet
}

// PodGatewayIP returns the gateway of this node's pod subnet (the first
// address after the network address), or nil while the subnet is unknown.
func (i *IPAM) PodGatewayIP() net.IP { return toNetIP(i.PodGatewayAddr()) }

// PodGatewayAddr is PodGatewayIP as a netip.Addr; the invalid Addr while
// the subnet is unknown.
func (i *IPAM) PodGatewayAddr() netip.Addr {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.podNet.IsValid() {
		return netip.Addr{}
	}
	return i.podNet.Addr().Next()
}

// GetPodIP returns the address allocated to the pod, with the mask of this
// node's pod subnet (10.1.5.2/24 with the defaults), or nil if the pod has
// none.
//
// This deliberately differs from the reference implementation, which
// returns the address with a host mask (/32, /128): the subnet mask is
// what the pod's interface is configured with and tells the caller the
// on-link pod subnet and, with PodGatewayIP, the whole CNI result. A
// caller that needs the host prefix (for a /32 route) uses PodAddr or
// sets the mask to the address length itself.
//
// A pod whose allocation failed to persist (see AllocatePodIP) keeps its
// reserved address and is reported here until the reservation is settled.
func (i *IPAM) GetPodIP(podID kubemodel.PodID) *net.IPNet {
	i.mu.Lock()
	defer i.mu.Unlock()
	off, ok := i.byPod[podID]
	if !ok {
		return nil
	}
	return addrIPNet(i.podAddr(off), i.podNet)
}

// PodAddr returns the address allocated to the pod; ok is false if it has
// none.
func (i *IPAM) PodAddr(podID kubemodel.PodID) (addr netip.Addr, ok bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	off, ok := i.byPod[podID]
	if !ok {
		return netip.Addr{}, false
	}
	return i.podAddr(off), true
}

// Allocations returns a snapshot of all pod IP allocations with the
// sandboxes holding them (see [Allocation]), sorted by address. The slice
// is the caller's.
func (i *IPAM) Allocations() []Allocation {
	i.mu.Lock()
	out := make([]Allocation, 0, len(i.byPod))
	for pod, off := range i.byPod {
		out = append(out, Allocation{Pod: pod, Addr: i.podAddr(off), ContainerID: i.holder[pod]})
	}
	i.mu.Unlock()
	slices.SortFunc(out, func(a, b Allocation) int { return a.Addr.Compare(b.Addr) })
	return out
}

// PoolUsage describes this node's pod address pool. It is a value.
type PoolUsage struct {
	// Subnet is this node's pod subnet; invalid while it is unknown
	// (before the first Resync, or without a pod CIDR in external mode).
	Subnet netip.Prefix
	// Capacity is the number of addresses that can be handed out (the
	// network, gateway and broadcast addresses excluded; for a slice of 64
	// or more host bits, the 2^64-2 offsets the pool uses). 0 while Subnet
	// is invalid.
	Capacity uint64
	// Allocated is the number of addresses allocated (reservations whose
	// record is not settled included).
	Allocated uint64
}

// PoolUsage returns the size and use of this node's pod address pool, for
// metrics. It costs O(1) and is safe for concurrent use.
func (i *IPAM) PoolUsage() PoolUsage {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.pool == nil {
		return PoolUsage{Subnet: i.podNet}
	}
	return PoolUsage{Subnet: i.podNet, Capacity: i.pool.capacity(), Allocated: i.pool.n}
}

// ---- allocation ----

// AllocatePodIP allocates an IP address for the pod and returns it.
//
// It is idempotent: a pod that already has an address gets the same one.
// With an empty ipamType the address is the next free one after the last
// allocated (a released address is reused only after wrap-around); the
// network, gateway and broadcast addresses are never handed out. When every
// address is taken it returns an error wrapping [ErrPoolExhausted].
//
// A non-empty ipamType means an external IPAM plugin already chose the
// address: ipamData carries it as an address ("10.1.5.7"), a CIDR
// ("10.1.5.7/24") or a CNI result ({"ips":[{"address":"10.1.5.7/24"}]}).
// It must be a pod address of this node's pod subnet that no other pod has
// ([ConflictError]); it is then recorded like any other allocation.
//
// With a Store the allocation is persisted before it is returned. A Store
// error fails the allocation, but the Store may have written the record
// anyway (an etcd request that times out after the write): the address
// therefore stays reserved for the pod and is not handed to another pod
// until the outcome is settled — a retried AllocatePodIP of the pod
// persists the same address again and returns it, ReleasePodIP deletes
// the record and frees the address, and a Resync rewrites the record.
//
// AllocatePodIP knows no container ID: a new allocation has an unknown
// holder (see [Allocation.ContainerID]), and the holder of an existing
// one is kept. The AddPod events of [IPAM.Update] carry the sandbox.
//
// AllocatePodIP takes no context (its signature is the documented IPAM
// API): its Store write is bounded by Config.StoreTimeout only. The AddPod
// events of [IPAM.Update] use the event's context.
func (i *IPAM) AllocatePodIP(podID kubemodel.PodID, ipamType string, ipamData string) (net.IP, error) {
	i.begin()
	r, err := i.allocate(context.Background(), podID, "", ipamType, ipamData)
	i.mu.Unlock() // not deferred: the hot path (a defer costs ~10% here)
	if err != nil {
		return nil, err
	}
	return toNetIP(r.addr), nil
}

// AllocatePodAddr is AllocatePodIP with the built-in allocator, returning
// a netip.Addr (it does not allocate memory without a Store). Like
// AllocatePodIP it records no holder.
func (i *IPAM) AllocatePodAddr(podID kubemodel.PodID) (netip.Addr, error) {
	i.begin()
	r, err := i.allocate(context.Background(), podID, "", "", "")
	i.mu.Unlock() // not deferred: the hot path
	return r.addr, err
}

// allocOutcome says what allocate did.
type allocOutcome int

const (
	allocExisting allocOutcome = iota // the pod had the address (and the holder) already
	allocNew                          // newly allocated, or first persisted now after a failed write
	allocMoved                        // the pod kept its address; its holder changed to the caller's sandbox
)

type allocResult struct {
	addr    netip.Addr
	outcome allocOutcome
	prev    string // allocMoved: the previous holder ("" if unknown)
}

// allocate returns the pod's address and what it did. A non-empty
// container becomes the holder of the address (a pod that holds an
// address already keeps it and the holder moves); an empty one leaves the
// holder as it is (unknown for a new allocation). Caller is in an
// operation (holds mu).
func (i *IPAM) allocate(ctx context.Context, pod kubemodel.PodID, container, ipamType, ipamData string) (allocResult, error) {
	if pod.Name == "" {
		return allocResult{}, fmt.Errorf("%w: allocate pod IP for %q", ErrInvalidPodID, pod.String())
	}
	var want netip.Addr // address chosen by an external IPAM plugin
	if ipamType != "" {
		a, ok := parseIPAMData(ipamData)
		if !ok {
			return allocResult{}, fmt.Errorf("%w: allocate pod IP for %s (IPAM type %s): %q is neither an address, a CIDR nor a CNI result with ips",
				ErrInvalidIPAMData, pod, ipamType, ipamData)
		}
		want = a
	}
	if i.pool == nil || i.waitResync {
		return allocResult{}, i.notReady("allocate pod IP for " + pod.String())
	}
	if off, ok := i.byPod[pod]; ok {
		r := allocResult{addr: i.podAddr(off)}
		holder := i.holder[pod]
		if container != "" && container != holder {
			// A re-created sandbox of the pod: it gets the pod's address,
			// and the DEL of the old sandbox must not release it.
			r.outcome, r.prev, holder = allocMoved, holder, container
			setHolder(&i.holder, pod, container)
		}
		if _, unsure := i.unsure[pod]; unsure {
			// An earlier write of this allocation failed: the first
			// successful write allocates it.
			r.outcome = allocNew
		}
		if r.outcome == allocExisting {
			return r, nil
		}
		if i.store != nil {
			if err := i.put(ctx, pod, r.addr, holder); err != nil {
				return allocResult{}, allocPersistError(pod, r.addr, err)
			}
		}
		return r, nil
	}
	var off uint64
	if !want.IsValid() {
		o, ok := i.pool.alloc()
		if !ok {
			return allocResult{}, fmt.Errorf("%w: allocate pod IP for %s in %s", ErrPoolExhausted, pod, i.podNet)
		}
		off = o
	} else {
		o, ok := offsetIn(i.podNet, want)
		if !ok || o < i.pool.lo || o > i.pool.hi {
			return allocResult{}, fmt.Errorf("%w: allocate pod IP for %s (IPAM type %s): %s is not a pod address of %s",
				ErrInvalidIPAMData, pod, ipamType, want, i.podNet)
		}
		if !i.pool.claim(o) {
			return allocResult{}, &ConflictError{Addr: want, Owner: i.ownerOf(o)}
		}
		off = o
	}
	i.byPod[pod] = off
	if container != "" {
		setHolder(&i.holder, pod, container)
	}
	addr := i.podAddr(off)
	if i.store != nil {
		if err := i.put(ctx, pod, addr, container); err != nil {
			return allocResult{}, allocPersistError(pod, addr, err)
		}
	}
	return allocResult{addr: addr, outcome: allocNew}, nil
}

func allocPersistError(pod kubemodel.PodID, addr netip.Addr, err error) error {
	return fmt.Errorf("ipam: allocate pod IP for %s: persist %s (reserved for the pod until a retried allocation persists it or its release deletes it): %w",
		pod, addr, err)
}

// setHolder records holder as the sandbox holding pod's address in the
// holder map *m (made on first use), or forgets pod's holder when holder
// is "" (unknown). The IPAM's map: caller holds mu.
func setHolder(m *map[kubemodel.PodID]string, pod kubemodel.PodID, holder string) {
	if holder == "" {
		delete(*m, pod)
		return
	}
	if *m == nil {
		*m = make(map[kubemodel.PodID]string)
	}
	(*m)[pod] = holder
}

// begin starts an operation: it waits until no other operation runs and
// returns with mu held. The operation ends with i.mu.Unlock().
func (i *IPAM) begin() {
	i.mu.Lock()
	for i.busy {
		i.idle.Wait()
	}
}

// unlock lets the running operation call out of IPAM (the Store, the
// event loop) without mu: other operations keep waiting, getters go on.
// Until relock the operation must not touch any field.
func (i *IPAM) unlock() {
	i.busy = true
	i.mu.Unlock()
}

// relock takes mu back after unlock.
func (i *IPAM) relock() {
	i.mu.Lock()
	i.busy = false
	i.idle.Broadcast()
}

// put persists the allocation of pod (which holds addr, held by the
// sandbox holder, "" if unknown), bounded by ctx and Config.StoreTimeout,
// and records the outcome in unsure. On error the allocation is kept: the
// write may have been applied. Caller is in an operation.
func (i *IPAM) put(ctx context.Context, pod kubemodel.PodID, addr netip.Addr, holder string) error {
	i.unlock()
	ctx, cancel := context.WithTimeout(ctx, i.storeTimeout)
	err := i.store.PutAllocation(ctx, Allocation{Pod: pod, Addr: addr, ContainerID: holder})
	cancel()
	i.relock()
	if err != nil {
		i.markUnsure(pod)
	} else {
		delete(i.unsure, pod)
	}
	return err
}

// markUnsure records that the Store record of pod may differ from its
// allocation. Caller holds mu.
func (i *IPAM) markUnsure(pod kubemodel.PodID) {
	if i.unsure == nil {
		i.unsure = make(map[kubemodel.PodID]struct{})
	}
	i.unsure[pod] = struct{}{}
}

// notReady explains why no address can be allocated for what, e.g.
// "allocate pod IP for ns/name". Caller holds mu.
func (i *IPAM) notReady(what string) error {
	switch {
	case i.nodeID == 0:
		return fmt.Errorf("%w: %s: no successful resync yet (this node's ID is not known)", ErrNotReady, what)
	case i.waitResync:
		return fmt.Errorf("%w: %s: the pod CIDR of node %s changed to %s; waiting for the resync that follows", ErrNotReady, what, i.nodeName, i.podNet)
	default:
		return fmt.Errorf("%w: %s: the pod CIDR of node %s is not known yet", ErrNotReady, what, i.nodeName)
	}
}

// setPodNet sets podNet and its derived fields. Caller holds mu.
func (i *IPAM) setPodNet(p netip.Prefix) {
	i.podNet = p
	if p.IsValid() {
		i.podBase, i.podIs4 = addrBits(p.Addr()), p.Addr().Is4()
	}
}

// podAddr returns the address at offset off of this node's pod subnet.
// Caller holds mu.
func (i *IPAM) podAddr(off uint64) netip.Addr {
	if i.podIs4 {
		v := uint32(i.podBase.lo) + uint32(off)
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return i.podBase.add(u128{lo: off}).toAddr(false)
}

// ownerOf finds the pod holding offset off (slow path, for errors only).
// Caller holds mu.
func (i *IPAM) ownerOf(off uint64) kubemodel.PodID {
	for pod, o := range i.byPod {
		if o == off {
			return pod
		}
	}
	return kubemodel.PodID{}
}

// parseIPAMData extracts an address from an external IPAM plugin's data:
// an address, a CIDR or a CNI result with ips; ok is false for anything
// else.
func parseIPAMData(data string) (netip.Addr, bool) {
	s := strings.TrimSpace(data)
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a.Unmap(), true
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr().Unmap(), true
	}
	var res struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if err := json.Unmarshal([]byte(s), &res); err == nil && len(res.IPs) > 0 {
		if p, err := netip.ParsePrefix(res.IPs[0].Address); err == nil {
			return p.Addr().Unmap(), true
		}
		if a, err := netip.ParseAddr(res.IPs[0].Address); err == nil && a.Zone() == "" {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// ReleasePodIP releases the pod's address, making it available for new pods
// (after the allocator wraps around). Releasing a pod without an address is
// not an error. With a Store the record is deleted first (also when IPAM
// knows no address of the pod, so that no record of a released pod
// survives); if that fails the address stays allocated and the error is
// returned, and a retried release deletes it again.
//
// ReleasePodIP knows no container ID: it releases the address whichever
// sandbox holds it, like a DeletePod without a container ID (see
// [IPAM.Update]). Like AllocatePodIP it takes no context: its Store call
// is bounded by Config.StoreTimeout only.
func (i *IPAM) ReleasePodIP(podID kubemodel.PodID) error {
	i.begin()
	_, err := i.release(context.Background(), podID, netip.Addr{}, releaseCause{})
	i.mu.Unlock() // not deferred: the hot path
	return err
}

// releaseCause says who asks for a release, which decides whether the
// sandbox holding the address keeps it (see [IPAM.Update]). The zero
// value is a release whatever sandbox holds the address: the direct API,
// or a DeletePod without a container ID. It is a value.
type releaseCause struct {
	// sandbox is the container ID of the DeletePod's sandbox; "" if not
	// known.
	sandbox string
	// kubeDeletion: the pod was deleted from the Kubernetes state, which
	// knows no sandbox.
	kubeDeletion bool
}

// String describes the cause for messages: "sandbox <id>", "deletion from
// Kubernetes" or "any sandbox".
func (c releaseCause) String() string {
	switch {
	case c.sandbox != "":
		return "sandbox " + c.sandbox
	case c.kubeDeletion:
		return "deletion from Kubernetes"
	}
	return "any sandbox"
}

// selective reports whether the release depends on the holder of the
// address.
func (c releaseCause) selective() bool { return c.sandbox != "" || c.kubeDeletion }

// keptBy reports whether the sandbox holder ("" if unknown) keeps the
// address against this release: a known holder keeps it against the DEL
// of another sandbox of the pod and against the pod's deletion from the
// Kubernetes state.
func (c releaseCause) keptBy(holder string) bool {
	return holder != "" && c.selective() && holder != c.sandbox
}

type releaseResult struct {
	addr netip.Addr // the released address; invalid if nothing was released
	// kept is the address not released because the sandbox holder (not
	// the caller's) holds it; invalid if not so.
	kept   netip.Addr
	holder string
}

// release releases the pod's address; if only is valid, only when the pod
// has exactly that address; and not when its holder keeps it against
// cause (see releaseCause.keptBy). Caller is in an operation.
func (i *IPAM) release(ctx context.Context, pod kubemodel.PodID, only netip.Addr, cause releaseCause) (releaseResult, error) {
	off, ok := i.byPod[pod]
	if only.IsValid() && (!ok || i.podAddr(off) != only) {
		return releaseResult{}, nil
	}
	if ok && cause.selective() {
		if h := i.holder[pod]; cause.keptBy(h) {
			return releaseResult{kept: i.podAddr(off), holder: h}, nil
		}
	} else if !ok && i.store != nil && cause.selective() && (i.pool == nil || i.waitResync) {
		// The pod's record, if any, is not loaded: it may name
		// another sandbox of the pod, which the blind delete below
		// would release.
		return releaseResult{}, i.notReady(fmt.Sprintf("release pod IP of %s (%s)", pod, cause))
	}
	if i.store != nil {
		// A pod IPAM knows no address of may still have a record: one
		// that was not loaded yet (no pod subnet yet) or one whose
		// deletion failed in a Resync. CNI DEL of such a pod deletes it.
		i.unlock()
		ctx, cancel := context.WithTimeout(ctx, i.storeTimeout)
		err := i.store.DeleteAllocation(ctx, pod)
		cancel()
		i.relock()
		if err != nil {
			if ok {
				// The delete may have been applied: settle it later.
				i.markUnsure(pod)
			}
			return releaseResult{}, fmt.Errorf("ipam: release pod IP of %s: persist: %w", pod, err)
		}
	}
	if !ok {
		return releaseResult{}, nil
	}
	delete(i.byPod, pod)
	if i.holder != nil {
		delete(i.holder, pod)
	}
	if i.unsure != nil {
		delete(i.unsure, pod)
	}
	i.pool.release(off)
	return releaseResult{addr: i.podAddr(off)}, nil
}

func comparePodID(a, b kubemodel.PodID) int {
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

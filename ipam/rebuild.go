package ipam

import (
	"log/slog"
	"maps"
	"net/netip"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

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
// Kubernetes state. Caller is in an operation.
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

// addMemory feeds the current in-memory allocations (with their holders)
// to r, which has claimed nothing yet, in its first pass. In the same
// subnet they cannot conflict with each other: r starts from a copy of
// them, and takes the holder map over without copying it — in the same
// subnet no memory claim is dropped, so the later passes only add and
// remove the holders of the pods they claim, and the caller, holding mu
// throughout, replaces i's state with r's. Caller is in an operation.
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

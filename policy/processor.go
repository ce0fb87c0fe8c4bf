package policy

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Config holds the optional settings of a [Processor]. The zero value is
// valid.
type Config struct {
	// NodeName is this node's Kubernetes name: pods whose node name is
	// NodeName are the local pods whose policies the processor computes.
	// Default "": every pod record the processor sees is local (the
	// watcher of an agent delivers only this node's pods).
	NodeName string

	// PodAddrs returns a local pod's addresses when its Kubernetes record
	// has none yet (a pod the CNI server is connecting: the address is
	// allocated before Kubernetes reports it), e.g. IPAM's. It is called
	// on the loop's goroutine. Default: only the records' addresses.
	PodAddrs func(kubemodel.PodID) []netip.Addr

	// Logger receives a warning when a policy becomes invalid (and an
	// info when it is valid again) and debug messages. Default: discard.
	Logger *slog.Logger
}

// Processor keeps, for every pod of this node, its effective
// NetworkPolicy ([PodPolicy]) computed from the cluster's namespaces,
// network policies and pods, and tells registered renderers what changed.
//
// Every pod of the cluster is a potential peer; the processor keeps of
// each only what policies can refer to (namespace, labels, addresses,
// named ports), from the compact [kubemodel.PodPeer] records, and the
// local pods whole. Changes are incremental: a change recomputes only the
// local pods whose view can change (those selected by a policy that
// changed, or by a policy whose peer set the change alters), and
// renderers hear only of views that did change.
//
// The processor is driven by a controller loop through [Processor.Handler]
// (events are processed one at a time). Its getters are safe for
// concurrent use.
type Processor struct {
	cfg Config
	log *slog.Logger

	mu sync.Mutex // guards everything below

	namespaces map[string]map[string]string            // labels by namespace
	peerRecs   map[kubemodel.PodID]*podInfo            // from PodPeer records
	localRecs  map[kubemodel.PodID]*podInfo            // local pods, from Pod records
	nsPods     map[string]map[kubemodel.PodID]struct{} // pods with a peer record or a local one, by namespace
	nsLocals   map[string]map[kubemodel.PodID]struct{} // local pods by namespace
	policies   map[kubemodel.PolicyID]*compiledPolicy  // valid policies
	nsPolicies map[string][]*compiledPolicy            // valid policies by namespace, sorted by name
	invalid    map[kubemodel.PolicyID]error            // invalid policies
	sels       map[string]*peerSel                     // interned peer selectors by key
	nsSels     map[string]map[*peerSel]struct{}        // selectors of one namespace's pods
	crossSels  map[*peerSel]struct{}                   // selectors with a namespace selector
	anywhere   map[kubemodel.PolicyID]*compiledPolicy  // policies with namedEgressAnywhere
	views      map[kubemodel.PodID]*PodPolicy          // effective policies of local pods
	dirty      map[kubemodel.PodID]struct{}            // local pods to recompute
	renderers  []Renderer
	stats      Stats
}

// podInfo is what the processor knows of one pod.
type podInfo struct {
	id     kubemodel.PodID
	labels map[string]string
	addrs  []netip.Addr
	ports  []namedPort
	node   string
	// fromIPAM: addrs came from Config.PodAddrs, not from the record.
	fromIPAM bool
}

func (p *podInfo) same(q *podInfo) bool {
	return p.id == q.id && maps.Equal(p.labels, q.labels) && slices.Equal(p.addrs, q.addrs) &&
		slices.Equal(p.ports, q.ports) && p.node == q.node
}

// peerSel is one interned pod/namespace selector peer and the pods it
// currently selects.
type peerSel struct {
	spec     peerSpec
	key      string
	members  map[kubemodel.PodID]struct{}
	users    map[kubemodel.PolicyID]int // policies using it, with the number of uses
	addrs    []netip.Addr               // the members' addresses, sorted (a multiset)
	prefixes []netip.Prefix             // aggregated addrs, valid unless stale
	stale    bool
}

// Stats are the processor's counters and sizes.
type Stats struct {
	Policies        int           `json:"policies"`        // valid network policies
	InvalidPolicies int           `json:"invalidPolicies"` // invalid ones, ignored (see [Processor.PolicyErrors])
	LocalPods       int           `json:"localPods"`       // pods of this node
	IsolatedIngress int           `json:"isolatedIngress"` // local pods isolated for ingress
	IsolatedEgress  int           `json:"isolatedEgress"`  // local pods isolated for egress
	Peers           int           `json:"peers"`           // pods known as peers
	PeerSelectors   int           `json:"peerSelectors"`   // distinct pod/namespace selectors of the policies
	Recomputed      uint64        `json:"recomputed"`      // local pod views computed since start
	Rendered        uint64        `json:"rendered"`        // render calls
	LastRender      time.Duration `json:"lastRender"`      // the last event's computation and render time
}

// New returns a processor. It does no I/O.
func New(cfg Config) (*Processor, error) {
	if cfg.NodeName != "" {
		if err := kubemodel.ValidateName(cfg.NodeName); err != nil {
			return nil, fmt.Errorf("policy: Config.NodeName: %w", err)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Processor{cfg: cfg, log: log.With(slog.String("component", "policy"))}
	p.reset()
	return p, nil
}

func (p *Processor) reset() {
	p.namespaces = map[string]map[string]string{}
	p.peerRecs = map[kubemodel.PodID]*podInfo{}
	p.localRecs = map[kubemodel.PodID]*podInfo{}
	p.nsPods = map[string]map[kubemodel.PodID]struct{}{}
	p.nsLocals = map[string]map[kubemodel.PodID]struct{}{}
	p.policies = map[kubemodel.PolicyID]*compiledPolicy{}
	p.nsPolicies = map[string][]*compiledPolicy{}
	p.invalid = map[kubemodel.PolicyID]error{}
	p.sels = map[string]*peerSel{}
	p.nsSels = map[string]map[*peerSel]struct{}{}
	p.crossSels = map[*peerSel]struct{}{}
	p.anywhere = map[kubemodel.PolicyID]*compiledPolicy{}
	p.views = map[kubemodel.PodID]*PodPolicy{}
	p.dirty = map[kubemodel.PodID]struct{}{}
}

// RegisterRenderer adds a renderer. If the processor has state already,
// the renderer gets a Resync with it at once (without a transaction).
func (p *Processor) RegisterRenderer(r Renderer) error {
	if r == nil {
		return ErrNilRenderer
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.renderers = append(p.renderers, r)
	if len(p.views) == 0 {
		return nil
	}
	return r.RenderPolicy(RenderEvent{Kind: Resync, Snapshot: p.snapshot()})
}

// PodPolicy returns the effective policy of a local pod.
func (p *Processor) PodPolicy(id kubemodel.PodID) (*PodPolicy, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.views[id]
	return v, ok
}

// PodPolicies returns the effective policy of every local pod, sorted by
// pod.
func (p *Processor) PodPolicies() []*PodPolicy {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshot()
}

// PolicyErrors returns the invalid policies with their errors (each a
// [*PolicyError]); the processor ignores them.
func (p *Processor) PolicyErrors() map[kubemodel.PolicyID]error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.invalid)
}

// Stats returns a snapshot of the counters.
func (p *Processor) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	st.Policies, st.InvalidPolicies, st.LocalPods = len(p.policies), len(p.invalid), len(p.localRecs)
	st.Peers, st.PeerSelectors = len(p.peerRecs), len(p.sels)
	for id := range p.localRecs {
		if p.peerRecs[id] == nil {
			st.Peers++
		}
	}
	for _, v := range p.views {
		if v.Ingress.Isolated {
			st.IsolatedIngress++
		}
		if v.Egress.Isolated {
			st.IsolatedEgress++
		}
	}
	return st
}

// snapshot returns every view, sorted by pod.
func (p *Processor) snapshot() []*PodPolicy {
	out := slices.Collect(maps.Values(p.views))
	slices.SortFunc(out, func(a, b *PodPolicy) int { return a.Pod.Compare(b.Pod) })
	return out
}

// peer returns the effective peer information of id: its peer record, else
// its local record; nil if neither exists.
func (p *Processor) peer(id kubemodel.PodID) *podInfo {
	if pi := p.peerRecs[id]; pi != nil {
		return pi
	}
	return p.localRecs[id]
}

// ---- selectors ----

func (p *Processor) selects(s *peerSel, pi *podInfo) bool {
	if pi == nil {
		return false
	}
	if s.spec.nsSel == nil {
		if pi.id.Namespace != s.spec.ns {
			return false
		}
	} else if !s.spec.nsSel.matches(p.namespaces[pi.id.Namespace]) {
		return false
	}
	return s.spec.pod == nil || s.spec.pod.matches(pi.labels)
}

// acquire returns the interned selector of spec, creating it (and
// computing its members) if needed, and counts a use by policy id.
func (p *Processor) acquire(spec peerSpec, id kubemodel.PolicyID) *peerSel {
	key := spec.key()
	s := p.sels[key]
	if s == nil {
		s = &peerSel{spec: spec, key: key, members: map[kubemodel.PodID]struct{}{}, users: map[kubemodel.PolicyID]int{}, stale: true}
		p.sels[key] = s
		if spec.nsSel == nil {
			if p.nsSels[spec.ns] == nil {
				p.nsSels[spec.ns] = map[*peerSel]struct{}{}
			}
			p.nsSels[spec.ns][s] = struct{}{}
			for id := range p.nsPods[spec.ns] {
				if p.selects(s, p.peer(id)) {
					s.members[id] = struct{}{}
				}
			}
		} else {
			p.crossSels[s] = struct{}{}
			for ns, pods := range p.nsPods {
				if !spec.nsSel.matches(p.namespaces[ns]) {
					continue
				}
				for id := range pods {
					if p.selects(s, p.peer(id)) {
						s.members[id] = struct{}{}
					}
				}
			}
		}
		for id := range s.members {
			s.addrs = append(s.addrs, p.peer(id).addrs...)
		}
		slices.SortFunc(s.addrs, netip.Addr.Compare)
	}
	s.users[id]++
	return s
}

// release drops one use of s by policy id, and s when nobody uses it.
func (p *Processor) release(s *peerSel, id kubemodel.PolicyID) {
	if s.users[id]--; s.users[id] <= 0 {
		delete(s.users, id)
	}
	if len(s.users) > 0 {
		return
	}
	delete(p.sels, s.key)
	if s.spec.nsSel == nil {
		delete(p.nsSels[s.spec.ns], s)
		if len(p.nsSels[s.spec.ns]) == 0 {
			delete(p.nsSels, s.spec.ns)
		}
	} else {
		delete(p.crossSels, s)
	}
}

// selPrefixes returns the aggregated addresses of s's members.
func (p *Processor) selPrefixes(s *peerSel) []netip.Prefix {
	if s.stale {
		s.prefixes, s.stale = aggregateSorted(s.addrs), false
	}
	return s.prefixes
}

// addMember and dropMember keep s's members and their sorted addresses.
func (s *peerSel) addMember(id kubemodel.PodID, addrs []netip.Addr) {
	s.members[id] = struct{}{}
	for _, a := range addrs {
		i, _ := slices.BinarySearchFunc(s.addrs, a, netip.Addr.Compare)
		s.addrs = slices.Insert(s.addrs, i, a)
	}
	s.stale = true
}

func (s *peerSel) dropMember(id kubemodel.PodID, addrs []netip.Addr) {
	delete(s.members, id)
	for _, a := range addrs {
		if i, ok := slices.BinarySearchFunc(s.addrs, a, netip.Addr.Compare); ok {
			s.addrs = slices.Delete(s.addrs, i, i+1)
		}
	}
	s.stale = true
}

// selChanged marks the local pods that policies using s select as dirty.
func (p *Processor) selChanged(s *peerSel) {
	for id := range s.users {
		if pol := p.policies[id]; pol != nil {
			p.markTargets(pol)
		}
	}
}

// markTargets marks the local pods that pol selects as dirty.
func (p *Processor) markTargets(pol *compiledPolicy) {
	for id := range p.nsLocals[pol.id.Namespace] {
		if pi := p.localRecs[id]; pi != nil && pol.target.matches(pi.labels) {
			p.dirty[id] = struct{}{}
		}
	}
}

// ---- changes ----

// setPeerRecord sets (pi non-nil) or removes the peer record of id.
func (p *Processor) setPeerRecord(id kubemodel.PodID, pi *podInfo) {
	old := p.peer(id)
	if pi == nil {
		delete(p.peerRecs, id)
	} else {
		p.peerRecs[id] = pi
	}
	p.peerChanged(id, old, p.peer(id))
}

// setLocalRecord sets (pi non-nil) or removes the local record of id.
func (p *Processor) setLocalRecord(id kubemodel.PodID, pi *podInfo) {
	old := p.peer(id)
	prev := p.localRecs[id]
	if pi == nil {
		delete(p.localRecs, id)
		removeFrom(p.nsLocals, id.Namespace, id)
	} else {
		p.localRecs[id] = pi
		addTo(p.nsLocals, id.Namespace, id)
	}
	if prev != nil || pi != nil {
		p.dirty[id] = struct{}{}
	}
	p.peerChanged(id, old, p.peer(id))
}

// peerChanged updates the selectors after the effective peer information
// of id changed from old to cur (either may be nil).
func (p *Processor) peerChanged(id kubemodel.PodID, old, cur *podInfo) {
	if old == cur || (old != nil && cur != nil && old.same(cur)) {
		return
	}
	if cur == nil {
		removeFrom(p.nsPods, id.Namespace, id)
	} else {
		addTo(p.nsPods, id.Namespace, id)
	}
	addrsChanged := old == nil || cur == nil || !slices.Equal(old.addrs, cur.addrs)
	portsChanged := old == nil || cur == nil || !slices.Equal(old.ports, cur.ports)
	check := func(s *peerSel) {
		was, is := p.selects(s, old), p.selects(s, cur)
		switch {
		case was && !is:
			s.dropMember(id, old.addrs)
		case !was && is:
			s.addMember(id, cur.addrs)
		case is && addrsChanged:
			s.dropMember(id, old.addrs)
			s.addMember(id, cur.addrs)
		case is && portsChanged:
		default:
			return
		}
		p.selChanged(s)
	}
	for s := range p.nsSels[id.Namespace] {
		check(s)
	}
	for s := range p.crossSels {
		check(s)
	}
	// Rules without peers (every address) with named ports resolve them
	// on every pod, and ipBlock rules with named ports on the pods inside
	// the block: their policies' targets are recomputed when any pod's
	// ports or addresses change.
	if portsChanged || addrsChanged {
		for _, pol := range p.anywhere {
			p.markTargets(pol)
		}
	}
}

// setNamespace sets (labels non-nil) or removes a namespace's labels.
func (p *Processor) setNamespace(ns string, labels map[string]string, present bool) {
	old := p.namespaces[ns]
	if present {
		if labels == nil {
			labels = map[string]string{}
		}
		p.namespaces[ns] = labels
	} else {
		delete(p.namespaces, ns)
	}
	if maps.Equal(old, labels) {
		return
	}
	for s := range p.crossSels {
		was, is := s.spec.nsSel.matches(old), s.spec.nsSel.matches(p.namespaces[ns])
		if was == is {
			continue
		}
		changed := false
		for id := range p.nsPods[ns] {
			pi := p.peer(id)
			_, member := s.members[id]
			switch in := p.selects(s, pi); {
			case in && !member:
				s.addMember(id, pi.addrs)
				changed = true
			case !in && member:
				s.dropMember(id, pi.addrs)
				changed = true
			}
		}
		if changed {
			p.selChanged(s)
		}
	}
}

// setPolicy sets (np non-nil) or removes the policy id.
func (p *Processor) setPolicy(id kubemodel.PolicyID, np *kubemodel.NetworkPolicy) {
	if old := p.policies[id]; old != nil {
		p.markTargets(old)
		p.uninstall(old)
	}
	prevErr, wasInvalid := p.invalid[id]
	delete(p.invalid, id)
	if np == nil {
		return
	}
	pol, err := compilePolicy(np)
	if err != nil {
		p.invalid[id] = err
		if !wasInvalid || prevErr.Error() != err.Error() {
			p.log.Warn("network policy ignored", slog.String("policy", id.String()), slog.Any("error", err))
		}
		return
	}
	if wasInvalid {
		p.log.Info("network policy valid again", slog.String("policy", id.String()))
	}
	p.install(pol)
	p.markTargets(pol)
}

func (p *Processor) install(pol *compiledPolicy) {
	for _, rules := range [][]compiledRule{pol.in, pol.eg} {
		for i := range rules {
			r := &rules[i]
			for _, spec := range r.peers {
				r.sels = append(r.sels, p.acquire(spec, pol.id))
			}
		}
	}
	for _, r := range pol.eg {
		if r.named && (r.allPeers || len(r.blocks) > 0) {
			pol.namedEgressAnywhere = true
			p.anywhere[pol.id] = pol
		}
	}
	p.policies[pol.id] = pol
	list := append(p.nsPolicies[pol.id.Namespace], pol)
	slices.SortFunc(list, func(a, b *compiledPolicy) int { return cmp.Compare(a.id.Name, b.id.Name) })
	p.nsPolicies[pol.id.Namespace] = list
}

func (p *Processor) uninstall(pol *compiledPolicy) {
	for _, rules := range [][]compiledRule{pol.in, pol.eg} {
		for _, r := range rules {
			for _, s := range r.sels {
				p.release(s, pol.id)
			}
		}
	}
	delete(p.policies, pol.id)
	delete(p.anywhere, pol.id)
	list := slices.DeleteFunc(p.nsPolicies[pol.id.Namespace], func(x *compiledPolicy) bool { return x == pol })
	if len(list) == 0 {
		delete(p.nsPolicies, pol.id.Namespace)
	} else {
		p.nsPolicies[pol.id.Namespace] = list
	}
}

// ---- views ----

// compute returns the effective policy of local pod id.
func (p *Processor) compute(id kubemodel.PodID) *PodPolicy {
	p.stats.Recomputed++
	pi := p.localRecs[id]
	v := &PodPolicy{Pod: id, Addrs: p.localAddrs(pi)}
	var in, eg ruleSet
	for _, pol := range p.nsPolicies[id.Namespace] {
		if !pol.target.matches(pi.labels) {
			continue
		}
		v.Policies = append(v.Policies, pol.id)
		if pol.ingress {
			v.Ingress.Isolated = true
			for i := range pol.in {
				r := &pol.in[i]
				ports := resolvePorts(r.ports, pi.ports)
				peers, aggregated := p.rulePeers(r)
				in.add(r.allPeers, peers, aggregated, ports)
			}
		}
		if pol.egress {
			v.Egress.Isolated = true
			for i := range pol.eg {
				p.egressRule(&eg, &pol.eg[i])
			}
		}
	}
	v.Ingress.Rules, v.Egress.Rules = in.rules(), eg.rules()
	return v
}

// localAddrs returns a local pod's addresses: its peer record's, else its
// local record's (which Config.PodAddrs fills in while Kubernetes has
// none).
func (p *Processor) localAddrs(pi *podInfo) []netip.Addr {
	if pr := p.peerRecs[pi.id]; pr != nil && len(pr.addrs) > 0 {
		return pr.addrs
	}
	return pi.addrs
}

// withIPAMAddrs returns pi with the addresses of Config.PodAddrs when it
// has none of its own (pi itself otherwise).
func (p *Processor) withIPAMAddrs(pi *podInfo) *podInfo {
	if (len(pi.addrs) > 0 && !pi.fromIPAM) || p.cfg.PodAddrs == nil {
		return pi
	}
	cur := *pi
	cur.addrs, cur.fromIPAM = sortAddrs(p.cfg.PodAddrs(pi.id)), true
	return &cur
}

// rulePeers returns the peers of a rule that lists peers (read-only), and
// whether they are aggregated already (one selector or only blocks).
func (p *Processor) rulePeers(r *compiledRule) ([]netip.Prefix, bool) {
	switch {
	case r.allPeers:
		return nil, true
	case len(r.sels) == 1 && len(r.blocks) == 0:
		return p.selPrefixes(r.sels[0]), true
	case len(r.sels) == 0:
		return r.blocks, true
	}
	var ps []netip.Prefix
	for _, s := range r.sels {
		ps = append(ps, p.selPrefixes(s)...)
	}
	return append(ps, r.blocks...), false
}

// egressRule adds the rules of one egress rule: its numbered ports to all
// its peers, its named ports to each destination pod that declares them.
func (p *Processor) egressRule(eg *ruleSet, r *compiledRule) {
	peers, aggregated := p.rulePeers(r)
	eg.add(r.allPeers, peers, aggregated, numberedPorts(r.ports))
	if !r.named {
		return
	}
	var named []portSpec
	for _, s := range r.ports {
		if s.name != "" {
			named = append(named, s)
		}
	}
	add := func(pi *podInfo) {
		if pi == nil || len(pi.addrs) == 0 || len(pi.ports) == 0 {
			return
		}
		ports := resolvePorts(named, pi.ports)
		if ports.IsEmpty() {
			return
		}
		hosts := make([]netip.Prefix, len(pi.addrs))
		for i, a := range pi.addrs {
			hosts[i] = hostPrefix(a)
		}
		eg.add(false, hosts, false, ports)
	}
	seen := map[kubemodel.PodID]struct{}{}
	once := func(id kubemodel.PodID) {
		if _, ok := seen[id]; !ok {
			seen[id] = struct{}{}
			add(p.peer(id))
		}
	}
	if r.allPeers {
		for _, pods := range p.nsPods {
			for id := range pods {
				once(id)
			}
		}
		return
	}
	for _, s := range r.sels {
		for id := range s.members {
			once(id)
		}
	}
	if len(r.blocks) > 0 {
		for _, pods := range p.nsPods {
			for id := range pods {
				pi := p.peer(id)
				if pi != nil && slices.ContainsFunc(pi.addrs, func(a netip.Addr) bool {
					return slices.ContainsFunc(r.blocks, func(b netip.Prefix) bool { return b.Contains(a) })
				}) {
					once(id)
				}
			}
		}
	}
}

// flush recomputes the dirty local pods and returns the changes, sorted by
// pod.
func (p *Processor) flush() []PodChange {
	var out []PodChange
	for id := range p.dirty {
		old := p.views[id]
		var cur *PodPolicy
		if p.localRecs[id] != nil {
			cur = p.compute(id)
		}
		if old.Equal(cur) {
			continue
		}
		if cur == nil {
			delete(p.views, id)
		} else {
			p.views[id] = cur
		}
		out = append(out, PodChange{Old: old, New: cur})
	}
	clear(p.dirty)
	slices.SortFunc(out, func(a, b PodChange) int { return podOf(a).Compare(podOf(b)) })
	return out
}

func podOf(c PodChange) kubemodel.PodID {
	if c.New != nil {
		return c.New.Pod
	}
	return c.Old.Pod
}

// render sends ev to every renderer.
func (p *Processor) render(ev RenderEvent) error {
	p.stats.Rendered++
	for i, r := range p.renderers {
		if err := r.RenderPolicy(ev); err != nil {
			return fmt.Errorf("policy: renderer %d: %s: %w", i, ev.Kind, err)
		}
	}
	return nil
}

// ---- records ----

func peerInfo(m *kubemodel.PodPeer) *podInfo {
	return &podInfo{
		id: m.ID(), labels: m.GetLabels(), addrs: parseAddrs(m.GetIpAddresses()),
		ports: namedPortsOfPeer(m.GetPorts()), node: m.GetNodeName(),
	}
}

func localInfo(m *kubemodel.Pod) *podInfo {
	ips := m.GetIpAddresses()
	if len(ips) == 0 && m.GetIpAddress() != "" {
		ips = []string{m.GetIpAddress()}
	}
	return &podInfo{
		id: m.ID(), labels: m.GetLabels(), addrs: parseAddrs(ips),
		ports: namedPortsOfPod(m.GetContainers()), node: m.GetNodeName(),
	}
}

// isLocal reports whether a pod record belongs to this node.
func (p *Processor) isLocal(m *kubemodel.Pod) bool {
	return !m.GetHostNetwork() && (p.cfg.NodeName == "" || m.GetNodeName() == p.cfg.NodeName)
}

func parseAddrs(ss []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return sortAddrs(out)
}

func sortAddrs(as []netip.Addr) []netip.Addr {
	as = slices.Clone(as)
	slices.SortFunc(as, netip.Addr.Compare)
	return slices.Compact(as)
}

func addTo[K comparable, V comparable](m map[K]map[V]struct{}, k K, v V) {
	if m[k] == nil {
		m[k] = map[V]struct{}{}
	}
	m[k][v] = struct{}{}
}

func removeFrom[K comparable, V comparable](m map[K]map[V]struct{}, k K, v V) {
	delete(m[k], v)
	if len(m[k]) == 0 {
		delete(m, k)
	}
}

var _ = controller.Update // the handler (handler.go) drives the processor

// PolicyStatus is what the processor can say about one network policy.
type PolicyStatus struct {
	// Err is set for an invalid policy (a [*PolicyError]); it is ignored.
	Err error
	// LocalPods is the number of this node's pods the policy selects.
	LocalPods int
	// UnresolvedPorts are the named ports of the policy's rules that
	// match no port: for ingress on none of the local pods it selects,
	// for egress on none of the peers it names. Such a port allows
	// nothing (it is not an error: a pod may declare it later).
	UnresolvedPorts []string
}

// PolicyStatuses returns the status of every policy the processor knows,
// valid or not.
func (p *Processor) PolicyStatuses() map[kubemodel.PolicyID]PolicyStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[kubemodel.PolicyID]PolicyStatus, len(p.policies)+len(p.invalid))
	for id, err := range p.invalid {
		out[id] = PolicyStatus{Err: err}
	}
	for id, pol := range p.policies {
		out[id] = p.statusOf(pol)
	}
	return out
}

func (p *Processor) statusOf(pol *compiledPolicy) PolicyStatus {
	var st PolicyStatus
	var targets []*podInfo
	for id := range p.nsLocals[pol.id.Namespace] {
		if pi := p.localRecs[id]; pi != nil && pol.target.matches(pi.labels) {
			targets = append(targets, pi)
		}
	}
	st.LocalPods = len(targets)
	unresolved := map[string]bool{}
	declares := func(pods []*podInfo, s portSpec) bool {
		return slices.ContainsFunc(pods, func(pi *podInfo) bool {
			return slices.ContainsFunc(pi.ports, func(np namedPort) bool { return np.name == s.name && np.proto == s.proto })
		})
	}
	for _, r := range pol.in {
		for _, s := range r.ports {
			if s.name != "" && len(targets) > 0 && !declares(targets, s) {
				unresolved["ingress "+s.name] = true
			}
		}
	}
	for _, r := range pol.eg {
		var peers []*podInfo
		for _, sel := range r.sels {
			for id := range sel.members {
				peers = append(peers, p.peer(id))
			}
		}
		for _, s := range r.ports {
			if s.name != "" && !r.allPeers && len(r.blocks) == 0 && !declares(peers, s) {
				unresolved["egress "+s.name] = true
			}
		}
	}
	st.UnresolvedPorts = slices.Sorted(maps.Keys(unresolved))
	return st
}

// PodAddrsFrom adapts lookups of one address per pod (IPAM's PodAddr; one
// lookup per IP family in a dual-stack cluster) to Config.PodAddrs: a pod's
// addresses in the lookups' order, those a lookup does not know left out.
func PodAddrsFrom(lookups ...func(kubemodel.PodID) (netip.Addr, bool)) func(kubemodel.PodID) []netip.Addr {
	return func(id kubemodel.PodID) []netip.Addr {
		var out []netip.Addr
		for _, lookup := range lookups {
			if ip, ok := lookup(id); ok {
				out = append(out, ip)
			}
		}
		return out
	}
}

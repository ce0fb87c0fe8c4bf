package aclpolicy

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net/netip"
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/policy"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// Names of the ACLs the renderer shares.
const (
	// ReflectACL permits every packet and creates a session for it: the
	// input ACL of a pod that is not egress-isolated but needs sessions
	// (its output ACL denies something), and of the exit interfaces.
	ReflectACL = "np-reflect"
	// EgressACL is the output ACL of the exit interfaces: the egress rules
	// of this node's egress-isolated pods, checked after service
	// translation for connections that leave the node.
	EgressACL = "np-egress"
	// podInputPrefix and podOutputPrefix start the names of a pod's own
	// ACLs (its overrides), followed by its interface; sharedInputPrefix
	// and sharedOutputPrefix the names of the shared ACLs, followed by the
	// interface of the pod that started the group (see the package doc:
	// Sharing).
	podInputPrefix     = "np-in-"
	podOutputPrefix    = "np-out-"
	sharedInputPrefix  = "np-gin-"
	sharedOutputPrefix = "np-gout-"
)

// env is what the builder needs besides the pods' policies.
type env struct {
	// hostPrefixes are the addresses whose traffic to local pods is always
	// allowed: the node's own and the NAT addresses of a pod reaching
	// itself through a service.
	hostPrefixes []netip.Prefix
	// servicePrefixes are the service frontends whose egress check waits
	// until after translation.
	servicePrefixes []netip.Prefix
	// exits are the interfaces on which traffic leaves the node.
	exits []string
}

// pod is one local pod as the builder sees it.
type pod struct {
	view  *policy.PodPolicy
	iface string
}

// state is the desired VPP state: ACLs by name and the ACL lists of
// interfaces.
type state struct {
	acls   map[string]*vppmodel.ACL
	keys   map[string]string // the content key of each ACL's rules
	attach map[string]*vppmodel.ACLInterface
}

// build computes the whole desired state from the local pods' policies.
// Pods without an interface or an address get nothing.
func build(pods []pod, e env) state {
	var b builder
	return b.build(pods, e)
}

// builder builds the desired state and keeps what it computed per pod,
// so that a change recomputes only the pods whose ACLs can change: a pod's
// ACLs depend on its own policy and interface, on the environment (node
// addresses, service prefixes) and on the egress-isolated pods of the
// node; the last two form the context, which a change of either renews.
// The zero value is ready.
type builder struct {
	ctx       builderCtx
	gen       uint64 // of ctx
	pods      map[kubemodel.PodID]*podACLs
	egress    []*vppmodel.ACLRule // EgressACL's rules, of gen
	egressKey string
	egressOK  bool
	// in and out share the pods' input and output ACLs.
	in, out sharing
}

// builderCtx is what every pod's ACLs may depend on besides its own
// policy.
type builderCtx struct {
	env      env
	isolated []*policy.PodPolicy // the egress-isolated pods with addresses, by pod
}

func (c builderCtx) equal(o builderCtx) bool {
	return slices.Equal(c.env.hostPrefixes, o.env.hostPrefixes) && slices.Equal(c.env.servicePrefixes, o.env.servicePrefixes) &&
		slices.Equal(c.env.exits, o.env.exits) && slices.Equal(c.isolated, o.isolated)
}

// podACLs is what the builder computed for one pod, in context gen.
type podACLs struct {
	view          *policy.PodPolicy
	iface         string
	gen           uint64
	none          bool // the pod needs no ACL
	in, out       []*vppmodel.ACLRule
	inKey, outKey string // the rules' content keys
}

func (b *builder) build(pods []pod, e env) state {
	st := state{acls: map[string]*vppmodel.ACL{}, keys: map[string]string{}, attach: map[string]*vppmodel.ACLInterface{}}
	var isolated []pod // egress-isolated pods with addresses
	ctx := builderCtx{env: e}
	for _, p := range pods {
		if p.view.Egress.Isolated && len(p.view.Addrs) > 0 {
			isolated = append(isolated, p)
			ctx.isolated = append(ctx.isolated, p.view)
		}
	}
	if b.pods == nil || !ctx.equal(b.ctx) {
		b.ctx, b.gen, b.egressOK = ctx, b.gen+1, false
	}
	next := make(map[kubemodel.PodID]*podACLs, len(pods))
	for _, d := range pods {
		if d.iface == "" || len(d.view.Addrs) == 0 {
			continue
		}
		c := b.pods[d.view.Pod]
		if c == nil || c.view != d.view || c.iface != d.iface || c.gen != b.gen {
			c = &podACLs{view: d.view, iface: d.iface, gen: b.gen}
			out, restricted := outputRules(d, isolated, e)
			if !restricted && !d.view.Isolated() {
				c.none = true // nothing to enforce on d: no ACL, no sessions
			} else {
				c.in, c.out = inputRules(d, e), out
				c.inKey, c.outKey = contentKey(c.in), contentKey(c.out)
			}
		}
		next[d.view.Pod] = c
	}
	b.pods = next
	in := b.in.assign(next, podInputPrefix, sharedInputPrefix, func(c *podACLs) (string, []*vppmodel.ACLRule) { return c.inKey, c.in })
	out := b.out.assign(next, podOutputPrefix, sharedOutputPrefix, func(c *podACLs) (string, []*vppmodel.ACLRule) { return c.outKey, c.out })
	for id, c := range next {
		if c.none {
			continue
		}
		lists := [2][]string{}
		for i, a := range []assignment{in[id], out[id]} {
			st.put(a.private, a.override)
			st.put(a.shared, a.group)
			lists[i] = []string{a.private, a.shared}
		}
		st.attach[c.iface] = &vppmodel.ACLInterface{Interface: c.iface, Input: lists[0], Output: lists[1]}
	}
	if len(isolated) > 0 {
		if !b.egressOK {
			b.egress, b.egressOK = egressTable(isolated), true
			b.egressKey = contentKey(b.egress)
		}
		st.put(EgressACL, &aclGroup{key: b.egressKey, rules: b.egress})
		st.put(ReflectACL, &aclGroup{key: reflectKey, rules: reflectAll()})
		for _, x := range e.exits {
			st.attach[x] = &vppmodel.ACLInterface{Interface: x, Input: []string{ReflectACL}, Output: []string{EgressACL}}
		}
	}
	return st
}

// put adds the ACL name with the rules of g, once.
func (st *state) put(name string, g *aclGroup) {
	if st.acls[name] == nil {
		st.acls[name] = &vppmodel.ACL{Name: name, Rules: g.rules}
		st.keys[name] = g.key
	}
}

// reflectKey is the content key of reflectAll's rules.
var reflectKey = contentKey(reflectAll())

// contentKey identifies a list of rules: equal lists have equal keys.
func contentKey(rules []*vppmodel.ACLRule) string {
	raw, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&vppmodel.ACL{Rules: rules})
	sum := sha256.Sum256(raw)
	return string(sum[:16])
}

// sharing groups the pods' ACLs of one direction so that pods with equal
// rules share one ACL, while no pod's ACL list ever changes as long as it
// has ACLs (VPP deletes an interface's sessions when its list changes, and
// keeps them when an ACL is replaced in place). Every pod's list is two
// ACLs: its own override, then its group's shared ACL. A pod joins a
// group (one with its rules, else a new one) when it gets ACLs and stays
// in it: the group's rules follow what most of its pods need, replaced in
// place; a pod whose rules differ from its group's has them in its
// override, which ends in a deny of everything so that the shared ACL is
// never reached; otherwise its override is empty. The zero value is
// ready.
type sharing struct {
	groups map[string]*aclGroup       // shared ACLs by name
	of     map[kubemodel.PodID]string // a pod's group, for as long as it has ACLs
}

// aclGroup is one ACL's rules and their content key.
type aclGroup struct {
	key   string
	rules []*vppmodel.ACLRule
}

// assignment is a pod's ACLs of one direction: its override (private,
// with its rules) and its group's shared ACL.
type assignment struct {
	private, shared string
	override, group *aclGroup
}

// emptyGroup is an override that leaves the decision to the shared ACL.
var emptyGroup = &aclGroup{key: contentKey(nil)}

// assign returns the ACLs of one direction of every pod that needs ACLs
// (pods, with rulesOf its rules of this direction and their key).
func (s *sharing) assign(pods map[kubemodel.PodID]*podACLs, prefix, sharedPrefix string, rulesOf func(*podACLs) (string, []*vppmodel.ACLRule)) map[kubemodel.PodID]assignment {
	if s.groups == nil {
		s.groups, s.of = map[string]*aclGroup{}, map[kubemodel.PodID]string{}
	}
	s.groups[ReflectACL] = &aclGroup{key: reflectKey, rules: reflectAll()}
	ids := slices.SortedFunc(maps.Keys(pods), kubemodel.PodID.Compare)
	members := map[string][]kubemodel.PodID{}
	for _, id := range ids {
		c := pods[id]
		if c.none {
			continue
		}
		g, ok := s.of[id]
		if !ok || s.groups[g] == nil {
			// A pod that gets ACLs joins a group with its rules, else
			// starts one.
			k, rules := rulesOf(c)
			g = ""
			for _, name := range slices.Sorted(maps.Keys(s.groups)) {
				if s.groups[name].key == k {
					g = name
					break
				}
			}
			if g == "" {
				g = uniqueName(sharedPrefix, c.iface, s.groups)
				s.groups[g] = &aclGroup{key: k, rules: rules}
			}
		}
		members[g] = append(members[g], id)
	}
	// Each group's rules are what most of its pods need (its own on a
	// tie); ReflectACL's never change.
	for g, ids := range members {
		if g == ReflectACL {
			continue
		}
		count := map[string]int{}
		for _, id := range ids {
			k, _ := rulesOf(pods[id])
			count[k]++
		}
		best, bestN := s.groups[g].key, count[s.groups[g].key]
		for _, k := range slices.Sorted(maps.Keys(count)) {
			if count[k] > bestN {
				best, bestN = k, count[k]
			}
		}
		if best != s.groups[g].key {
			for _, id := range ids {
				if k, rules := rulesOf(pods[id]); k == best {
					s.groups[g] = &aclGroup{key: k, rules: rules}
					break
				}
			}
		}
	}
	for g := range s.groups {
		if _, ok := members[g]; !ok && g != ReflectACL {
			delete(s.groups, g)
		}
	}
	clear(s.of)
	out := make(map[kubemodel.PodID]assignment, len(pods))
	for g, ids := range members {
		for _, id := range ids {
			s.of[id] = g
			c := pods[id]
			a := assignment{private: uniqueName(prefix, c.iface, nil), shared: g, override: emptyGroup, group: s.groups[g]}
			if k, rules := rulesOf(c); k != a.group.key {
				rules = append(slices.Clip(rules), denyAll()...)
				a.override = &aclGroup{key: contentKey(rules), rules: rules}
			}
			out[id] = a
		}
	}
	return out
}

// denyAll denies every packet of both families: the end of an override,
// so that the shared ACL after it is not reached.
func denyAll() []*vppmodel.ACLRule {
	return append(rule(vppmodel.ACLRule_DENY, anyOf(false), anyOf(false), policy.AnyPorts()),
		rule(vppmodel.ACLRule_DENY, anyOf(true), anyOf(true), policy.AnyPorts())...)
}

// uniqueName returns prefix+iface (a hash of iface when too long for an
// ACL name), with a number appended while that names one of groups.
func uniqueName(prefix, iface string, groups map[string]*aclGroup) string {
	base := prefix + iface
	if len(base) > vppmodel.MaxInterfaceNameLen-4 {
		sum := sha256.Sum256([]byte(iface))
		base = prefix + "h" + hex.EncodeToString(sum[:10])
	}
	name := base
	for i := 2; groups[name] != nil; i++ {
		name = base + "-" + strconv.Itoa(i)
	}
	return name
}

// inputRules is a pod's input ACL (the packets it sends): its egress rules
// when it is egress-isolated — service frontends pass, their connections
// are checked after translation, where they leave the node or reach a
// local pod — else permit and reflect everything.
func inputRules(p pod, e env) []*vppmodel.ACLRule {
	v := p.view
	if !v.Egress.Isolated {
		return reflectAll()
	}
	var rs []*vppmodel.ACLRule
	rs = append(rs, neighborDiscovery(v.Addrs)...)
	for _, sp := range e.servicePrefixes {
		if hasFamily(v.Addrs, sp.Addr().Is6()) {
			rs = append(rs, rule(vppmodel.ACLRule_PERMIT_REFLECT, anyOf(sp.Addr().Is6()), sp, policy.AnyPorts())...)
		}
	}
	for _, r := range v.Egress.Rules {
		for _, peer := range peersOf(r, v.Addrs) {
			rs = append(rs, rule(vppmodel.ACLRule_PERMIT_REFLECT, anyOf(peer.Addr().Is6()), peer, r.Ports)...)
		}
	}
	return rs // the rest is denied
}

// outputRules is a pod's output ACL (the packets it receives): the node's
// own traffic, then for each egress-isolated local pod whose egress rules
// allow less towards d than d's ingress rules allow from it, the ports
// both allow and a deny of the rest, then d's ingress rules (or permit
// everything). restricted reports whether the pair rules deny anything.
func outputRules(d pod, isolated []pod, e env) (rs []*vppmodel.ACLRule, restricted bool) {
	v := d.view
	rs = append(rs, neighborDiscovery(v.Addrs)...)
	for _, h := range e.hostPrefixes {
		if hasFamily(v.Addrs, h.Addr().Is6()) {
			rs = append(rs, rule(vppmodel.ACLRule_PERMIT_REFLECT, h, anyOf(h.Addr().Is6()), policy.AnyPorts())...)
		}
	}
	for _, s := range isolated {
		if s.view.Pod == v.Pod {
			continue // a pod does not block itself
		}
		for _, src := range s.view.Addrs {
			dst, ok := firstOfFamily(v.Addrs, src.Is6())
			if !ok {
				continue
			}
			eg := allowedPorts(s.view.Egress, dst)
			in := allowedPorts(v.Ingress, src)
			if in.Subset(eg) {
				continue // d's own rules decide
			}
			restricted = true
			h := netip.PrefixFrom(src, src.BitLen())
			rs = append(rs, rule(vppmodel.ACLRule_PERMIT_REFLECT, h, anyOf(src.Is6()), in.Intersect(eg))...)
			rs = append(rs, rule(vppmodel.ACLRule_DENY, h, anyOf(src.Is6()), policy.AnyPorts())...)
		}
	}
	if !v.Ingress.Isolated {
		return append(rs, reflectAll()...), restricted
	}
	for _, r := range v.Ingress.Rules {
		for _, peer := range peersOf(r, v.Addrs) {
			rs = append(rs, rule(vppmodel.ACLRule_PERMIT_REFLECT, peer, anyOf(peer.Addr().Is6()), r.Ports)...)
		}
	}
	return rs, restricted // the rest is denied
}

// egressTable is the output ACL of the exit interfaces: each
// egress-isolated pod's rules from its addresses, then a deny of the rest
// from them; everything else is permitted.
func egressTable(isolated []pod) []*vppmodel.ACLRule {
	var rs []*vppmodel.ACLRule
	for _, s := range isolated {
		for _, src := range s.view.Addrs {
			h := netip.PrefixFrom(src, src.BitLen())
			for _, r := range s.view.Egress.Rules {
				for _, peer := range peersOf(r, []netip.Addr{src}) {
					rs = append(rs, rule(vppmodel.ACLRule_PERMIT, h, peer, r.Ports)...)
				}
			}
			rs = append(rs, rule(vppmodel.ACLRule_DENY, h, anyOf(src.Is6()), policy.AnyPorts())...)
		}
	}
	return append(rs,
		rule(vppmodel.ACLRule_PERMIT, anyOf(false), anyOf(false), policy.AnyPorts())[0],
		rule(vppmodel.ACLRule_PERMIT, anyOf(true), anyOf(true), policy.AnyPorts())[0])
}

// allowedPorts returns what a direction allows with peer.
func allowedPorts(d policy.Direction, peer netip.Addr) policy.Ports {
	if !d.Isolated {
		return policy.AnyPorts()
	}
	var out policy.Ports
	for _, r := range d.Rules {
		if r.AnyPeer || slices.ContainsFunc(r.Peers, func(p netip.Prefix) bool { return p.Contains(peer) }) {
			out = out.Union(r.Ports)
		}
	}
	return out
}

// peersOf returns the peer prefixes of a rule in the families of addrs
// (every address of each family for AnyPeer).
func peersOf(r policy.Rule, addrs []netip.Addr) []netip.Prefix {
	if r.AnyPeer {
		var out []netip.Prefix
		for _, v6 := range []bool{false, true} {
			if hasFamily(addrs, v6) {
				out = append(out, anyOf(v6))
			}
		}
		return out
	}
	var out []netip.Prefix
	for _, p := range r.Peers {
		if hasFamily(addrs, p.Addr().Is6()) {
			out = append(out, p)
		}
	}
	return out
}

// rule returns the ACL rules for src → dst on ports (one per protocol and
// range).
func rule(action vppmodel.ACLRule_Action, src, dst netip.Prefix, ports policy.Ports) []*vppmodel.ACLRule {
	base := func(proto uint32) *vppmodel.ACLRule {
		return &vppmodel.ACLRule{Action: action, SrcPrefix: src.String(), DstPrefix: dst.String(), Protocol: proto,
			SrcPortLast: 65535, DstPortLast: 65535}
	}
	if ports.Any {
		return []*vppmodel.ACLRule{base(0)}
	}
	var out []*vppmodel.ACLRule
	for _, x := range []struct {
		proto uint32
		p     kubemodel.Protocol
	}{{vppmodel.ProtoTCP, kubemodel.Protocol_TCP}, {vppmodel.ProtoUDP, kubemodel.Protocol_UDP}, {vppmodel.ProtoSCTP, kubemodel.Protocol_SCTP}} {
		for _, pr := range ports.Ranges(x.p) {
			r := base(x.proto)
			r.DstPortFirst, r.DstPortLast = uint32(pr.First), uint32(pr.Last)
			out = append(out, r)
		}
	}
	return out
}

// reflectAll permits and reflects every packet of both families.
func reflectAll() []*vppmodel.ACLRule {
	return append(rule(vppmodel.ACLRule_PERMIT_REFLECT, anyOf(false), anyOf(false), policy.AnyPorts()),
		rule(vppmodel.ACLRule_PERMIT_REFLECT, anyOf(true), anyOf(true), policy.AnyPorts())...)
}

// neighborDiscovery permits IPv6 router and neighbor solicitations and
// advertisements (ICMPv6 types 133-136), without which an IPv6 pod
// cannot reach its gateway, when addrs has an IPv6 address.
func neighborDiscovery(addrs []netip.Addr) []*vppmodel.ACLRule {
	if !hasFamily(addrs, true) {
		return nil
	}
	return []*vppmodel.ACLRule{{Action: vppmodel.ACLRule_PERMIT, SrcPrefix: "::/0", DstPrefix: "::/0",
		Protocol: vppmodel.ProtoICMPv6, SrcPortFirst: 133, SrcPortLast: 136, DstPortLast: 255}}
}

func anyOf(v6 bool) netip.Prefix {
	if v6 {
		return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
}

func hasFamily(addrs []netip.Addr, v6 bool) bool {
	_, ok := firstOfFamily(addrs, v6)
	return ok
}

func firstOfFamily(addrs []netip.Addr, v6 bool) (netip.Addr, bool) {
	for _, a := range addrs {
		if a.Is6() == v6 {
			return a, true
		}
	}
	return netip.Addr{}, false
}

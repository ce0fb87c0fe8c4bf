package aclpolicy

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"slices"

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
	// podACLPrefix starts the names of the per-rule-set pod ACLs, followed
	// by a hash of their rules (pods with equal rules share one ACL).
	podACLPrefix = "np-"
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
	ctx      builderCtx
	gen      uint64 // of ctx
	pods     map[kubemodel.PodID]*podACLs
	egress   []*vppmodel.ACLRule // EgressACL's rules, of gen
	egressOK bool
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
	view            *policy.PodPolicy
	iface           string
	gen             uint64
	none            bool // the pod needs no ACL
	in, out         []*vppmodel.ACLRule
	inName, outName string
}

func (b *builder) build(pods []pod, e env) state {
	st := state{acls: map[string]*vppmodel.ACL{}, attach: map[string]*vppmodel.ACLInterface{}}
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
				c.inName, c.outName = aclName(c.in), aclName(c.out)
			}
		}
		next[d.view.Pod] = c
		if c.none {
			continue
		}
		st.put(c.inName, c.in)
		st.put(c.outName, c.out)
		st.attach[d.iface] = &vppmodel.ACLInterface{Interface: d.iface, Input: []string{c.inName}, Output: []string{c.outName}}
	}
	b.pods = next
	if len(isolated) > 0 {
		if !b.egressOK {
			b.egress, b.egressOK = egressTable(isolated), true
		}
		st.acls[EgressACL] = &vppmodel.ACL{Name: EgressACL, Rules: b.egress}
		st.put(ReflectACL, reflectAll())
		for _, x := range e.exits {
			st.attach[x] = &vppmodel.ACLInterface{Interface: x, Input: []string{ReflectACL}, Output: []string{EgressACL}}
		}
	}
	return st
}

// put adds the ACL name with rules, once.
func (st *state) put(name string, rules []*vppmodel.ACLRule) {
	if st.acls[name] == nil {
		st.acls[name] = &vppmodel.ACL{Name: name, Rules: rules}
	}
}

// aclName names an ACL by its rules: ReflectACL for the reflect-all
// rules, else podACLPrefix and a hash.
func aclName(rules []*vppmodel.ACLRule) string {
	acl := &vppmodel.ACL{Rules: rules}
	if proto.Equal(acl, &vppmodel.ACL{Rules: reflectAll()}) {
		return ReflectACL
	}
	raw, _ := proto.MarshalOptions{Deterministic: true}.Marshal(acl)
	sum := sha256.Sum256(raw)
	return podACLPrefix + hex.EncodeToString(sum[:8])
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

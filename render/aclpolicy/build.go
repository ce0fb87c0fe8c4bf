package aclpolicy

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"slices"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/policy"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// Names of the ACLs the renderer shares between the exit interfaces.
const (
	// ReflectACL permits every packet and creates a session for it: the
	// input ACL of the exit interfaces.
	ReflectACL = "np-reflect"
	// EgressACL is the output ACL of the exit interfaces: the egress rules
	// of this node's egress-isolated pods, checked after service
	// translation for connections that leave the node.
	EgressACL = "np-egress"
	// podInputPrefix and podOutputPrefix start the names of a pod
	// interface's own input and output ACLs, followed by the interface's
	// name (see podACLName).
	podInputPrefix  = "np-in-"
	podOutputPrefix = "np-out-"
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
	st := state{acls: map[string]*vppmodel.ACL{}, attach: map[string]*vppmodel.ACLInterface{}}
	var isolated []pod // egress-isolated pods with addresses
	for _, p := range pods {
		if p.view.Egress.Isolated && len(p.view.Addrs) > 0 {
			isolated = append(isolated, p)
		}
	}
	for _, d := range pods {
		if d.iface == "" || len(d.view.Addrs) == 0 {
			continue
		}
		out, restricted := outputRules(d, isolated, e)
		if !restricted && !d.view.Isolated() {
			continue // nothing to enforce on d: no ACL, no sessions
		}
		// The interface's own ACLs, whatever their rules: a change of its
		// rules replaces them in place and leaves its lists alone (VPP
		// deletes an interface's sessions when its ACL list changes).
		in, outName := podACLName(podInputPrefix, d.iface), podACLName(podOutputPrefix, d.iface)
		st.acls[in] = &vppmodel.ACL{Name: in, Rules: inputRules(d, e)}
		st.acls[outName] = &vppmodel.ACL{Name: outName, Rules: out}
		st.attach[d.iface] = &vppmodel.ACLInterface{Interface: d.iface, Input: []string{in}, Output: []string{outName}}
	}
	if len(isolated) > 0 {
		st.acls[EgressACL] = &vppmodel.ACL{Name: EgressACL, Rules: egressTable(isolated)}
		st.acls[ReflectACL] = &vppmodel.ACL{Name: ReflectACL, Rules: reflectAll()}
		for _, x := range e.exits {
			st.attach[x] = &vppmodel.ACLInterface{Interface: x, Input: []string{ReflectACL}, Output: []string{EgressACL}}
		}
	}
	return st
}

// podACLName names the ACL of a pod interface: prefix and the interface's
// name, or, when that is longer than a name may be, prefix and a hash of
// the interface's name.
func podACLName(prefix, iface string) string {
	if name := prefix + iface; len(name) <= vppmodel.MaxInterfaceNameLen {
		return name
	}
	sum := sha256.Sum256([]byte(iface))
	return prefix + "h" + hex.EncodeToString(sum[:12])
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

package aclpolicy

import (
	"net/netip"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// This file simulates VPP's ACL plugin on the state the renderer builds,
// packet by packet, the way VPP applies it: on each interface a packet
// passes (input when VPP receives it, output when it sends it), a session
// of that interface (created by a permit+reflect rule there) lets both
// directions of its connection through; otherwise the ACLs of that
// interface and direction are searched in order, the first matching rule
// decides, and no match denies; an interface without ACLs passes
// everything. Services are translated between a pod's input and the
// output towards the backend; the reply is translated back.

type simPacket struct {
	src, dst     netip.Addr
	proto        uint32
	sport, dport uint16
}

func (p simPacket) reverse() simPacket {
	return simPacket{src: p.dst, dst: p.src, proto: p.proto, sport: p.dport, dport: p.sport}
}

// key is a direction-independent session key.
func (p simPacket) key() simPacket {
	if p.src.Compare(p.dst) > 0 || (p.src == p.dst && p.sport > p.dport) {
		return p.reverse()
	}
	return p
}

type simNode struct {
	st       state
	sessions map[string]map[simPacket]bool // by interface
}

func newSimNode(st state) *simNode {
	return &simNode{st: st, sessions: map[string]map[simPacket]bool{}}
}

// pass reports whether VPP lets pkt through iface in the direction
// (output or input), creating sessions as permit+reflect rules match.
func (n *simNode) pass(iface string, output bool, pkt simPacket) bool {
	if n.sessions[iface][pkt.key()] {
		return true
	}
	a := n.st.attach[iface]
	if a == nil {
		return true
	}
	names := a.GetInput()
	if output {
		names = a.GetOutput()
	}
	if len(names) == 0 {
		return true
	}
	for _, name := range names {
		for _, r := range n.st.acls[name].GetRules() {
			if !ruleMatches(r, pkt) {
				continue
			}
			switch r.GetAction() {
			case vppmodel.ACLRule_DENY:
				return false
			case vppmodel.ACLRule_PERMIT_REFLECT:
				if n.sessions[iface] == nil {
					n.sessions[iface] = map[simPacket]bool{}
				}
				n.sessions[iface][pkt.key()] = true
			}
			return true
		}
	}
	return false
}

func ruleMatches(r *vppmodel.ACLRule, p simPacket) bool {
	src := netip.MustParsePrefix(r.GetSrcPrefix())
	dst := netip.MustParsePrefix(r.GetDstPrefix())
	if !src.Contains(p.src) || !dst.Contains(p.dst) {
		return false
	}
	if r.GetProtocol() == 0 {
		return true
	}
	if r.GetProtocol() != p.proto {
		return false
	}
	return uint32(p.sport) >= r.GetSrcPortFirst() && uint32(p.sport) <= r.GetSrcPortLast() &&
		uint32(p.dport) >= r.GetDstPortFirst() && uint32(p.dport) <= r.GetDstPortLast()
}

func ipProto(p kubemodel.Protocol) uint32 {
	switch p {
	case kubemodel.Protocol_UDP:
		return vppmodel.ProtoUDP
	case kubemodel.Protocol_SCTP:
		return vppmodel.ProtoSCTP
	}
	return vppmodel.ProtoTCP
}

// simEndpoint is a pod as the simulation sees it.
type simEndpoint struct {
	node  *simNode
	iface string
	addr  netip.Addr
}

// simCluster connects endpoints; tunnel(from, to) names the interface of
// node from towards node to.
type simCluster struct {
	tunnel func(from, to *simNode) string
}

// connect sends one connection from src to dst (to vip when it is valid:
// a service address translated to dst's address, the port unchanged) and
// its reply; it reports whether both got through.
func (c simCluster) connect(src, dst simEndpoint, vip netip.Addr, proto uint32, port uint16) bool {
	pkt := simPacket{src: src.addr, dst: dst.addr, proto: proto, sport: 40000, dport: port}
	if vip.IsValid() {
		pkt.dst = vip
	}
	hops := func(p simPacket, reply bool) bool {
		if !reply {
			if !src.node.pass(src.iface, false, p) {
				return false
			}
			p.dst = dst.addr // translated
			if src.node != dst.node {
				if !src.node.pass(c.tunnel(src.node, dst.node), true, p) || !dst.node.pass(c.tunnel(dst.node, src.node), false, p) {
					return false
				}
			}
			return dst.node.pass(dst.iface, true, p)
		}
		if !dst.node.pass(dst.iface, false, p) {
			return false
		}
		if src.node != dst.node {
			if !dst.node.pass(c.tunnel(dst.node, src.node), true, p) || !src.node.pass(c.tunnel(src.node, dst.node), false, p) {
				return false
			}
		}
		if vip.IsValid() {
			p.src = vip // translated back
		}
		return src.node.pass(src.iface, true, p)
	}
	if !hops(pkt, false) {
		return false
	}
	reply := simPacket{src: dst.addr, dst: src.addr, proto: proto, sport: port, dport: 40000}
	return hops(reply, true)
}

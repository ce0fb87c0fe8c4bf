package vppsim

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/l2"
	"go.fd.io/govpp/binapi/vlib"
	"go.fd.io/govpp/binapi/vxlan"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
)

const (
	rvNoSuchNode             = -63
	rvTunnelExist            = -75
	rvSameSrcDst             = -82
	rvBDAlreadyExists        = -119
	rvBDNotEmpty             = -120
	rvBDIDExceedMax          = -121
	rvInstanceInUse          = -147
	devVxlan                 = "VXLAN"
	vxlanPort                = 4789
	decapL2Input      uint32 = 1
)

// vxlanTunnel is the VXLAN part of a kindVxlan interface.
type vxlanTunnel struct {
	src, dst  netip.Addr
	srcPort   uint16
	dstPort   uint16
	mcast     uint32
	encapVrf  uint32
	decapNext uint32
	vni       uint32
	l3        bool
}

// vxlanKey is what identifies a tunnel (VPP refuses a second one).
type vxlanKey struct {
	src, dst         netip.Addr
	vni, encapVrf    uint32
	srcPort, dstPort uint16
}

func (t *vxlanTunnel) key() vxlanKey {
	return vxlanKey{src: t.src, dst: t.dst, vni: t.vni, encapVrf: t.encapVrf, srcPort: t.srcPort, dstPort: t.dstPort}
}

// graph holds the next nodes of the graph nodes add_node_next may extend.
func newGraph() map[string][]string {
	return map[string][]string{
		"vxlan4-input": {"error-drop", "l2-input"},
		"vxlan6-input": {"error-drop", "l2-input"},
		"ip4-input":    {"error-drop", "error-punt", "ip4-lookup"},
		"ip6-input":    {"error-drop", "error-punt", "ip6-lookup"},
		"l2-input":     {"error-drop"},
	}
}

func (s *state) addNodeNext(m api.Message) []api.Message {
	req := m.(*vlib.AddNodeNext)
	nexts, ok := s.graph[req.NodeName]
	if _, nextOK := s.graph[req.NextName]; !ok || !nextOK {
		return []api.Message{&vlib.AddNodeNextReply{Retval: rvNoSuchNode, NextIndex: noIndex}}
	}
	if i := slices.Index(nexts, req.NextName); i >= 0 {
		return []api.Message{&vlib.AddNodeNextReply{NextIndex: uint32(i)}}
	}
	s.graph[req.NodeName] = append(nexts, req.NextName)
	return []api.Message{&vlib.AddNodeNextReply{NextIndex: uint32(len(nexts))}}
}

func (s *state) vxlanAddDel(m api.Message) []api.Message {
	req := m.(*vxlan.VxlanAddDelTunnelV3)
	fail := func(rv int32) []api.Message {
		return []api.Message{&vxlan.VxlanAddDelTunnelV3Reply{Retval: rv, SwIfIndex: interface_types.InterfaceIndex(noIndex)}}
	}
	t := vxlanTunnel{
		src: vppconv.AddrOf(req.SrcAddress), dst: vppconv.AddrOf(req.DstAddress),
		srcPort: cmp.Or(req.SrcPort, vxlanPort), dstPort: cmp.Or(req.DstPort, vxlanPort),
		mcast: uint32(req.McastSwIfIndex), encapVrf: req.EncapVrfID, decapNext: req.DecapNextIndex,
		vni: req.Vni, l3: req.IsL3,
	}
	if t.decapNext == noIndex {
		t.decapNext = decapL2Input
	}
	if i := s.vxlans[t.key()]; i != nil {
		if req.IsAdd {
			return fail(rvTunnelExist)
		}
		s.removeIface(i)
		return []api.Message{&vxlan.VxlanAddDelTunnelV3Reply{SwIfIndex: interface_types.InterfaceIndex(i.idx)}}
	}
	if !req.IsAdd {
		return fail(rvNoSuchEntry)
	}
	if t.src == t.dst {
		return fail(rvSameSrcDst)
	}
	if s.tables[tableKey{t.src.Is6(), t.encapVrf}] == nil {
		return fail(rvNoSuchFib)
	}
	inst := req.Instance
	if inst == noIndex {
		inst = s.freeInstance(kindVxlan)
	} else if set := s.instances[kindVxlan]; set != nil && set.used[inst] {
		return fail(rvInstanceInUse)
	}
	i := &simIface{idx: s.freeIndex(), kind: kindVxlan, instance: inst, name: fmt.Sprintf("vxlan_tunnel%d", inst),
		adminUp: true, vxlan: &t}
	if !t.l3 {
		i.mac = s.randomMAC()
	}
	s.addIface(i)
	return []api.Message{&vxlan.VxlanAddDelTunnelV3Reply{SwIfIndex: interface_types.InterfaceIndex(i.idx)}}
}

func (s *state) vxlanDump(m api.Message) []api.Message {
	req := m.(*vxlan.VxlanTunnelV2Dump)
	var out []api.Message
	for _, i := range s.sortedIfaces() {
		if i.vxlan == nil || (uint32(req.SwIfIndex) != noIndex && uint32(req.SwIfIndex) != i.idx) {
			continue
		}
		t := i.vxlan
		out = append(out, &vxlan.VxlanTunnelV2Details{
			SwIfIndex: interface_types.InterfaceIndex(i.idx), Instance: i.instance,
			SrcAddress: vppconv.Address(t.src), DstAddress: vppconv.Address(t.dst),
			SrcPort: t.srcPort, DstPort: t.dstPort, McastSwIfIndex: interface_types.InterfaceIndex(t.mcast),
			EncapVrfID: t.encapVrf, DecapNextIndex: t.decapNext, Vni: t.vni,
		})
	}
	return out
}

// bridgeDomain is an L2 bridge domain.
type bridgeDomain struct {
	id                                            uint32
	flood, uuFlood, forward, learn, arpTerm, arpU bool
	macAge                                        uint8
	tag                                           string
	members                                       []bdMember // in join order
	bvi                                           uint32
}

type bdMember struct {
	sw  uint32
	shg uint8
}

const maxBDID = 1<<24 - 1

func (s *state) bdAddDel(m api.Message) []api.Message {
	req := m.(*l2.BridgeDomainAddDelV2)
	reply := func(rv int32, id uint32) []api.Message {
		return []api.Message{&l2.BridgeDomainAddDelV2Reply{Retval: rv, BdID: id}}
	}
	if !req.IsAdd {
		bd := s.bds[req.BdID]
		switch {
		case req.BdID == 0 || req.BdID > maxBDID:
			return reply(rvBDIDExceedMax, req.BdID)
		case bd == nil:
			return reply(rvNoSuchEntry, req.BdID)
		case len(bd.members) > 0:
			return reply(rvBDNotEmpty, req.BdID)
		}
		delete(s.bds, req.BdID)
		return reply(0, req.BdID)
	}
	id := req.BdID
	if id == noIndex {
		// VPP picks a random free ID; the stand-in's is pseudo-random too.
		for id = 7919; s.bds[id] != nil; id = (id*7919 + 1) % maxBDID {
		}
	}
	if id == 0 || id > maxBDID {
		return reply(rvBDIDExceedMax, id)
	}
	if s.bds[id] != nil {
		return reply(rvBDAlreadyExists, id)
	}
	s.bds[id] = &bridgeDomain{id: id, flood: req.Flood, uuFlood: req.UuFlood, forward: req.Forward, learn: req.Learn,
		arpTerm: req.ArpTerm, arpU: req.ArpUfwd, macAge: req.MacAge, tag: req.BdTag, bvi: noIndex}
	return reply(0, id)
}

// leaveBD removes an interface from whatever bridge domain it is in.
func (s *state) leaveBD(sw uint32) {
	for _, bd := range s.bds {
		bd.members = slices.DeleteFunc(bd.members, func(m bdMember) bool { return m.sw == sw })
		if bd.bvi == sw {
			bd.bvi = noIndex
		}
	}
}

func (s *state) setL2Bridge(m api.Message) []api.Message {
	req := m.(*l2.SwInterfaceSetL2Bridge)
	sw := uint32(req.RxSwIfIndex)
	if s.ifaces[sw] == nil {
		return []api.Message{&l2.SwInterfaceSetL2BridgeReply{Retval: rvInvalidSwIfIndex}}
	}
	s.leaveBD(sw)
	if req.Enable {
		bd := s.bds[req.BdID]
		if bd == nil { // VPP creates a missing bridge domain with defaults
			bd = &bridgeDomain{id: req.BdID, flood: true, uuFlood: true, forward: true, learn: true, bvi: noIndex}
			s.bds[req.BdID] = bd
		}
		bd.members = append(bd.members, bdMember{sw: sw, shg: req.Shg})
		if req.PortType == l2.L2_API_PORT_TYPE_BVI {
			bd.bvi = sw
		}
	}
	return []api.Message{&l2.SwInterfaceSetL2BridgeReply{}}
}

func (s *state) bdDump(m api.Message) []api.Message {
	req := m.(*l2.BridgeDomainDump)
	ids := make([]uint32, 0, len(s.bds))
	for id := range s.bds {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []api.Message
	for _, id := range ids {
		bd := s.bds[id]
		if req.BdID != noIndex && req.BdID != id {
			continue
		}
		if sw := uint32(req.SwIfIndex); sw != noIndex && !slices.ContainsFunc(bd.members, func(m bdMember) bool { return m.sw == sw }) {
			continue
		}
		d := &l2.BridgeDomainDetails{BdID: id, Flood: bd.flood, UuFlood: bd.uuFlood, Forward: bd.forward, Learn: bd.learn,
			ArpTerm: bd.arpTerm, ArpUfwd: bd.arpU, MacAge: bd.macAge, BdTag: bd.tag,
			BviSwIfIndex: interface_types.InterfaceIndex(bd.bvi), UuFwdSwIfIndex: interface_types.InterfaceIndex(noIndex)}
		for _, mb := range bd.members {
			d.SwIfDetails = append(d.SwIfDetails, l2.BridgeDomainSwIf{SwIfIndex: interface_types.InterfaceIndex(mb.sw), Shg: mb.shg})
		}
		d.NSwIfs = uint32(len(d.SwIfDetails))
		out = append(out, d)
	}
	return out
}

package vppsim

import (
	"cmp"
	"net/netip"
	"slices"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/ethernet_types"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip"
	"go.fd.io/govpp/binapi/ip_neighbor"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/binapi/vlib"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
)

// Retvals of the unnumbered, neighbor and next-node API (VPP 26.06, see
// testdata/vpp-traces/9-unnumbered_neighbor.json).
const (
	rvInvalidSwIfIndex2 = -10
	rvNoSuchNode2       = -64
)

// neighborKey identifies an IP neighbor: interface and address.
type neighborKey struct {
	sw uint32
	ip netip.Addr
}

// simNeighbor is an IP neighbor entry (static or dynamic).
type simNeighbor struct {
	mac   ethernet_types.MacAddress
	flags ip_neighbor.IPNeighborFlags
}

// setUnnumbered implements sw_interface_set_unnumbered. As in VPP 26.06:
// the user must exist (-2) and, for an add, the source too (-10); an add
// replaces the user's source (an interface may name itself); a delete
// ignores the source it is given; deleting the source leaves its users
// pointing at its (freed) index.
func (s *state) setUnnumbered(m api.Message) []api.Message {
	req := m.(*interfaces.SwInterfaceSetUnnumbered)
	reply := func(rv int32) []api.Message {
		return []api.Message{&interfaces.SwInterfaceSetUnnumberedReply{Retval: rv}}
	}
	user := s.iface(req.UnnumberedSwIfIndex)
	if user == nil {
		return reply(rvInvalidSwIfIndex)
	}
	if !req.IsAdd {
		user.unnumbered, user.unnumberedOK = 0, false
		return reply(0)
	}
	if s.iface(req.SwIfIndex) == nil {
		return reply(rvInvalidSwIfIndex2)
	}
	user.unnumbered, user.unnumberedOK = uint32(req.SwIfIndex), true
	return reply(0)
}

func (s *state) unnumberedDump(m api.Message) []api.Message {
	req := m.(*ip.IPUnnumberedDump)
	var out []api.Message
	for _, i := range s.sortedIfaces() {
		if !i.unnumberedOK || (uint32(req.SwIfIndex) != noIndex && uint32(req.SwIfIndex) != i.idx) {
			continue
		}
		out = append(out, &ip.IPUnnumberedDetails{SwIfIndex: interface_types.InterfaceIndex(i.idx),
			IPSwIfIndex: interface_types.InterfaceIndex(i.unnumbered)})
	}
	return out
}

// neighborAddDel implements ip_neighbor_add_del: an add creates or
// replaces (MAC and flags) the entry of the interface and address; a
// delete ignores MAC and flags and returns -6 for a missing entry.
func (s *state) neighborAddDel(m api.Message) []api.Message {
	req := m.(*ip_neighbor.IPNeighborAddDel)
	reply := func(rv int32, stats uint32) []api.Message {
		return []api.Message{&ip_neighbor.IPNeighborAddDelReply{Retval: rv, StatsIndex: stats}}
	}
	n := req.Neighbor
	if s.iface(n.SwIfIndex) == nil {
		return reply(rvInvalidSwIfIndex, noIndex)
	}
	sw, ip := uint32(n.SwIfIndex), vppconv.AddrOf(n.IPAddress)
	if !req.IsAdd {
		if _, ok := s.neighbors[sw][ip]; !ok {
			return reply(rvNoSuchEntry, noIndex)
		}
		delete(s.neighbors[sw], ip)
		return reply(0, noIndex)
	}
	if s.neighbors[sw] == nil {
		s.neighbors[sw] = map[netip.Addr]*simNeighbor{}
	}
	s.neighbors[sw][ip] = &simNeighbor{mac: n.MacAddress, flags: n.Flags}
	s.nextStats++
	return reply(0, s.nextStats-1)
}

func (s *state) sortedNeighbors() []neighborKey {
	var keys []neighborKey
	for sw, ns := range s.neighbors {
		for ip := range ns {
			keys = append(keys, neighborKey{sw, ip})
		}
	}
	slices.SortFunc(keys, func(a, b neighborKey) int { return cmp.Or(cmp.Compare(a.sw, b.sw), a.ip.Compare(b.ip)) })
	return keys
}

func (s *state) neighborDump(m api.Message) []api.Message {
	req := m.(*ip_neighbor.IPNeighborDump)
	v6 := req.Af == ip_types.ADDRESS_IP6
	var out []api.Message
	for _, k := range s.sortedNeighbors() {
		if k.ip.Is6() != v6 || (uint32(req.SwIfIndex) != noIndex && uint32(req.SwIfIndex) != k.sw) {
			continue
		}
		n := s.neighbors[k.sw][k.ip]
		out = append(out, &ip_neighbor.IPNeighborDetails{Neighbor: ip_neighbor.IPNeighbor{
			SwIfIndex: interface_types.InterfaceIndex(k.sw), Flags: n.flags, MacAddress: n.mac,
			IPAddress: vppconv.Address(k.ip)}})
	}
	return out
}

// getNextIndex implements get_next_index (read-only): -63 for an unknown
// node, -64 for an unknown next node, -6 if it is not a next of the node.
func (s *state) getNextIndex(m api.Message) []api.Message {
	req := m.(*vlib.GetNextIndex)
	fail := func(rv int32) []api.Message {
		return []api.Message{&vlib.GetNextIndexReply{Retval: rv, NextIndex: noIndex}}
	}
	nexts, ok := s.graph[req.NodeName]
	if !ok {
		return fail(rvNoSuchNode)
	}
	if _, ok := s.graph[req.NextName]; !ok {
		return fail(rvNoSuchNode2)
	}
	i := slices.Index(nexts, req.NextName)
	if i < 0 {
		return fail(rvNoSuchEntry)
	}
	return []api.Message{&vlib.GetNextIndexReply{NextIndex: uint32(i)}}
}

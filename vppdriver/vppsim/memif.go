package vppsim

import (
	"fmt"
	"slices"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/ethernet_types"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/memif"
)

// Retvals of the memif API (VPP 26.06, see testdata/vpp-traces/7-memif.json).
const (
	rvSubifAlreadyExists = -68
	rvInvalidArgument    = -73
	rvUnexpectedIfState  = -74
	rvEntryAlreadyExists = -116
)

const (
	devMemif           = "memif"
	defaultMemifSocket = "/run/vpp/memif.sock"
)

// memifLink is the memif part of a kindMemif interface.
type memifLink struct {
	id, socketID uint32
	role         memif.MemifRole
	mode         memif.MemifMode
	ringSize     uint32 // configured (VPP's dump reports the running values)
	bufferSize   uint16
	zeroCopy     bool
}

// nextMemifSocketID is VPP's choice for socket_id ~0: the next value of
// random_u32 (a linear congruential generator whose seed starts at 0 in
// every VPP process) that is not in use.
func (s *state) nextMemifSocketID() uint32 {
	for {
		s.memifSeed = 1664525*s.memifSeed + 1013904223
		if _, used := s.memifSockets[s.memifSeed]; !used && s.memifSeed != noIndex {
			return s.memifSeed
		}
	}
}

func (s *state) memifSocketAddDel(m api.Message) []api.Message {
	req := m.(*memif.MemifSocketFilenameAddDelV2)
	reply := func(rv int32, id uint32) []api.Message {
		return []api.Message{&memif.MemifSocketFilenameAddDelV2Reply{Retval: rv, SocketID: id}}
	}
	if !req.IsAdd {
		if _, ok := s.memifSockets[req.SocketID]; !ok || req.SocketID == 0 {
			return reply(rvInvalidArgument, req.SocketID)
		}
		for _, i := range s.ifaces {
			if i.memif != nil && i.memif.socketID == req.SocketID {
				return reply(rvUnexpectedIfState, req.SocketID) // in use
			}
		}
		delete(s.memifSockets, req.SocketID)
		return reply(0, req.SocketID)
	}
	id := req.SocketID
	switch {
	case id == 0:
		return reply(rvInvalidArgument, 0)
	case id == noIndex:
		id = s.nextMemifSocketID() // drawn before the filename is checked
	default:
		if _, used := s.memifSockets[id]; used {
			return reply(rvEntryAlreadyExists, id)
		}
	}
	if req.SocketFilename == "" {
		return reply(rvInvalidArgument, id)
	}
	s.memifSockets[id] = req.SocketFilename // the same file may be registered under several IDs
	return reply(0, id)
}

func (s *state) memifSocketDump(api.Message) []api.Message {
	ids := make([]uint32, 0, len(s.memifSockets))
	for id := range s.memifSockets {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []api.Message
	for _, id := range ids {
		out = append(out, &memif.MemifSocketFilenameDetails{SocketID: id, SocketFilename: s.memifSockets[id]})
	}
	return out
}

func (s *state) memifCreate(m api.Message) []api.Message {
	req := m.(*memif.MemifCreateV2)
	fail := func(rv int32) []api.Message {
		return []api.Message{&memif.MemifCreateV2Reply{Retval: rv}}
	}
	if _, ok := s.memifSockets[req.SocketID]; !ok {
		return fail(rvInvalidArgument)
	}
	if rs := req.RingSize; rs != 0 && rs&(rs-1) != 0 {
		return fail(rvInvalidArgument)
	}
	// One socket file serves interfaces of one role, each ID once.
	for _, i := range s.ifaces {
		if i.memif != nil && i.memif.socketID == req.SocketID && (i.memif.id == req.ID || i.memif.role != req.Role) {
			return fail(rvSubifAlreadyExists)
		}
	}
	l := &memifLink{id: req.ID, socketID: req.SocketID, role: req.Role, mode: req.Mode,
		ringSize: req.RingSize, bufferSize: req.BufferSize,
		zeroCopy: req.Role == memif.MEMIF_ROLE_API_SLAVE && !req.NoZeroCopy}
	if l.ringSize == 0 {
		l.ringSize = 1024
	}
	if l.bufferSize == 0 {
		l.bufferSize = 2048
	}
	i := &simIface{idx: s.freeIndex(), kind: kindMemif, name: fmt.Sprintf("memif%d/%d", req.SocketID, req.ID),
		mac: req.HwAddr, memif: l}
	if i.mac == (ethernet_types.MacAddress{}) {
		i.mac = s.randomMAC()
	}
	s.addIface(i)
	return []api.Message{&memif.MemifCreateV2Reply{SwIfIndex: interface_types.InterfaceIndex(i.idx)}}
}

func (s *state) memifDelete(m api.Message) []api.Message {
	req := m.(*memif.MemifDelete)
	i := s.iface(req.SwIfIndex)
	if i == nil || i.memif == nil {
		return []api.Message{&memif.MemifDeleteReply{Retval: rvInvalidSwIfIndex}}
	}
	s.removeIface(i)
	return []api.Message{&memif.MemifDeleteReply{}}
}

func (s *state) memifDump(api.Message) []api.Message {
	var out []api.Message
	for _, i := range s.sortedIfaces() {
		if l := i.memif; l != nil {
			// The ring and buffer sizes are the running ones, negotiated
			// with the peer: 1 and 0 without one (the stand-in's memifs
			// never get a peer).
			d := &memif.MemifDetails{SwIfIndex: interface_types.InterfaceIndex(i.idx), HwAddr: i.mac, ID: l.id,
				Role: l.role, Mode: l.mode, ZeroCopy: l.zeroCopy, SocketID: l.socketID, RingSize: 1,
				IfName: i.name}
			if i.adminUp {
				d.Flags = interface_types.IF_STATUS_API_FLAG_ADMIN_UP
			}
			out = append(out, d)
		}
	}
	return out
}

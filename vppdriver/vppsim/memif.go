package vppsim

import (
	"fmt"
	"slices"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/ethernet_types"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/memif"
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
	ringSize     uint32
	bufferSize   uint16
}

func (s *state) memifSocketAddDel(m api.Message) []api.Message {
	req := m.(*memif.MemifSocketFilenameAddDelV2)
	reply := func(rv int32, id uint32) []api.Message {
		return []api.Message{&memif.MemifSocketFilenameAddDelV2Reply{Retval: rv, SocketID: id}}
	}
	if !req.IsAdd {
		if _, ok := s.memifSockets[req.SocketID]; !ok || req.SocketID == 0 {
			return reply(rvInvalidValue, req.SocketID)
		}
		for _, i := range s.ifaces {
			if i.memif != nil && i.memif.socketID == req.SocketID {
				return reply(rvInvalidValue, req.SocketID) // in use
			}
		}
		delete(s.memifSockets, req.SocketID)
		return reply(0, req.SocketID)
	}
	if req.SocketFilename == "" {
		return reply(rvInvalidValue, noIndex)
	}
	id := req.SocketID
	if id == noIndex {
		for id = 1; ; id++ {
			if _, used := s.memifSockets[id]; !used {
				break
			}
		}
	} else if _, used := s.memifSockets[id]; used {
		return reply(rvInvalidValue, id)
	}
	s.memifSockets[id] = req.SocketFilename
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
		return []api.Message{&memif.MemifCreateV2Reply{Retval: rv, SwIfIndex: interface_types.InterfaceIndex(noIndex)}}
	}
	if _, ok := s.memifSockets[req.SocketID]; !ok {
		return fail(rvInvalidValue)
	}
	for _, i := range s.ifaces {
		if i.memif != nil && i.memif.socketID == req.SocketID && i.memif.id == req.ID {
			return fail(rvIfAlreadyExists)
		}
	}
	l := &memifLink{id: req.ID, socketID: req.SocketID, role: req.Role, mode: req.Mode,
		ringSize: req.RingSize, bufferSize: req.BufferSize}
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
	s.ifaces[i.idx] = i
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
			d := &memif.MemifDetails{SwIfIndex: interface_types.InterfaceIndex(i.idx), HwAddr: i.mac, ID: l.id,
				Role: l.role, Mode: l.mode, ZeroCopy: true, SocketID: l.socketID, RingSize: l.ringSize,
				BufferSize: l.bufferSize, IfName: i.name}
			if i.adminUp {
				d.Flags = interface_types.IF_STATUS_API_FLAG_ADMIN_UP
			}
			out = append(out, d)
		}
	}
	return out
}

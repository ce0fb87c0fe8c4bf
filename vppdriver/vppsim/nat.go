package vppsim

import (
	"cmp"
	"net/netip"
	"slices"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/binapi/nat44_ed"
	"go.fd.io/govpp/binapi/nat_types"
)

const (
	rvUnspecified     = -1
	rvValueExist      = -81
	rvUnsupported     = -126
	rvPluginDisabled  = -169
	rvPluginEnabled   = -170
	defaultNATSession = 64512
)

// natState is the NAT44-ED configuration; nil while the plugin is disabled.
type natState struct {
	sessions   uint32
	forwarding bool
	ifaces     map[uint32]nat_types.NatConfigFlags
	output     []uint32     // output-feature interfaces, in order of addition
	ifAddrs    []natIfAddr  // interface-address pools, in order of addition
	pool       []natAddr    // addresses: ranges and resolved interface addresses
	statics    []*natStatic // static and identity mappings, in creation order
	lbs        map[lbKey]*natLB
	lbSeq      uint64 // creation counter of lbs (dumps list them in creation order)
}

// natIfAddr is an interface whose IPv4 address is a pool address.
type natIfAddr struct {
	sw    uint32
	twice bool
}

type lbKey struct {
	external netip.Addr
	port     uint16
	proto    uint8
}

type natAddr struct {
	ip     netip.Addr
	vrf    uint32
	twice  bool
	fromIf bool   // the resolved address of an interface-address pool
	sw     uint32 // that interface
}

type natStatic struct {
	identity bool
	flags    nat_types.NatConfigFlags
	local    netip.Addr // identity: the address
	external netip.Addr
	proto    uint8
	lport    uint16
	eport    uint16 // identity: the port
	extSw    uint32 // ~0 unless bound to an interface's address
	vrf      uint32
	tag      string
}

type natLB struct {
	seq      uint64
	external netip.Addr
	port     uint16
	proto    uint8
	flags    nat_types.NatConfigFlags
	affinity uint32
	tag      string
	locals   []nat44_ed.Nat44LbAddrPort
}

func ip4(a ip_types.IP4Address) netip.Addr { return netip.AddrFrom4(a) }

func ip4Of(a netip.Addr) ip_types.IP4Address {
	if !a.IsValid() {
		return ip_types.IP4Address{}
	}
	return a.As4()
}

// firstIP4 returns the first IPv4 address of an interface (invalid if none).
func (s *state) firstIP4(sw uint32) netip.Addr {
	if i := s.ifaces[sw]; i != nil {
		for _, a := range i.addrs {
			if a.Addr().Is4() {
				return a.Addr()
			}
		}
	}
	return netip.Addr{}
}

// natBuckets is VPP's nat_calc_bihash_buckets: the power of two nearest to
// sessions / 2.5.
func natBuckets(sessions uint32) uint32 {
	n := uint64(float64(sessions) / 2.5)
	lower := uint64(1)
	for lower*2 < n {
		lower *= 2
	}
	upper := lower * 2
	if upper-n < n-lower {
		return uint32(upper)
	}
	return uint32(lower)
}

func (s *state) natEnableDisable(m api.Message) []api.Message {
	req := m.(*nat44_ed.Nat44EdPluginEnableDisable)
	reply := func(rv int32) []api.Message {
		return []api.Message{&nat44_ed.Nat44EdPluginEnableDisableReply{Retval: rv}}
	}
	if !req.Enable {
		if s.nat == nil {
			return reply(rvPluginDisabled)
		}
		s.nat = nil
		return reply(0)
	}
	if s.nat != nil {
		return reply(rvPluginEnabled)
	}
	s.nat = &natState{sessions: req.Sessions, ifaces: map[uint32]nat_types.NatConfigFlags{}, lbs: map[lbKey]*natLB{}}
	if s.nat.sessions == 0 {
		s.nat.sessions = defaultNATSession
	}
	return reply(0)
}

func (s *state) natRunningConfig(api.Message) []api.Message {
	r := &nat44_ed.Nat44ShowRunningConfigReply{IpfixLoggingEnabled: true, Flags: nat44_ed.NAT44_IS_ENDPOINT_DEPENDENT}
	if s.nat != nil {
		r.Sessions = s.nat.sessions
		r.ForwardingEnabled = s.nat.forwarding
		r.TranslationBuckets = natBuckets(s.nat.sessions)
		r.Timeouts = nat_types.NatTimeouts{UDP: 300, TCPEstablished: 7440, TCPTransitory: 240, ICMP: 60}
	}
	return []api.Message{r}
}

func (s *state) natFeature(m api.Message) []api.Message {
	req := m.(*nat44_ed.Nat44InterfaceAddDelFeature)
	reply := func(rv int32) []api.Message {
		return []api.Message{&nat44_ed.Nat44InterfaceAddDelFeatureReply{Retval: rv}}
	}
	if s.nat == nil {
		return reply(rvUnsupported)
	}
	sw := uint32(req.SwIfIndex)
	if s.ifaces[sw] == nil {
		return reply(rvInvalidSwIfIndex)
	}
	f := req.Flags & (nat_types.NAT_IS_INSIDE | nat_types.NAT_IS_OUTSIDE)
	cur, ok := s.nat.ifaces[sw]
	if req.IsAdd && slices.Contains(s.nat.output, sw) {
		return reply(rvValueExist) // an output-feature interface
	}
	if req.IsAdd {
		s.nat.ifaces[sw] = cur | f
		return reply(0)
	}
	if !ok {
		return reply(rvNoSuchEntry)
	}
	// VPP removes an interface that lacks the feature being deleted.
	if cur&f == 0 || cur&^f == 0 {
		delete(s.nat.ifaces, sw)
	} else {
		s.nat.ifaces[sw] = cur &^ f
	}
	return reply(0)
}

func (s *state) natInterfaceDump(api.Message) []api.Message {
	if s.nat == nil {
		return nil
	}
	sws := make([]uint32, 0, len(s.nat.ifaces))
	for sw := range s.nat.ifaces {
		sws = append(sws, sw)
	}
	slices.Sort(sws)
	var out []api.Message
	for _, sw := range sws {
		out = append(out, &nat44_ed.Nat44InterfaceDetails{Flags: s.nat.ifaces[sw], SwIfIndex: interface_types.InterfaceIndex(sw)})
	}
	return out
}

func (s *state) natAddressRange(m api.Message) []api.Message {
	req := m.(*nat44_ed.Nat44AddDelAddressRange)
	reply := func(rv int32) []api.Message {
		return []api.Message{&nat44_ed.Nat44AddDelAddressRangeReply{Retval: rv}}
	}
	if s.nat == nil {
		return reply(rvUnsupported)
	}
	first, last := ip4(req.FirstIPAddress), ip4(req.LastIPAddress)
	var addrs []netip.Addr
	for a := first; a.IsValid() && a.Compare(last) <= 0; a = a.Next() {
		addrs = append(addrs, a)
	}
	twice := req.Flags&nat_types.NAT_IS_TWICE_NAT != 0
	inPool := func(a netip.Addr) int {
		return slices.IndexFunc(s.nat.pool, func(p natAddr) bool { return p.ip == a && p.twice == twice && !p.fromIf })
	}
	for _, a := range addrs { // all or nothing
		exists := inPool(a) >= 0
		if req.IsAdd && exists {
			return reply(rvValueExist)
		}
		if !req.IsAdd && !exists {
			return reply(rvNoSuchEntry)
		}
	}
	for _, a := range addrs {
		if req.IsAdd {
			s.nat.pool = append(s.nat.pool, natAddr{ip: a, vrf: req.VrfID, twice: twice})
		} else {
			i := inPool(a)
			s.nat.pool = slices.Delete(s.nat.pool, i, i+1)
		}
	}
	return reply(0)
}

func (s *state) natAddressDump(api.Message) []api.Message {
	if s.nat == nil {
		return nil
	}
	var out []api.Message
	for _, twice := range []bool{false, true} {
		for _, p := range s.nat.pool {
			if p.twice != twice {
				continue
			}
			d := &nat44_ed.Nat44AddressDetails{IPAddress: ip4Of(p.ip), VrfID: p.vrf}
			if twice {
				d.Flags = nat_types.NAT_IS_TWICE_NAT
			}
			out = append(out, d)
		}
	}
	return out
}

func (s *state) natStaticAddDel(m api.Message) []api.Message {
	req := m.(*nat44_ed.Nat44AddDelStaticMappingV2)
	reply := func(rv int32) []api.Message {
		return []api.Message{&nat44_ed.Nat44AddDelStaticMappingV2Reply{Retval: rv}}
	}
	if s.nat == nil {
		return reply(rvUnsupported)
	}
	sm := &natStatic{flags: req.Flags, local: ip4(req.LocalIPAddress), external: ip4(req.ExternalIPAddress),
		proto: req.Protocol, lport: req.LocalPort, eport: req.ExternalPort, extSw: uint32(req.ExternalSwIfIndex),
		vrf: req.VrfID, tag: req.Tag}
	return reply(s.natStaticPut(sm, req.IsAdd))
}

func (s *state) natIdentityAddDel(m api.Message) []api.Message {
	req := m.(*nat44_ed.Nat44AddDelIdentityMapping)
	reply := func(rv int32) []api.Message {
		return []api.Message{&nat44_ed.Nat44AddDelIdentityMappingReply{Retval: rv}}
	}
	if s.nat == nil {
		return reply(rvUnsupported)
	}
	sm := &natStatic{identity: true, flags: req.Flags, local: ip4(req.IPAddress), external: ip4(req.IPAddress),
		proto: req.Protocol, eport: req.Port, lport: req.Port, extSw: uint32(req.SwIfIndex), vrf: req.VrfID, tag: req.Tag}
	return reply(s.natStaticPut(sm, req.IsAdd))
}

// natStaticPut adds or deletes a static or identity mapping. VPP finds the
// mapping to delete by its external address, port and protocol (the local
// side and the flags of the request do not matter). An add conflicts with
// a mapping (or a load-balanced one) of the same external address, port and
// protocol, and, unless one of the two is OUT2IN_ONLY, with a static
// mapping of the same local address and port: out2in-only mappings
// translate no locally initiated traffic, so several may share a backend.
func (s *state) natStaticPut(sm *natStatic, add bool) int32 {
	sameExt := func(o *natStatic) bool {
		if o.identity != sm.identity || o.proto != sm.proto || o.extSw != sm.extSw {
			return false
		}
		if sm.extSw != noIndex {
			return o.local == sm.local && o.lport == sm.lport && o.eport == sm.eport
		}
		return o.external == sm.external && o.eport == sm.eport
	}
	i := slices.IndexFunc(s.nat.statics, sameExt)
	if !add {
		if i < 0 {
			return rvNoSuchEntry
		}
		s.nat.statics = slices.Delete(s.nat.statics, i, i+1)
		return 0
	}
	if i >= 0 {
		return rvValueExist
	}
	if !sm.identity && sm.extSw == noIndex {
		if _, ok := s.nat.lbs[lbKey{sm.external, sm.eport, sm.proto}]; ok {
			return rvValueExist
		}
		o2i := func(f nat_types.NatConfigFlags) bool { return f&nat_types.NAT_IS_OUT2IN_ONLY != 0 }
		if !o2i(sm.flags) && slices.ContainsFunc(s.nat.statics, func(o *natStatic) bool {
			return !o.identity && !o2i(o.flags) && o.proto == sm.proto && o.local == sm.local && o.lport == sm.lport
		}) {
			return rvValueExist
		}
	}
	s.nat.statics = append(s.nat.statics, sm)
	return 0
}

// natStaticEntries expands mappings bound to an interface into the record
// (address 0.0.0.0, the interface, flags 0) and, if the interface has an
// IPv4 address, the resolved mapping.
func (s *state) natStaticEntries(identity bool) []natStatic {
	var out []natStatic
	for _, sm := range s.nat.statics {
		if sm.identity != identity {
			continue
		}
		if sm.extSw == noIndex {
			out = append(out, *sm)
			continue
		}
		if a := s.firstIP4(sm.extSw); a.IsValid() {
			r := *sm
			r.extSw = noIndex
			r.external = a
			if identity {
				r.local = a
			}
			out = append(out, r)
		}
		rec := *sm
		rec.flags = 0
		rec.external = netip.AddrFrom4([4]byte{})
		if identity {
			rec.local = rec.external
		}
		out = append(out, rec)
	}
	return out
}

func (s *state) natStaticDump(api.Message) []api.Message {
	if s.nat == nil {
		return nil
	}
	var out []api.Message
	for _, sm := range s.natStaticEntries(false) {
		out = append(out, &nat44_ed.Nat44StaticMappingDetails{Flags: sm.flags, LocalIPAddress: ip4Of(sm.local),
			ExternalIPAddress: ip4Of(sm.external), Protocol: sm.proto, LocalPort: sm.lport, ExternalPort: sm.eport,
			ExternalSwIfIndex: interface_types.InterfaceIndex(sm.extSw), VrfID: sm.vrf, Tag: sm.tag})
	}
	return out
}

func (s *state) natIdentityDump(api.Message) []api.Message {
	if s.nat == nil {
		return nil
	}
	var out []api.Message
	for _, sm := range s.natStaticEntries(true) {
		out = append(out, &nat44_ed.Nat44IdentityMappingDetails{Flags: sm.flags, IPAddress: ip4Of(sm.local),
			Protocol: sm.proto, Port: sm.eport, SwIfIndex: interface_types.InterfaceIndex(sm.extSw), VrfID: sm.vrf, Tag: sm.tag})
	}
	return out
}

func (s *state) natLBAddDel(m api.Message) []api.Message {
	req := m.(*nat44_ed.Nat44AddDelLbStaticMapping)
	reply := func(rv int32) []api.Message {
		return []api.Message{&nat44_ed.Nat44AddDelLbStaticMappingReply{Retval: rv}}
	}
	if s.nat == nil {
		return reply(rvUnsupported)
	}
	ext := ip4(req.ExternalAddr)
	k := lbKey{ext, req.ExternalPort, req.Protocol}
	_, exists := s.nat.lbs[k]
	if !req.IsAdd {
		if !exists {
			return reply(rvNoSuchEntry)
		}
		delete(s.nat.lbs, k)
		return reply(0)
	}
	if len(req.Locals) < 2 {
		return reply(rvInvalidValue)
	}
	if exists || slices.ContainsFunc(s.nat.statics, func(o *natStatic) bool {
		return !o.identity && o.extSw == noIndex && o.proto == req.Protocol && o.external == ext && o.eport == req.ExternalPort
	}) {
		return reply(rvValueExist)
	}
	if req.Flags&nat_types.NAT_IS_OUT2IN_ONLY == 0 &&
		!slices.ContainsFunc(s.nat.pool, func(p natAddr) bool { return p.ip == ext }) {
		return reply(rvNoSuchEntry)
	}
	s.nat.lbSeq++
	s.nat.lbs[k] = &natLB{seq: s.nat.lbSeq, external: ext, port: req.ExternalPort, proto: req.Protocol, flags: req.Flags,
		affinity: req.Affinity, tag: req.Tag, locals: slices.Clone(req.Locals)}
	return reply(0)
}

func (s *state) natLBLocal(m api.Message) []api.Message {
	req := m.(*nat44_ed.Nat44LbStaticMappingAddDelLocal)
	reply := func(rv int32) []api.Message {
		return []api.Message{&nat44_ed.Nat44LbStaticMappingAddDelLocalReply{Retval: rv}}
	}
	if s.nat == nil {
		return reply(rvUnsupported)
	}
	lb := s.nat.lbs[lbKey{ip4(req.ExternalAddr), req.ExternalPort, req.Protocol}]
	if lb == nil {
		return reply(rvNoSuchEntry)
	}
	j := slices.IndexFunc(lb.locals, func(l nat44_ed.Nat44LbAddrPort) bool {
		return l.Addr == req.Local.Addr && l.Port == req.Local.Port
	})
	switch {
	case req.IsAdd && j >= 0:
		return reply(rvValueExist)
	case req.IsAdd:
		lb.locals = append(lb.locals, req.Local)
	case j < 0:
		return reply(rvNoSuchEntry)
	case len(lb.locals) < 3:
		return reply(rvUnspecified) // VPP keeps at least two backends
	default:
		lb.locals = slices.Delete(lb.locals, j, j+1)
	}
	return reply(0)
}

func (s *state) natLBDump(api.Message) []api.Message {
	if s.nat == nil {
		return nil
	}
	lbs := make([]*natLB, 0, len(s.nat.lbs))
	for _, lb := range s.nat.lbs {
		lbs = append(lbs, lb)
	}
	slices.SortFunc(lbs, func(a, b *natLB) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]api.Message, 0, len(lbs))
	for _, lb := range lbs {
		// VPP does not report the affinity.
		out = append(out, &nat44_ed.Nat44LbStaticMappingDetails{ExternalAddr: ip4Of(lb.external), ExternalPort: lb.port,
			Protocol: lb.proto, Flags: lb.flags, Tag: lb.tag, LocalNum: uint32(len(lb.locals)), Locals: slices.Clone(lb.locals)})
	}
	return out
}

func (s *state) natForwarding(m api.Message) []api.Message {
	req := m.(*nat44_ed.Nat44ForwardingEnableDisable)
	// Accepted also while the plugin is disabled, without effect: enabling
	// the plugin starts without forwarding.
	if s.nat != nil {
		s.nat.forwarding = req.Enable
	}
	return []api.Message{&nat44_ed.Nat44ForwardingEnableDisableReply{}}
}

func (s *state) natOutputAddDel(m api.Message) []api.Message {
	req := m.(*nat44_ed.Nat44EdAddDelOutputInterface)
	reply := func(rv int32) []api.Message {
		return []api.Message{&nat44_ed.Nat44EdAddDelOutputInterfaceReply{Retval: rv}}
	}
	if s.nat == nil {
		return reply(rvUnsupported)
	}
	sw := uint32(req.SwIfIndex)
	if s.ifaces[sw] == nil {
		return reply(rvInvalidSwIfIndex)
	}
	i := slices.Index(s.nat.output, sw)
	if !req.IsAdd {
		if i < 0 {
			return reply(rvNoSuchEntry)
		}
		s.nat.output = slices.Delete(s.nat.output, i, i+1)
		return reply(0)
	}
	if _, pre := s.nat.ifaces[sw]; i >= 0 || pre {
		return reply(rvValueExist)
	}
	s.nat.output = append(s.nat.output, sw)
	return reply(0)
}

// natOutputGet answers nat44_ed_output_interface_get: the details, then the
// reply (cursor ~0 after details, 0 when there were none).
func (s *state) natOutputGet(api.Message) []api.Message {
	var out []api.Message
	if s.nat != nil {
		for _, sw := range s.nat.output {
			out = append(out, &nat44_ed.Nat44EdOutputInterfaceDetails{SwIfIndex: interface_types.InterfaceIndex(sw)})
		}
	}
	r := &nat44_ed.Nat44EdOutputInterfaceGetReply{}
	if len(out) > 0 {
		r.Cursor = noIndex
	}
	return append(out, r)
}

func (s *state) natInterfaceAddr(m api.Message) []api.Message {
	req := m.(*nat44_ed.Nat44AddDelInterfaceAddr)
	reply := func(rv int32) []api.Message {
		return []api.Message{&nat44_ed.Nat44AddDelInterfaceAddrReply{Retval: rv}}
	}
	if s.nat == nil {
		return reply(rvUnsupported)
	}
	e := natIfAddr{sw: uint32(req.SwIfIndex), twice: req.Flags&nat_types.NAT_IS_TWICE_NAT != 0}
	if s.ifaces[e.sw] == nil {
		return reply(rvInvalidSwIfIndex)
	}
	i := slices.Index(s.nat.ifAddrs, e)
	if !req.IsAdd {
		if i < 0 {
			return reply(rvNoSuchEntry)
		}
		s.nat.ifAddrs = slices.Delete(s.nat.ifAddrs, i, i+1)
		s.natIfAddrSync(e.sw)
		return reply(0)
	}
	if i >= 0 {
		return reply(rvValueExist)
	}
	s.nat.ifAddrs = append(s.nat.ifAddrs, e)
	s.natIfAddrSync(e.sw)
	return reply(0)
}

// natIfAddrSync makes the pool hold the first IPv4 address of interface sw
// for each of its interface-address pools (appended when it appears,
// removed when it goes), as VPP does when the interface's address changes.
func (s *state) natIfAddrSync(sw uint32) {
	if s.nat == nil {
		return
	}
	addr := s.firstIP4(sw)
	for _, twice := range []bool{false, true} {
		want := addr.IsValid() && slices.Contains(s.nat.ifAddrs, natIfAddr{sw, twice})
		i := slices.IndexFunc(s.nat.pool, func(p natAddr) bool { return p.fromIf && p.sw == sw && p.twice == twice })
		if i >= 0 && (!want || s.nat.pool[i].ip != addr) {
			s.nat.pool = slices.Delete(s.nat.pool, i, i+1)
			i = -1
		}
		if want && i < 0 {
			s.nat.pool = append(s.nat.pool, natAddr{ip: addr, vrf: noIndex, twice: twice, fromIf: true, sw: sw})
		}
	}
}

func (s *state) natInterfaceAddrDump(api.Message) []api.Message {
	if s.nat == nil {
		return nil
	}
	var out []api.Message
	for _, e := range s.nat.ifAddrs {
		d := &nat44_ed.Nat44InterfaceAddrDetails{SwIfIndex: interface_types.InterfaceIndex(e.sw)}
		if e.twice {
			d.Flags = nat_types.NAT_IS_TWICE_NAT
		}
		out = append(out, d)
	}
	return out
}

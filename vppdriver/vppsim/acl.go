package vppsim

import (
	"net/netip"
	"slices"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/acl"
	"go.fd.io/govpp/binapi/acl_types"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip_types"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
)

// Retvals of the ACL plugin (VPP's src/vnet/error.h).
const (
	rvInvalidValue2      = -8
	rvInvalidSrcAddress  = -57
	rvInvalidDstAddress  = -58
	rvACLInUseInbound    = -142
	rvACLInUseOutbound   = -143
	aclTagLen            = 64 // string[64]: a tag of 64 characters leaves no room for the NUL
	aclConnTableMax      = 500000
	aclVersionMajor      = 1
	aclVersionMinor      = 4
	aclListDuplicateRval = 1 // acl_interface_set_acl_list: VPP's `rv = rv || …` makes any failure 1
)

// indexPool hands out indexes as VPP's pools do: the index freed last,
// else the next new one.
type indexPool struct {
	next uint32
	free []uint32
}

func (p *indexPool) get() uint32 {
	if n := len(p.free); n > 0 {
		i := p.free[n-1]
		p.free = p.free[:n-1]
		return i
	}
	p.next++
	return p.next - 1
}

func (p *indexPool) put(i uint32) { p.free = append(p.free, i) }

// aclState is the ACL plugin's configuration.
type aclState struct {
	acls map[uint32]*simACL
	pool indexPool
	// in and out are the ordered ACL lists per sw_if_index; an interface
	// without ACLs has no entry.
	in, out map[uint32][]uint32
	// users counts, per ACL, the interface lists it is on (input, output).
	users map[uint32]*[2]int
}

type simACL struct {
	tag   string
	rules []acl_types.ACLRule
}

func newACLState() aclState {
	return aclState{acls: map[uint32]*simACL{}, in: map[uint32][]uint32{}, out: map[uint32][]uint32{}, users: map[uint32]*[2]int{}}
}

func (s *state) aclGetVersion(api.Message) []api.Message {
	return []api.Message{&acl.ACLPluginGetVersionReply{Major: aclVersionMajor, Minor: aclVersionMinor}}
}

func (s *state) aclConnTableMax(api.Message) []api.Message {
	return []api.Message{&acl.ACLPluginGetConnTableMaxEntriesReply{ConnTableMaxEntries: aclConnTableMax}}
}

// aclPrefixValid tells whether VPP accepts p in a rule: a known family, a
// length within it, no host bits.
func aclPrefixValid(p ip_types.Prefix) bool {
	if p.Address.Af != ip_types.ADDRESS_IP4 && p.Address.Af != ip_types.ADDRESS_IP6 {
		return false
	}
	np := vppconv.PrefixOf(p)
	return np.IsValid() && np.Masked() == np
}

// aclCheckRules returns the retval VPP gives for rules (0 if it accepts
// them), checking them in order as acl_add_list does.
func aclCheckRules(rules []acl_types.ACLRule) int32 {
	for _, r := range rules {
		switch {
		case !aclPrefixValid(r.SrcPrefix):
			return rvInvalidSrcAddress
		case !aclPrefixValid(r.DstPrefix):
			return rvInvalidDstAddress
		case r.SrcPrefix.Address.Af != r.DstPrefix.Address.Af:
			return rvInvalidSrcAddress
		case r.SrcportOrIcmptypeFirst > r.SrcportOrIcmptypeLast, r.DstportOrIcmpcodeFirst > r.DstportOrIcmpcodeLast:
			return rvInvalidValue2
		}
	}
	return 0
}

// aclRuleCopy is a rule as VPP stores and dumps it: the addresses encoded
// again for the rule's family.
func aclRuleCopy(r acl_types.ACLRule) acl_types.ACLRule {
	src, dst := vppconv.PrefixOf(r.SrcPrefix), vppconv.PrefixOf(r.DstPrefix)
	r.SrcPrefix, r.DstPrefix = vppconv.Prefix(src), vppconv.Prefix(dst)
	return r
}

func (s *state) aclAddReplace(m api.Message) []api.Message {
	req := m.(*acl.ACLAddReplace)
	reply := func(rv int32, idx uint32) []api.Message {
		return []api.Message{&acl.ACLAddReplaceReply{Retval: rv, ACLIndex: idx}}
	}
	if len(req.Tag) >= aclTagLen {
		return reply(rvInvalidValue, req.ACLIndex)
	}
	if rv := aclCheckRules(req.R); rv != 0 {
		return reply(rv, req.ACLIndex)
	}
	a := s.acl.acls[req.ACLIndex]
	if req.ACLIndex != noIndex && a == nil {
		return reply(rvNoSuchEntry, req.ACLIndex)
	}
	idx := req.ACLIndex
	if a == nil {
		idx = s.acl.pool.get()
		a = &simACL{}
		s.acl.acls[idx] = a
	}
	a.tag = req.Tag
	a.rules = make([]acl_types.ACLRule, len(req.R))
	for n, r := range req.R {
		a.rules[n] = aclRuleCopy(r)
	}
	return reply(0, idx)
}

func (s *state) aclDel(m api.Message) []api.Message {
	req := m.(*acl.ACLDel)
	reply := func(rv int32) []api.Message { return []api.Message{&acl.ACLDelReply{Retval: rv}} }
	if s.acl.acls[req.ACLIndex] == nil {
		return reply(rvNoSuchEntry)
	}
	if u := s.acl.users[req.ACLIndex]; u != nil {
		if u[0] > 0 {
			return reply(rvACLInUseInbound)
		}
		if u[1] > 0 {
			return reply(rvACLInUseOutbound)
		}
	}
	delete(s.acl.acls, req.ACLIndex)
	s.acl.pool.put(req.ACLIndex)
	return reply(0)
}

func (s *state) aclDetails(idx uint32) *acl.ACLDetails {
	a := s.acl.acls[idx]
	return &acl.ACLDetails{ACLIndex: idx, Tag: a.tag, Count: uint32(len(a.rules)), R: slices.Clone(a.rules)}
}

func (s *state) aclDump(m api.Message) []api.Message {
	req := m.(*acl.ACLDump)
	if req.ACLIndex != noIndex {
		if s.acl.acls[req.ACLIndex] == nil {
			return nil
		}
		return []api.Message{s.aclDetails(req.ACLIndex)}
	}
	var out []api.Message
	for _, idx := range s.sortedACLs() {
		out = append(out, s.aclDetails(idx))
	}
	return out
}

func (s *state) sortedACLs() []uint32 {
	idx := make([]uint32, 0, len(s.acl.acls))
	for i := range s.acl.acls {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	return idx
}

// aclSetList replaces the input (or output) list of sw with list, as
// acl_interface_set_inout_acl_list does: an unknown ACL gives -6, an ACL
// twice -116; the list is then unchanged.
func (s *state) aclSetList(sw uint32, input bool, list []uint32) int32 {
	seen := make(map[uint32]bool, len(list))
	for _, a := range list {
		if s.acl.acls[a] == nil {
			return rvNoSuchEntry
		}
		if seen[a] {
			return rvEntryAlreadyExists
		}
		seen[a] = true
	}
	lists, dir := s.acl.out, 1
	if input {
		lists, dir = s.acl.in, 0
	}
	for _, a := range lists[sw] {
		s.acl.users[a][dir]--
	}
	if len(list) == 0 {
		delete(lists, sw)
		return 0
	}
	lists[sw] = slices.Clone(list)
	for _, a := range list {
		u := s.acl.users[a]
		if u == nil {
			u = &[2]int{}
			s.acl.users[a] = u
		}
		u[dir]++
	}
	return 0
}

func (s *state) aclInterfaceSetList(m api.Message) []api.Message {
	req := m.(*acl.ACLInterfaceSetACLList)
	reply := func(rv int32) []api.Message { return []api.Message{&acl.ACLInterfaceSetACLListReply{Retval: rv}} }
	if s.iface(req.SwIfIndex) == nil {
		return reply(rvInvalidSwIfIndex)
	}
	for _, a := range req.Acls {
		if s.acl.acls[a] == nil {
			return reply(rvNoSuchEntry)
		}
	}
	n := min(int(req.NInput), len(req.Acls))
	in, out := req.Acls[:n], req.Acls[n:]
	sw := uint32(req.SwIfIndex)
	// VPP sets the output list first: `rv = set(out); rv = rv || set(in)`.
	if s.aclSetList(sw, false, out) != 0 || s.aclSetList(sw, true, in) != 0 {
		return reply(aclListDuplicateRval)
	}
	return reply(0)
}

func (s *state) aclInterfaceAddDel(m api.Message) []api.Message {
	req := m.(*acl.ACLInterfaceAddDel)
	reply := func(rv int32) []api.Message { return []api.Message{&acl.ACLInterfaceAddDelReply{Retval: rv}} }
	if s.iface(req.SwIfIndex) == nil {
		return reply(rvInvalidSwIfIndex)
	}
	sw := uint32(req.SwIfIndex)
	lists, inUse := s.acl.out, int32(rvACLInUseOutbound)
	if req.IsInput {
		lists, inUse = s.acl.in, rvACLInUseInbound
	}
	list := slices.Clone(lists[sw])
	at := slices.Index(list, req.ACLIndex)
	if req.IsAdd {
		if at >= 0 {
			return reply(inUse)
		}
		list = append(list, req.ACLIndex)
	} else {
		if at < 0 {
			return reply(rvNoSuchEntry)
		}
		list = slices.Delete(list, at, at+1)
	}
	return reply(s.aclSetList(sw, req.IsInput, list))
}

func (s *state) aclInterfaceDetails(sw uint32) *acl.ACLInterfaceListDetails {
	in, out := s.acl.in[sw], s.acl.out[sw]
	acls := make([]uint32, 0, len(in)+len(out))
	acls = append(append(acls, in...), out...)
	return &acl.ACLInterfaceListDetails{SwIfIndex: interface_types.InterfaceIndex(sw), Count: uint8(len(acls)),
		NInput: uint8(len(in)), Acls: acls}
}

func (s *state) aclInterfaceListDump(m api.Message) []api.Message {
	req := m.(*acl.ACLInterfaceListDump)
	if uint32(req.SwIfIndex) != noIndex {
		if s.iface(req.SwIfIndex) == nil {
			return nil
		}
		return []api.Message{s.aclInterfaceDetails(uint32(req.SwIfIndex))}
	}
	var out []api.Message
	for _, i := range s.sortedIfaces() {
		out = append(out, s.aclInterfaceDetails(i.idx))
	}
	return out
}

// aclIfaceRemoved drops the ACL lists of a deleted interface, as the ACL
// plugin does.
func (s *state) aclIfaceRemoved(sw uint32) {
	s.aclSetList(sw, true, nil)
	s.aclSetList(sw, false, nil)
}

// ACL is a snapshot of one ACL of the ACL plugin.
type ACL struct {
	Index uint32
	Tag   string
	Rules []ACLRule // in order
}

// ACLRule is a snapshot of one ACL rule.
type ACLRule struct {
	Action   acl_types.ACLAction // deny, permit, permit+reflect
	Src, Dst netip.Prefix
	Proto    uint8 // 0: any
	// SrcPorts and DstPorts are [first, last] ranges; for ICMP they are
	// the type and code ranges.
	SrcPorts, DstPorts [2]uint16
	TCPFlagsMask       uint8
	TCPFlagsValue      uint8
}

// ACLInterface is a snapshot of the ACL lists of one interface.
type ACLInterface struct {
	SwIfIndex     uint32
	Input, Output []uint32 // ACL indexes in evaluation order
}

func (s *state) aclSnapshot() ([]ACL, []ACLInterface) {
	var acls []ACL
	for _, idx := range s.sortedACLs() {
		a := s.acl.acls[idx]
		out := ACL{Index: idx, Tag: a.tag}
		for _, r := range a.rules {
			out.Rules = append(out.Rules, ACLRule{Action: r.IsPermit, Src: vppconv.PrefixOf(r.SrcPrefix), Dst: vppconv.PrefixOf(r.DstPrefix),
				Proto: uint8(r.Proto), SrcPorts: [2]uint16{r.SrcportOrIcmptypeFirst, r.SrcportOrIcmptypeLast},
				DstPorts: [2]uint16{r.DstportOrIcmpcodeFirst, r.DstportOrIcmpcodeLast}, TCPFlagsMask: r.TCPFlagsMask, TCPFlagsValue: r.TCPFlagsValue})
		}
		acls = append(acls, out)
	}
	var ifs []ACLInterface
	for _, i := range s.sortedIfaces() {
		in, out := s.acl.in[i.idx], s.acl.out[i.idx]
		if len(in)+len(out) > 0 {
			ifs = append(ifs, ACLInterface{SwIfIndex: i.idx, Input: slices.Clone(in), Output: slices.Clone(out)})
		}
	}
	return acls, ifs
}

// Packet is the part of a packet the ACL plugin matches on.
type Packet struct {
	Src, Dst     netip.Addr
	Proto        uint8 // IP protocol number
	Sport, Dport uint16
}

// ACLVerdict tells what the ACLs applied to the interface tagged tag, in
// the direction given (output: the packets VPP sends on it), do with p:
// the action of the first rule that matches, searched ACL by ACL in the
// interface's order; a packet that no rule matches is denied when the
// interface has ACLs in that direction, permitted when it has none
// (found is false then). The stand-in keeps no sessions: this is the
// verdict on the first packet of a connection.
func (v *VPP) ACLVerdict(tag string, output bool, p Packet) (permit, found bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.st
	var sw uint32
	ok := false
	for _, i := range s.sortedIfaces() {
		if i.tag == tag {
			sw, ok = i.idx, true
			break
		}
	}
	if !ok {
		return true, false
	}
	lists := s.acl.in
	if output {
		lists = s.acl.out
	}
	list := lists[sw]
	if len(list) == 0 {
		return true, false
	}
	for _, idx := range list {
		for _, r := range s.acl.acls[idx].rules {
			if aclRuleMatches(r, p) {
				return r.IsPermit != acl_types.ACL_ACTION_API_DENY, true
			}
		}
	}
	return false, true
}

func aclRuleMatches(r acl_types.ACLRule, p Packet) bool {
	if !vppconv.PrefixOf(r.SrcPrefix).Contains(p.Src) || !vppconv.PrefixOf(r.DstPrefix).Contains(p.Dst) {
		return false
	}
	if r.Proto == 0 {
		return true
	}
	return uint8(r.Proto) == p.Proto &&
		r.SrcportOrIcmptypeFirst <= p.Sport && p.Sport <= r.SrcportOrIcmptypeLast &&
		r.DstportOrIcmpcodeFirst <= p.Dport && p.Dport <= r.DstportOrIcmpcodeLast
}

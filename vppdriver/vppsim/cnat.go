package vppsim

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip_types"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/internal/binapi/cnat"
)

// RetvalWouldCrash is the retval with which the stand-in refuses a request
// that makes the real VPP 26.06 die (see the package documentation and
// testdata/vpp-traces/12-cnat_sessions_crashes.json). VPP has no such
// code: a driver that gets it has a bug that would kill a real VPP.
const RetvalWouldCrash int32 = -1000

const (
	rvFeatureDisabled     = -30
	rvInvalidAddrFamily   = -97
	cnatTrkActive         = 4    // a path's flag when both its endpoints are resolved
	cnatTrFlagExclusive   = 0x80 // VPP's flag for a translation sent with is_real_ip 0 (not reported)
	cnatSnatTables        = 4    // INCLUDE_V4, INCLUDE_V6, POD, HOST
	cnatSnatPolicyMax     = 4    // none, if-pfx, k8s, dnat and 4 (dnat-only in VPP's sources)
	cnatSnatFlagNoClient  = uint8(cnat.CNAT_SNAT_POLICY_F_NO_CLIENT)
	cnatAddressFamilyIPv6 = 1
)

// cnatState is the cnat plugin's configuration.
type cnatState struct {
	trs    map[uint32]*cnatTr
	trPool indexPool
	db     map[cnatKey]uint32 // VPP's translation db: key -> id
	// clients are VPP's cnat clients: one per VIP or SNAT address (and
	// FIB index), shared, destroyed when the last translation on it goes.
	clients    map[cnatClientKey]*cnatClient
	clientKeys map[uint32]cnatClientKey // by client index
	clientPool indexPool
	snat       map[uint32]*snatEntry
	snatPool   indexPool
	snatByFib  [2]map[uint32]uint32 // per family: forwarding FIB index -> entry
	features   map[uint32]int       // sw_if_index -> times feature_cnat_enable_disable enabled it
}

func newCnatState() cnatState {
	return cnatState{trs: map[uint32]*cnatTr{}, db: map[cnatKey]uint32{}, clients: map[cnatClientKey]*cnatClient{},
		clientKeys: map[uint32]cnatClientKey{},
		snat:       map[uint32]*snatEntry{}, snatByFib: [2]map[uint32]uint32{{}, {}}, features: map[uint32]int{}}
}

// cnatKey is the key of VPP's translation db: a resolved VIP by its client,
// an unresolved one (by interface) by family and sw_if_index.
type cnatKey struct {
	unresolved bool
	v6         bool   // unresolved only
	idx        uint32 // client index, or the sw_if_index of an unresolved VIP
	port       uint16
	proto      uint8
}

type cnatClientKey struct {
	fib  uint32
	addr netip.Addr
}

type cnatClient struct {
	idx    uint32
	trRefs int // translations whose VIP it is
}

// cnatEP is an endpoint as VPP keeps it.
type cnatEP struct {
	addr     netip.Addr // resolved address; zero of the family while unresolved
	sw       uint32     // ~0 for an IP endpoint
	port     uint16
	v6       bool
	resolved bool
}

type cnatPath struct {
	dst, src cnatEP
	flags    uint8 // as sent, with cnatTrkActive when both endpoints resolved
}

type cnatTr struct {
	vip    cnatEP
	proto  uint8
	cci    uint32 // client, ~0 while the VIP is unresolved
	flags  uint8  // translation flags, cnatTrFlagExclusive for is_real_ip 0
	lbType uint8
	fhc    uint32
	paths  []cnatPath
}

// snatEntry is a SNAT policy entry (one per forwarding FIB index).
type snatEntry struct {
	flags uint8
	parts [2]snatPart // [0] IPv4, [1] IPv6
	// initialized tells whether VPP considers the policy part set up: it
	// checks that the INCLUDE_V4 interface bitmap is not empty.
	initialized bool
	exclude     map[netip.Prefix]bool
	ifaces      [cnatSnatTables]map[uint32]bool
	policy      uint8
}

type snatPart struct {
	addr     netip.Addr
	sw       uint32
	fwd, ret uint32
	resolved bool
	set      bool // registered for its forwarding FIB
}

// cnatDecodeEP decodes an endpoint as cnat_endpoint_decode does.
func cnatDecodeEP(in cnat.CnatEndpoint) (cnatEP, int32) {
	ep := cnatEP{sw: uint32(in.SwIfIndex), port: in.Port}
	if ep.sw == noIndex {
		ep.v6 = in.Addr.Af == ip_types.ADDRESS_IP6
		ep.addr = vppconv.AddrOf(in.Addr)
		return ep, 0
	}
	switch in.IfAf {
	case ip_types.ADDRESS_IP4:
	case ip_types.ADDRESS_IP6:
		ep.v6 = true
	default:
		return ep, rvInvalidAddrFamily
	}
	ep.addr = zeroAddr(ep.v6)
	return ep, 0
}

func zeroAddr(v6 bool) netip.Addr {
	if v6 {
		return netip.IPv6Unspecified()
	}
	return netip.IPv4Unspecified()
}

// firstAddr returns the first address of a family of an interface.
func (s *state) firstAddr(sw uint32, v6 bool) (netip.Addr, bool) {
	i := s.ifaces[sw]
	if i == nil {
		return netip.Addr{}, false
	}
	for _, a := range i.addrs {
		if a.Addr().Is6() == v6 {
			return a.Addr(), true
		}
	}
	return netip.Addr{}, false
}

// cnatResolve resolves an endpoint as cnat_resolve_ep does: an IP endpoint
// is resolved, an interface one takes the interface's first address of its
// family. It reports whether it resolved now; a failure keeps an earlier
// resolution.
func (s *state) cnatResolve(ep *cnatEP) bool {
	if ep.sw == noIndex {
		ep.resolved = true
		return true
	}
	a, ok := s.firstAddr(ep.sw, ep.v6)
	if ok {
		ep.addr, ep.resolved = a, true
	}
	return ok
}

func cnatEncodeEP(ep cnatEP) cnat.CnatEndpoint {
	out := cnat.CnatEndpoint{SwIfIndex: interface_types.InterfaceIndex(ep.sw), Port: ep.port}
	if ep.v6 {
		out.IfAf = ip_types.ADDRESS_IP6
	}
	if ep.resolved {
		out.Addr = vppconv.Address(ep.addr)
	}
	return out
}

// clientAdd returns the client of addr in fib, made if needed.
func (s *state) cnatClientAdd(fib uint32, addr netip.Addr) *cnatClient {
	k := cnatClientKey{fib, addr}
	c := s.cnat.clients[k]
	if c == nil {
		c = &cnatClient{idx: s.cnat.clientPool.get()}
		s.cnat.clients[k] = c
		s.cnat.clientKeys[c.idx] = k
	}
	return c
}

func (s *state) cnatClientByIndex(cci uint32) (cnatClientKey, *cnatClient) {
	k, ok := s.cnat.clientKeys[cci]
	if !ok {
		return cnatClientKey{}, nil
	}
	return k, s.cnat.clients[k]
}

func (s *state) cnatClientDestroy(k cnatClientKey) {
	idx := s.cnat.clients[k].idx
	s.cnat.clientPool.put(idx)
	delete(s.cnat.clientKeys, idx)
	delete(s.cnat.clients, k)
}

func (s *state) cnatTranslationUpdate(m api.Message) []api.Message {
	req := m.(*cnat.CnatTranslationUpdate)
	reply := func(rv int32, id uint32) []api.Message {
		return []api.Message{&cnat.CnatTranslationUpdateReply{Retval: rv, ID: id}}
	}
	t := req.Translation
	if len(t.Paths) == 0 {
		// VPP 26.06 aborts (vec_validate of n_paths - 1): refuse.
		return reply(RetvalWouldCrash, noIndex)
	}
	paths := make([]cnatPath, len(t.Paths))
	for n, p := range t.Paths {
		src, rv := cnatDecodeEP(p.SrcEp)
		if rv != 0 {
			return reply(rv, noIndex)
		}
		dst, rv := cnatDecodeEP(p.DstEp)
		if rv != 0 {
			return reply(rv, noIndex)
		}
		paths[n] = cnatPath{dst: dst, src: src, flags: p.Flags}
	}
	vip, rv := cnatDecodeEP(t.Vip)
	if rv != 0 {
		return reply(rv, noIndex)
	}
	flags := t.Flags
	if t.IsRealIP == 0 {
		flags |= cnatTrFlagExclusive
	}
	proto := uint8(t.IPProto)
	// An unresolved VIP is looked up with its sw_if_index in place of a
	// client index (VPP's cnat_find_translation), and stored under a key
	// that lookup never finds.
	var key, find cnatKey
	cci := noIndex
	var client *cnatClient
	if s.cnatResolve(&vip) {
		client = s.cnatClientAdd(0, vip.addr)
		cci = client.idx
		key = cnatKey{idx: cci, port: vip.port, proto: proto}
		find = key
	} else {
		key = cnatKey{unresolved: true, v6: vip.v6, idx: vip.sw, port: vip.port, proto: proto}
		find = cnatKey{idx: vip.sw, port: vip.port, proto: proto}
	}
	id, found := s.cnat.db[find]
	tr := s.cnat.trs[id]
	if !found || tr == nil {
		id = s.cnat.trPool.get()
		// lb_type and flow_hash_config are taken when the translation is
		// made only: an update keeps them (step 37 of 11-cnat.json).
		tr = &cnatTr{vip: vip, proto: proto, cci: cci, lbType: uint8(t.LbType), fhc: uint32(t.FlowHashConfig)}
		s.cnat.trs[id] = tr
		s.cnat.db[key] = id
		if client != nil {
			client.trRefs++
		}
	}
	tr.flags = flags
	for n := range paths {
		p := &paths[n]
		src, dst := s.cnatResolve(&p.src), s.cnatResolve(&p.dst)
		if src && dst {
			p.flags |= cnatTrkActive
		} else {
			p.flags &^= cnatTrkActive
		}
	}
	tr.paths = paths
	return reply(0, id)
}

// cnatDelete deletes a translation as cnat_translation_delete does: its
// client goes when it was its last translation.
func (s *state) cnatDelete(id uint32) bool {
	tr := s.cnat.trs[id]
	if tr == nil {
		return false
	}
	if tr.cci == noIndex {
		delete(s.cnat.db, cnatKey{unresolved: true, v6: tr.vip.v6, idx: tr.vip.sw, port: tr.vip.port, proto: tr.proto})
	} else {
		delete(s.cnat.db, cnatKey{idx: tr.cci, port: tr.vip.port, proto: tr.proto})
		if k, c := s.cnatClientByIndex(tr.cci); c != nil {
			if c.trRefs--; c.trRefs <= 0 {
				s.cnatClientDestroy(k)
			}
		}
	}
	delete(s.cnat.trs, id)
	s.cnat.trPool.put(id)
	return true
}

func (s *state) cnatTranslationDel(m api.Message) []api.Message {
	req := m.(*cnat.CnatTranslationDel)
	if !s.cnatDelete(req.ID) {
		return []api.Message{&cnat.CnatTranslationDelReply{Retval: rvNoSuchEntry}}
	}
	return []api.Message{&cnat.CnatTranslationDelReply{}}
}

func (s *state) sortedCnatIDs() []uint32 {
	return slices.Sorted(maps.Keys(s.cnat.trs))
}

func (s *state) cnatTranslationDump(api.Message) []api.Message {
	var out []api.Message
	for _, id := range s.sortedCnatIDs() {
		tr := s.cnat.trs[id]
		d := &cnat.CnatTranslationDetails{Translation: cnat.CnatTranslation{Vip: cnatEncodeEP(tr.vip), ID: id,
			IPProto: ip_types.IPProto(tr.proto), LbType: cnat.CnatLbType(tr.lbType), NPaths: uint32(len(tr.paths))}}
		for _, p := range tr.paths {
			d.Translation.Paths = append(d.Translation.Paths, cnat.CnatEndpointTuple{DstEp: cnatEncodeEP(p.dst), SrcEp: cnatEncodeEP(p.src), Flags: p.flags})
		}
		out = append(out, d)
	}
	return out
}

func (s *state) cnatSessionDump(api.Message) []api.Message { return nil }

func (s *state) cnatSessionPurge(api.Message) []api.Message {
	for _, id := range s.sortedCnatIDs() {
		s.cnatDelete(id)
	}
	return []api.Message{&cnat.CnatSessionPurgeReply{}}
}

// snatLookup returns the SNAT entry of a family and forwarding FIB index.
func (s *state) snatLookup(v6 bool, fwd uint32) (uint32, *snatEntry) {
	idx, ok := s.cnat.snatByFib[famIdx(v6)][fwd]
	if !ok {
		return 0, nil
	}
	return idx, s.cnat.snat[idx]
}

// snatDefault returns the default SNAT entry (FIB index 0: its IPv4 part,
// else its IPv6 part), or nil.
func (s *state) snatDefault() *snatEntry {
	if _, e := s.snatLookup(false, 0); e != nil {
		return e
	}
	_, e := s.snatLookup(true, 0)
	return e
}

// snatSet is VPP's cnat_set_snat.
func (s *state) snatSet(fwd, ret uint32, ip4 netip.Addr, ip6 netip.Addr, sw uint32, flags uint8) int32 {
	swSet := sw != noIndex
	set := [2]bool{swSet || !ip4.IsUnspecified(), swSet || !ip6.IsUnspecified()}
	addrs := [2]netip.Addr{ip4, ip6}
	if !set[0] && !set[1] {
		return s.snatDelete(fwd)
	}
	for f, v6 := range []bool{false, true} {
		if !set[f] {
			continue
		}
		// A FIB index that does not exist may kill VPP 26.06
		// (12-cnat_sessions_crashes.json part E): refuse.
		if _, ok := s.fibTableID(v6, fwd); !ok {
			return RetvalWouldCrash
		}
		if _, ok := s.fibTableID(v6, ret); !ok {
			return RetvalWouldCrash
		}
	}
	idx, e := s.snatLookup(false, fwd)
	if e == nil {
		idx, e = s.snatLookup(true, fwd)
	}
	if e == nil {
		idx = s.cnat.snatPool.get()
		e = &snatEntry{flags: flags, exclude: map[netip.Prefix]bool{}}
		for n := range e.ifaces {
			e.ifaces[n] = map[uint32]bool{}
		}
		e.parts[1].addr = netip.IPv6Unspecified()
		e.parts[0].addr = netip.IPv4Unspecified()
		s.cnat.snat[idx] = e
	}
	for f, v6 := range []bool{false, true} {
		if !set[f] {
			continue
		}
		p := &e.parts[f]
		p.sw, p.fwd, p.ret, p.set = sw, fwd, ret, true
		s.cnat.snatByFib[f][fwd] = idx
		if !addrs[f].IsUnspecified() {
			p.addr = addrs[f]
		}
		ep := cnatEP{addr: p.addr, sw: sw, v6: v6, resolved: p.resolved}
		if s.cnatResolve(&ep) && e.flags&cnatSnatFlagNoClient == 0 {
			s.cnatClientAdd(ret, ep.addr)
		}
		p.addr, p.resolved = ep.addr, ep.resolved
	}
	return 0
}

// snatDelete deletes the SNAT entry of a forwarding FIB index, as
// cnat_snat_cleanup does: the clients of its resolved addresses are freed.
func (s *state) snatDelete(fwd uint32) int32 {
	idx, e := s.snatLookup(false, fwd)
	if e == nil {
		idx, e = s.snatLookup(true, fwd)
	}
	if e == nil {
		return rvFeatureDisabled
	}
	var free []cnatClientKey
	if e.flags&cnatSnatFlagNoClient == 0 {
		for _, p := range e.parts {
			if !p.resolved {
				continue
			}
			k := cnatClientKey{p.ret, p.addr}
			if s.cnat.clients[k] == nil {
				// The client went with the last translation of a VIP of
				// the same address: VPP 26.06 frees a missing client
				// and dies (part H).
				return RetvalWouldCrash
			}
			free = append(free, k)
		}
	}
	for _, k := range free {
		if c := s.cnat.clients[k]; c != nil && c.trRefs == 0 {
			s.cnatClientDestroy(k)
		}
	}
	for f := range e.parts {
		if cur, ok := s.cnat.snatByFib[f][fwd]; ok && cur == idx {
			delete(s.cnat.snatByFib[f], fwd)
		}
	}
	delete(s.cnat.snat, idx)
	s.cnat.snatPool.put(idx)
	return 0
}

func (s *state) cnatSetSnatAddresses(m api.Message) []api.Message {
	req := m.(*cnat.CnatSetSnatAddresses)
	rv := s.snatSet(0, 0, netip.AddrFrom4(req.SnatIP4), netip.AddrFrom16(req.SnatIP6), uint32(req.SwIfIndex), 0)
	return []api.Message{&cnat.CnatSetSnatAddressesReply{Retval: rv}}
}

func (s *state) cnatSetSnatAddressesV2(m api.Message) []api.Message {
	req := m.(*cnat.CnatSetSnatAddressesV2)
	rv := s.snatSet(req.FwdFibIndex, req.RetFibIndex, netip.AddrFrom4(req.SnatIP4), netip.AddrFrom16(req.SnatIP6),
		uint32(req.SwIfIndex), uint8(req.Flags))
	return []api.Message{&cnat.CnatSetSnatAddressesV2Reply{Retval: rv}}
}

func (s *state) cnatGetSnatAddresses(api.Message) []api.Message {
	e := s.snatDefault()
	if e == nil {
		return []api.Message{&cnat.CnatGetSnatAddressesReply{Retval: rvFeatureDisabled}}
	}
	return []api.Message{&cnat.CnatGetSnatAddressesReply{SnatIP4: e.parts[0].addr.As4(), SnatIP6: e.parts[1].addr.As16(),
		SwIfIndex: interface_types.InterfaceIndex(e.parts[1].sw)}}
}

func (s *state) cnatSnatAddressesDump(api.Message) []api.Message {
	tableID := func(v6 bool, fib uint32) uint32 {
		if id, ok := s.fibTableID(v6, fib); ok {
			return id
		}
		return noIndex
	}
	var out []api.Message
	for _, idx := range slices.Sorted(maps.Keys(s.cnat.snat)) {
		e := s.cnat.snat[idx]
		out = append(out, &cnat.CnatSnatAddressesDetails{
			FwdTableID4: tableID(false, e.parts[0].fwd), FwdTableID6: tableID(true, e.parts[1].fwd),
			RetTableID4: tableID(false, e.parts[0].ret), RetTableID6: tableID(true, e.parts[1].ret),
			SnatIP4: e.parts[0].addr.As4(), SnatIP6: e.parts[1].addr.As16(), SwIfIndex: interface_types.InterfaceIndex(e.parts[1].sw)})
	}
	return out
}

// snatInit is cnat_snat_policy_entry_init: an entry that is not
// initialized starts a new (empty) table of excluded prefixes.
func (e *snatEntry) snatInit() {
	if !e.initialized {
		e.exclude = map[netip.Prefix]bool{}
		e.initialized = true
	}
}

func (s *state) cnatExcludePfx(m api.Message) []api.Message {
	req := m.(*cnat.CnatSnatPolicyAddDelExcludePfx)
	reply := func(rv int32) []api.Message {
		return []api.Message{&cnat.CnatSnatPolicyAddDelExcludePfxReply{Retval: rv}}
	}
	e := s.snatDefault()
	if e == nil {
		return reply(RetvalWouldCrash) // VPP 26.06 dereferences the missing entry (part F)
	}
	p := vppconv.PrefixOf(req.Prefix).Masked()
	if req.IsAdd != 0 {
		e.snatInit()
		if p.IsValid() {
			e.exclude[p] = true
		}
	} else if e.initialized {
		delete(e.exclude, p)
	}
	return reply(0)
}

func (s *state) cnatSnatPolicyIf(m api.Message) []api.Message {
	req := m.(*cnat.CnatSnatPolicyAddDelIf)
	reply := func(rv int32) []api.Message { return []api.Message{&cnat.CnatSnatPolicyAddDelIfReply{Retval: rv}} }
	switch e := s.snatDefault(); {
	case s.iface(req.SwIfIndex) == nil:
		return reply(rvInvalidSwIfIndex)
	case req.Table >= cnatSnatTables:
		return reply(rvInvalidValue)
	case e == nil:
		return reply(rvFeatureDisabled)
	case req.IsAdd == 0 && !e.initialized:
		return reply(0) // ignored, as VPP 26.06 does
	case req.IsAdd != 0:
		e.snatInit()
		e.ifaces[req.Table][uint32(req.SwIfIndex)] = true
	default:
		delete(e.ifaces[req.Table], uint32(req.SwIfIndex))
		// Clearing the last bit of the INCLUDE_V4 bitmap trims it to
		// nothing, which VPP takes for "not initialized".
		if req.Table == cnat.CNAT_POLICY_INCLUDE_V4 && len(e.ifaces[req.Table]) == 0 {
			e.initialized = false
		}
	}
	return reply(0)
}

func (s *state) cnatSetSnatPolicy(m api.Message) []api.Message {
	req := m.(*cnat.CnatSetSnatPolicy)
	reply := func(rv int32) []api.Message { return []api.Message{&cnat.CnatSetSnatPolicyReply{Retval: rv}} }
	e := s.snatDefault()
	if e == nil {
		return reply(RetvalWouldCrash) // VPP 26.06 dereferences the missing entry (part G)
	}
	if req.Policy > cnatSnatPolicyMax {
		return reply(rvInvalidValue)
	}
	e.policy = uint8(req.Policy)
	return reply(0)
}

func (s *state) cnatFeature(m api.Message) []api.Message {
	req := m.(*cnat.FeatureCnatEnableDisable)
	if s.iface(req.SwIfIndex) == nil {
		return []api.Message{&cnat.FeatureCnatEnableDisableReply{Retval: rvInvalidSwIfIndex}}
	}
	sw := uint32(req.SwIfIndex)
	switch {
	case req.EnableDisable:
		s.cnat.features[sw]++
	case s.cnat.features[sw] > 1:
		s.cnat.features[sw]--
	default:
		delete(s.cnat.features, sw)
	}
	return []api.Message{&cnat.FeatureCnatEnableDisableReply{}}
}

// cnatIfaceRemoved drops the cnat feature of a deleted interface. Its SNAT
// table memberships stay, as in VPP.
func (s *state) cnatIfaceRemoved(sw uint32) {
	delete(s.cnat.features, sw)
}

// CnatEndpoint is a snapshot of a cnat endpoint.
type CnatEndpoint struct {
	Addr      netip.Addr // the resolved address; the zero address of the family while unresolved
	SwIfIndex uint32     // ~0 for an address endpoint
	Port      uint16
	Resolved  bool
}

// CnatPath is a snapshot of one backend of a translation.
type CnatPath struct {
	Dst, Src CnatEndpoint
	Flags    uint8 // as sent (CNAT_EPT_NO_NAT is 2 in 26.06), without VPP's "active" bit 4
}

// CnatTranslation is a snapshot of one cnat translation, with what the
// dump does not report (IsRealIP, Flags, FlowHashConfig).
type CnatTranslation struct {
	ID             uint32
	VIP            CnatEndpoint
	Proto          uint8
	LBType         uint8 // 0 default, 1 maglev
	IsRealIP       bool
	Flags          uint8
	FlowHashConfig uint32
	Paths          []CnatPath // in order
}

// CnatSNAT is a snapshot of one SNAT policy entry (the default one has
// FwdFibIndex 0).
type CnatSNAT struct {
	FwdFibIndex, RetFibIndex uint32     // of the entry's IPv4 part, else its IPv6 part
	IP4, IP6                 netip.Addr // as VPP reports them (zero when not set)
	SwIfIndex                uint32     // as VPP reports it: the IPv6 part's
	Flags                    uint8
	Policy                   uint8
	// Initialized tells whether VPP applies the policy tables: false until
	// the first interface or excluded prefix is added, and again after the
	// INCLUDE_V4 table loses its last interface.
	Initialized      bool
	ExcludedPrefixes []netip.Prefix // sorted
	// Interfaces are the interface tables: INCLUDE_V4, INCLUDE_V6, POD,
	// HOST, each sorted (deleted interfaces stay, as in VPP).
	Interfaces [cnatSnatTables][]uint32
}

// CnatFeature is an interface with the cnat feature and how many times it
// was enabled (VPP puts the cnat nodes on the arcs once per enable).
type CnatFeature struct {
	SwIfIndex uint32
	Count     int
}

// Cnat is a snapshot of the cnat plugin's configuration.
type Cnat struct {
	Translations []CnatTranslation // by id
	SNAT         []CnatSNAT        // by VPP's entry index
	Features     []CnatFeature     // by sw_if_index
}

func cnatSnapEP(ep cnatEP) CnatEndpoint {
	out := CnatEndpoint{Addr: zeroAddr(ep.v6), SwIfIndex: ep.sw, Port: ep.port, Resolved: ep.resolved}
	if ep.resolved {
		out.Addr = ep.addr
	}
	return out
}

func (s *state) cnatSnapshot() Cnat {
	var out Cnat
	for _, id := range s.sortedCnatIDs() {
		tr := s.cnat.trs[id]
		t := CnatTranslation{ID: id, VIP: cnatSnapEP(tr.vip), Proto: tr.proto, LBType: tr.lbType,
			IsRealIP: tr.flags&cnatTrFlagExclusive == 0, Flags: tr.flags &^ cnatTrFlagExclusive, FlowHashConfig: tr.fhc}
		for _, p := range tr.paths {
			t.Paths = append(t.Paths, CnatPath{Dst: cnatSnapEP(p.dst), Src: cnatSnapEP(p.src), Flags: p.flags &^ cnatTrkActive})
		}
		out.Translations = append(out.Translations, t)
	}
	for _, idx := range slices.Sorted(maps.Keys(s.cnat.snat)) {
		e := s.cnat.snat[idx]
		part := e.parts[0]
		if !part.set {
			part = e.parts[1]
		}
		sn := CnatSNAT{FwdFibIndex: part.fwd, RetFibIndex: part.ret, IP4: e.parts[0].addr, IP6: e.parts[1].addr,
			SwIfIndex: e.parts[1].sw, Flags: e.flags, Policy: e.policy, Initialized: e.initialized}
		sn.ExcludedPrefixes = slices.SortedFunc(maps.Keys(e.exclude), func(a, b netip.Prefix) int {
			return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
		})
		for n, set := range e.ifaces {
			sn.Interfaces[n] = slices.Sorted(maps.Keys(set))
		}
		out.SNAT = append(out.SNAT, sn)
	}
	for _, sw := range slices.Sorted(maps.Keys(s.cnat.features)) {
		out.Features = append(out.Features, CnatFeature{SwIfIndex: sw, Count: s.cnat.features[sw]})
	}
	return out
}

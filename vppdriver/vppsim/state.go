package vppsim

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/af_packet"
	"go.fd.io/govpp/binapi/ethernet_types"
	"go.fd.io/govpp/binapi/fib_types"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/binapi/memclnt"
	"go.fd.io/govpp/binapi/tapv2"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
)

// VPP retvals used by the stand-in (names as in VPP's src/vnet/error.h).
const (
	rvInvalidSwIfIndex   = -2
	rvNoSuchFib          = -3
	rvNoSuchEntry        = -6
	rvInvalidValue       = -7
	rvSyscallError1      = -11
	rvSyscallError2      = -12
	rvNoPathsInRoute     = -52
	rvNoMatchingIface    = -54
	rvAddrNotFound       = -60
	rvInvalidInterface   = -71
	rvIfAlreadyExists    = -79
	rvAddressInUse       = -105
	rvAddrFoundForIface  = -114
	rvDuplicateIfAddress = -127
)

const (
	noIndex  = ^uint32(0)
	linkMTU  = 9000
	devLoop  = "Loopback"
	devAFP   = "af-packet"
	devTap   = "virtio"
	devLocal = "local"
	devNIC   = "dpdk"
)

type ifKind uint8

const (
	kindLocal ifKind = iota
	kindLoop
	kindAFP
	kindTap
	kindVxlan
	kindMemif
	kindNIC // a hardware interface VPP has from its start (Config.NICs)
)

type simIface struct {
	idx      uint32
	kind     ifKind
	instance uint32 // loopback instance / tap id
	name     string
	mac      ethernet_types.MacAddress
	adminUp  bool
	tag      string
	addrs    []netip.Prefix // in insertion order, both families
	vrf      [2]uint32      // [0] IPv4, [1] IPv6
	hostIf   string         // af_packet / tap host side
	rxRing   uint16
	vxlan    *vxlanTunnel // kindVxlan
	memif    *memifLink   // kindMemif
	txRing   uint16
	tap      *tapHost // kindTap: the host (Linux) side
	// unnumbered is the interface whose addresses this one borrows, valid
	// when unnumberedOK.
	unnumbered   uint32
	unnumberedOK bool
	// ll6 is the IPv6 FIB index of the interface's link-local FIB, valid
	// when ll6OK: VPP creates one when the interface gets its first IPv6
	// address.
	ll6   uint32
	ll6OK bool
}

// tapHost is what a tap_create_v3 configured on the Linux side.
type tapHost struct {
	namespace        string
	mac              ethernet_types.MacAddress
	ip4, ip6         netip.Prefix // invalid if not set
	gw4, gw6         netip.Addr   // invalid if not set
	ip4Set, ip6Set   bool
	gw4Set, gw6Set   bool
	namespaceSet     bool
	hostMACRequested bool
}

type tableKey struct {
	v6 bool
	id uint32
}

type simTable struct {
	key       tableKey
	name      string
	fibIndex  uint32 // VPP's FIB index in the table's family
	apiLocked bool
	routes    map[netip.Prefix]*simRoute
}

type simPath struct {
	swIfIndex uint32
	tableID   uint32
	weight    uint8
	nh        netip.Addr // zero for attached
}

type simRoute struct {
	prefix netip.Prefix
	stats  uint32
	paths  []simPath
}

type state struct {
	cfg       *Config
	ifaces    map[uint32]*simIface
	tables    map[tableKey]*simTable
	nextStats uint32
	macSeq    uint32
	graph     map[string][]string
	bds       map[uint32]*bridgeDomain
	nat       *natState // nil while the NAT44-ED plugin is disabled
	acl       aclState
	cnat      cnatState
	// fibs are VPP's FIB indexes per family ([0] IPv4, [1] IPv6):
	// fibTables maps an index in use to its table ID (~0 for a link-local
	// FIB).
	fibs         [2]indexPool
	fibTables    [2]map[uint32]uint32
	memifSockets map[uint32]string
	memifSeed    uint32                                 // VPP's random_u32 seed for memif socket IDs (0 at start)
	poolLen      uint32                                 // sw_if_index pool size (next new index)
	freed        []uint32                               // freed sw_if_indexes, reused last-freed-first like VPP's pools
	neighbors    map[uint32]map[netip.Addr]*simNeighbor // by sw_if_index
	// Indexes, so that one request costs the same with 10 or 10k
	// interfaces and routes.
	instances map[ifKind]*instanceSet // used instance numbers per kind
	vxlans    map[vxlanKey]*simIface  // tunnels by their identity
	pathRefs  map[uint32]int          // route paths through each sw_if_index
}

// instanceSet tracks the instance numbers (loopN, tapN, vxlan_tunnelN) of
// one kind; low is at or below the lowest free one.
type instanceSet struct {
	used map[uint32]bool
	low  uint32
}

func newState(cfg *Config) *state {
	s := &state{cfg: cfg, ifaces: map[uint32]*simIface{}, tables: map[tableKey]*simTable{}, nextStats: 33,
		graph: newGraph(), bds: map[uint32]*bridgeDomain{}, memifSockets: map[uint32]string{0: defaultMemifSocket},
		neighbors: map[uint32]map[netip.Addr]*simNeighbor{}, instances: map[ifKind]*instanceSet{},
		vxlans: map[vxlanKey]*simIface{}, pathRefs: map[uint32]int{}, acl: newACLState(), cnat: newCnatState(),
		fibTables: [2]map[uint32]uint32{{}, {}}}
	s.ifaces[0] = &simIface{idx: 0, kind: kindLocal, name: "local0"}
	s.poolLen = 1
	for n, name := range cfg.NICs {
		i := &simIface{idx: s.poolLen, kind: kindNIC, name: name,
			mac: ethernet_types.MacAddress{0x02, 0x00, 0x00, 0x5e, 0x00, byte(n + 1)}}
		s.addIface(i)
		s.poolLen++
	}
	s.addTable(tableKey{false, 0}, "")
	s.addTable(tableKey{true, 0}, "")
	return s
}

func (s *state) addTable(k tableKey, name string) *simTable {
	if name == "" {
		fam := "ipv4"
		if k.v6 {
			fam = "ipv6"
		}
		name = fmt.Sprintf("%s-VRF:%d", fam, k.id)
	}
	t := &simTable{key: k, name: name, routes: map[netip.Prefix]*simRoute{}, fibIndex: s.fibs[famIdx(k.v6)].get()}
	s.fibTables[famIdx(k.v6)][t.fibIndex] = k.id
	s.tables[k] = t
	return t
}

// freeFib frees a FIB index of a family.
func (s *state) freeFib(v6 bool, idx uint32) {
	delete(s.fibTables[famIdx(v6)], idx)
	s.fibs[famIdx(v6)].put(idx)
}

// fibTableID returns the table ID of a FIB index (~0 for a link-local FIB)
// and whether the index is in use.
func (s *state) fibTableID(v6 bool, idx uint32) (uint32, bool) {
	id, ok := s.fibTables[famIdx(v6)][idx]
	return id, ok
}

// freeIndex allocates a sw_if_index as VPP's pool does: the index freed
// last, else a new one.
func (s *state) freeIndex() uint32 {
	for len(s.freed) > 0 {
		i := s.freed[len(s.freed)-1]
		s.freed = s.freed[:len(s.freed)-1]
		if _, used := s.ifaces[i]; !used {
			return i
		}
	}
	s.poolLen++
	return s.poolLen - 1
}

// freeInstance returns the lowest instance number of kind not in use.
func (s *state) freeInstance(kind ifKind) uint32 {
	set := s.instances[kind]
	if set == nil {
		return 0
	}
	for set.used[set.low] {
		set.low++
	}
	return set.low
}

// addIface registers a new interface in the tables and indexes.
func (s *state) addIface(i *simIface) {
	s.ifaces[i.idx] = i
	switch i.kind {
	case kindLoop, kindTap, kindVxlan:
		set := s.instances[i.kind]
		if set == nil {
			set = &instanceSet{used: map[uint32]bool{}}
			s.instances[i.kind] = set
		}
		set.used[i.instance] = true
	}
	if i.vxlan != nil {
		s.vxlans[i.vxlan.key()] = i
	}
}

// setPaths replaces the paths of route r of table t (none: the route goes)
// and keeps Driver.pathRefs.
func (s *state) setPaths(t *simTable, r *simRoute, paths []simPath) {
	for _, sp := range r.paths {
		if sp.swIfIndex != noIndex {
			if s.pathRefs[sp.swIfIndex]--; s.pathRefs[sp.swIfIndex] <= 0 {
				delete(s.pathRefs, sp.swIfIndex)
			}
		}
	}
	r.paths = paths
	for _, sp := range r.paths {
		if sp.swIfIndex != noIndex {
			s.pathRefs[sp.swIfIndex]++
		}
	}
	if len(r.paths) == 0 {
		delete(t.routes, r.prefix)
	}
}

func (s *state) randomMAC() ethernet_types.MacAddress {
	s.macSeq++
	n := s.macSeq
	return ethernet_types.MacAddress{0x02, 0xfe, 0x5e, byte(n >> 16), byte(n >> 8), byte(n)}
}

func (s *state) iface(idx interface_types.InterfaceIndex) *simIface {
	return s.ifaces[uint32(idx)]
}

func (s *state) controlPing(api.Message) []api.Message {
	return []api.Message{&memclnt.ControlPingReply{VpePID: s.cfg.PID}}
}

func (s *state) createLoopback(m api.Message) []api.Message {
	req := m.(*interfaces.CreateLoopback)
	inst := s.freeInstance(kindLoop)
	i := &simIface{idx: s.freeIndex(), kind: kindLoop, instance: inst, name: fmt.Sprintf("loop%d", inst), mac: req.MacAddress}
	if i.mac == (ethernet_types.MacAddress{}) {
		i.mac = ethernet_types.MacAddress{0xde, 0xad, 0, 0, 0, byte(inst)}
	}
	s.addIface(i)
	return []api.Message{&interfaces.CreateLoopbackReply{SwIfIndex: interface_types.InterfaceIndex(i.idx)}}
}

func (s *state) deleteLoopback(m api.Message) []api.Message {
	req := m.(*interfaces.DeleteLoopback)
	i := s.iface(req.SwIfIndex)
	if i == nil || i.kind != kindLoop {
		return []api.Message{&interfaces.DeleteLoopbackReply{Retval: rvInvalidSwIfIndex}}
	}
	s.removeIface(i)
	return []api.Message{&interfaces.DeleteLoopbackReply{}}
}

// removeIface deletes an interface with its addresses, bindings and the
// route paths through it.
func (s *state) removeIface(i *simIface) {
	s.leaveBD(i.idx)
	delete(s.neighbors, i.idx)
	s.aclIfaceRemoved(i.idx)
	s.cnatIfaceRemoved(i.idx)
	if i.ll6OK {
		s.freeFib(true, i.ll6)
	}
	if s.nat != nil {
		delete(s.nat.ifaces, i.idx)
		s.nat.output = slices.DeleteFunc(s.nat.output, func(sw uint32) bool { return sw == i.idx })
		s.nat.pool = slices.DeleteFunc(s.nat.pool, func(p natAddr) bool { return p.fromIf && p.sw == i.idx })
	}
	for _, v6 := range []bool{false, true} {
		s.unbind(i, v6)
	}
	if s.pathRefs[i.idx] > 0 {
		for _, t := range s.tables {
			for _, r := range t.routes {
				if slices.ContainsFunc(r.paths, func(sp simPath) bool { return sp.swIfIndex == i.idx }) {
					s.setPaths(t, r, slices.DeleteFunc(slices.Clone(r.paths), func(sp simPath) bool { return sp.swIfIndex == i.idx }))
				}
			}
		}
	}
	if set := s.instances[i.kind]; set != nil && (i.kind == kindLoop || i.kind == kindTap || i.kind == kindVxlan) {
		delete(set.used, i.instance)
		set.low = min(set.low, i.instance)
	}
	if i.vxlan != nil && s.vxlans[i.vxlan.key()] == i {
		delete(s.vxlans, i.vxlan.key())
	}
	delete(s.ifaces, i.idx)
	s.freed = append(s.freed, i.idx)
}

func famIdx(v6 bool) int {
	if v6 {
		return 1
	}
	return 0
}

// unbind moves i back to table 0 of a family, dropping a table that is
// held only by bindings.
func (s *state) unbind(i *simIface, v6 bool) {
	old := i.vrf[famIdx(v6)]
	i.vrf[famIdx(v6)] = 0
	s.maybeDropTable(tableKey{v6, old})
}

func (s *state) maybeDropTable(k tableKey) {
	t := s.tables[k]
	if t == nil || k.id == 0 || t.apiLocked {
		return
	}
	for _, i := range s.ifaces {
		if i.vrf[famIdx(k.v6)] == k.id {
			return
		}
	}
	for _, r := range t.routes {
		s.setPaths(t, r, nil)
	}
	delete(s.tables, k)
	s.freeFib(k.v6, t.fibIndex)
}

func (s *state) setFlags(m api.Message) []api.Message {
	req := m.(*interfaces.SwInterfaceSetFlags)
	i := s.iface(req.SwIfIndex)
	if i == nil {
		return []api.Message{&interfaces.SwInterfaceSetFlagsReply{Retval: rvInvalidSwIfIndex}}
	}
	i.adminUp = req.Flags&interface_types.IF_STATUS_API_FLAG_ADMIN_UP != 0
	return []api.Message{&interfaces.SwInterfaceSetFlagsReply{}}
}

func (s *state) addDelAddress(m api.Message) []api.Message {
	req := m.(*interfaces.SwInterfaceAddDelAddress)
	reply := func(rv int32) []api.Message {
		return []api.Message{&interfaces.SwInterfaceAddDelAddressReply{Retval: rv}}
	}
	i := s.iface(req.SwIfIndex)
	if i == nil {
		return reply(rvInvalidSwIfIndex)
	}
	defer s.natIfAddrSync(i.idx)
	if req.DelAll {
		i.addrs = nil
		return reply(0)
	}
	p := vppconv.PrefixOf(ip_types.Prefix(req.Prefix))
	if !p.IsValid() {
		return reply(rvInvalidValue)
	}
	v6 := p.Addr().Is6()
	if !req.IsAdd {
		for n, a := range i.addrs {
			if a.Addr() == p.Addr() {
				i.addrs = slices.Delete(i.addrs, n, n+1)
				return reply(0)
			}
		}
		return reply(rvAddrNotFound)
	}
	for _, a := range i.addrs {
		if a.Addr() == p.Addr() {
			if v6 {
				return reply(rvDuplicateIfAddress)
			}
			return reply(rvAddressInUse)
		}
	}
	vrf := i.vrf[famIdx(v6)]
	for _, o := range s.ifaces {
		if o == i || o.vrf[famIdx(v6)] != vrf {
			continue
		}
		for _, a := range o.addrs {
			if a.Addr().Is6() == v6 && (a.Contains(p.Addr()) || p.Contains(a.Addr())) {
				return reply(rvAddressInUse)
			}
		}
	}
	i.addrs = append(i.addrs, p)
	if v6 && !i.ll6OK {
		i.ll6, i.ll6OK = s.fibs[1].get(), true
		s.fibTables[1][i.ll6] = noIndex
	}
	return reply(0)
}

func (s *state) tagAddDel(m api.Message) []api.Message {
	req := m.(*interfaces.SwInterfaceTagAddDel)
	i := s.iface(req.SwIfIndex)
	if i == nil {
		return []api.Message{&interfaces.SwInterfaceTagAddDelReply{Retval: rvInvalidSwIfIndex}}
	}
	if req.IsAdd {
		i.tag = req.Tag
	} else {
		i.tag = ""
	}
	return []api.Message{&interfaces.SwInterfaceTagAddDelReply{}}
}

func (s *state) setTable(m api.Message) []api.Message {
	req := m.(*interfaces.SwInterfaceSetTable)
	reply := func(rv int32) []api.Message {
		return []api.Message{&interfaces.SwInterfaceSetTableReply{Retval: rv}}
	}
	i := s.iface(req.SwIfIndex)
	if i == nil {
		return reply(rvInvalidSwIfIndex)
	}
	k := tableKey{req.IsIPv6, req.VrfID}
	if s.tables[k] == nil {
		return reply(rvNoSuchFib)
	}
	fi := famIdx(req.IsIPv6)
	if i.vrf[fi] == req.VrfID {
		return reply(0)
	}
	for _, a := range i.addrs {
		if a.Addr().Is6() == req.IsIPv6 {
			return reply(rvAddrFoundForIface)
		}
	}
	old := i.vrf[fi]
	i.vrf[fi] = req.VrfID
	s.maybeDropTable(tableKey{req.IsIPv6, old})
	return reply(0)
}

func (s *state) getTable(m api.Message) []api.Message {
	req := m.(*interfaces.SwInterfaceGetTable)
	i := s.iface(req.SwIfIndex)
	if i == nil {
		return []api.Message{&interfaces.SwInterfaceGetTableReply{Retval: rvInvalidSwIfIndex}}
	}
	return []api.Message{&interfaces.SwInterfaceGetTableReply{VrfID: i.vrf[famIdx(req.IsIPv6)]}}
}

func (s *state) sortedIfaces() []*simIface {
	out := make([]*simIface, 0, len(s.ifaces))
	for _, i := range s.ifaces {
		out = append(out, i)
	}
	slices.SortFunc(out, func(a, b *simIface) int { return cmp.Compare(a.idx, b.idx) })
	return out
}

func (s *state) ifDetails(i *simIface) *interfaces.SwInterfaceDetails {
	d := &interfaces.SwInterfaceDetails{
		SwIfIndex:        interface_types.InterfaceIndex(i.idx),
		SupSwIfIndex:     i.idx,
		L2Address:        i.mac,
		Mtu:              []uint32{0, 0, 0, 0},
		InterfaceName:    i.name,
		InterfaceDevType: devLocal,
		Tag:              i.tag,
	}
	if i.kind == kindLocal {
		return d
	}
	d.LinkMtu = linkMTU
	d.Mtu[0] = linkMTU
	linkUp := i.adminUp
	switch i.kind {
	case kindLoop:
		d.InterfaceDevType = devLoop
	case kindAFP:
		d.InterfaceDevType = devAFP
		linkUp = true
	case kindTap:
		d.InterfaceDevType = devTap
		linkUp = true
	case kindNIC:
		d.InterfaceDevType = devNIC
	case kindMemif:
		d.InterfaceDevType = devMemif // link stays down: no peer
	case kindVxlan:
		d.InterfaceDevType = devVxlan
		linkUp = true
		if i.vxlan.l3 {
			d.LinkMtu, d.Mtu[0] = 0, 0
		}
	}
	if i.adminUp {
		d.Flags |= interface_types.IF_STATUS_API_FLAG_ADMIN_UP
	}
	if linkUp {
		d.Flags |= interface_types.IF_STATUS_API_FLAG_LINK_UP
	}
	return d
}

func (s *state) ifDump(m api.Message) []api.Message {
	req := m.(*interfaces.SwInterfaceDump)
	var out []api.Message
	for _, i := range s.sortedIfaces() {
		if req.SwIfIndex != 0 && uint32(req.SwIfIndex) != noIndex && uint32(req.SwIfIndex) != i.idx {
			continue
		}
		if req.NameFilterValid && !strings.Contains(i.name, req.NameFilter) {
			continue
		}
		out = append(out, s.ifDetails(i))
	}
	return out
}

func (s *state) addressDump(m api.Message) []api.Message {
	req := m.(*ip.IPAddressDump)
	i := s.iface(req.SwIfIndex)
	if i == nil {
		return nil
	}
	var out []api.Message
	for _, a := range i.addrs {
		if a.Addr().Is6() == req.IsIPv6 {
			out = append(out, &ip.IPAddressDetails{SwIfIndex: req.SwIfIndex, Prefix: addrWithPrefix(a)})
		}
	}
	return out
}

func (s *state) tableAddDel(m api.Message) []api.Message {
	req := m.(*ip.IPTableAddDel)
	k := tableKey{req.Table.IsIP6, req.Table.TableID}
	t := s.tables[k]
	if req.IsAdd {
		if t == nil {
			t = s.addTable(k, req.Table.Name)
		}
		t.apiLocked = true
	} else if t != nil && k.id != 0 {
		t.apiLocked = false
		s.maybeDropTable(k)
	}
	return []api.Message{&ip.IPTableAddDelReply{}}
}

func (s *state) sortedTables() []*simTable {
	out := make([]*simTable, 0, len(s.tables))
	for _, t := range s.tables {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *simTable) int {
		if a.key.v6 != b.key.v6 {
			if a.key.v6 {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.key.id, b.key.id)
	})
	return out
}

func (s *state) tableDump(api.Message) []api.Message {
	var out []api.Message
	for _, t := range s.sortedTables() {
		out = append(out, &ip.IPTableDetails{Table: ip.IPTable{TableID: t.key.id, IsIP6: t.key.v6, Name: t.name}})
	}
	return out
}

func (s *state) routeAddDel(m api.Message) []api.Message {
	req := m.(*ip.IPRouteAddDel)
	reply := func(rv int32, stats uint32) []api.Message {
		return []api.Message{&ip.IPRouteAddDelReply{Retval: rv, StatsIndex: stats}}
	}
	p := vppconv.PrefixOf(req.Route.Prefix)
	if !p.IsValid() {
		return reply(rvInvalidValue, noIndex)
	}
	p = p.Masked()
	v6 := p.Addr().Is6()
	t := s.tables[tableKey{v6, req.Route.TableID}]
	if t == nil {
		return reply(rvNoSuchFib, noIndex)
	}
	paths := make([]simPath, 0, len(req.Route.Paths))
	for _, fp := range req.Route.Paths {
		sp := simPath{swIfIndex: fp.SwIfIndex, weight: fp.Weight}
		if sp.weight == 0 {
			sp.weight = 1
		}
		if nh := vppconv.UnionAddr(fp.Nh.Address, v6); !nh.IsUnspecified() {
			sp.nh = nh
		}
		if fp.SwIfIndex == noIndex {
			sp.tableID = fp.TableID
		}
		paths = append(paths, sp)
	}
	r := t.routes[p]
	if !req.IsAdd {
		if r == nil {
			return reply(0, noIndex)
		}
		if req.IsMultipath && len(paths) > 0 {
			s.setPaths(t, r, slices.DeleteFunc(slices.Clone(r.paths), func(sp simPath) bool { return slices.Contains(paths, sp) }))
			return reply(0, noIndex)
		}
		s.setPaths(t, r, nil)
		return reply(0, noIndex)
	}
	if len(paths) == 0 {
		return reply(rvNoPathsInRoute, noIndex)
	}
	for _, sp := range paths {
		if sp.swIfIndex == noIndex {
			if s.tables[tableKey{v6, sp.tableID}] == nil {
				return reply(rvNoSuchFib, noIndex)
			}
		} else if s.ifaces[sp.swIfIndex] == nil {
			return reply(rvNoMatchingIface, noIndex)
		}
	}
	if r == nil {
		r = &simRoute{prefix: p, stats: s.nextStats}
		s.nextStats++
		t.routes[p] = r
	}
	if req.IsMultipath {
		merged := slices.Clone(r.paths)
		for _, sp := range paths {
			if !slices.Contains(merged, sp) {
				merged = append(merged, sp)
			}
		}
		paths = merged
	}
	s.setPaths(t, r, paths)
	return reply(0, r.stats)
}

func fibPath(sw uint32, v6 bool, typ fib_types.FibPathType, nh netip.Addr) fib_types.FibPath {
	fp := fib_types.FibPath{SwIfIndex: sw, Weight: 1, Type: typ}
	if v6 {
		fp.Proto = fib_types.FIB_API_PATH_NH_PROTO_IP6
	}
	fp.Nh.Address = vppconv.Union(nh)
	return fp
}

// specialRoutes are the entries VPP creates with every table.
func specialRoutes(v6 bool) []*ip.IPRouteDetails {
	drop := func(p string) *ip.IPRouteDetails {
		return routeDetails(netip.MustParsePrefix(p), fibPath(noIndex, v6, fib_types.FIB_API_PATH_TYPE_DROP, netip.Addr{}))
	}
	if v6 {
		return []*ip.IPRouteDetails{
			drop("::/0"),
			routeDetails(netip.MustParsePrefix("fe80::/10"), fibPath(noIndex, true, fib_types.FIB_API_PATH_TYPE_NORMAL, netip.Addr{})),
		}
	}
	return []*ip.IPRouteDetails{
		drop("0.0.0.0/0"), drop("0.0.0.0/32"), drop("240.0.0.0/4"), drop("224.0.0.0/4"), drop("255.255.255.255/32"),
	}
}

func routeDetails(p netip.Prefix, paths ...fib_types.FibPath) *ip.IPRouteDetails {
	return &ip.IPRouteDetails{Route: ip.IPRoute{Prefix: vppconv.Prefix(p), NPaths: uint8(len(paths)), Paths: paths}}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func (s *state) routeDump(m api.Message) []api.Message {
	req := m.(*ip.IPRouteDump)
	v6 := req.Table.IsIP6
	t := s.tables[tableKey{v6, req.Table.TableID}]
	if t == nil {
		return nil
	}
	details := specialRoutes(v6)
	seen := map[netip.Prefix]bool{}
	for _, i := range s.sortedIfaces() {
		// VPP installs connected and local entries of admin-up interfaces
		// only.
		if i.vrf[famIdx(v6)] != t.key.id || !i.adminUp {
			continue
		}
		for _, a := range i.addrs {
			if a.Addr().Is6() != v6 {
				continue
			}
			host := netip.PrefixFrom(a.Addr(), a.Addr().BitLen())
			details = append(details, routeDetails(host, fibPath(i.idx, v6, fib_types.FIB_API_PATH_TYPE_LOCAL, a.Addr())))
			if seen[a.Masked()] || a.Bits() == a.Addr().BitLen() {
				continue
			}
			seen[a.Masked()] = true
			shown := a.Masked()
			if !v6 {
				shown = a // VPP shows the IPv4 connected prefix unmasked
			}
			details = append(details, routeDetails(shown, fibPath(i.idx, v6, fib_types.FIB_API_PATH_TYPE_NORMAL, netip.Addr{})))
			if !v6 && a.Bits() <= 30 {
				drop := fibPath(noIndex, false, fib_types.FIB_API_PATH_TYPE_DROP, netip.Addr{})
				details = append(details,
					routeDetails(netip.PrefixFrom(a.Masked().Addr(), 32), drop),
					routeDetails(netip.PrefixFrom(lastAddr(a), 32), drop))
			}
		}
	}
	adj := s.neighborEntries(t)
	details = append(details, s.trackedEntries(t, adj)...)
	for _, d := range adj {
		details = append(details, d)
	}
	routes := make([]*simRoute, 0, len(t.routes))
	for _, r := range t.routes {
		routes = append(routes, r)
	}
	slices.SortFunc(routes, func(a, b *simRoute) int { return a.prefix.Addr().Compare(b.prefix.Addr()) })
	for _, r := range routes {
		paths := make([]fib_types.FibPath, 0, len(r.paths))
		for _, sp := range r.paths {
			nh := sp.nh
			if !nh.IsValid() && sp.swIfIndex != noIndex && r.prefix.IsSingleIP() {
				// An attached host route is an attached next hop: VPP
				// reports the address as its next hop.
				nh = r.prefix.Addr()
			}
			fp := fibPath(sp.swIfIndex, v6, fib_types.FIB_API_PATH_TYPE_NORMAL, nh)
			fp.Weight = sp.weight
			fp.TableID = sp.tableID
			paths = append(paths, fp)
		}
		d := routeDetails(r.prefix, paths...)
		d.Route.StatsIndex = r.stats
		details = append(details, d)
	}
	out := make([]api.Message, len(details))
	for n, d := range details {
		d.Route.TableID = t.key.id
		out[n] = d
	}
	return out
}

// neighborEntries returns the host entries VPP adds to table t for the IP
// neighbors (static or dynamic, not link-local) of the interfaces bound to
// it, keyed by address, except where an API route of the same prefix
// exists (it takes precedence in the dump). They have no stats index.
func (s *state) neighborEntries(t *simTable) map[netip.Addr]*ip.IPRouteDetails {
	v6 := t.key.v6
	out := map[netip.Addr]*ip.IPRouteDetails{}
	for _, k := range s.sortedNeighbors() {
		i := s.ifaces[k.sw]
		if i == nil || k.ip.Is6() != v6 || i.vrf[famIdx(v6)] != t.key.id || k.ip.IsLinkLocalUnicast() {
			continue
		}
		host := netip.PrefixFrom(k.ip, k.ip.BitLen())
		if t.routes[host] != nil || out[k.ip] != nil {
			continue
		}
		d := routeDetails(host, fibPath(k.sw, v6, fib_types.FIB_API_PATH_TYPE_NORMAL, k.ip))
		d.Route.StatsIndex = noIndex
		out[k.ip] = d
	}
	return out
}

func (s *state) afPacketCreate(m api.Message) []api.Message {
	req := m.(*af_packet.AfPacketCreateV3)
	for _, i := range s.ifaces {
		if i.kind == kindAFP && i.hostIf == req.HostIfName {
			return []api.Message{&af_packet.AfPacketCreateV3Reply{Retval: rvIfAlreadyExists, SwIfIndex: interface_types.InterfaceIndex(i.idx)}}
		}
	}
	if req.Mode == 0 || req.NumRxQueues == 0 || req.NumTxQueues == 0 {
		return []api.Message{&af_packet.AfPacketCreateV3Reply{Retval: rvInvalidValue, SwIfIndex: interface_types.InterfaceIndex(noIndex)}}
	}
	if !slices.Contains(s.cfg.HostInterfaces, req.HostIfName) &&
		(s.cfg.HostInterfaceExists == nil || !s.cfg.HostInterfaceExists(req.HostIfName)) {
		return []api.Message{&af_packet.AfPacketCreateV3Reply{Retval: rvInvalidInterface}}
	}
	i := &simIface{idx: s.freeIndex(), kind: kindAFP, name: "host-" + req.HostIfName, hostIf: req.HostIfName, mac: req.HwAddr}
	if req.UseRandomHwAddr || i.mac == (ethernet_types.MacAddress{}) {
		i.mac = s.randomMAC()
	}
	s.addIface(i)
	return []api.Message{&af_packet.AfPacketCreateV3Reply{SwIfIndex: interface_types.InterfaceIndex(i.idx)}}
}

func (s *state) afPacketDelete(m api.Message) []api.Message {
	req := m.(*af_packet.AfPacketDelete)
	for _, i := range s.ifaces {
		if i.kind == kindAFP && i.hostIf == req.HostIfName {
			s.removeIface(i)
			return []api.Message{&af_packet.AfPacketDeleteReply{}}
		}
	}
	return []api.Message{&af_packet.AfPacketDeleteReply{Retval: rvSyscallError1}}
}

func (s *state) afPacketDump(api.Message) []api.Message {
	var out []api.Message
	for _, i := range s.sortedIfaces() {
		if i.kind == kindAFP {
			out = append(out, &af_packet.AfPacketDetails{SwIfIndex: interface_types.InterfaceIndex(i.idx), HostIfName: i.hostIf})
		}
	}
	return out
}

func (s *state) tapCreate(m api.Message) []api.Message {
	req := m.(*tapv2.TapCreateV3)
	fail := func(rv int32) []api.Message {
		return []api.Message{&tapv2.TapCreateV3Reply{Retval: rv, SwIfIndex: interface_types.InterfaceIndex(noIndex)}}
	}
	ns := ""
	if req.HostNamespaceSet {
		ns = netnsPath(req.HostNamespace)
		if !slices.ContainsFunc(s.cfg.Namespaces, func(n string) bool { return netnsPath(n) == ns }) {
			return fail(rvSyscallError2) // VPP cannot open the namespace
		}
	}
	if !s.cfg.VhostNet {
		return fail(rvSyscallError1)
	}
	id := req.ID
	if id == noIndex {
		id = s.freeInstance(kindTap)
	}
	for _, i := range s.ifaces {
		if i.kind != kindTap {
			continue
		}
		sameNS := i.tap != nil && i.tap.namespace == ns
		if i.instance == id || (req.HostIfNameSet && sameNS && i.hostIf == req.HostIfName) {
			return fail(rvIfAlreadyExists)
		}
	}
	if req.NumRxQueues == 0 || req.NumTxQueues == 0 || req.RxRingSz == 0 || req.TxRingSz == 0 {
		return fail(rvInvalidValue)
	}
	i := &simIface{idx: s.freeIndex(), kind: kindTap, instance: id, name: fmt.Sprintf("tap%d", id),
		mac: req.MacAddress, tag: req.Tag, rxRing: req.RxRingSz, txRing: req.TxRingSz}
	i.hostIf = fmt.Sprintf("tap%d", id)
	if req.HostIfNameSet {
		i.hostIf = req.HostIfName
	}
	if req.UseRandomMac || i.mac == (ethernet_types.MacAddress{}) {
		i.mac = s.randomMAC()
	}
	h := &tapHost{namespace: ns, namespaceSet: req.HostNamespaceSet, mac: req.HostMacAddr, hostMACRequested: req.HostMacAddrSet}
	if !req.HostMacAddrSet {
		h.mac = s.randomMAC()
	}
	if req.HostIP4PrefixSet {
		h.ip4, h.ip4Set = netip.PrefixFrom(netip.AddrFrom4(req.HostIP4Prefix.Address), int(req.HostIP4Prefix.Len)), true
	}
	if req.HostIP6PrefixSet {
		h.ip6, h.ip6Set = netip.PrefixFrom(netip.AddrFrom16(req.HostIP6Prefix.Address), int(req.HostIP6Prefix.Len)), true
	}
	if req.HostIP4GwSet {
		h.gw4, h.gw4Set = netip.AddrFrom4(req.HostIP4Gw), true
	}
	if req.HostIP6GwSet {
		h.gw6, h.gw6Set = netip.AddrFrom16(req.HostIP6Gw), true
	}
	i.tap = h
	s.addIface(i)
	return []api.Message{&tapv2.TapCreateV3Reply{SwIfIndex: interface_types.InterfaceIndex(i.idx)}}
}

// netnsPath is the path VPP opens for a tap's host namespace: a name is
// looked up under /var/run/netns.
func netnsPath(ns string) string {
	if strings.HasPrefix(ns, "/") {
		return ns
	}
	return "/var/run/netns/" + ns
}

func (s *state) tapDelete(m api.Message) []api.Message {
	req := m.(*tapv2.TapDeleteV2)
	i := s.iface(req.SwIfIndex)
	if i == nil || i.kind != kindTap {
		return []api.Message{&tapv2.TapDeleteV2Reply{Retval: rvInvalidSwIfIndex}}
	}
	s.removeIface(i)
	return []api.Message{&tapv2.TapDeleteV2Reply{}}
}

func (s *state) tapDump(m api.Message) []api.Message {
	req := m.(*tapv2.SwInterfaceTapV2Dump)
	var out []api.Message
	for _, i := range s.sortedIfaces() {
		if i.kind != kindTap || (uint32(req.SwIfIndex) != noIndex && uint32(req.SwIfIndex) != i.idx) {
			continue
		}
		d := &tapv2.SwInterfaceTapV2Details{SwIfIndex: i.idx, ID: i.instance, RxRingSz: i.rxRing,
			TxRingSz: i.txRing, DevName: i.name, HostIfName: i.hostIf}
		if h := i.tap; h != nil {
			d.HostMacAddr = h.mac
			if h.namespaceSet {
				d.HostNamespace = h.namespace
			}
			if h.ip4Set {
				d.HostIP4Prefix = ip_types.IP4AddressWithPrefix{Address: h.ip4.Addr().As4(), Len: uint8(h.ip4.Bits())}
			}
			if h.ip6Set {
				d.HostIP6Prefix = ip_types.IP6AddressWithPrefix{Address: h.ip6.Addr().As16(), Len: uint8(h.ip6.Bits())}
			}
		}
		out = append(out, d)
	}
	return out
}

// trackedEntries returns the host entries VPP adds to table t to track
// addresses: the next hops of recursive paths (sw_if_index ~0) that
// resolve in t, and the destinations of VXLAN tunnels whose encap table
// is t. An entry copies the connected interface (of an admin-up
// interface) it is covered by, or drops; none is shown where an API route
// or a neighbor entry (adj) of the address exists.
func (s *state) trackedEntries(t *simTable, adj map[netip.Addr]*ip.IPRouteDetails) []*ip.IPRouteDetails {
	v6 := t.key.v6
	var tracked []netip.Addr
	for _, tt := range s.sortedTables() {
		if tt.key.v6 != v6 {
			continue
		}
		routes := make([]*simRoute, 0, len(tt.routes))
		for _, r := range tt.routes {
			routes = append(routes, r)
		}
		slices.SortFunc(routes, func(a, b *simRoute) int { return a.prefix.Addr().Compare(b.prefix.Addr()) })
		for _, r := range routes {
			for _, sp := range r.paths {
				if sp.swIfIndex == noIndex && sp.tableID == t.key.id && sp.nh.IsValid() {
					tracked = append(tracked, sp.nh)
				}
			}
		}
	}
	for _, i := range s.sortedIfaces() {
		if x := i.vxlan; x != nil && x.dst.Is6() == v6 && x.encapVrf == t.key.id {
			tracked = append(tracked, x.dst)
		}
	}
	done := map[netip.Addr]bool{}
	var out []*ip.IPRouteDetails
	for _, nh := range tracked {
		if done[nh] {
			continue
		}
		done[nh] = true
		host := netip.PrefixFrom(nh, nh.BitLen())
		if t.routes[host] != nil || adj[nh] != nil {
			continue
		}
		path := fibPath(noIndex, v6, fib_types.FIB_API_PATH_TYPE_DROP, netip.Addr{})
		for _, i := range s.sortedIfaces() {
			if i.vrf[famIdx(v6)] != t.key.id || !i.adminUp {
				continue
			}
			for _, a := range i.addrs {
				if a.Addr() == nh {
					path = fib_types.FibPath{} // the local entry is already there
				} else if a.Addr().Is6() == v6 && a.Contains(nh) && path.Type == fib_types.FIB_API_PATH_TYPE_DROP {
					path = fibPath(i.idx, v6, fib_types.FIB_API_PATH_TYPE_NORMAL, nh)
				}
			}
		}
		if path.Weight == 0 {
			continue
		}
		out = append(out, routeDetails(host, path))
	}
	return out
}

package vppdriver

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"go.fd.io/govpp/binapi/ethernet_types"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// value is the parsed, canonical form of one model value: every address is
// a netip value, defaults are filled in, lists are sorted. It is built once
// (from a validated message in Commit, or from VPP's dumps in a readback)
// and immutable afterwards; the ops read its typed fields and never parse
// strings again.
type value interface {
	kind() kind
	// key returns the key of the value.
	key() string
	// deps returns the keys that must be configured before the value can
	// be applied (shared; read-only).
	deps() []string
	// equal tells whether o is the same value (o has the same kind).
	equal(o value) bool
	// message returns the canonical model message of the value.
	message() proto.Message
}

// Kinds in dependency order: a kind depends only on lower kinds.
type kind int

const (
	kindVrf kind = iota
	kindNatGlobal
	kindACL      // ACLs (before interfaces: removed after them, see goesWith)
	kindCnatSnat // the cnat SNAT entry (removed after the translations)
	kindCnat     // cnat translations
	kindInterface
	kindNeighbor
	kindRoute
	kindNat       // NAT44 interfaces, pools and mappings
	kindACLIface  // the ACL lists of interfaces
	kindCnatIface // cnat on interfaces
	numKinds
)

// kindOf returns the kind of a key of the model.
func kindOf(key string) kind {
	switch {
	case strings.HasPrefix(key, vppmodel.VrfTableKeyPrefix):
		return kindVrf
	case key == vppmodel.Nat44GlobalKey:
		return kindNatGlobal
	case strings.HasPrefix(key, vppmodel.InterfaceKeyPrefix):
		return kindInterface
	case strings.HasPrefix(key, vppmodel.IPNeighborKeyPrefix):
		return kindNeighbor
	case strings.HasPrefix(key, vppmodel.Nat44KeyPrefix):
		return kindNat
	case strings.HasPrefix(key, vppmodel.ACLKeyPrefix):
		return kindACL
	case strings.HasPrefix(key, vppmodel.ACLInterfaceKeyPrefix):
		return kindACLIface
	case strings.HasPrefix(key, vppmodel.CnatTranslationKeyPrefix):
		return kindCnat
	case key == vppmodel.CnatSnatKey:
		return kindCnatSnat
	case strings.HasPrefix(key, vppmodel.CnatInterfaceKeyPrefix):
		return kindCnatIface
	}
	return kindRoute
}

// parseValue converts a message that model validation accepted into its
// value. It returns an error (never panics) if a field does not parse.
func parseValue(msg proto.Message) (value, error) {
	switch m := msg.(type) {
	case *vppmodel.Interface:
		return parseInterface(m)
	case *vppmodel.VrfTable:
		return newVrf(m.GetId(), m.GetProtocol() == vppmodel.VrfTable_IPV6, m.GetLabel()), nil
	case *vppmodel.Route:
		return parseRoute(m)
	case *vppmodel.IPNeighbor:
		return parseNeighbor(m)
	case *vppmodel.Nat44Global:
		return &natGlobalVal{sessions: cmp.Or(m.GetSessions(), natDefaultSessions), forwarding: m.GetForwarding()}, nil
	case *vppmodel.Nat44Interface:
		return newNatIface(m.GetInterface(), m.GetInside(), m.GetOutside(), m.GetOutputFeature()), nil
	case *vppmodel.Nat44AddressPool:
		return parsePool(m)
	case *vppmodel.Nat44StaticMapping:
		return parseStatic(m)
	case *vppmodel.Nat44IdentityMapping:
		return parseIdentity(m)
	case *vppmodel.Nat44LbStaticMapping:
		return parseLB(m)
	case *vppmodel.ACL:
		return parseACL(m)
	case *vppmodel.ACLInterface:
		return parseACLIface(m), nil
	case *vppmodel.CnatTranslation:
		return parseCnatTr(m)
	case *vppmodel.CnatSnat:
		return parseCnatSnat(m)
	case *vppmodel.CnatInterface:
		return newCnatIface(m.GetInterface(), m.GetFeature(), cnatTables{v4: m.GetSnatV4(), v6: m.GetSnatV6(),
			pod: m.GetSnatPod(), host: m.GetSnatHost()}), nil
	}
	return nil, fmt.Errorf("unsupported message type %T", msg)
}

// needsRecreate tells whether changing old into new needs the object to be
// deleted and created again (fields VPP sets only at creation).
func needsRecreate(old, new value) bool {
	switch o := old.(type) {
	case *halfVal:
		return true // made only in part
	case *ifaceVal:
		n, ok := new.(*ifaceVal)
		return !ok || o.typ != n.typ || o.hasMAC != n.hasMAC || o.mac != n.mac || o.link != n.link
	case *vrfVal:
		// VPP keeps the name a table was created with (a second add with
		// another name succeeds and changes nothing): a new label needs a
		// new table.
		n, ok := new.(*vrfVal)
		return !ok || *o != *n
	case *routeVal, *neighborVal, *aclVal, *aclIfaceVal, *cnatIfaceVal:
		return false // changed in place (an ACL keeps its index, a list is set again)
	case *cnatTrVal:
		// VPP keeps the lb type and the flow hash of a translation from
		// its creation; the VIP's exclusivity and client are made with it
		// too.
		n, ok := new.(*cnatTrVal)
		return !ok || o.lbType != n.lbType || o.fhc != n.fhc || o.realIP != n.realIP || o.noClient != n.noClient
	case *cnatSnatVal:
		// VPP keeps an address of a family until the entry is deleted,
		// and the flags of the entry's first set.
		n, ok := new.(*cnatSnatVal)
		return !ok || (o.ip4.IsValid() && !n.ip4.IsValid()) || (o.ip6.IsValid() && !n.ip6.IsValid()) || o.noClient != n.noClient
	case *natIfaceVal:
		// inside and outside change in place; VPP refuses them on an
		// interface with the output feature and the reverse.
		n, ok := new.(*natIfaceVal)
		return !ok || o.output != n.output
	case *natGlobalVal:
		// Forwarding changes in place; new sessions need disable + enable,
		// which wipes all NAT configuration.
		n, ok := new.(*natGlobalVal)
		return !ok || o.sessions != n.sessions
	case *lbVal:
		// Backends are changed in place, the rest needs a new mapping;
		// so do backend changes that VPP cannot make in place.
		n, ok := new.(*lbVal)
		return !ok || o.lbHead != n.lbHead || !lbInPlace(o.backends, n.backends)
	}
	// Pools, static and identity mappings.
	return !old.equal(new)
}

// goesWither is a value that VPP drops when it deletes an interface (an
// interface's ACL lists, its cnat feature): removed with that interface in
// one pass, it sends nothing of its own (see planWith).
type goesWither interface {
	// goesWith returns the key of the interface ("" if the value does not
	// go with it).
	goesWith() string
}

// depsOf lists dependency keys without duplicates.
type depsOf []string

func (d *depsOf) add(key string) {
	if !slices.Contains(*d, key) {
		*d = append(*d, key)
	}
}

// ---- interfaces

// ifaceLink holds the creation-time attributes of an interface: changing
// any of them re-creates it. Comparable.
type ifaceLink struct {
	afpHost string // AF_PACKET

	tapHost      string // TAP
	tapRx, tapTx uint32
	tapNS        string // host namespace, "" for VPP's
	tapHostMAC   ethernet_types.MacAddress
	tapHasMAC    bool
	tapIP4       netip.Prefix // invalid if not set
	tapIP6       netip.Prefix
	tapGW4       netip.Addr
	tapGW6       netip.Addr

	vxSrc, vxDst  netip.Addr // VXLAN_TUNNEL
	vni, encapVrf uint32
	vxPayload6    bool // the tunnel carries IPv6 (decap-next ip6-input)
	vxBadDecap    bool // read back: the decap-next is neither ip4-input nor ip6-input

	existing string // EXISTING: VPP's name of the adopted interface

	memifMaster         bool // MEMIF
	memifID             uint32
	memifSocket         string
	memifRing, memifBuf uint32
	memifSecret         string
}

type ifaceVal struct {
	name       string
	typ        vppmodel.Interface_Type
	enabled    bool
	hasMAC     bool
	mac        ethernet_types.MacAddress
	addrs      []netip.Prefix // sorted by address; host bits kept
	vrf        uint32
	vrf6       uint32
	unnumbered string // logical name of the address source, "" if none
	unnumKey   string // its key
	link       ifaceLink
	depKeys    []string
}

func (v *ifaceVal) kind() kind     { return kindInterface }
func (v *ifaceVal) key() string    { return vppmodel.InterfaceKey(v.name) }
func (v *ifaceVal) deps() []string { return v.depKeys }
func (v *ifaceVal) vxlanV6() bool  { return v.link.vxSrc.Is6() }

func (v *ifaceVal) equal(o value) bool {
	w := o.(*ifaceVal)
	return v.name == w.name && v.typ == w.typ && v.enabled == w.enabled && v.hasMAC == w.hasMAC && v.mac == w.mac &&
		v.vrf == w.vrf && v.vrf6 == w.vrf6 && v.link == w.link && v.unnumbered == w.unnumbered && slices.Equal(v.addrs, w.addrs)
}

func cmpPrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

// finish sorts the addresses and computes the dependencies.
func (v *ifaceVal) finish() *ifaceVal {
	slices.SortFunc(v.addrs, cmpPrefix)
	var deps depsOf
	if v.typ == vppmodel.Interface_VXLAN_TUNNEL && v.link.encapVrf != 0 {
		deps.add(vppmodel.VrfTableKey(protoOf(v.vxlanV6()), v.link.encapVrf))
	}
	if v.vrf != 0 {
		deps.add(vppmodel.VrfTableKey(vppmodel.VrfTable_IPV4, v.vrf))
	}
	if v.vrf6 != 0 {
		deps.add(vppmodel.VrfTableKey(vppmodel.VrfTable_IPV6, v.vrf6))
	}
	v.unnumKey = ""
	if v.unnumbered != "" {
		v.unnumKey = vppmodel.InterfaceKey(v.unnumbered)
		deps.add(v.unnumKey)
	}
	v.depKeys = deps
	return v
}

func protoOf(v6 bool) vppmodel.VrfTable_Protocol {
	if v6 {
		return vppmodel.VrfTable_IPV6
	}
	return vppmodel.VrfTable_IPV4
}

func parseInterface(m *vppmodel.Interface) (*ifaceVal, error) {
	v := &ifaceVal{name: m.GetName(), typ: m.GetType(), enabled: m.GetEnabled(), vrf: m.GetVrf(), vrf6: m.GetIpv6Vrf(),
		unnumbered: m.GetUnnumbered()}
	if s := m.GetMacAddress(); s != "" {
		mac, err := vppmodel.ParseMAC(s)
		if err != nil {
			return nil, err
		}
		v.hasMAC, v.mac = true, mac
	}
	for _, a := range m.GetIpAddresses() {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return nil, err
		}
		v.addrs = append(v.addrs, p)
	}
	if t := ifaceTypes[v.typ]; t != nil {
		if err := t.parse(m, &v.link); err != nil {
			return nil, err
		}
	}
	return v.finish(), nil
}

func (v *ifaceVal) message() proto.Message {
	m := &vppmodel.Interface{Name: v.name, Type: v.typ, Enabled: v.enabled, Vrf: v.vrf, Ipv6Vrf: v.vrf6, Unnumbered: v.unnumbered}
	if v.hasMAC {
		m.MacAddress = v.mac.String()
	}
	for _, a := range v.addrs {
		m.IpAddresses = append(m.IpAddresses, a.String())
	}
	if t := ifaceTypes[v.typ]; t != nil {
		t.message(&v.link, m)
	}
	return m
}

// ---- VRF tables

type vrfVal struct {
	id    uint32
	v6    bool
	label string
}

func newVrf(id uint32, v6 bool, label string) *vrfVal { return &vrfVal{id: id, v6: v6, label: label} }

func (v *vrfVal) kind() kind         { return kindVrf }
func (v *vrfVal) key() string        { return vppmodel.VrfTableKey(protoOf(v.v6), v.id) }
func (v *vrfVal) deps() []string     { return nil }
func (v *vrfVal) equal(o value) bool { return *v == *o.(*vrfVal) }
func (v *vrfVal) message() proto.Message {
	return &vppmodel.VrfTable{Id: v.id, Protocol: protoOf(v.v6), Label: v.label}
}

// ---- routes

type pathVal struct {
	iface  string // "" for none
	ifKey  string // the interface's key (derived from iface)
	nh     netip.Addr
	weight uint8 // 1-255 (the model's 0 means 1)
}

func cmpPath(a, b pathVal) int {
	return cmp.Or(cmp.Compare(a.iface, b.iface), a.nh.Compare(b.nh), cmp.Compare(a.weight, b.weight))
}

type routeVal struct {
	vrf     uint32
	dst     netip.Prefix
	paths   []pathVal // sorted
	depKeys []string
}

func (v *routeVal) kind() kind     { return kindRoute }
func (v *routeVal) key() string    { return vppmodel.RouteKey(v.vrf, v.dst) }
func (v *routeVal) deps() []string { return v.depKeys }
func (v *routeVal) equal(o value) bool {
	w := o.(*routeVal)
	return v.vrf == w.vrf && v.dst == w.dst && slices.Equal(v.paths, w.paths)
}

// finish sorts the paths and computes the dependencies.
func (v *routeVal) finish() *routeVal {
	slices.SortFunc(v.paths, cmpPath)
	var deps depsOf
	if v.vrf != 0 {
		deps.add(vppmodel.VrfTableKey(protoOf(v.dst.Addr().Is6()), v.vrf))
	}
	for i := range v.paths {
		if v.paths[i].iface != "" {
			v.paths[i].ifKey = vppmodel.InterfaceKey(v.paths[i].iface)
			deps.add(v.paths[i].ifKey)
		}
	}
	v.depKeys = deps
	return v
}

func parseRoute(m *vppmodel.Route) (*routeVal, error) {
	dst, err := netip.ParsePrefix(m.GetDstNetwork())
	if err != nil {
		return nil, err
	}
	v := &routeVal{vrf: m.GetVrf(), dst: dst, paths: make([]pathVal, 0, len(m.GetPaths()))}
	for _, p := range m.GetPaths() {
		pv := pathVal{iface: p.GetOutgoingInterface(), weight: uint8(max(p.GetWeight(), 1))}
		if s := p.GetNextHop(); s != "" {
			if pv.nh, err = netip.ParseAddr(s); err != nil {
				return nil, err
			}
		}
		if pv.iface != "" && dst.IsSingleIP() && pv.nh == dst.Addr() {
			// A host route via an interface to its own address is the
			// attached host route (VPP makes both an attached next hop).
			pv.nh = netip.Addr{}
		}
		v.paths = append(v.paths, pv)
	}
	return v.finish(), nil
}

func (v *routeVal) message() proto.Message {
	m := &vppmodel.Route{Vrf: v.vrf, DstNetwork: v.dst.String()}
	for _, p := range v.paths {
		mp := &vppmodel.Path{OutgoingInterface: p.iface}
		if p.weight != 1 {
			mp.Weight = uint32(p.weight)
		}
		if p.nh.IsValid() {
			mp.NextHop = p.nh.String()
		}
		m.Paths = append(m.Paths, mp)
	}
	return m
}

// ---- IP neighbors

type neighborVal struct {
	iface   string
	ip      netip.Addr
	mac     ethernet_types.MacAddress
	depKeys []string // the interface
}

func newNeighbor(iface string, ip netip.Addr, mac ethernet_types.MacAddress) *neighborVal {
	return &neighborVal{iface: iface, ip: ip, mac: mac, depKeys: []string{vppmodel.InterfaceKey(iface)}}
}

func (v *neighborVal) kind() kind     { return kindNeighbor }
func (v *neighborVal) key() string    { return vppmodel.IPNeighborKey(v.iface, v.ip) }
func (v *neighborVal) deps() []string { return v.depKeys }
func (v *neighborVal) ifKey() string  { return v.depKeys[0] }
func (v *neighborVal) equal(o value) bool {
	w := o.(*neighborVal)
	return v.iface == w.iface && v.ip == w.ip && v.mac == w.mac
}
func (v *neighborVal) message() proto.Message {
	return &vppmodel.IPNeighbor{Interface: v.iface, IpAddress: v.ip.String(), MacAddress: v.mac.String()}
}

func parseNeighbor(m *vppmodel.IPNeighbor) (*neighborVal, error) {
	ip, err := netip.ParseAddr(m.GetIpAddress())
	if err != nil {
		return nil, err
	}
	mac, err := vppmodel.ParseMAC(m.GetMacAddress())
	if err != nil {
		return nil, err
	}
	return newNeighbor(m.GetInterface(), ip, mac), nil
}

// ---- NAT44-ED

var natGlobalDeps = []string{vppmodel.Nat44GlobalKey}

type natGlobalVal struct {
	sessions   uint32
	forwarding bool
}

func (v *natGlobalVal) kind() kind         { return kindNatGlobal }
func (v *natGlobalVal) key() string        { return vppmodel.Nat44GlobalKey }
func (v *natGlobalVal) deps() []string     { return nil }
func (v *natGlobalVal) equal(o value) bool { return *v == *o.(*natGlobalVal) }
func (v *natGlobalVal) message() proto.Message {
	return &vppmodel.Nat44Global{Sessions: v.sessions, Forwarding: v.forwarding}
}

type natIfaceVal struct {
	iface           string
	inside, outside bool
	output          bool     // post-routing (output feature); excludes inside and outside
	depKeys         []string // the plugin, the interface
}

func newNatIface(iface string, inside, outside, output bool) *natIfaceVal {
	return &natIfaceVal{iface: iface, inside: inside, outside: outside, output: output,
		depKeys: []string{vppmodel.Nat44GlobalKey, vppmodel.InterfaceKey(iface)}}
}

func (v *natIfaceVal) kind() kind     { return kindNat }
func (v *natIfaceVal) key() string    { return vppmodel.Nat44InterfaceKey(v.iface) }
func (v *natIfaceVal) deps() []string { return v.depKeys }
func (v *natIfaceVal) ifKey() string  { return v.depKeys[1] }
func (v *natIfaceVal) equal(o value) bool {
	w := o.(*natIfaceVal)
	return v.iface == w.iface && v.inside == w.inside && v.outside == w.outside && v.output == w.output
}
func (v *natIfaceVal) message() proto.Message {
	return &vppmodel.Nat44Interface{Interface: v.iface, Inside: v.inside, Outside: v.outside, OutputFeature: v.output}
}

// poolVal is an address range, or (iface set) the address of an interface.
type poolVal struct {
	first, last netip.Addr // invalid for an interface pool
	vrf         uint32
	twice       bool
	iface       string
	depKeys     []string
}

func newIfacePool(iface string, twice bool) *poolVal {
	return &poolVal{iface: iface, twice: twice, depKeys: []string{vppmodel.Nat44GlobalKey, vppmodel.InterfaceKey(iface)}}
}

func (v *poolVal) kind() kind { return kindNat }
func (v *poolVal) key() string {
	if v.iface != "" {
		return vppmodel.Nat44InterfaceAddressPoolKey(v.iface, v.twice)
	}
	return vppmodel.Nat44AddressPoolKey(v.first, v.last, v.twice)
}
func (v *poolVal) deps() []string {
	if v.depKeys != nil {
		return v.depKeys
	}
	return natGlobalDeps
}
func (v *poolVal) ifKey() string { return v.depKeys[1] }
func (v *poolVal) equal(o value) bool {
	w := o.(*poolVal)
	return v.first == w.first && v.last == w.last && v.vrf == w.vrf && v.twice == w.twice && v.iface == w.iface
}
func (v *poolVal) message() proto.Message {
	if v.iface != "" {
		return &vppmodel.Nat44AddressPool{Interface: v.iface, TwiceNat: v.twice}
	}
	return &vppmodel.Nat44AddressPool{FirstIp: v.first.String(), LastIp: v.last.String(), Vrf: v.vrf, TwiceNat: v.twice}
}

func parsePool(m *vppmodel.Nat44AddressPool) (*poolVal, error) {
	if iface := m.GetInterface(); iface != "" {
		return newIfacePool(iface, m.GetTwiceNat()), nil
	}
	first, err := netip.ParseAddr(m.GetFirstIp())
	if err != nil {
		return nil, err
	}
	last := first
	if s := m.GetLastIp(); s != "" {
		if last, err = netip.ParseAddr(s); err != nil {
			return nil, err
		}
	}
	return &poolVal{first: first, last: last, vrf: m.GetVrf(), twice: m.GetTwiceNat()}, nil
}

// natFlagsVal are the flags of static and load-balanced mappings.
type natFlagsVal struct{ out2in, twice, selfTwice bool }

type staticVal struct {
	proto        vppmodel.Nat44Protocol
	local, ext   netip.Addr
	lport, eport uint16
	vrf          uint32
	flags        natFlagsVal
}

func (v *staticVal) kind() kind { return kindNat }
func (v *staticVal) key() string {
	return vppmodel.Nat44StaticMappingKey(v.proto, v.ext, uint32(v.eport))
}
func (v *staticVal) deps() []string     { return natGlobalDeps }
func (v *staticVal) equal(o value) bool { return *v == *o.(*staticVal) }
func (v *staticVal) message() proto.Message {
	return &vppmodel.Nat44StaticMapping{Protocol: v.proto, LocalIp: v.local.String(), LocalPort: uint32(v.lport),
		ExternalIp: v.ext.String(), ExternalPort: uint32(v.eport), Vrf: v.vrf,
		Out2InOnly: v.flags.out2in, TwiceNat: v.flags.twice, SelfTwiceNat: v.flags.selfTwice}
}

func parseStatic(m *vppmodel.Nat44StaticMapping) (*staticVal, error) {
	local, err := netip.ParseAddr(m.GetLocalIp())
	if err != nil {
		return nil, err
	}
	ext, err := netip.ParseAddr(m.GetExternalIp())
	if err != nil {
		return nil, err
	}
	return &staticVal{proto: m.GetProtocol(), local: local, ext: ext, lport: uint16(m.GetLocalPort()),
		eport: uint16(m.GetExternalPort()), vrf: m.GetVrf(),
		flags: natFlagsVal{m.GetOut2InOnly(), m.GetTwiceNat(), m.GetSelfTwiceNat()}}, nil
}

type identityVal struct {
	proto   vppmodel.Nat44Protocol
	ip      netip.Addr // invalid when iface is set
	iface   string
	port    uint16
	vrf     uint32
	depKeys []string
}

func newIdentity(p vppmodel.Nat44Protocol, ip netip.Addr, iface string, port uint16, vrf uint32) *identityVal {
	v := &identityVal{proto: p, ip: ip, iface: iface, port: port, vrf: vrf, depKeys: natGlobalDeps}
	if iface != "" {
		v.depKeys = []string{vppmodel.Nat44GlobalKey, vppmodel.InterfaceKey(iface)}
	}
	return v
}

func (v *identityVal) kind() kind { return kindNat }
func (v *identityVal) key() string {
	return vppmodel.Nat44IdentityMappingKey(v.proto, v.ip, v.iface, uint32(v.port))
}
func (v *identityVal) deps() []string { return v.depKeys }
func (v *identityVal) equal(o value) bool {
	w := o.(*identityVal)
	return v.proto == w.proto && v.ip == w.ip && v.iface == w.iface && v.port == w.port && v.vrf == w.vrf
}
func (v *identityVal) message() proto.Message {
	m := &vppmodel.Nat44IdentityMapping{Protocol: v.proto, Interface: v.iface, Port: uint32(v.port), Vrf: v.vrf}
	if v.iface == "" {
		m.Ip = v.ip.String()
	}
	return m
}

func parseIdentity(m *vppmodel.Nat44IdentityMapping) (*identityVal, error) {
	var ip netip.Addr
	if m.GetInterface() == "" {
		var err error
		if ip, err = netip.ParseAddr(m.GetIp()); err != nil {
			return nil, err
		}
	}
	return newIdentity(m.GetProtocol(), ip, m.GetInterface(), uint16(m.GetPort()), m.GetVrf()), nil
}

type backendVal struct {
	ip    netip.Addr
	port  uint16
	prob  uint8
	vrf   uint32
	order uint64 // an IPv4 ip and port as one number (NAT44 backends are IPv4)
}

func newBackend(ip netip.Addr, port uint16, prob uint8, vrf uint32) backendVal {
	b := backendVal{ip: ip, port: port, prob: prob, vrf: vrf}
	if ip.Is4() {
		a := ip.As4()
		b.order = uint64(binary.BigEndian.Uint32(a[:]))<<16 | uint64(port)
	}
	return b
}

// cmpBackend orders backends by address, then port.
func cmpBackend(a, b backendVal) int { return a.cmp(&b) }

// cmp is cmpBackend without copying the backends: the merge walks over a
// mapping's backends (hundreds of them) compare a lot, and IPv4 backends
// compare as one number.
func (b *backendVal) cmp(o *backendVal) int {
	if b.ip.Is4() && o.ip.Is4() {
		return cmp.Compare(b.order, o.order)
	}
	return cmp.Or(b.ip.Compare(o.ip), cmp.Compare(b.port, o.port))
}

// lbHead is everything of a load-balanced mapping but its backends.
type lbHead struct {
	proto    vppmodel.Nat44Protocol
	ext      netip.Addr
	port     uint16
	affinity uint32
	flags    natFlagsVal
}

type lbVal struct {
	lbHead
	backends []backendVal // sorted by address and port
}

func (v *lbVal) kind() kind { return kindNat }
func (v *lbVal) key() string {
	return vppmodel.Nat44LbStaticMappingKey(v.proto, v.ext, uint32(v.port))
}
func (v *lbVal) deps() []string { return natGlobalDeps }
func (v *lbVal) equal(o value) bool {
	w := o.(*lbVal)
	return v.lbHead == w.lbHead && slices.Equal(v.backends, w.backends)
}
func (v *lbVal) message() proto.Message {
	m := &vppmodel.Nat44LbStaticMapping{Protocol: v.proto, ExternalIp: v.ext.String(), ExternalPort: uint32(v.port),
		Affinity: v.affinity, Out2InOnly: v.flags.out2in, TwiceNat: v.flags.twice, SelfTwiceNat: v.flags.selfTwice}
	for _, b := range v.backends {
		m.Backends = append(m.Backends, &vppmodel.Nat44Backend{Ip: b.ip.String(), Port: uint32(b.port),
			Probability: uint32(b.prob), Vrf: b.vrf})
	}
	return m
}

func (v *lbVal) finish() *lbVal {
	slices.SortFunc(v.backends, cmpBackend)
	return v
}

func parseLB(m *vppmodel.Nat44LbStaticMapping) (*lbVal, error) {
	ext, err := netip.ParseAddr(m.GetExternalIp())
	if err != nil {
		return nil, err
	}
	v := &lbVal{lbHead: lbHead{proto: m.GetProtocol(), ext: ext, port: uint16(m.GetExternalPort()),
		affinity: m.GetAffinity(), flags: natFlagsVal{m.GetOut2InOnly(), m.GetTwiceNat(), m.GetSelfTwiceNat()}},
		backends: make([]backendVal, 0, len(m.GetBackends()))}
	for _, b := range m.GetBackends() {
		ip, err := netip.ParseAddr(b.GetIp())
		if err != nil {
			return nil, err
		}
		v.backends = append(v.backends, newBackend(ip, uint16(b.GetPort()), uint8(b.GetProbability()), b.GetVrf()))
	}
	return v.finish(), nil
}

// lbInPlace tells whether the backends of a load-balanced mapping change
// from old to new in place: new ones are added first, then the removed and
// changed ones are removed, then the changed ones added back. VPP refuses
// to remove a backend from a mapping that has fewer than three (retval -1),
// so the removals must leave at least two; and when no backend is kept
// (nothing whose sessions an in-place change would preserve), deleting and
// adding the mapping (two requests) is cheaper. Both lists are sorted by
// address and port.
//
// One merge walk over the two lists (a mapping may have hundreds of
// backends and one changes at a time): an old backend is kept if the first
// new one with its address and port equals it, else removed; a new one is
// added if no old one has its address and port.
func lbInPlace(old, new []backendVal) bool {
	kept, added, removed := 0, 0, 0
	i, j := 0, 0
	for i < len(old) && j < len(new) {
		switch c := old[i].cmp(&new[j]); {
		case c < 0:
			removed++
			i++
		case c > 0:
			added++
			j++
		default:
			first := &new[j]
			for ; i < len(old) && old[i].cmp(first) == 0; i++ {
				if old[i] == *first {
					kept++
				} else {
					removed++
				}
			}
			for j < len(new) && new[j].cmp(first) == 0 {
				j++
			}
		}
	}
	removed += len(old) - i
	added += len(new) - j
	return removed == 0 || (kept > 0 && kept+added >= 2)
}

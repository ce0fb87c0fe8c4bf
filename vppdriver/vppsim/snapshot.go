package vppsim

import (
	"cmp"
	"net/netip"
	"slices"

	"go.fd.io/govpp/binapi/ip_neighbor"
	"go.fd.io/govpp/binapi/ip_types"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
)

func addrWithPrefix(p netip.Prefix) ip_types.AddressWithPrefix {
	return ip_types.AddressWithPrefix(vppconv.Prefix(p))
}

// Interface is a snapshot of one VPP interface.
type Interface struct {
	SwIfIndex  uint32
	Name       string // VPP's name, e.g. "loop0"
	DevType    string
	Tag        string
	AdminUp    bool
	Addresses  []netip.Prefix // sorted
	Vrf        uint32
	IPv6Vrf    uint32
	HostIfName string
	MAC        string // VPP's side, "aa:bb:cc:dd:ee:ff"
	// Unnumbered tells that the interface borrows the addresses of the
	// interface UnnumberedTo (which may no longer exist: VPP keeps the
	// index when the source is deleted).
	Unnumbered   bool
	UnnumberedTo uint32
	Vxlan        *VxlanTunnel // VXLAN tunnels only
	Memif        *Memif       // memif interfaces only
	Tap          *TapHost     // tap interfaces only
}

// TapHost is a snapshot of the host (Linux) side of a tap interface as
// tap_create_v3 configured it; invalid prefixes and addresses were not set.
type TapHost struct {
	Namespace string // as given, "" if not set
	MAC       string
	IP4, IP6  netip.Prefix
	GW4, GW6  netip.Addr
}

// Neighbor is a snapshot of one IP neighbor entry.
type Neighbor struct {
	SwIfIndex uint32
	IP        netip.Addr
	MAC       string
	Static    bool
}

// Memif is a snapshot of the memif part of an interface.
type Memif struct {
	ID             uint32
	SocketFilename string
	Master         bool
	RingSize       uint32
	BufferSize     uint16
}

// VxlanTunnel is a snapshot of the VXLAN part of a tunnel interface.
type VxlanTunnel struct {
	Src, Dst  netip.Addr
	Vni       uint32
	EncapVrf  uint32
	DecapNext uint32 // 1 = l2-input; an L3 tunnel needs the ip4-input/ip6-input index
	L3        bool
}

// Table is a snapshot of one IP table.
type Table struct {
	ID   uint32
	IPv6 bool
	Name string
}

// Path is a snapshot of one route path.
type Path struct {
	SwIfIndex uint32 // ~0 for a recursive path
	NextHop   netip.Addr
	Weight    uint8
}

// Route is a snapshot of one route added over the API (connected and
// special routes are not included).
type Route struct {
	Table  uint32
	Prefix netip.Prefix
	Paths  []Path // sorted
}

// Snapshot is the configuration of the VPP at one moment.
type Snapshot struct {
	Interfaces []Interface // by SwIfIndex, local0 included
	Tables     []Table     // IPv4 then IPv6, by ID
	Routes     []Route     // by table, then prefix
	Neighbors  []Neighbor  // by interface, then address
	// ACLs are the ACL plugin's ACLs by index; ACLInterfaces the
	// interfaces that have ACLs, by sw_if_index.
	ACLs          []ACL
	ACLInterfaces []ACLInterface
	Cnat          Cnat // the cnat plugin
}

// Snapshot returns a deep copy of the current configuration.
func (v *VPP) Snapshot() Snapshot {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.st
	var out Snapshot
	for _, i := range s.sortedIfaces() {
		addrs := slices.Clone(i.addrs)
		slices.SortFunc(addrs, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
		out.Interfaces = append(out.Interfaces, Interface{
			SwIfIndex: i.idx, Name: i.name, DevType: s.ifDetails(i).InterfaceDevType, Tag: i.tag,
			AdminUp: i.adminUp, Addresses: addrs, Vrf: i.vrf[0], IPv6Vrf: i.vrf[1], HostIfName: i.hostIf,
			MAC: i.mac.String(), Unnumbered: i.unnumberedOK, UnnumberedTo: i.unnumbered,
		})
		if h := i.tap; h != nil {
			th := &TapHost{MAC: h.mac.String(), IP4: h.ip4, IP6: h.ip6, GW4: h.gw4, GW6: h.gw6}
			if h.namespaceSet {
				th.Namespace = h.namespace
			}
			out.Interfaces[len(out.Interfaces)-1].Tap = th
		}
		if l := i.memif; l != nil {
			out.Interfaces[len(out.Interfaces)-1].Memif = &Memif{ID: l.id, SocketFilename: s.memifSockets[l.socketID],
				Master: l.role == 0, RingSize: l.ringSize, BufferSize: l.bufferSize}
		}
		if t := i.vxlan; t != nil {
			out.Interfaces[len(out.Interfaces)-1].Vxlan = &VxlanTunnel{Src: t.src, Dst: t.dst, Vni: t.vni,
				EncapVrf: t.encapVrf, DecapNext: t.decapNext, L3: t.l3}
		}
	}
	for _, t := range s.sortedTables() {
		out.Tables = append(out.Tables, Table{ID: t.key.id, IPv6: t.key.v6, Name: t.name})
		var routes []Route
		for _, r := range t.routes {
			rt := Route{Table: t.key.id, Prefix: r.prefix}
			for _, p := range r.paths {
				rt.Paths = append(rt.Paths, Path{SwIfIndex: p.swIfIndex, NextHop: p.nh, Weight: p.weight})
			}
			slices.SortFunc(rt.Paths, func(a, b Path) int {
				return cmp.Or(cmp.Compare(a.SwIfIndex, b.SwIfIndex), a.NextHop.Compare(b.NextHop), cmp.Compare(a.Weight, b.Weight))
			})
			routes = append(routes, rt)
		}
		slices.SortFunc(routes, func(a, b Route) int {
			return cmp.Or(a.Prefix.Addr().Compare(b.Prefix.Addr()), cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()))
		})
		out.Routes = append(out.Routes, routes...)
	}
	for _, k := range s.sortedNeighbors() {
		n := s.neighbors[k.sw][k.ip]
		out.Neighbors = append(out.Neighbors, Neighbor{SwIfIndex: k.sw, IP: k.ip, MAC: n.mac.String(),
			Static: n.flags&ip_neighbor.IP_API_NEIGHBOR_FLAG_STATIC != 0})
	}
	out.ACLs, out.ACLInterfaces = s.aclSnapshot()
	out.Cnat = s.cnatSnapshot()
	return out
}

// FibIndex returns VPP's FIB index of the IP table tableID of a family
// (what cnat_set_snat_addresses_v2 takes) and whether the table exists.
func (v *VPP) FibIndex(tableID uint32, ipv6 bool) (uint32, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	t := v.st.tables[tableKey{ipv6, tableID}]
	if t == nil {
		return 0, false
	}
	return t.fibIndex, true
}

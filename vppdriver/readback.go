package vppdriver

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/af_packet"
	"go.fd.io/govpp/binapi/fib_types"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip"
	"go.fd.io/govpp/binapi/ip_neighbor"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/binapi/memif"
	"go.fd.io/govpp/binapi/tapv2"
	"go.fd.io/govpp/binapi/vlib"
	"go.fd.io/govpp/binapi/vxlan"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// resyncLocked reads the owned configuration back from VPP, replaces the
// driver's record of what is applied with it, and runs a pass over every
// key (a resync costs the whole state, by nature).
func (d *Driver) resyncLocked(ctx context.Context) error {
	if d.cl == nil {
		d.publishLocked()
		return ErrNotConnected
	}
	if d.compatErr != nil {
		for _, it := range d.items {
			d.markDirtyLocked(it)
		}
		return d.passLocked(ctx)
	}
	found, err := d.readbackLocked(ctx)
	if err != nil {
		if ctx.Err() != nil {
			d.needResync = true
		} else {
			d.connBroken(err)
		}
		d.publishLocked()
		return err
	}
	d.stats.resyncs.Add(1)
	d.needResync = false
	for k, it := range d.items {
		if _, ok := found[k]; !ok {
			it.index = noIndex
			d.setHaveLocked(it, nil)
			d.forgetLocked(it)
		}
	}
	for k, f := range found {
		d.holdLocked(k, f)
	}
	d.readBack = true
	for _, it := range d.items {
		// What VPP holds and nobody asked for yet is kept until the first
		// resync commit (stateUnclaimed).
		d.markDirtyLocked(it)
		d.markPubLocked(it)
	}
	return d.passLocked(ctx)
}

// holdLocked records that VPP holds f of key, as a readback found it. A
// key no commit mentioned is stateUnclaimed (or stateRemoving after a
// resync commit).
func (d *Driver) holdLocked(key string, f found) {
	it := d.items[key]
	if it == nil {
		it = d.itemLocked(key)
		it.state = d.unclaimedLocked()
	}
	it.index = f.index
	d.setHaveLocked(it, f.value)
}

// found is an object a readback found in VPP that the driver owns: its
// value and VPP's index of it (see item.index).
type found struct {
	value value
	index uint32
}

// readbackLocked reads back what the driver owns in VPP, kind by kind:
// interfaces whose tag starts with TagPrefix (with what VPP reports of
// their type, their addresses, VRF bindings and unnumbered source), the
// static neighbors on them, IP tables whose name starts with TagPrefix,
// routes that are in an owned table or whose key the driver applied or
// wants (other routes are foreign and left alone), and the NAT44-ED
// configuration (see readNat). It returns them by key.
func (d *Driver) readbackLocked(ctx context.Context) (map[string]found, error) {
	x, err := d.dumpObjects(ctx)
	if err != nil {
		return nil, err
	}
	ifs, err := d.readInterfaces(ctx, x)
	if err != nil {
		return nil, err
	}
	out := make(map[string]found, len(d.items))
	add := func(vs []value) {
		for _, v := range vs {
			out[v.key()] = found{value: v, index: noIndex}
		}
	}
	for _, i := range ifs.list {
		out[i.v.key()] = found{value: i.v, index: i.sw}
	}
	add(asValues(readNeighbors(x, ifs)))
	tables := d.readTables(x)
	for _, v := range tables.owned {
		add([]value{v})
	}
	routes, err := d.readRoutes(ctx, tables, ifs)
	if err != nil {
		return nil, err
	}
	add(asValues(routes))
	if d.natErr == nil {
		nat, err := d.readNat(ctx, ifs)
		if err != nil {
			return nil, err
		}
		add(nat)
	}
	if d.cnatErr == nil {
		cn, err := d.readCnat(ctx, ifs)
		if err != nil {
			return nil, err
		}
		for _, f := range cn {
			out[f.value.key()] = f
		}
	}
	if d.aclErr == nil {
		acls, err := d.readACLs(ctx, ifs)
		if err != nil {
			return nil, err
		}
		for _, f := range acls {
			out[f.value.key()] = f
		}
	}
	return out, nil
}

// asValues returns typed values as values.
func asValues[V value](vs []V) []value {
	out := make([]value, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

// dumped is what the first round of a readback dumps, pipelined together,
// typed: one field per dump (the memif and VXLAN ones empty without those
// messages).
type dumped struct {
	ifaces                 []*interfaces.SwInterfaceDetails
	afPackets              []*af_packet.AfPacketDetails
	taps                   []*tapv2.SwInterfaceTapV2Details
	memifSockets           []*memif.MemifSocketFilenameDetails
	memifs                 []*memif.MemifDetails
	tunnels                []*vxlan.VxlanTunnelV2Details
	unnumbered             []*ip.IPUnnumberedDetails
	neighbors4, neighbors6 []*ip_neighbor.IPNeighborDetails
	tables                 []*ip.IPTableDetails
}

// dumpObjects runs the first round of a readback: every dump that needs
// nothing from another.
func (d *Driver) dumpObjects(ctx context.Context) (*dumped, error) {
	all := interface_types.InterfaceIndex(noIndex)
	x := &dumped{}
	var b dumpBatch
	addDump(&b, &interfaces.SwInterfaceDump{SwIfIndex: all}, &x.ifaces)
	addDump(&b, &af_packet.AfPacketDump{}, &x.afPackets)
	addDump(&b, &tapv2.SwInterfaceTapV2Dump{SwIfIndex: all}, &x.taps)
	if d.memifErr == nil {
		addDump(&b, &memif.MemifSocketFilenameDump{}, &x.memifSockets)
		addDump(&b, &memif.MemifDump{}, &x.memifs)
	}
	if d.vxlanErr == nil {
		addDump(&b, &vxlan.VxlanTunnelV2Dump{SwIfIndex: all}, &x.tunnels)
	}
	addDump(&b, &ip.IPUnnumberedDump{SwIfIndex: all}, &x.unnumbered)
	addDump(&b, &ip_neighbor.IPNeighborDump{SwIfIndex: all, Af: ip_types.ADDRESS_IP4}, &x.neighbors4)
	addDump(&b, &ip_neighbor.IPNeighborDump{SwIfIndex: all, Af: ip_types.ADDRESS_IP6}, &x.neighbors6)
	addDump(&b, &ip.IPTableDump{}, &x.tables)
	return x, b.run(ctx, d.cl)
}

// ownedIfaces are the interfaces a readback found that the driver owns.
type ownedIfaces struct {
	list  []ownedIface
	names map[uint32]string // sw_if_index -> logical name
	// connected holds the subnets of their addresses (masked), by
	// interface: VPP's connected routes.
	connected map[swPrefix]bool
}

type ownedIface struct {
	sw uint32
	v  *ifaceVal
}

type swPrefix struct {
	sw  uint32
	pfx netip.Prefix
}

// nameOf returns the logical name of an owned interface, or a name that
// no desired value uses for a foreign one.
func (o *ownedIfaces) nameOf(sw uint32) (name string, owned bool) {
	if name, ok := o.names[sw]; ok {
		return name, true
	}
	return fmt.Sprintf("#sw_if_index=%d", sw), false
}

// readInterfaces reads the interfaces the driver owns (tagged TagPrefix +
// name, TagPrefix + "=" + name if adopted), finished: with what the dumps
// of their types report (see ifaceTypes), their unnumbered source, their
// addresses and their VRF bindings.
func (d *Driver) readInterfaces(ctx context.Context, x *dumped) (*ownedIfaces, error) {
	afpHosts := readAfPackets(x)
	taps := readTaps(x)
	memifs := d.readMemifs(x)
	tunnels, err := d.readVxlanTunnels(ctx, x)
	if err != nil {
		return nil, err
	}
	unnumbered := readUnnumbered(x)

	prefix := d.cfg.TagPrefix
	ifs := &ownedIfaces{names: map[uint32]string{}, connected: map[swPrefix]bool{}}
	for _, r := range x.ifaces {
		if !strings.HasPrefix(r.Tag, prefix) {
			continue
		}
		name := strings.TrimPrefix(r.Tag, prefix)
		adopted := strings.HasPrefix(name, adoptedMark)
		name = strings.TrimPrefix(name, adoptedMark)
		sw := uint32(r.SwIfIndex)
		vi := &vppIface{details: r, afpHost: afpHosts[sw], tap: taps[sw], memif: memifs[sw], tunnel: tunnels[sw]}
		v := ifaceFromVPP(vi, name, adopted, d.ifaceRecordLocked(name))
		ifs.list = append(ifs.list, ownedIface{sw: sw, v: v})
		ifs.names[sw] = name
	}
	for _, o := range ifs.list {
		if src, ok := unnumbered[o.sw]; ok {
			o.v.unnumbered, _ = ifs.nameOf(src) // a foreign source never equals a desired one
		}
	}
	if err := d.readAddresses(ctx, ifs); err != nil {
		return nil, err
	}
	for _, o := range ifs.list {
		o.v.finish()
	}
	return ifs, nil
}

// ifaceRecordLocked returns the driver's record of the interface name:
// its desired value, else the applied one, else an empty value.
func (d *Driver) ifaceRecordLocked(name string) *ifaceVal {
	if it := d.items[vppmodel.InterfaceKey(name)]; it != nil {
		if v, ok := it.want.(*ifaceVal); ok {
			return v
		}
		if v, ok := applied(it.have).(*ifaceVal); ok {
			return v
		}
	}
	return &ifaceVal{}
}

// readAfPackets returns the host interface of every af_packet interface,
// by sw_if_index.
func readAfPackets(x *dumped) map[uint32]string {
	out := make(map[uint32]string, len(x.afPackets))
	for _, r := range x.afPackets {
		out[uint32(r.SwIfIndex)] = r.HostIfName
	}
	return out
}

// readTaps returns the details of every tap, by sw_if_index.
func readTaps(x *dumped) map[uint32]*tapv2.SwInterfaceTapV2Details {
	out := make(map[uint32]*tapv2.SwInterfaceTapV2Details, len(x.taps))
	for _, r := range x.taps {
		out[r.SwIfIndex] = r
	}
	return out
}

// memifInfo is what VPP reports of a memif.
type memifInfo struct {
	master bool
	id     uint32
	socket string // its socket's filename ("" if VPP did not list it)
}

// readMemifs returns every memif, by sw_if_index, and learns the socket
// IDs of the socket filenames.
func (d *Driver) readMemifs(x *dumped) map[uint32]*memifInfo {
	filenames := make(map[uint32]string, len(x.memifSockets))
	for _, r := range x.memifSockets {
		filenames[r.SocketID] = r.SocketFilename
		d.memifSockets[r.SocketFilename] = r.SocketID
	}
	out := make(map[uint32]*memifInfo, len(x.memifs))
	for _, r := range x.memifs {
		out[uint32(r.SwIfIndex)] = &memifInfo{master: r.Role == memif.MEMIF_ROLE_API_MASTER, id: r.ID, socket: filenames[r.SocketID]}
	}
	return out
}

// vxlanInfo is what VPP reports of a VXLAN tunnel.
type vxlanInfo struct {
	src, dst      netip.Addr
	vni, encapVrf uint32
	payload6      bool // the decap-next is ip6-input
	badDecap      bool // the decap-next is neither ip4-input nor ip6-input: not a routed tunnel of ours
}

// readVxlanTunnels returns every VXLAN tunnel, by sw_if_index, with its
// payload family as its decap-next tells it (asked of VPP if there are
// tunnels).
func (d *Driver) readVxlanTunnels(ctx context.Context, x *dumped) (map[uint32]*vxlanInfo, error) {
	decap, err := d.decapNexts(ctx, len(x.tunnels) > 0)
	if err != nil {
		return nil, err
	}
	out := make(map[uint32]*vxlanInfo, len(x.tunnels))
	for _, t := range x.tunnels {
		v := &vxlanInfo{src: vppconv.AddrOf(t.SrcAddress), dst: vppconv.AddrOf(t.DstAddress), vni: t.Vni, encapVrf: t.EncapVrfID}
		switch t.DecapNextIndex {
		case decap[decapKey{v.src.Is6(), false}]:
		case decap[decapKey{v.src.Is6(), true}]:
			v.payload6 = true
		default:
			v.badDecap = true // re-created
		}
		out[uint32(t.SwIfIndex)] = v
	}
	return out, nil
}

// readUnnumbered returns the address source of every unnumbered
// interface, by sw_if_index.
func readUnnumbered(x *dumped) map[uint32]uint32 {
	out := make(map[uint32]uint32, len(x.unnumbered))
	for _, r := range x.unnumbered {
		out[uint32(r.SwIfIndex)] = uint32(r.IPSwIfIndex)
	}
	return out
}

// readAddresses reads the addresses (IPv4 and IPv6) and VRF bindings of
// the owned interfaces into their values, and their subnets into
// ifs.connected.
func (d *Driver) readAddresses(ctx context.Context, ifs *ownedIfaces) error {
	reqs := make([]api.Message, 0, 2*len(ifs.list))
	calls := make([]call, 0, 2*len(ifs.list))
	for _, o := range ifs.list {
		sw := interface_types.InterfaceIndex(o.sw)
		reqs = append(reqs, &ip.IPAddressDump{SwIfIndex: sw}, &ip.IPAddressDump{SwIfIndex: sw, IsIPv6: true})
		calls = append(calls,
			call{req: &interfaces.SwInterfaceGetTable{SwIfIndex: sw}, done: func(r api.Message, err error) {
				if err == nil {
					o.v.vrf = r.(*interfaces.SwInterfaceGetTableReply).VrfID
				}
			}},
			call{req: &interfaces.SwInterfaceGetTable{SwIfIndex: sw, IsIPv6: true}, done: func(r api.Message, err error) {
				if err == nil {
					o.v.vrf6 = r.(*interfaces.SwInterfaceGetTableReply).VrfID
				}
			}})
	}
	addrs, err := dumpEach[*ip.IPAddressDetails](ctx, d.cl, reqs)
	if err != nil {
		return err
	}
	if err := d.cl.pipeline(ctx, calls); err != nil {
		return err
	}
	for i, o := range ifs.list {
		for _, a := range append(addrs[2*i], addrs[2*i+1]...) {
			p := vppconv.PrefixOf(ip_types.Prefix(a.Prefix))
			o.v.addrs = append(o.v.addrs, p)
			ifs.connected[swPrefix{o.sw, p.Masked()}] = true
		}
	}
	return nil
}

// readNeighbors returns the static neighbors on owned interfaces (learnt
// ones, and those of foreign interfaces, are not the driver's).
func readNeighbors(x *dumped, ifs *ownedIfaces) []*neighborVal {
	var out []*neighborVal
	for _, r := range slices.Concat(x.neighbors4, x.neighbors6) {
		n := r.Neighbor
		name, owned := ifs.nameOf(uint32(n.SwIfIndex))
		if !owned || n.Flags&ip_neighbor.IP_API_NEIGHBOR_FLAG_STATIC == 0 {
			continue
		}
		out = append(out, newNeighbor(name, vppconv.AddrOf(n.IPAddress), n.MacAddress))
	}
	return out
}

// tableID names an IP table of VPP.
type tableID struct {
	v6 bool
	id uint32
}

// ipTables is what a readback found of VPP's IP tables.
type ipTables struct {
	exists map[tableID]bool
	owned  map[tableID]*vrfVal // named TagPrefix + label (never table 0)
}

// readTables reads VPP's IP tables: which exist, and which the driver
// owns.
func (d *Driver) readTables(x *dumped) *ipTables {
	out := &ipTables{exists: map[tableID]bool{}, owned: map[tableID]*vrfVal{}}
	for _, r := range x.tables {
		t := r.Table
		k := tableID{t.IsIP6, t.TableID}
		out.exists[k] = true
		if strings.HasPrefix(t.Name, d.cfg.TagPrefix) && t.TableID != 0 {
			out.owned[k] = newVrf(t.TableID, t.IsIP6, strings.TrimPrefix(t.Name, d.cfg.TagPrefix))
		}
	}
	return out
}

// readRoutes reads the routes the driver owns: the routes of owned tables,
// and in other tables (table 0, foreign tables) those whose key it
// applied or wants. It reads the tables that hold either.
func (d *Driver) readRoutes(ctx context.Context, tables *ipTables, ifs *ownedIfaces) ([]*routeVal, error) {
	scan := map[tableID]bool{{false, 0}: true, {true, 0}: true}
	for k := range tables.owned {
		scan[k] = true
	}
	for _, it := range d.items {
		if it.kind != kindRoute {
			continue
		}
		for _, v := range []value{it.want, it.have} {
			if r, ok := v.(*routeVal); ok {
				scan[tableID{r.dst.Addr().Is6(), r.vrf}] = true
			}
		}
	}
	var ids []tableID
	var reqs []api.Message
	for k := range scan {
		if tables.exists[k] {
			ids = append(ids, k)
			reqs = append(reqs, &ip.IPRouteDump{Table: ip.IPTable{TableID: k.id, IsIP6: k.v6}})
		}
	}
	res, err := dumpEach[*ip.IPRouteDetails](ctx, d.cl, reqs)
	if err != nil {
		return nil, err
	}
	var out []*routeVal
	for i, tk := range ids {
		for _, r := range res[i] {
			v, hostEntry, ok := routeFromVPP(r.Route, tk.id, ifs)
			if !ok {
				continue
			}
			it := d.items[v.key()]
			known := it != nil && (it.have != nil || it.want != nil)
			if !known && (hostEntry || tables.owned[tk] == nil) {
				continue // foreign, or an entry VPP made for a neighbor or a tracked address
			}
			out = append(out, v.finish())
		}
	}
	return out, nil
}

// routeFromVPP converts a dumped route, or reports false for entries VPP
// makes itself (special, connected, local, drop). The result is not
// finished (see routeVal.finish).
//
// A host prefix whose paths go through an interface to the prefix's own
// address is how VPP reports an attached host route (an attached next
// hop), but also the host entries it makes for IP neighbors and for
// resolving next hops: it is converted to the attached route, and
// hostEntry tells the caller that it is the driver's only if the driver
// knows the key.
func routeFromVPP(r ip.IPRoute, table uint32, ifs *ownedIfaces) (v *routeVal, hostEntry, ok bool) {
	p := vppconv.PrefixOf(r.Prefix)
	if !p.IsValid() || p.Masked() != p || len(r.Paths) == 0 {
		return nil, false, false
	}
	v6 := p.Addr().Is6()
	v = &routeVal{vrf: table, dst: p, paths: make([]pathVal, 0, len(r.Paths))}
	for _, fp := range r.Paths {
		if fp.Type != fib_types.FIB_API_PATH_TYPE_NORMAL {
			return nil, false, false
		}
		nh := vppconv.UnionAddr(fp.Nh.Address, v6)
		if fp.SwIfIndex == noIndex && nh.IsUnspecified() {
			return nil, false, false
		}
		if nh.IsUnspecified() && ifs.connected[swPrefix{fp.SwIfIndex, p}] {
			return nil, false, false
		}
		if p.IsSingleIP() && nh == p.Addr() {
			if fp.SwIfIndex == noIndex {
				return nil, false, false
			}
			nh, hostEntry = netip.IPv4Unspecified(), true
			if v6 {
				nh = netip.IPv6Unspecified()
			}
		}
		pv := pathVal{weight: max(fp.Weight, 1)}
		if !nh.IsUnspecified() {
			pv.nh = nh
		}
		if fp.SwIfIndex != noIndex {
			pv.iface, _ = ifs.nameOf(fp.SwIfIndex) // a foreign interface: never equal to a desired path
		}
		v.paths = append(v.paths, pv)
	}
	return v, hostEntry, true
}

// decapKey selects a next node of vxlan4-input (v6: vxlan6-input):
// ip4-input, or ip6-input for payload6.
type decapKey struct{ v6, payload6 bool }

// decapNexts asks VPP (get_next_index, read-only) for the next indexes
// of ip4-input and ip6-input from the VXLAN decap nodes: a routed tunnel's
// decap-next tells its payload family. Nodes that are not (yet) nexts
// get ~0. Without tunnels (need false) it asks nothing.
func (d *Driver) decapNexts(ctx context.Context, need bool) (map[decapKey]uint32, error) {
	out := map[decapKey]uint32{}
	if !need {
		return out, nil
	}
	var calls []call
	for _, k := range []decapKey{{false, false}, {false, true}, {true, false}, {true, true}} {
		node, next := vxlanNodes(k.v6, k.payload6)
		out[k] = noIndex
		calls = append(calls, call{req: &vlib.GetNextIndex{NodeName: node, NextName: next}, done: func(rep api.Message, err error) {
			if err == nil {
				out[k] = rep.(*vlib.GetNextIndexReply).NextIndex
			}
		}})
	}
	if err := d.cl.pipeline(ctx, calls); err != nil {
		return nil, err
	}
	return out, nil
}

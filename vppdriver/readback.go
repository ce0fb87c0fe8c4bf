package vppdriver

import (
	"context"
	"fmt"
	"net/netip"
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
			it.swIfIndex = noIndex
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
	it.swIfIndex = f.swIfIndex
	d.setHaveLocked(it, f.value)
}

// found is an object a readback found in VPP that the driver owns: its
// value and, for an interface, its sw_if_index (noIndex for the others).
type found struct {
	value     value
	swIfIndex uint32
}

// readbackLocked reads back what the driver owns in VPP, kind by kind:
// interfaces whose tag starts with TagPrefix (with what VPP reports of
// their type, their addresses, VRF bindings and unnumbered source), the
// static neighbors on them, IP tables whose name starts with TagPrefix,
// routes that are in an owned table or whose key the driver applied or
// wants (other routes are foreign and left alone), and the NAT44-ED
// configuration (see readNat). It returns them by key.
func (d *Driver) readbackLocked(ctx context.Context) (map[string]found, error) {
	ifs, err := d.readInterfaces(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]found, len(d.items))
	for _, i := range ifs.list {
		out[i.v.key()] = found{value: i.v, swIfIndex: i.sw}
	}
	var tables *ipTables
	for _, read := range []func() ([]value, error){
		func() ([]value, error) { return asValues(d.readNeighbors(ctx, ifs)) },
		func() (vs []value, err error) {
			tables, err = d.readTables(ctx)
			if err != nil {
				return nil, err
			}
			for _, v := range tables.owned {
				vs = append(vs, v)
			}
			return vs, nil
		},
		func() ([]value, error) { return asValues(d.readRoutes(ctx, tables, ifs)) },
		func() ([]value, error) {
			if d.natErr != nil {
				return nil, nil // no NAT44-ED messages: nothing to read
			}
			return d.readNat(ctx, ifs)
		},
	} {
		vs, err := read()
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			out[v.key()] = found{value: v, swIfIndex: noIndex}
		}
	}
	return out, nil
}

// asValues returns typed values as values.
func asValues[V value](vs []V, err error) ([]value, error) {
	if err != nil {
		return nil, err
	}
	out := make([]value, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out, nil
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
func (d *Driver) readInterfaces(ctx context.Context) (*ownedIfaces, error) {
	details, err := dumpOf[*interfaces.SwInterfaceDetails](ctx, d.cl, &interfaces.SwInterfaceDump{SwIfIndex: interface_types.InterfaceIndex(noIndex)})
	if err != nil {
		return nil, err
	}
	afpHosts, err := d.readAfPackets(ctx)
	if err != nil {
		return nil, err
	}
	taps, err := d.readTaps(ctx)
	if err != nil {
		return nil, err
	}
	memifs, err := d.readMemifs(ctx)
	if err != nil {
		return nil, err
	}
	tunnels, err := d.readVxlanTunnels(ctx)
	if err != nil {
		return nil, err
	}
	unnumbered, err := d.readUnnumbered(ctx)
	if err != nil {
		return nil, err
	}

	prefix := d.cfg.TagPrefix
	ifs := &ownedIfaces{names: map[uint32]string{}, connected: map[swPrefix]bool{}}
	for _, r := range details {
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
func (d *Driver) readAfPackets(ctx context.Context) (map[uint32]string, error) {
	res, err := dumpOf[*af_packet.AfPacketDetails](ctx, d.cl, &af_packet.AfPacketDump{})
	if err != nil {
		return nil, err
	}
	out := make(map[uint32]string, len(res))
	for _, r := range res {
		out[uint32(r.SwIfIndex)] = r.HostIfName
	}
	return out, nil
}

// readTaps returns the details of every tap, by sw_if_index.
func (d *Driver) readTaps(ctx context.Context) (map[uint32]*tapv2.SwInterfaceTapV2Details, error) {
	res, err := dumpOf[*tapv2.SwInterfaceTapV2Details](ctx, d.cl, &tapv2.SwInterfaceTapV2Dump{SwIfIndex: interface_types.InterfaceIndex(noIndex)})
	if err != nil {
		return nil, err
	}
	out := make(map[uint32]*tapv2.SwInterfaceTapV2Details, len(res))
	for _, r := range res {
		out[r.SwIfIndex] = r
	}
	return out, nil
}

// memifInfo is what VPP reports of a memif.
type memifInfo struct {
	master bool
	id     uint32
	socket string // its socket's filename ("" if VPP did not list it)
}

// readMemifs returns every memif, by sw_if_index (none without the memif
// messages), and learns the socket IDs of the socket filenames.
func (d *Driver) readMemifs(ctx context.Context) (map[uint32]*memifInfo, error) {
	out := map[uint32]*memifInfo{}
	if d.memifErr != nil {
		return out, nil
	}
	sockets, err := dumpOf[*memif.MemifSocketFilenameDetails](ctx, d.cl, &memif.MemifSocketFilenameDump{})
	if err != nil {
		return nil, err
	}
	filenames := make(map[uint32]string, len(sockets))
	for _, r := range sockets {
		filenames[r.SocketID] = r.SocketFilename
		d.memifSockets[r.SocketFilename] = r.SocketID
	}
	memifs, err := dumpOf[*memif.MemifDetails](ctx, d.cl, &memif.MemifDump{})
	if err != nil {
		return nil, err
	}
	for _, r := range memifs {
		out[uint32(r.SwIfIndex)] = &memifInfo{master: r.Role == memif.MEMIF_ROLE_API_MASTER, id: r.ID, socket: filenames[r.SocketID]}
	}
	return out, nil
}

// vxlanInfo is what VPP reports of a VXLAN tunnel.
type vxlanInfo struct {
	src, dst      netip.Addr
	vni, encapVrf uint32
	payload6      bool // the decap-next is ip6-input
	badDecap      bool // the decap-next is neither ip4-input nor ip6-input: not a routed tunnel of ours
}

// readVxlanTunnels returns every VXLAN tunnel, by sw_if_index (none
// without the VXLAN messages), with its payload family as its decap-next
// tells it.
func (d *Driver) readVxlanTunnels(ctx context.Context) (map[uint32]*vxlanInfo, error) {
	out := map[uint32]*vxlanInfo{}
	if d.vxlanErr != nil {
		return out, nil
	}
	res, err := dumpOf[*vxlan.VxlanTunnelV2Details](ctx, d.cl, &vxlan.VxlanTunnelV2Dump{SwIfIndex: interface_types.InterfaceIndex(noIndex)})
	if err != nil {
		return nil, err
	}
	decap, err := d.decapNexts(ctx, len(res) > 0)
	if err != nil {
		return nil, err
	}
	for _, t := range res {
		x := &vxlanInfo{src: vppconv.AddrOf(t.SrcAddress), dst: vppconv.AddrOf(t.DstAddress), vni: t.Vni, encapVrf: t.EncapVrfID}
		switch t.DecapNextIndex {
		case decap[decapKey{x.src.Is6(), false}]:
		case decap[decapKey{x.src.Is6(), true}]:
			x.payload6 = true
		default:
			x.badDecap = true // re-created
		}
		out[uint32(t.SwIfIndex)] = x
	}
	return out, nil
}

// readUnnumbered returns the address source of every unnumbered
// interface, by sw_if_index.
func (d *Driver) readUnnumbered(ctx context.Context) (map[uint32]uint32, error) {
	res, err := dumpOf[*ip.IPUnnumberedDetails](ctx, d.cl, &ip.IPUnnumberedDump{SwIfIndex: interface_types.InterfaceIndex(noIndex)})
	if err != nil {
		return nil, err
	}
	out := make(map[uint32]uint32, len(res))
	for _, r := range res {
		out[uint32(r.SwIfIndex)] = uint32(r.IPSwIfIndex)
	}
	return out, nil
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
func (d *Driver) readNeighbors(ctx context.Context, ifs *ownedIfaces) ([]*neighborVal, error) {
	all := interface_types.InterfaceIndex(noIndex)
	res, err := dumpEach[*ip_neighbor.IPNeighborDetails](ctx, d.cl, []api.Message{
		&ip_neighbor.IPNeighborDump{SwIfIndex: all, Af: ip_types.ADDRESS_IP4},
		&ip_neighbor.IPNeighborDump{SwIfIndex: all, Af: ip_types.ADDRESS_IP6},
	})
	if err != nil {
		return nil, err
	}
	var out []*neighborVal
	for _, r := range append(res[0], res[1]...) {
		n := r.Neighbor
		name, owned := ifs.nameOf(uint32(n.SwIfIndex))
		if !owned || n.Flags&ip_neighbor.IP_API_NEIGHBOR_FLAG_STATIC == 0 {
			continue
		}
		out = append(out, newNeighbor(name, vppconv.AddrOf(n.IPAddress), n.MacAddress))
	}
	return out, nil
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
func (d *Driver) readTables(ctx context.Context) (*ipTables, error) {
	res, err := dumpOf[*ip.IPTableDetails](ctx, d.cl, &ip.IPTableDump{})
	if err != nil {
		return nil, err
	}
	out := &ipTables{exists: map[tableID]bool{}, owned: map[tableID]*vrfVal{}}
	for _, r := range res {
		t := r.Table
		k := tableID{t.IsIP6, t.TableID}
		out.exists[k] = true
		if strings.HasPrefix(t.Name, d.cfg.TagPrefix) && t.TableID != 0 {
			out.owned[k] = newVrf(t.TableID, t.IsIP6, strings.TrimPrefix(t.Name, d.cfg.TagPrefix))
		}
	}
	return out, nil
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

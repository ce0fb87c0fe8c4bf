package vppdriver

import (
	"cmp"
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
			it.created, it.half, it.swIfIndex = false, false, 0
			d.setHaveLocked(it, nil)
			d.forgetLocked(it)
		}
	}
	for k, f := range found {
		it := d.itemLocked(k)
		it.created, it.half, it.swIfIndex = true, false, f.swIfIndex
		d.setHaveLocked(it, f.value)
	}
	d.readBack = true
	for _, it := range d.items {
		// What VPP holds and nobody asked for yet is kept until the first
		// resync commit (see Driver.fullState and the removal set in
		// passLocked).
		d.markDirtyLocked(it)
		d.markPubLocked(it)
	}
	return d.passLocked(ctx)
}

type found struct {
	value     value
	swIfIndex uint32
}

// readbackLocked dumps VPP and returns the objects the driver owns:
// interfaces whose tag starts with TagPrefix, IP tables whose name starts
// with it, and routes that are in an owned table or whose key the driver
// applied or wants (other routes are foreign and left alone).
func (d *Driver) readbackLocked(ctx context.Context) (map[string]found, error) {
	all := interface_types.InterfaceIndex(noIndex)
	reqs := []api.Message{
		&interfaces.SwInterfaceDump{SwIfIndex: all},
		&ip.IPTableDump{},
		&af_packet.AfPacketDump{},
		&tapv2.SwInterfaceTapV2Dump{SwIfIndex: all},
		&ip.IPUnnumberedDump{SwIfIndex: all},
		&ip_neighbor.IPNeighborDump{SwIfIndex: all, Af: ip_types.ADDRESS_IP4},
		&ip_neighbor.IPNeighborDump{SwIfIndex: all, Af: ip_types.ADDRESS_IP6},
	}
	const (
		resUnnumbered = 4
		resNeigh4     = 5
		resNeigh6     = 6
		resVxlan      = 7
	)
	if d.vxlanErr == nil {
		reqs = append(reqs, &vxlan.VxlanTunnelV2Dump{SwIfIndex: interface_types.InterfaceIndex(noIndex)})
	}
	memifAt := len(reqs)
	if d.memifErr == nil {
		reqs = append(reqs, &memif.MemifSocketFilenameDump{}, &memif.MemifDump{})
	}
	res, err := d.cl.dumps(ctx, reqs)
	if err != nil {
		return nil, err
	}
	out := map[string]found{}
	prefix := d.cfg.TagPrefix

	afpHost := map[uint32]string{}
	for _, m := range res[2] {
		r := m.(*af_packet.AfPacketDetails)
		afpHost[uint32(r.SwIfIndex)] = r.HostIfName
	}
	taps := map[uint32]*tapv2.SwInterfaceTapV2Details{}
	for _, m := range res[3] {
		r := m.(*tapv2.SwInterfaceTapV2Details)
		taps[r.SwIfIndex] = r
	}

	memifs := map[uint32]*memif.MemifDetails{}
	sockets := map[uint32]string{}
	if d.memifErr == nil {
		for _, m := range res[memifAt] {
			r := m.(*memif.MemifSocketFilenameDetails)
			sockets[r.SocketID] = r.SocketFilename
			d.memifSockets[r.SocketFilename] = r.SocketID
		}
		for _, m := range res[memifAt+1] {
			r := m.(*memif.MemifDetails)
			memifs[uint32(r.SwIfIndex)] = r
		}
	}
	tunnels := map[uint32]*vxlan.VxlanTunnelV2Details{}
	if d.vxlanErr == nil {
		for _, m := range res[resVxlan] {
			r := m.(*vxlan.VxlanTunnelV2Details)
			tunnels[uint32(r.SwIfIndex)] = r
		}
	}
	decap, err := d.decapNexts(ctx, len(tunnels) > 0)
	if err != nil {
		return nil, err
	}
	unnumbered := map[uint32]uint32{}
	for _, m := range res[resUnnumbered] {
		r := m.(*ip.IPUnnumberedDetails)
		unnumbered[uint32(r.SwIfIndex)] = uint32(r.IPSwIfIndex)
	}

	// Owned interfaces.
	type ownedIf struct {
		sw uint32
		v  *ifaceVal
	}
	var owned []*ownedIf
	swName := map[uint32]string{}
	for _, m := range res[0] {
		r := m.(*interfaces.SwInterfaceDetails)
		if !strings.HasPrefix(r.Tag, prefix) {
			continue
		}
		name := strings.TrimPrefix(r.Tag, prefix)
		adopted := strings.HasPrefix(name, adoptedMark)
		name = strings.TrimPrefix(name, adoptedMark)
		v := &ifaceVal{name: name, enabled: r.Flags&interface_types.IF_STATUS_API_FLAG_ADMIN_UP != 0}
		var want *ifaceVal
		if it := d.items[vppmodel.InterfaceKey(name)]; it != nil {
			want, _ = it.want.(*ifaceVal)
			if want == nil {
				want, _ = it.have.(*ifaceVal)
			}
		}
		if want == nil {
			want = &ifaceVal{}
		}
		devType := r.InterfaceDevType
		if adopted {
			devType = "" // never created by the driver: adopted, whatever it is
		}
		switch devType {
		case "":
			v.typ = vppmodel.Interface_EXISTING
			v.link.existing = r.InterfaceName
		case "Loopback":
			v.typ = vppmodel.Interface_LOOPBACK
		case "af-packet":
			v.typ = vppmodel.Interface_AF_PACKET
			v.link.afpHost = afpHost[uint32(r.SwIfIndex)]
		case "virtio":
			v.typ = vppmodel.Interface_TAP
			v.link.tapRx, v.link.tapTx = defaultTapRing, defaultTapRing
			if t := taps[uint32(r.SwIfIndex)]; t != nil {
				v.link.tapRx, v.link.tapTx = uint32(cmp.Or(t.RxRingSz, defaultTapRing)), uint32(cmp.Or(t.TxRingSz, defaultTapRing))
				if want.link.tapHost != "" {
					v.link.tapHost = t.HostIfName
				}
				if want.link.tapNS != "" {
					v.link.tapNS = t.HostNamespace
					if netnsPath(t.HostNamespace) == netnsPath(want.link.tapNS) {
						v.link.tapNS = want.link.tapNS // a name and its path are one namespace
					}
				}
				if want.link.tapHasMAC {
					v.link.tapHostMAC, v.link.tapHasMAC = t.HostMacAddr, true
				}
				if t.HostIP4Prefix.Len != 0 || t.HostIP4Prefix.Address != (ip_types.IP4Address{}) {
					v.link.tapIP4 = netip.PrefixFrom(netip.AddrFrom4(t.HostIP4Prefix.Address), int(t.HostIP4Prefix.Len))
				}
				if t.HostIP6Prefix.Len != 0 || t.HostIP6Prefix.Address != (ip_types.IP6Address{}) {
					v.link.tapIP6 = netip.PrefixFrom(netip.AddrFrom16(t.HostIP6Prefix.Address), int(t.HostIP6Prefix.Len))
				}
			}
			// VPP does not report the host gateways: take them from the
			// driver's record.
			v.link.tapGW4, v.link.tapGW6 = want.link.tapGW4, want.link.tapGW6
		case "memif":
			v.typ = vppmodel.Interface_MEMIF
			v.link.memifSocket = defaultMemifSocket
			if r := memifs[uint32(r.SwIfIndex)]; r != nil {
				v.link.memifMaster, v.link.memifID = r.Role == memif.MEMIF_ROLE_API_MASTER, r.ID
				v.link.memifSocket = cmp.Or(sockets[r.SocketID], defaultMemifSocket)
			}
			// VPP does not report the secret, and reports the running ring
			// and buffer sizes (negotiated with the peer; 1 and 0 without
			// one), not the configured ones: take them from the driver's
			// record.
			v.link.memifSecret = want.link.memifSecret
			v.link.memifRing, v.link.memifBuf = cmp.Or(want.link.memifRing, defaultMemifRing), cmp.Or(want.link.memifBuf, defaultMemifBuffer)
		case "VXLAN":
			v.typ = vppmodel.Interface_VXLAN_TUNNEL
			if t := tunnels[uint32(r.SwIfIndex)]; t != nil {
				v.link.vxSrc, v.link.vxDst = vppconv.AddrOf(t.SrcAddress), vppconv.AddrOf(t.DstAddress)
				v.link.vni, v.link.encapVrf = t.Vni, t.EncapVrfID
				switch t.DecapNextIndex {
				case decap[decapKey{v.link.vxSrc.Is6(), false}]:
				case decap[decapKey{v.link.vxSrc.Is6(), true}]:
					v.link.vxPayload6 = true
				default:
					v.link.vxBadDecap = true // not a routed tunnel of ours: re-created
				}
			} else {
				v.typ = vppmodel.Interface_TYPE_UNSPECIFIED
			}
		default:
			v.typ = vppmodel.Interface_TYPE_UNSPECIFIED // unknown kind: will be re-created
		}
		if want.hasMAC {
			v.hasMAC, v.mac = true, r.L2Address
		}
		o := &ownedIf{sw: uint32(r.SwIfIndex), v: v}
		owned = append(owned, o)
		swName[o.sw] = name
	}

	for _, o := range owned {
		if src, ok := unnumbered[o.sw]; ok {
			name, known := swName[src]
			if !known {
				name = fmt.Sprintf("#sw_if_index=%d", src) // not ours: never equal to a desired source
			}
			o.v.unnumbered = name
		}
	}

	// Static neighbors on owned interfaces.
	for _, m := range append(res[resNeigh4], res[resNeigh6]...) {
		n := m.(*ip_neighbor.IPNeighborDetails).Neighbor
		name, ok := swName[uint32(n.SwIfIndex)]
		if !ok || n.Flags&ip_neighbor.IP_API_NEIGHBOR_FLAG_STATIC == 0 {
			continue // foreign interface, or learnt (ARP / neighbor discovery)
		}
		ip := vppconv.AddrOf(n.IPAddress)
		out[vppmodel.IPNeighborKey(name, ip)] = found{value: newNeighbor(name, ip, n.MacAddress)}
	}

	// Their addresses and VRF bindings.
	var dumpReqs []api.Message
	var calls []call
	for _, o := range owned {
		sw := interface_types.InterfaceIndex(o.sw)
		dumpReqs = append(dumpReqs, &ip.IPAddressDump{SwIfIndex: sw}, &ip.IPAddressDump{SwIfIndex: sw, IsIPv6: true})
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
	addrs, err := d.cl.dumps(ctx, dumpReqs)
	if err != nil {
		return nil, err
	}
	if err := d.cl.pipeline(ctx, calls); err != nil {
		return nil, err
	}
	type conn struct {
		sw  uint32
		pfx netip.Prefix
	}
	connected := map[conn]bool{}
	for i, o := range owned {
		for _, m := range append(addrs[2*i], addrs[2*i+1]...) {
			p := vppconv.PrefixOf(addrDetailsPrefix(m.(*ip.IPAddressDetails)))
			o.v.addrs = append(o.v.addrs, p)
			connected[conn{o.sw, p.Masked()}] = true
		}
		out[vppmodel.InterfaceKey(o.v.name)] = found{value: o.v.finish(), swIfIndex: o.sw}
	}

	// Owned tables; which tables to read routes from.
	type tkey struct {
		v6 bool
		id uint32
	}
	exists := map[tkey]bool{}
	ownedTable := map[tkey]bool{}
	for _, m := range res[1] {
		t := m.(*ip.IPTableDetails).Table
		k := tkey{t.IsIP6, t.TableID}
		exists[k] = true
		if strings.HasPrefix(t.Name, prefix) && t.TableID != 0 {
			ownedTable[k] = true
			proto := vppmodel.VrfTable_IPV4
			if t.IsIP6 {
				proto = vppmodel.VrfTable_IPV6
			}
			out[vppmodel.VrfTableKey(proto, t.TableID)] = found{value: newVrf(t.TableID, t.IsIP6, strings.TrimPrefix(t.Name, prefix))}
		}
	}
	scan := map[tkey]bool{{false, 0}: true, {true, 0}: true}
	for k := range ownedTable {
		scan[k] = true
	}
	for _, it := range d.items {
		if it.kind != kindRoute {
			continue
		}
		for _, v := range []value{it.want, it.have} {
			if r, ok := v.(*routeVal); ok {
				scan[tkey{r.dst.Addr().Is6(), r.vrf}] = true
			}
		}
	}
	var tables []tkey
	var routeReqs []api.Message
	for k := range scan {
		if exists[k] {
			tables = append(tables, k)
			routeReqs = append(routeReqs, &ip.IPRouteDump{Table: ip.IPTable{TableID: k.id, IsIP6: k.v6}})
		}
	}
	routes, err := d.cl.dumps(ctx, routeReqs)
	if err != nil {
		return nil, err
	}
	for i, tk := range tables {
		for _, m := range routes[i] {
			r := m.(*ip.IPRouteDetails).Route
			v, hostEntry, ok := d.routeFromVPP(r, tk.id, swName, func(p netip.Prefix, sw uint32) bool { return connected[conn{sw, p}] })
			if !ok {
				continue
			}
			key := vppmodel.RouteKey(tk.id, v.dst)
			it := d.items[key]
			known := it != nil && (it.have != nil || it.want != nil)
			if !known && (hostEntry || !ownedTable[tk]) {
				continue // foreign, or an entry VPP made for a neighbor or a tracked address
			}
			out[key] = found{value: v.finish()}
		}
	}
	if d.natErr == nil {
		if err := d.readbackNat(ctx, out, swName); err != nil {
			return nil, err
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
func (d *Driver) routeFromVPP(r ip.IPRoute, table uint32, swName map[uint32]string, isConnected func(netip.Prefix, uint32) bool) (v *routeVal, hostEntry, ok bool) {
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
		if nh.IsUnspecified() && isConnected(p, fp.SwIfIndex) {
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
			name, ok := swName[fp.SwIfIndex]
			if !ok {
				name = fmt.Sprintf("#sw_if_index=%d", fp.SwIfIndex) // not ours: never equal to a desired path
			}
			pv.iface = name
		}
		v.paths = append(v.paths, pv)
	}
	return v, hostEntry, true
}

// netnsPath is the path VPP opens for a tap's host namespace (a name is
// looked up under /var/run/netns).
func netnsPath(ns string) string {
	if strings.HasPrefix(ns, "/") {
		return ns
	}
	return "/var/run/netns/" + ns
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

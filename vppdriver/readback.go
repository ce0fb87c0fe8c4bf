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
	"go.fd.io/govpp/binapi/memif"
	"go.fd.io/govpp/binapi/tapv2"
	"go.fd.io/govpp/binapi/vxlan"

	"github.com/vswitchkit/vswitchkit/vppdriver/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/model"
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
			d.signal(d.broken)
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
		// Until the first resync commit the desired state is not known:
		// what VPP holds and nobody asked for yet is kept (a driver that
		// restarts on a populated VPP must not tear it down before the
		// application said what it wants).
		if d.desiredKnown || it.desired() {
			d.markDirtyLocked(it)
		}
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
	reqs := []api.Message{
		&interfaces.SwInterfaceDump{SwIfIndex: interface_types.InterfaceIndex(noIndex)},
		&ip.IPTableDump{},
		&af_packet.AfPacketDump{},
		&tapv2.SwInterfaceTapV2Dump{SwIfIndex: interface_types.InterfaceIndex(noIndex)},
	}
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
		for _, m := range res[4] {
			r := m.(*vxlan.VxlanTunnelV2Details)
			tunnels[uint32(r.SwIfIndex)] = r
		}
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
		v := &ifaceVal{name: name, enabled: r.Flags&interface_types.IF_STATUS_API_FLAG_ADMIN_UP != 0}
		var want *ifaceVal
		if it := d.items[model.InterfaceKey(name)]; it != nil {
			want, _ = it.want.(*ifaceVal)
			if want == nil {
				want, _ = it.have.(*ifaceVal)
			}
		}
		if want == nil {
			want = &ifaceVal{}
		}
		switch r.InterfaceDevType {
		case "Loopback":
			v.typ = model.Interface_LOOPBACK
		case "af-packet":
			v.typ = model.Interface_AF_PACKET
			v.link.afpHost = afpHost[uint32(r.SwIfIndex)]
		case "virtio":
			v.typ = model.Interface_TAP
			v.link.tapRx, v.link.tapTx = 256, 256
			if t := taps[uint32(r.SwIfIndex)]; t != nil {
				v.link.tapRx, v.link.tapTx = uint32(cmp.Or(t.RxRingSz, 256)), uint32(cmp.Or(t.TxRingSz, 256))
				if want.link.tapHost != "" {
					v.link.tapHost = t.HostIfName
				}
			}
		case "memif":
			v.typ = model.Interface_MEMIF
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
			v.link.memifRing, v.link.memifBuf = cmp.Or(want.link.memifRing, 1024), cmp.Or(want.link.memifBuf, 2048)
		case "VXLAN":
			v.typ = model.Interface_VXLAN_TUNNEL
			if t := tunnels[uint32(r.SwIfIndex)]; t != nil {
				v.link.vxSrc, v.link.vxDst = vppconv.AddrOf(t.SrcAddress), vppconv.AddrOf(t.DstAddress)
				v.link.vni, v.link.encapVrf = t.Vni, t.EncapVrfID
			} else {
				v.typ = model.Interface_TYPE_UNSPECIFIED
			}
		default:
			v.typ = model.Interface_TYPE_UNSPECIFIED // unknown kind: will be re-created
		}
		if want.hasMAC {
			v.hasMAC, v.mac = true, r.L2Address
		}
		o := &ownedIf{sw: uint32(r.SwIfIndex), v: v}
		owned = append(owned, o)
		swName[o.sw] = name
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
		out[model.InterfaceKey(o.v.name)] = found{value: o.v.finish(), swIfIndex: o.sw}
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
			proto := model.VrfTable_IPV4
			if t.IsIP6 {
				proto = model.VrfTable_IPV6
			}
			out[model.VrfTableKey(proto, t.TableID)] = found{value: newVrf(t.TableID, t.IsIP6, strings.TrimPrefix(t.Name, prefix))}
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
			v, ok := d.routeFromVPP(r, tk.id, swName, func(p netip.Prefix, sw uint32) bool { return connected[conn{sw, p}] })
			if !ok {
				continue
			}
			key := model.RouteKey(tk.id, v.dst)
			it := d.items[key]
			if !ownedTable[tk] && (it == nil || (it.have == nil && it.want == nil)) {
				continue // foreign
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
// makes itself (special, connected, local, drop, next-hop resolution).
// The result is not finished (see routeVal.finish).
func (d *Driver) routeFromVPP(r ip.IPRoute, table uint32, swName map[uint32]string, isConnected func(netip.Prefix, uint32) bool) (*routeVal, bool) {
	p := vppconv.PrefixOf(r.Prefix)
	if !p.IsValid() || p.Masked() != p || len(r.Paths) == 0 {
		return nil, false
	}
	v6 := p.Addr().Is6()
	v := &routeVal{vrf: table, dst: p, paths: make([]pathVal, 0, len(r.Paths))}
	for _, fp := range r.Paths {
		if fp.Type != fib_types.FIB_API_PATH_TYPE_NORMAL {
			return nil, false
		}
		nh := vppconv.UnionAddr(fp.Nh.Address, v6)
		if fp.SwIfIndex == noIndex && nh.IsUnspecified() {
			return nil, false
		}
		if nh.IsUnspecified() && isConnected(p, fp.SwIfIndex) {
			return nil, false
		}
		if p.IsSingleIP() && nh == p.Addr() {
			return nil, false
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
	return v, true
}

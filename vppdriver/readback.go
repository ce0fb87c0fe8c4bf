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
	"go.fd.io/govpp/binapi/memif"
	"go.fd.io/govpp/binapi/tapv2"
	"go.fd.io/govpp/binapi/vxlan"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/vppdriver/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/model"
)

// resyncLocked reads the owned configuration back from VPP, replaces the
// driver's record of what is applied with it, and runs a pass.
func (d *Driver) resyncLocked(ctx context.Context) error {
	if d.cl == nil {
		d.publishLocked()
		return ErrNotConnected
	}
	if d.compatErr != nil {
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
	d.needResync = false
	for k, it := range d.items {
		if _, ok := found[k]; !ok {
			it.setApplied(nil)
			it.created, it.dirty, it.swIfIndex = false, false, 0
			if it.desired == nil {
				delete(d.items, k)
			}
		}
	}
	for k, f := range found {
		it := d.items[k]
		if it == nil {
			it = &item{key: k}
			d.items[k] = it
		}
		it.setApplied(f.value)
		it.created, it.dirty, it.swIfIndex = true, false, f.swIfIndex
	}
	return d.passLocked(ctx)
}

type found struct {
	value     proto.Message
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
		sw   uint32
		name string
		v    *model.Interface
	}
	var owned []*ownedIf
	swName := map[uint32]string{}
	for _, m := range res[0] {
		r := m.(*interfaces.SwInterfaceDetails)
		if !strings.HasPrefix(r.Tag, prefix) {
			continue
		}
		name := strings.TrimPrefix(r.Tag, prefix)
		v := &model.Interface{Name: name, Enabled: r.Flags&interface_types.IF_STATUS_API_FLAG_ADMIN_UP != 0}
		var want *model.Interface
		if it := d.items[model.InterfaceKey(name)]; it != nil {
			want, _ = it.desired.(*model.Interface)
			if want == nil {
				want, _ = it.applied.(*model.Interface)
			}
		}
		switch r.InterfaceDevType {
		case "Loopback":
			v.Type = model.Interface_LOOPBACK
		case "af-packet":
			v.Type = model.Interface_AF_PACKET
			v.AfPacket = &model.AfPacketLink{HostIfName: afpHost[uint32(r.SwIfIndex)]}
		case "virtio":
			v.Type = model.Interface_TAP
			v.Tap = &model.TapLink{}
			if t := taps[uint32(r.SwIfIndex)]; t != nil {
				v.Tap.RxRingSize, v.Tap.TxRingSize = uint32(t.RxRingSz), uint32(t.TxRingSz)
				if want.GetTap().GetHostIfName() != "" {
					v.Tap.HostIfName = t.HostIfName
				}
			}
		case "memif":
			v.Type = model.Interface_MEMIF
			if r := memifs[uint32(r.SwIfIndex)]; r != nil {
				v.Memif = &model.MemifLink{Master: r.Role == memif.MEMIF_ROLE_API_MASTER, Id: r.ID,
					SocketFilename: sockets[r.SocketID], RingSize: r.RingSize, BufferSize: uint32(r.BufferSize),
					Secret: want.GetMemif().GetSecret()} // VPP does not report the secret
			}
		case "VXLAN":
			v.Type = model.Interface_VXLAN_TUNNEL
			if t := tunnels[uint32(r.SwIfIndex)]; t != nil {
				v.Vxlan = &model.VxlanLink{SrcAddress: vppconv.AddrOf(t.SrcAddress).String(),
					DstAddress: vppconv.AddrOf(t.DstAddress).String(), Vni: t.Vni, EncapVrf: t.EncapVrfID}
			} else {
				v.Type = model.Interface_TYPE_UNSPECIFIED
			}
		default:
			v.Type = model.Interface_TYPE_UNSPECIFIED // unknown kind: will be re-created
		}
		if want.GetMacAddress() != "" {
			v.MacAddress = r.L2Address.String()
		}
		o := &ownedIf{sw: uint32(r.SwIfIndex), name: name, v: v}
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
					o.v.Vrf = r.(*interfaces.SwInterfaceGetTableReply).VrfID
				}
			}},
			call{req: &interfaces.SwInterfaceGetTable{SwIfIndex: sw, IsIPv6: true}, done: func(r api.Message, err error) {
				if err == nil {
					o.v.Ipv6Vrf = r.(*interfaces.SwInterfaceGetTableReply).VrfID
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
	var connected []conn
	for i, o := range owned {
		for _, m := range append(addrs[2*i], addrs[2*i+1]...) {
			p := vppconv.PrefixOf(addrDetailsPrefix(m.(*ip.IPAddressDetails)))
			o.v.IpAddresses = append(o.v.IpAddresses, p.String())
			connected = append(connected, conn{o.sw, p.Masked()})
		}
		out[model.InterfaceKey(o.name)] = found{value: normalize(o.v), swIfIndex: o.sw}
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
			out[model.VrfTableKey(proto, t.TableID)] = found{value: normalize(&model.VrfTable{
				Id: t.TableID, Protocol: proto, Label: strings.TrimPrefix(t.Name, prefix)})}
		}
	}
	scan := map[tkey]bool{{false, 0}: true, {true, 0}: true}
	for k := range ownedTable {
		scan[k] = true
	}
	for k, it := range d.items {
		if kindOf(k) != kindRoute {
			continue
		}
		for _, v := range []proto.Message{it.desired, it.applied} {
			if r, ok := v.(*model.Route); ok {
				scan[tkey{netip.MustParsePrefix(r.DstNetwork).Addr().Is6(), r.Vrf}] = true
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
			v, ok := d.routeFromVPP(r, tk.id, swName, func(p netip.Prefix, sw uint32) bool {
				for _, c := range connected {
					if c.pfx == p && c.sw == sw {
						return true
					}
				}
				return false
			})
			if !ok {
				continue
			}
			key := model.RouteKey(tk.id, netip.MustParsePrefix(v.DstNetwork))
			it := d.items[key]
			if !ownedTable[tk] && (it == nil || (it.applied == nil && it.desired == nil)) {
				continue // foreign
			}
			out[key] = found{value: normalize(v)}
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
func (d *Driver) routeFromVPP(r ip.IPRoute, table uint32, swName map[uint32]string, isConnected func(netip.Prefix, uint32) bool) (*model.Route, bool) {
	p := vppconv.PrefixOf(r.Prefix)
	if !p.IsValid() || p.Masked() != p || len(r.Paths) == 0 {
		return nil, false
	}
	v6 := p.Addr().Is6()
	v := &model.Route{Vrf: table, DstNetwork: p.String()}
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
		mp := &model.Path{Weight: uint32(fp.Weight)}
		if !nh.IsUnspecified() {
			mp.NextHop = nh.String()
		}
		if fp.SwIfIndex != noIndex {
			name, ok := swName[fp.SwIfIndex]
			if !ok {
				name = fmt.Sprintf("#sw_if_index=%d", fp.SwIfIndex) // not ours: never equal to a desired path
			}
			mp.OutgoingInterface = name
		}
		v.Paths = append(v.Paths, mp)
	}
	return v, true
}

package vppdriver

import (
	"cmp"
	"errors"
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
	"go.fd.io/govpp/binapi/memif"
	"go.fd.io/govpp/binapi/tapv2"
	"go.fd.io/govpp/binapi/vlib"
	"go.fd.io/govpp/binapi/vxlan"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/vppdriver/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/model"
)

// vxlanMessages are the messages of the optional VXLAN feature: without
// them only VXLAN_TUNNEL interfaces fail (with ErrIncompatible).
func vxlanMessages() []api.Message {
	return []api.Message{
		&vlib.AddNodeNext{}, &vlib.AddNodeNextReply{},
		&vxlan.VxlanAddDelTunnelV3{}, &vxlan.VxlanAddDelTunnelV3Reply{},
		&vxlan.VxlanTunnelV2Dump{}, &vxlan.VxlanTunnelV2Details{},
	}
}

// memifMessages are the messages of the optional memif feature.
func memifMessages() []api.Message {
	return []api.Message{
		&memif.MemifSocketFilenameAddDelV2{}, &memif.MemifSocketFilenameAddDelV2Reply{},
		&memif.MemifSocketFilenameDump{}, &memif.MemifSocketFilenameDetails{},
		&memif.MemifCreateV2{}, &memif.MemifCreateV2Reply{},
		&memif.MemifDelete{}, &memif.MemifDeleteReply{},
		&memif.MemifDump{}, &memif.MemifDetails{},
	}
}

// coreMessages are exactly the other binary-API messages the driver sends
// (and whose replies it reads); checked for compatibility on every connect.
func coreMessages() []api.Message {
	return []api.Message{
		&memclnt.ControlPing{}, &memclnt.ControlPingReply{},
		&interfaces.CreateLoopback{}, &interfaces.CreateLoopbackReply{},
		&interfaces.DeleteLoopback{}, &interfaces.DeleteLoopbackReply{},
		&interfaces.SwInterfaceSetFlags{}, &interfaces.SwInterfaceSetFlagsReply{},
		&interfaces.SwInterfaceAddDelAddress{}, &interfaces.SwInterfaceAddDelAddressReply{},
		&interfaces.SwInterfaceTagAddDel{}, &interfaces.SwInterfaceTagAddDelReply{},
		&interfaces.SwInterfaceSetTable{}, &interfaces.SwInterfaceSetTableReply{},
		&interfaces.SwInterfaceGetTable{}, &interfaces.SwInterfaceGetTableReply{},
		&interfaces.SwInterfaceDump{}, &interfaces.SwInterfaceDetails{},
		&ip.IPTableAddDel{}, &ip.IPTableAddDelReply{},
		&ip.IPTableDump{}, &ip.IPTableDetails{},
		&ip.IPRouteAddDel{}, &ip.IPRouteAddDelReply{},
		&ip.IPRouteDump{}, &ip.IPRouteDetails{},
		&ip.IPAddressDump{}, &ip.IPAddressDetails{},
		&af_packet.AfPacketCreateV3{}, &af_packet.AfPacketCreateV3Reply{},
		&af_packet.AfPacketDelete{}, &af_packet.AfPacketDeleteReply{},
		&af_packet.AfPacketDump{}, &af_packet.AfPacketDetails{},
		&tapv2.TapCreateV3{}, &tapv2.TapCreateV3Reply{},
		&tapv2.TapDeleteV2{}, &tapv2.TapDeleteV2Reply{},
		&tapv2.SwInterfaceTapV2Dump{}, &tapv2.SwInterfaceTapV2Details{},
	}
}

// Kinds in dependency order: a kind depends only on lower kinds.
type kind int

const (
	kindVrf kind = iota
	kindNatGlobal
	kindInterface
	kindRoute
	kindNat // NAT44 interfaces, pools and mappings
	numKinds
)

func kindOf(key string) kind {
	switch {
	case strings.HasPrefix(key, model.VrfTableKeyPrefix):
		return kindVrf
	case key == model.Nat44GlobalKey:
		return kindNatGlobal
	case strings.HasPrefix(key, model.InterfaceKeyPrefix):
		return kindInterface
	case isNatKey(key):
		return kindNat
	}
	return kindRoute
}

const noIndex = ^uint32(0)

// normalize returns a canonical copy of a validated value, so that
// proto.Equal tells whether VPP needs changing.
func normalize(v proto.Message) proto.Message {
	switch m := v.(type) {
	case *model.Interface:
		c := proto.Clone(m).(*model.Interface)
		for i, a := range c.IpAddresses {
			c.IpAddresses[i] = netip.MustParsePrefix(a).String()
		}
		slices.SortFunc(c.IpAddresses, func(a, b string) int {
			return netip.MustParsePrefix(a).Addr().Compare(netip.MustParsePrefix(b).Addr())
		})
		c.MacAddress = strings.ToLower(c.MacAddress)
		if c.Type != model.Interface_AF_PACKET {
			c.AfPacket = nil
		}
		if c.Type != model.Interface_VXLAN_TUNNEL {
			c.Vxlan = nil
		} else {
			c.Vxlan.SrcAddress = netip.MustParseAddr(c.Vxlan.SrcAddress).String()
			c.Vxlan.DstAddress = netip.MustParseAddr(c.Vxlan.DstAddress).String()
		}
		if c.Type != model.Interface_MEMIF {
			c.Memif = nil
		} else {
			if c.Memif == nil {
				c.Memif = &model.MemifLink{}
			}
			c.Memif.SocketFilename = cmp.Or(c.Memif.SocketFilename, defaultMemifSocket)
			c.Memif.RingSize = cmp.Or(c.Memif.RingSize, 1024)
			c.Memif.BufferSize = cmp.Or(c.Memif.BufferSize, 2048)
		}
		if c.Type != model.Interface_TAP {
			c.Tap = nil
		} else {
			if c.Tap == nil {
				c.Tap = &model.TapLink{}
			}
			if c.Tap.RxRingSize == 0 {
				c.Tap.RxRingSize = 256
			}
			if c.Tap.TxRingSize == 0 {
				c.Tap.TxRingSize = 256
			}
		}
		return c
	case *model.Route:
		if routeCanonical(m) {
			return m // values are immutable by convention: no copy needed
		}
		c := proto.Clone(m).(*model.Route)
		for _, p := range c.Paths {
			if p.Weight == 1 {
				p.Weight = 0 // canonical: 0 means 1
			}
			if p.NextHop != "" {
				p.NextHop = netip.MustParseAddr(p.NextHop).String()
			}
		}
		slices.SortFunc(c.Paths, pathLess)
		return c
	case *model.Nat44Global, *model.Nat44Interface, *model.Nat44AddressPool, *model.Nat44StaticMapping,
		*model.Nat44IdentityMapping, *model.Nat44LbStaticMapping:
		return normalizeNat(v)
	}
	return proto.Clone(v)
}

// dependencies returns the keys that must be configured before v.
func dependencies(v proto.Message) []string {
	var deps []string
	switch m := v.(type) {
	case *model.Nat44Global, *model.Nat44Interface, *model.Nat44AddressPool, *model.Nat44StaticMapping,
		*model.Nat44IdentityMapping, *model.Nat44LbStaticMapping:
		return natDependencies(v)
	case *model.Interface:
		if x := m.Vxlan; x != nil && x.EncapVrf != 0 {
			proto := model.VrfTable_IPV4
			if netip.MustParseAddr(x.SrcAddress).Is6() {
				proto = model.VrfTable_IPV6
			}
			deps = append(deps, model.VrfTableKey(proto, x.EncapVrf))
		}
		if m.Vrf != 0 {
			deps = append(deps, model.VrfTableKey(model.VrfTable_IPV4, m.Vrf))
		}
		if m.Ipv6Vrf != 0 {
			deps = append(deps, model.VrfTableKey(model.VrfTable_IPV6, m.Ipv6Vrf))
		}
	case *model.Route:
		if m.Vrf != 0 {
			proto := model.VrfTable_IPV4
			if netip.MustParsePrefix(m.DstNetwork).Addr().Is6() {
				proto = model.VrfTable_IPV6
			}
			deps = append(deps, model.VrfTableKey(proto, m.Vrf))
		}
		for _, p := range m.Paths {
			if p.OutgoingInterface != "" {
				k := model.InterfaceKey(p.OutgoingInterface)
				if !slices.Contains(deps, k) {
					deps = append(deps, k)
				}
			}
		}
	}
	return deps
}

// needsRecreate tells whether changing old into new needs the object to be
// deleted and created again (fields VPP sets only at creation).
func needsRecreate(old, new proto.Message) bool {
	if reflectType(old) != reflectType(new) {
		return true
	}
	if isNatModel(old) {
		return natNeedsRecreate(old, new)
	}
	o, ok1 := old.(*model.Interface)
	n, ok2 := new.(*model.Interface)
	if !ok1 || !ok2 {
		return false
	}
	return o.Type != n.Type || o.MacAddress != n.MacAddress ||
		!proto.Equal(o.AfPacket, n.AfPacket) || !proto.Equal(o.Tap, n.Tap) || !proto.Equal(o.Vxlan, n.Vxlan) ||
		!proto.Equal(o.Memif, n.Memif)
}

// op is the work on one item: stages run in order; the calls of one stage
// of all ops of a kind are pipelined together.
type op struct {
	it        *item
	stages    []func() []call
	err       error
	decapNext uint32 // VXLAN: next index of ip4-input/ip6-input
}

func (o *op) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// expect returns a reply handler that fails the op on an error, except for
// retvals listed as idempotent success.
func (o *op) expect(ok ...int32) func(api.Message, error) {
	return func(_ api.Message, err error) {
		var ve *VPPError
		if errors.As(err, &ve) && slices.Contains(ok, ve.Retval) {
			return
		}
		if err != nil {
			o.fail(err)
		}
	}
}

// VPP retvals that mean "already so" for an idempotent operation.
const (
	rvInvalidSwIfIndex = -2
	rvNoSuchFib        = -3
	rvNoSuchEntry      = -6
	rvSyscallError1    = -11
	rvAddrNotFound     = -60
	rvIfAlreadyExists  = -79
)

func macOf(s string) ethernet_types.MacAddress {
	if s == "" {
		return ethernet_types.MacAddress{}
	}
	m, _ := model.ParseMAC(s)
	return ethernet_types.MacAddress(m)
}

func addrMsg(sw uint32, p string, add bool) call {
	pfx := netip.MustParsePrefix(p)
	return call{req: &interfaces.SwInterfaceAddDelAddress{
		SwIfIndex: interface_types.InterfaceIndex(sw), IsAdd: add,
		Prefix: ip_types.AddressWithPrefix(vppconv.Prefix(pfx)),
	}}
}

func isV6(p string) bool { return netip.MustParsePrefix(p).Addr().Is6() }

func flagsMsg(sw uint32, up bool) *interfaces.SwInterfaceSetFlags {
	var f interface_types.IfStatusFlags
	if up {
		f = interface_types.IF_STATUS_API_FLAG_ADMIN_UP
	}
	return &interfaces.SwInterfaceSetFlags{SwIfIndex: interface_types.InterfaceIndex(sw), Flags: f}
}

// ifaceCreate builds the op that creates an interface from scratch.
func (d *Driver) ifaceCreate(it *item, m *model.Interface) *op {
	o := &op{it: it}
	if m.Type == model.Interface_VXLAN_TUNNEL {
		if d.vxlanErr != nil {
			o.err = d.vxlanErr
			return o
		}
		o.stages = append(o.stages, func() []call {
			return []call{{req: vxlanNodeNext(m.Vxlan), done: func(rep api.Message, err error) {
				if err != nil {
					o.fail(err)
					return
				}
				o.decapNext = rep.(*vlib.AddNodeNextReply).NextIndex
			}}}
		})
	}
	if m.Type == model.Interface_MEMIF {
		if d.memifErr != nil {
			o.err = d.memifErr
			return o
		}
		o.stages = append(o.stages, func() []call {
			path := m.Memif.SocketFilename
			if _, known := d.memifSockets[path]; known || d.memifPending[path] {
				return nil
			}
			d.memifPending[path] = true
			return []call{{req: &memif.MemifSocketFilenameAddDelV2{IsAdd: true, SocketID: noIndex, SocketFilename: path},
				done: func(rep api.Message, err error) {
					delete(d.memifPending, path)
					if err != nil {
						o.fail(err)
						return
					}
					d.memifSockets[path] = rep.(*memif.MemifSocketFilenameAddDelV2Reply).SocketID
				}}}
		})
	}
	o.stages = append(o.stages, func() []call {
		var req api.Message
		switch m.Type {
		case model.Interface_MEMIF:
			sock, ok := d.memifSockets[m.Memif.SocketFilename]
			if !ok {
				o.fail(fmt.Errorf("memif socket %q is not registered", m.Memif.SocketFilename))
				return nil
			}
			role := memif.MEMIF_ROLE_API_SLAVE
			if m.Memif.Master {
				role = memif.MEMIF_ROLE_API_MASTER
			}
			req = &memif.MemifCreateV2{Role: role, Mode: memif.MEMIF_MODE_API_ETHERNET, RxQueues: 1, TxQueues: 1,
				ID: m.Memif.Id, SocketID: sock, RingSize: m.Memif.RingSize, BufferSize: uint16(m.Memif.BufferSize),
				HwAddr: macOf(m.MacAddress), Secret: m.Memif.Secret}
		case model.Interface_VXLAN_TUNNEL:
			req = vxlanMsg(m.Vxlan, true, o.decapNext)
		case model.Interface_LOOPBACK:
			req = &interfaces.CreateLoopback{MacAddress: macOf(m.MacAddress)}
		case model.Interface_AF_PACKET:
			req = &af_packet.AfPacketCreateV3{
				Mode: af_packet.AF_PACKET_API_MODE_ETHERNET, HostIfName: m.AfPacket.HostIfName,
				HwAddr: macOf(m.MacAddress), UseRandomHwAddr: m.MacAddress == "",
				NumRxQueues: 1, NumTxQueues: 1,
			}
		case model.Interface_TAP:
			req = &tapv2.TapCreateV3{
				ID: noIndex, UseRandomMac: m.MacAddress == "", MacAddress: macOf(m.MacAddress),
				NumRxQueues: 1, NumTxQueues: 1,
				RxRingSz: uint16(m.Tap.RxRingSize), TxRingSz: uint16(m.Tap.TxRingSize),
				HostIfNameSet: m.Tap.HostIfName != "", HostIfName: m.Tap.HostIfName,
				Tag: d.cfg.TagPrefix + m.Name,
			}
		}
		return []call{{req: req, done: func(rep api.Message, err error) {
			var ve *VPPError
			if err != nil && !(errors.As(err, &ve) && ve.Retval == rvIfAlreadyExists) {
				o.fail(err)
				return
			}
			switch r := rep.(type) {
			case *interfaces.CreateLoopbackReply:
				it.swIfIndex = uint32(r.SwIfIndex)
			case *af_packet.AfPacketCreateV3Reply:
				it.swIfIndex = uint32(r.SwIfIndex)
			case *tapv2.TapCreateV3Reply:
				it.swIfIndex = uint32(r.SwIfIndex)
			case *vxlan.VxlanAddDelTunnelV3Reply:
				it.swIfIndex = uint32(r.SwIfIndex)
			case *memif.MemifCreateV2Reply:
				it.swIfIndex = uint32(r.SwIfIndex)
			}
			it.created = true
		}}}
	})
	o.stages = append(o.stages, func() []call {
		sw := interface_types.InterfaceIndex(it.swIfIndex)
		cs := []call{{req: &interfaces.SwInterfaceTagAddDel{IsAdd: true, SwIfIndex: sw, Tag: d.cfg.TagPrefix + m.Name}, done: o.expect()}}
		if m.Vrf != 0 {
			cs = append(cs, call{req: &interfaces.SwInterfaceSetTable{SwIfIndex: sw, VrfID: m.Vrf}, done: o.expect()})
		}
		if m.Ipv6Vrf != 0 {
			cs = append(cs, call{req: &interfaces.SwInterfaceSetTable{SwIfIndex: sw, IsIPv6: true, VrfID: m.Ipv6Vrf}, done: o.expect()})
		}
		return cs
	})
	o.stages = append(o.stages, func() []call {
		var cs []call
		for _, a := range m.IpAddresses {
			c := addrMsg(it.swIfIndex, a, true)
			c.done = o.expect()
			cs = append(cs, c)
		}
		if m.Enabled {
			cs = append(cs, call{req: flagsMsg(it.swIfIndex, true), done: o.expect()})
		}
		return cs
	})
	return o
}

// ifaceUpdate changes admin state, VRF binding and addresses in place.
func (d *Driver) ifaceUpdate(it *item, old, m *model.Interface) *op {
	o := &op{it: it}
	vrfChanged := [2]bool{old.Vrf != m.Vrf, old.Ipv6Vrf != m.Ipv6Vrf}
	fam := func(a string) int {
		if isV6(a) {
			return 1
		}
		return 0
	}
	o.stages = append(o.stages, func() []call {
		var cs []call
		for _, a := range old.IpAddresses {
			if vrfChanged[fam(a)] || !slices.Contains(m.IpAddresses, a) {
				c := addrMsg(it.swIfIndex, a, false)
				c.done = o.expect(rvAddrNotFound)
				cs = append(cs, c)
			}
		}
		return cs
	})
	o.stages = append(o.stages, func() []call {
		var cs []call
		sw := interface_types.InterfaceIndex(it.swIfIndex)
		if vrfChanged[0] {
			cs = append(cs, call{req: &interfaces.SwInterfaceSetTable{SwIfIndex: sw, VrfID: m.Vrf}, done: o.expect()})
		}
		if vrfChanged[1] {
			cs = append(cs, call{req: &interfaces.SwInterfaceSetTable{SwIfIndex: sw, IsIPv6: true, VrfID: m.Ipv6Vrf}, done: o.expect()})
		}
		return cs
	})
	o.stages = append(o.stages, func() []call {
		var cs []call
		for _, a := range m.IpAddresses {
			if vrfChanged[fam(a)] || !slices.Contains(old.IpAddresses, a) {
				c := addrMsg(it.swIfIndex, a, true)
				c.done = o.expect()
				cs = append(cs, c)
			}
		}
		if old.Enabled != m.Enabled {
			cs = append(cs, call{req: flagsMsg(it.swIfIndex, m.Enabled), done: o.expect()})
		}
		return cs
	})
	return o
}

func (d *Driver) ifaceDelete(it *item, old *model.Interface) *op {
	o := &op{it: it}
	o.stages = append(o.stages, func() []call {
		sw := interface_types.InterfaceIndex(it.swIfIndex)
		switch old.Type {
		case model.Interface_AF_PACKET:
			return []call{{req: &af_packet.AfPacketDelete{HostIfName: old.AfPacket.HostIfName}, done: o.expect(rvSyscallError1)}}
		case model.Interface_TAP:
			return []call{{req: &tapv2.TapDeleteV2{SwIfIndex: sw}, done: o.expect(rvInvalidSwIfIndex)}}
		case model.Interface_VXLAN_TUNNEL:
			return []call{{req: vxlanMsg(old.Vxlan, false, noIndex), done: o.expect(rvNoSuchEntry)}}
		case model.Interface_MEMIF:
			return []call{{req: &memif.MemifDelete{SwIfIndex: sw}, done: o.expect(rvInvalidSwIfIndex)}}
		default:
			return []call{{req: &interfaces.DeleteLoopback{SwIfIndex: sw}, done: o.expect(rvInvalidSwIfIndex)}}
		}
	})
	return o
}

func (d *Driver) vrfPut(it *item, m *model.VrfTable) *op {
	o := &op{it: it}
	o.stages = append(o.stages, func() []call {
		return []call{{req: &ip.IPTableAddDel{IsAdd: true, Table: ip.IPTable{
			TableID: m.Id, IsIP6: m.Protocol == model.VrfTable_IPV6, Name: d.cfg.TagPrefix + m.Label,
		}}, done: o.expect()}}
	})
	return o
}

func (d *Driver) vrfDelete(it *item, m *model.VrfTable) *op {
	o := &op{it: it}
	o.stages = append(o.stages, func() []call {
		return []call{{req: &ip.IPTableAddDel{IsAdd: false, Table: ip.IPTable{
			TableID: m.Id, IsIP6: m.Protocol == model.VrfTable_IPV6,
		}}, done: o.expect(rvNoSuchEntry)}}
	})
	return o
}

// routeMsg builds ip_route_add_del. An add replaces the whole path set
// (is_multipath=false), so create and update are the same message.
func (d *Driver) routeMsg(m *model.Route, add bool) (*ip.IPRouteAddDel, error) {
	dst := netip.MustParsePrefix(m.DstNetwork)
	v6 := dst.Addr().Is6()
	req := &ip.IPRouteAddDel{IsAdd: add, Route: ip.IPRoute{TableID: m.Vrf, Prefix: vppconv.Prefix(dst)}}
	if !add {
		return req, nil
	}
	for _, p := range m.Paths {
		fp := fib_types.FibPath{SwIfIndex: noIndex, Weight: uint8(p.Weight)}
		if fp.Weight == 0 {
			fp.Weight = 1
		}
		if v6 {
			fp.Proto = fib_types.FIB_API_PATH_NH_PROTO_IP6
		}
		if p.OutgoingInterface != "" {
			dep := d.items[model.InterfaceKey(p.OutgoingInterface)]
			if dep == nil || !dep.created {
				return nil, fmt.Errorf("interface %q is not configured", p.OutgoingInterface)
			}
			fp.SwIfIndex = dep.swIfIndex
		} else {
			fp.TableID = m.Vrf
		}
		if p.NextHop != "" {
			fp.Nh.Address = vppconv.Union(netip.MustParseAddr(p.NextHop))
		}
		req.Route.Paths = append(req.Route.Paths, fp)
	}
	req.Route.NPaths = uint8(len(req.Route.Paths))
	return req, nil
}

func (d *Driver) routePut(it *item, m *model.Route) *op {
	o := &op{it: it}
	o.stages = append(o.stages, func() []call {
		req, err := d.routeMsg(m, true)
		if err != nil {
			o.fail(err)
			return nil
		}
		return []call{{req: req, done: o.expect()}}
	})
	return o
}

func (d *Driver) routeDelete(it *item, m *model.Route) *op {
	o := &op{it: it}
	o.stages = append(o.stages, func() []call {
		req, _ := d.routeMsg(m, false)
		return []call{{req: req, done: o.expect(rvNoSuchFib)}}
	})
	return o
}

func addrDetailsPrefix(d *ip.IPAddressDetails) ip_types.Prefix { return ip_types.Prefix(d.Prefix) }

func pathLess(a, b *model.Path) int {
	return cmp.Or(cmp.Compare(a.OutgoingInterface, b.OutgoingInterface),
		cmp.Compare(a.NextHop, b.NextHop), cmp.Compare(a.Weight, b.Weight))
}

// routeCanonical tells whether normalize would leave m unchanged.
func routeCanonical(m *model.Route) bool {
	for i, p := range m.Paths {
		if p.Weight == 1 || (p.NextHop != "" && netip.MustParseAddr(p.NextHop).String() != p.NextHop) {
			return false
		}
		if i > 0 && pathLess(m.Paths[i-1], p) > 0 {
			return false
		}
	}
	return true
}

const vxlanPort = 4789

// vxlanNodeNext makes ip4-input (ip6-input) a next node of vxlan4-input
// (vxlan6-input): an L3 tunnel needs it as its decap-next, otherwise VPP
// drops the decapsulated packets.
func vxlanNodeNext(x *model.VxlanLink) *vlib.AddNodeNext {
	if netip.MustParseAddr(x.SrcAddress).Is6() {
		return &vlib.AddNodeNext{NodeName: "vxlan6-input", NextName: "ip6-input"}
	}
	return &vlib.AddNodeNext{NodeName: "vxlan4-input", NextName: "ip4-input"}
}

// vxlanMsg builds vxlan_add_del_tunnel_v3 with every default set
// explicitly (GoVPP does not apply binapi defaults).
func vxlanMsg(x *model.VxlanLink, add bool, decapNext uint32) *vxlan.VxlanAddDelTunnelV3 {
	return &vxlan.VxlanAddDelTunnelV3{
		IsAdd: add, Instance: noIndex,
		SrcAddress: vppconv.Address(netip.MustParseAddr(x.SrcAddress)),
		DstAddress: vppconv.Address(netip.MustParseAddr(x.DstAddress)),
		SrcPort:    vxlanPort, DstPort: vxlanPort, McastSwIfIndex: interface_types.InterfaceIndex(noIndex),
		EncapVrfID: x.EncapVrf, DecapNextIndex: decapNext, Vni: x.Vni, IsL3: true,
	}
}

func reflectType(m proto.Message) string { return string(m.ProtoReflect().Descriptor().FullName()) }

func isNatModel(m proto.Message) bool {
	switch m.(type) {
	case *model.Nat44Global, *model.Nat44Interface, *model.Nat44AddressPool, *model.Nat44StaticMapping,
		*model.Nat44IdentityMapping, *model.Nat44LbStaticMapping:
		return true
	}
	return false
}

// defaultMemifSocket is VPP's socket 0.
const defaultMemifSocket = "/run/vpp/memif.sock"

package vppdriver

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/af_packet"
	"go.fd.io/govpp/binapi/fib_types"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip"
	"go.fd.io/govpp/binapi/ip_neighbor"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/binapi/memclnt"
	"go.fd.io/govpp/binapi/memif"
	"go.fd.io/govpp/binapi/tapv2"
	"go.fd.io/govpp/binapi/vlib"
	"go.fd.io/govpp/binapi/vxlan"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// vxlanMessages are the messages of the optional VXLAN feature: without
// them only VXLAN_TUNNEL interfaces fail (with ErrIncompatible).
func vxlanMessages() []api.Message {
	return []api.Message{
		&vlib.AddNodeNext{}, &vlib.AddNodeNextReply{},
		&vlib.GetNextIndex{}, &vlib.GetNextIndexReply{},
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
		&interfaces.SwInterfaceSetUnnumbered{}, &interfaces.SwInterfaceSetUnnumberedReply{},
		&ip.IPUnnumberedDump{}, &ip.IPUnnumberedDetails{},
		&ip_neighbor.IPNeighborAddDel{}, &ip_neighbor.IPNeighborAddDelReply{},
		&ip_neighbor.IPNeighborDump{}, &ip_neighbor.IPNeighborDetails{},
		&af_packet.AfPacketCreateV3{}, &af_packet.AfPacketCreateV3Reply{},
		&af_packet.AfPacketDelete{}, &af_packet.AfPacketDeleteReply{},
		&af_packet.AfPacketDump{}, &af_packet.AfPacketDetails{},
		&tapv2.TapCreateV3{}, &tapv2.TapCreateV3Reply{},
		&tapv2.TapDeleteV2{}, &tapv2.TapDeleteV2Reply{},
		&tapv2.SwInterfaceTapV2Dump{}, &tapv2.SwInterfaceTapV2Details{},
	}
}

const noIndex = ^uint32(0)

// op is the work on one item: stages run in order; the calls of one stage
// of all ops of a kind are pipelined together.
type op struct {
	it        *item
	stages    []func() []call
	err       error
	decapNext uint32 // VXLAN: next index of ip4-input/ip6-input
	// lookup names the VPP interface an EXISTING interface adopts: runOps
	// resolves it (found, lookupSw) before the first stage.
	lookup   string
	found    bool
	lookupSw uint32
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

func addrMsg(sw uint32, p netip.Prefix, add bool) call {
	return call{req: &interfaces.SwInterfaceAddDelAddress{
		SwIfIndex: interface_types.InterfaceIndex(sw), IsAdd: add,
		Prefix: ip_types.AddressWithPrefix(vppconv.Prefix(p)),
	}}
}

func flagsMsg(sw uint32, up bool) *interfaces.SwInterfaceSetFlags {
	var f interface_types.IfStatusFlags
	if up {
		f = interface_types.IF_STATUS_API_FLAG_ADMIN_UP
	}
	return &interfaces.SwInterfaceSetFlags{SwIfIndex: interface_types.InterfaceIndex(sw), Flags: f}
}

// ifaceCreate builds the op that creates an interface from scratch.
func (d *Driver) ifaceCreate(it *item, m *ifaceVal) *op {
	o := &op{it: it}
	l := &m.link
	if m.typ == vppmodel.Interface_VXLAN_TUNNEL {
		if d.vxlanErr != nil {
			o.err = d.vxlanErr
			return o
		}
		o.stages = append(o.stages, func() []call {
			return []call{{req: vxlanNodeNext(m.vxlanV6(), m.link.vxPayload6), done: func(rep api.Message, err error) {
				if err != nil {
					o.fail(err)
					return
				}
				o.decapNext = rep.(*vlib.AddNodeNextReply).NextIndex
			}}}
		})
	}
	if m.typ == vppmodel.Interface_MEMIF {
		if d.memifErr != nil {
			o.err = d.memifErr
			return o
		}
		o.stages = append(o.stages, func() []call {
			path := l.memifSocket
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
	if m.typ == vppmodel.Interface_EXISTING {
		o.lookup = l.existing
	}
	o.stages = append(o.stages, func() []call {
		if m.typ == vppmodel.Interface_EXISTING {
			// Adopted, not created: runOps looked it up by name.
			if !o.found {
				o.fail(fmt.Errorf("%w: VPP has no interface named %q", ErrNoSuchInterface, l.existing))
				return nil
			}
			it.index = o.lookupSw
			return nil
		}
		t := ifaceTypes[m.typ]
		if t == nil || t.create == nil {
			o.fail(fmt.Errorf("unsupported interface type %v", m.typ))
			return nil
		}
		req, err := t.create(d, m, o.decapNext)
		if err != nil {
			o.fail(err)
			return nil
		}
		return []call{{req: req, done: func(rep api.Message, err error) {
			var ve *VPPError
			if err != nil && !(errors.As(err, &ve) && ve.Retval == rvIfAlreadyExists) {
				o.fail(err)
				return
			}
			switch r := rep.(type) {
			case *interfaces.CreateLoopbackReply:
				it.index = uint32(r.SwIfIndex)
			case *af_packet.AfPacketCreateV3Reply:
				it.index = uint32(r.SwIfIndex)
			case *tapv2.TapCreateV3Reply:
				it.index = uint32(r.SwIfIndex)
			case *vxlan.VxlanAddDelTunnelV3Reply:
				it.index = uint32(r.SwIfIndex)
			case *memif.MemifCreateV2Reply:
				it.index = uint32(r.SwIfIndex)
			}
		}}}
	})
	o.stages = append(o.stages, func() []call {
		sw := interface_types.InterfaceIndex(it.index)
		cs := []call{{req: &interfaces.SwInterfaceTagAddDel{IsAdd: true, SwIfIndex: sw, Tag: d.tag(m)}, done: o.expect()}}
		if m.vrf != 0 {
			cs = append(cs, call{req: &interfaces.SwInterfaceSetTable{SwIfIndex: sw, VrfID: m.vrf}, done: o.expect()})
		}
		if m.vrf6 != 0 {
			cs = append(cs, call{req: &interfaces.SwInterfaceSetTable{SwIfIndex: sw, IsIPv6: true, VrfID: m.vrf6}, done: o.expect()})
		}
		return cs
	})
	o.stages = append(o.stages, func() []call {
		var cs []call
		for _, a := range m.addrs {
			c := addrMsg(it.index, a, true)
			c.done = o.expect()
			cs = append(cs, c)
		}
		if c, ok := d.unnumberedCall(o, it, m); ok {
			cs = append(cs, c)
		}
		if m.enabled {
			cs = append(cs, call{req: flagsMsg(it.index, true), done: o.expect()})
		}
		return cs
	})
	return o
}

// tag returns the VPP interface tag of m: TagPrefix + name, and for an
// adopted (EXISTING) interface TagPrefix + "=" + name, so that a readback
// knows not to delete it.
func (d *Driver) tag(m *ifaceVal) string {
	if m.typ == vppmodel.Interface_EXISTING {
		return d.cfg.TagPrefix + adoptedMark + m.name
	}
	return d.cfg.TagPrefix + m.name
}

// adoptedMark follows TagPrefix in the tag of an adopted interface
// (interface names cannot contain it).
const adoptedMark = "="

// unnumberedCall returns the call that makes it borrow the addresses of
// m.unnumbered (false if m has none).
func (d *Driver) unnumberedCall(o *op, it *item, m *ifaceVal) (call, bool) {
	if m.unnumbered == "" {
		return call{}, false
	}
	src := d.items[m.unnumKey]
	if src == nil || !src.created() {
		o.fail(fmt.Errorf("interface %q is not configured", m.unnumbered))
		return call{}, false
	}
	return call{req: &interfaces.SwInterfaceSetUnnumbered{SwIfIndex: interface_types.InterfaceIndex(src.index),
		UnnumberedSwIfIndex: interface_types.InterfaceIndex(it.index), IsAdd: true}, done: o.expect()}, true
}

// ifaceUpdate changes admin state, VRF binding and addresses in place.
func (d *Driver) ifaceUpdate(it *item, old, m *ifaceVal) *op {
	o := &op{it: it}
	vrfChanged := func(a netip.Prefix) bool {
		if a.Addr().Is6() {
			return old.vrf6 != m.vrf6
		}
		return old.vrf != m.vrf
	}
	o.stages = append(o.stages, func() []call {
		var cs []call
		for _, a := range old.addrs {
			if vrfChanged(a) || !slices.Contains(m.addrs, a) {
				c := addrMsg(it.index, a, false)
				c.done = o.expect(rvAddrNotFound)
				cs = append(cs, c)
			}
		}
		return cs
	})
	o.stages = append(o.stages, func() []call {
		var cs []call
		sw := interface_types.InterfaceIndex(it.index)
		if old.vrf != m.vrf {
			cs = append(cs, call{req: &interfaces.SwInterfaceSetTable{SwIfIndex: sw, VrfID: m.vrf}, done: o.expect()})
		}
		if old.vrf6 != m.vrf6 {
			cs = append(cs, call{req: &interfaces.SwInterfaceSetTable{SwIfIndex: sw, IsIPv6: true, VrfID: m.vrf6}, done: o.expect()})
		}
		return cs
	})
	o.stages = append(o.stages, func() []call {
		var cs []call
		for _, a := range m.addrs {
			if vrfChanged(a) || !slices.Contains(old.addrs, a) {
				c := addrMsg(it.index, a, true)
				c.done = o.expect()
				cs = append(cs, c)
			}
		}
		if old.unnumbered != m.unnumbered {
			if m.unnumbered == "" {
				cs = append(cs, call{req: &interfaces.SwInterfaceSetUnnumbered{
					UnnumberedSwIfIndex: interface_types.InterfaceIndex(it.index)}, done: o.expect()})
			} else if c, ok := d.unnumberedCall(o, it, m); ok {
				cs = append(cs, c) // an add replaces the source
			}
		}
		if old.enabled != m.enabled {
			cs = append(cs, call{req: flagsMsg(it.index, m.enabled), done: o.expect()})
		}
		return cs
	})
	return o
}

func (d *Driver) ifaceDelete(it *item, old *ifaceVal) *op {
	o := &op{it: it}
	if old.typ == vppmodel.Interface_EXISTING {
		return d.ifaceRelease(o, it, old)
	}
	o.stages = append(o.stages, func() []call {
		t := ifaceTypes[old.typ]
		if t == nil || t.delete == nil {
			t = ifaceTypes[vppmodel.Interface_LOOPBACK] // an owned interface of a type the driver does not create
		}
		req, gone := t.delete(it.index, &old.link)
		return []call{{req: req, done: o.expect(gone...)}}
	})
	return o
}

// ifaceRelease takes back what the driver configured on an adopted
// interface, which it never deletes: addresses, unnumbered and VRF
// bindings go, it is set admin down and its tag removed.
func (d *Driver) ifaceRelease(o *op, it *item, old *ifaceVal) *op {
	sw := func() interface_types.InterfaceIndex { return interface_types.InterfaceIndex(it.index) }
	gone := []int32{rvInvalidSwIfIndex} // the interface went away: nothing to release
	o.stages = append(o.stages, func() []call {
		var cs []call
		for _, a := range old.addrs {
			c := addrMsg(it.index, a, false)
			c.done = o.expect(rvAddrNotFound, rvInvalidSwIfIndex)
			cs = append(cs, c)
		}
		if old.unnumbered != "" {
			cs = append(cs, call{req: &interfaces.SwInterfaceSetUnnumbered{UnnumberedSwIfIndex: sw()}, done: o.expect(gone...)})
		}
		return cs
	})
	o.stages = append(o.stages, func() []call {
		var cs []call
		if old.vrf != 0 {
			cs = append(cs, call{req: &interfaces.SwInterfaceSetTable{SwIfIndex: sw()}, done: o.expect(gone...)})
		}
		if old.vrf6 != 0 {
			cs = append(cs, call{req: &interfaces.SwInterfaceSetTable{SwIfIndex: sw(), IsIPv6: true}, done: o.expect(gone...)})
		}
		return cs
	})
	o.stages = append(o.stages, func() []call {
		return []call{
			{req: flagsMsg(it.index, false), done: o.expect(gone...)},
			{req: &interfaces.SwInterfaceTagAddDel{SwIfIndex: sw()}, done: o.expect(gone...)},
		}
	})
	return o
}

func neighborMsg(sw uint32, m *neighborVal, add bool) *ip_neighbor.IPNeighborAddDel {
	return &ip_neighbor.IPNeighborAddDel{IsAdd: add, Neighbor: ip_neighbor.IPNeighbor{
		SwIfIndex: interface_types.InterfaceIndex(sw), Flags: ip_neighbor.IP_API_NEIGHBOR_FLAG_STATIC,
		MacAddress: m.mac, IPAddress: vppconv.Address(m.ip)}}
}

// neighborPut adds (or, for a new MAC, replaces) a static neighbor.
func (d *Driver) neighborPut(it *item, m *neighborVal) *op {
	o := &op{it: it}
	o.stages = append(o.stages, func() []call {
		dep := d.items[m.ifKey()]
		if dep == nil || !dep.created() {
			o.fail(fmt.Errorf("interface %q is not configured", m.iface))
			return nil
		}
		return []call{{req: neighborMsg(dep.index, m, true), done: o.expect()}}
	})
	return o
}

func (d *Driver) neighborDelete(it *item, m *neighborVal) *op {
	o := &op{it: it}
	o.stages = append(o.stages, func() []call {
		dep := d.items[m.ifKey()]
		if dep == nil || !dep.created() {
			return nil // the interface is gone, and its neighbors with it
		}
		return []call{{req: neighborMsg(dep.index, m, false), done: o.expect(rvNoSuchEntry, rvInvalidSwIfIndex)}}
	})
	return o
}

func (d *Driver) vrfPut(it *item, m *vrfVal) *op {
	o := &op{it: it}
	o.stages = append(o.stages, func() []call {
		return []call{{req: &ip.IPTableAddDel{IsAdd: true, Table: ip.IPTable{
			TableID: m.id, IsIP6: m.v6, Name: d.cfg.TagPrefix + m.label,
		}}, done: o.expect()}}
	})
	return o
}

func (d *Driver) vrfDelete(it *item, m *vrfVal) *op {
	o := &op{it: it}
	o.stages = append(o.stages, func() []call {
		return []call{{req: &ip.IPTableAddDel{IsAdd: false, Table: ip.IPTable{TableID: m.id, IsIP6: m.v6}}, done: o.expect(rvNoSuchEntry)}}
	})
	return o
}

// routeMsg builds ip_route_add_del. An add replaces the whole path set
// (is_multipath=false), so create and update are the same message.
func (d *Driver) routeMsg(m *routeVal, add bool) (*ip.IPRouteAddDel, error) {
	v6 := m.dst.Addr().Is6()
	req := &ip.IPRouteAddDel{IsAdd: add, Route: ip.IPRoute{TableID: m.vrf, Prefix: vppconv.Prefix(m.dst)}}
	if !add {
		return req, nil
	}
	req.Route.Paths = make([]fib_types.FibPath, 0, len(m.paths))
	for _, p := range m.paths {
		fp := fib_types.FibPath{SwIfIndex: noIndex, Weight: p.weight}
		if v6 {
			fp.Proto = fib_types.FIB_API_PATH_NH_PROTO_IP6
		}
		if p.iface != "" {
			dep := d.items[p.ifKey]
			if dep == nil || !dep.created() {
				return nil, fmt.Errorf("interface %q is not configured", p.iface)
			}
			fp.SwIfIndex = dep.index
		} else {
			fp.TableID = m.vrf
		}
		if p.nh.IsValid() {
			fp.Nh.Address = vppconv.Union(p.nh)
		}
		req.Route.Paths = append(req.Route.Paths, fp)
	}
	req.Route.NPaths = uint8(len(req.Route.Paths))
	return req, nil
}

func (d *Driver) routePut(it *item, m *routeVal) *op {
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

func (d *Driver) routeDelete(it *item, m *routeVal) *op {
	o := &op{it: it}
	o.stages = append(o.stages, func() []call {
		req, _ := d.routeMsg(m, false)
		return []call{{req: req, done: o.expect(rvNoSuchFib)}}
	})
	return o
}

const vxlanPort = 4789

// vxlanNodeNext makes ip4-input (payload6: ip6-input) a next node of
// vxlan4-input (v6: vxlan6-input): an L3 tunnel needs it as its
// decap-next, otherwise VPP drops the decapsulated packets.
func vxlanNodeNext(v6, payload6 bool) *vlib.AddNodeNext {
	node, next := vxlanNodes(v6, payload6)
	return &vlib.AddNodeNext{NodeName: node, NextName: next}
}

// vxlanNodes names the decap node of a tunnel with v6 endpoints and the
// input node of its payload.
func vxlanNodes(v6, payload6 bool) (node, next string) {
	node, next = "vxlan4-input", "ip4-input"
	if v6 {
		node = "vxlan6-input"
	}
	if payload6 {
		next = "ip6-input"
	}
	return node, next
}

// defaultMemifSocket is VPP's socket 0.
const defaultMemifSocket = "/run/vpp/memif.sock"

// The sizes a tap or memif interface gets when its value leaves them 0
// (VPP's defaults), in parsing and in readback alike.
const (
	defaultTapRing     = 256  // rx and tx ring
	defaultMemifRing   = 1024 // ring size
	defaultMemifBuffer = 2048 // buffer size
)

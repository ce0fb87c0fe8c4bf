package vppdriver

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/nat44_ed"
	"go.fd.io/govpp/binapi/nat_types"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/vppdriver/model"
)

// natMessages are the messages of the optional NAT44-ED feature: without
// them only NAT44 keys fail (with ErrIncompatible).
func natMessages() []api.Message {
	return []api.Message{
		&nat44_ed.Nat44EdPluginEnableDisable{}, &nat44_ed.Nat44EdPluginEnableDisableReply{},
		&nat44_ed.Nat44ShowRunningConfig{}, &nat44_ed.Nat44ShowRunningConfigReply{},
		&nat44_ed.Nat44InterfaceAddDelFeature{}, &nat44_ed.Nat44InterfaceAddDelFeatureReply{},
		&nat44_ed.Nat44InterfaceDump{}, &nat44_ed.Nat44InterfaceDetails{},
		&nat44_ed.Nat44AddDelAddressRange{}, &nat44_ed.Nat44AddDelAddressRangeReply{},
		&nat44_ed.Nat44AddressDump{}, &nat44_ed.Nat44AddressDetails{},
		&nat44_ed.Nat44AddDelStaticMappingV2{}, &nat44_ed.Nat44AddDelStaticMappingV2Reply{},
		&nat44_ed.Nat44StaticMappingDump{}, &nat44_ed.Nat44StaticMappingDetails{},
		&nat44_ed.Nat44AddDelIdentityMapping{}, &nat44_ed.Nat44AddDelIdentityMappingReply{},
		&nat44_ed.Nat44IdentityMappingDump{}, &nat44_ed.Nat44IdentityMappingDetails{},
		&nat44_ed.Nat44AddDelLbStaticMapping{}, &nat44_ed.Nat44AddDelLbStaticMappingReply{},
		&nat44_ed.Nat44LbStaticMappingAddDelLocal{}, &nat44_ed.Nat44LbStaticMappingAddDelLocalReply{},
		&nat44_ed.Nat44LbStaticMappingDump{}, &nat44_ed.Nat44LbStaticMappingDetails{},
	}
}

// VPP retvals of NAT44-ED meaning "already so".
const (
	rvNatDisabled      = -169 // disable while disabled
	rvNatEnabled       = -170 // enable while enabled
	natDefaultSessions = 64512
)

func isNatKey(key string) bool { return strings.HasPrefix(key, model.Nat44KeyPrefix) }

func ip4(s string) [4]byte { return netip.MustParseAddr(s).As4() }

func natFlags(out2in, twice, selfTwice bool) nat_types.NatConfigFlags {
	var f nat_types.NatConfigFlags
	if out2in {
		f |= nat_types.NAT_IS_OUT2IN_ONLY
	}
	if twice {
		f |= nat_types.NAT_IS_TWICE_NAT
	}
	if selfTwice {
		f |= nat_types.NAT_IS_SELF_TWICE_NAT
	}
	return f
}

func normalizeNat(v proto.Message) proto.Message {
	c := proto.Clone(v)
	switch m := c.(type) {
	case *model.Nat44Global:
		if m.Sessions == 0 {
			m.Sessions = natDefaultSessions
		}
	case *model.Nat44AddressPool:
		if m.LastIp == "" {
			m.LastIp = m.FirstIp
		}
		m.FirstIp = netip.MustParseAddr(m.FirstIp).String()
		m.LastIp = netip.MustParseAddr(m.LastIp).String()
	case *model.Nat44StaticMapping:
		m.LocalIp = netip.MustParseAddr(m.LocalIp).String()
		m.ExternalIp = netip.MustParseAddr(m.ExternalIp).String()
	case *model.Nat44IdentityMapping:
		if m.Ip != "" {
			m.Ip = netip.MustParseAddr(m.Ip).String()
		}
	case *model.Nat44LbStaticMapping:
		m.ExternalIp = netip.MustParseAddr(m.ExternalIp).String()
		for _, b := range m.Backends {
			b.Ip = netip.MustParseAddr(b.Ip).String()
		}
		slices.SortFunc(m.Backends, func(a, b *model.Nat44Backend) int {
			return cmp.Or(netip.MustParseAddr(a.Ip).Compare(netip.MustParseAddr(b.Ip)), cmp.Compare(a.Port, b.Port))
		})
	}
	return c
}

func natDependencies(v proto.Message) []string {
	deps := []string{model.Nat44GlobalKey}
	switch m := v.(type) {
	case *model.Nat44Global:
		return nil
	case *model.Nat44Interface:
		deps = append(deps, model.InterfaceKey(m.Interface))
	case *model.Nat44IdentityMapping:
		if m.Interface != "" {
			deps = append(deps, model.InterfaceKey(m.Interface))
		}
	}
	return deps
}

// natNeedsRecreate: NAT objects other than interface features and LB
// backends cannot be changed in place. A change of Nat44Global means
// disable + enable, which wipes all NAT configuration (its dependents are
// re-applied).
func natNeedsRecreate(old, new proto.Message) bool {
	switch o := old.(type) {
	case *model.Nat44Interface:
		return false
	case *model.Nat44LbStaticMapping:
		n := new.(*model.Nat44LbStaticMapping)
		oc, nc := proto.Clone(o).(*model.Nat44LbStaticMapping), proto.Clone(n).(*model.Nat44LbStaticMapping)
		oc.Backends, nc.Backends = nil, nil
		return !proto.Equal(oc, nc)
	}
	return !proto.Equal(old, new)
}

func (d *Driver) natPut(it *item) *op {
	o := &op{it: it}
	if d.natErr != nil {
		o.err = d.natErr
		return o
	}
	tag := d.cfg.TagPrefix
	switch m := it.desired.(type) {
	case *model.Nat44Global:
		o.stages = append(o.stages, func() []call {
			return []call{{req: &nat44_ed.Nat44EdPluginEnableDisable{Enable: true, Sessions: m.Sessions}, done: o.expect(rvNatEnabled)}}
		})
	case *model.Nat44Interface:
		old, _ := it.applied.(*model.Nat44Interface)
		o.stages = append(o.stages, func() []call {
			sw := interface_types.InterfaceIndex(d.items[model.InterfaceKey(m.Interface)].swIfIndex)
			var cs []call
			if m.Inside && !old.GetInside() {
				cs = append(cs, call{req: &nat44_ed.Nat44InterfaceAddDelFeature{IsAdd: true, Flags: nat_types.NAT_IS_INSIDE, SwIfIndex: sw}, done: o.expect()})
			}
			if m.Outside && !old.GetOutside() {
				cs = append(cs, call{req: &nat44_ed.Nat44InterfaceAddDelFeature{IsAdd: true, Flags: nat_types.NAT_IS_OUTSIDE, SwIfIndex: sw}, done: o.expect()})
			}
			return cs
		})
		// Removing a feature the interface keeps the other one of: VPP
		// deletes an interface entirely when asked to remove a feature it
		// lacks, so only features that are set are removed.
		o.stages = append(o.stages, func() []call {
			sw := interface_types.InterfaceIndex(d.items[model.InterfaceKey(m.Interface)].swIfIndex)
			var cs []call
			if old.GetInside() && !m.Inside {
				cs = append(cs, call{req: &nat44_ed.Nat44InterfaceAddDelFeature{Flags: nat_types.NAT_IS_INSIDE, SwIfIndex: sw}, done: o.expect(rvNoSuchEntry)})
			}
			if old.GetOutside() && !m.Outside {
				cs = append(cs, call{req: &nat44_ed.Nat44InterfaceAddDelFeature{Flags: nat_types.NAT_IS_OUTSIDE, SwIfIndex: sw}, done: o.expect(rvNoSuchEntry)})
			}
			return cs
		})
	case *model.Nat44AddressPool:
		o.stages = append(o.stages, func() []call { return []call{{req: poolMsg(m, true), done: o.expect()}} })
	case *model.Nat44StaticMapping:
		o.stages = append(o.stages, func() []call { return []call{{req: staticMsg(m, true, tag), done: o.expect()}} })
	case *model.Nat44IdentityMapping:
		o.stages = append(o.stages, func() []call { return []call{{req: d.identityMsg(m, true, tag), done: o.expect()}} })
	case *model.Nat44LbStaticMapping:
		old, _ := it.applied.(*model.Nat44LbStaticMapping)
		if old == nil {
			o.stages = append(o.stages, func() []call { return []call{{req: lbMsg(m, true, tag), done: o.expect()}} })
			break
		}
		// Backends only: add the new ones, then remove the old ones, then
		// add back the changed ones (VPP needs >= 2 backends throughout).
		key := func(b *model.Nat44Backend) netip.AddrPort {
			return netip.AddrPortFrom(netip.MustParseAddr(b.Ip), uint16(b.Port))
		}
		oldBy := map[netip.AddrPort]*model.Nat44Backend{}
		for _, b := range old.Backends {
			oldBy[key(b)] = b
		}
		newBy := map[netip.AddrPort]*model.Nat44Backend{}
		for _, b := range m.Backends {
			newBy[key(b)] = b
		}
		local := func(b *model.Nat44Backend, add bool) call {
			c := call{req: &nat44_ed.Nat44LbStaticMappingAddDelLocal{IsAdd: add, ExternalAddr: ip4(m.ExternalIp),
				ExternalPort: uint16(m.ExternalPort), Protocol: uint8(m.Protocol), Local: lbLocal(b)}}
			if add {
				c.done = o.expect()
			} else {
				c.done = o.expect(rvNoSuchEntry)
			}
			return c
		}
		o.stages = append(o.stages, func() []call {
			var cs []call
			for _, b := range m.Backends {
				if oldBy[key(b)] == nil {
					cs = append(cs, local(b, true))
				}
			}
			return cs
		}, func() []call {
			var cs []call
			for _, b := range old.Backends {
				if n := newBy[key(b)]; n == nil || !proto.Equal(n, b) {
					cs = append(cs, local(b, false))
				}
			}
			return cs
		}, func() []call {
			var cs []call
			for _, b := range m.Backends {
				if ob := oldBy[key(b)]; ob != nil && !proto.Equal(ob, b) {
					cs = append(cs, local(b, true))
				}
			}
			return cs
		})
	}
	return o
}

func (d *Driver) natDelete(it *item) *op {
	o := &op{it: it}
	if d.natErr != nil {
		o.err = d.natErr
		return o
	}
	tag := d.cfg.TagPrefix
	switch m := it.applied.(type) {
	case *model.Nat44Global:
		o.stages = append(o.stages, func() []call {
			return []call{{req: &nat44_ed.Nat44EdPluginEnableDisable{}, done: o.expect(rvNatDisabled)}}
		})
	case *model.Nat44Interface:
		sw := func() interface_types.InterfaceIndex {
			return interface_types.InterfaceIndex(d.items[model.InterfaceKey(m.Interface)].swIfIndex)
		}
		if m.Inside {
			o.stages = append(o.stages, func() []call {
				return []call{{req: &nat44_ed.Nat44InterfaceAddDelFeature{Flags: nat_types.NAT_IS_INSIDE, SwIfIndex: sw()}, done: o.expect(rvNoSuchEntry, rvInvalidSwIfIndex)}}
			})
		}
		if m.Outside {
			o.stages = append(o.stages, func() []call {
				return []call{{req: &nat44_ed.Nat44InterfaceAddDelFeature{Flags: nat_types.NAT_IS_OUTSIDE, SwIfIndex: sw()}, done: o.expect(rvNoSuchEntry, rvInvalidSwIfIndex)}}
			})
		}
	case *model.Nat44AddressPool:
		o.stages = append(o.stages, func() []call { return []call{{req: poolMsg(m, false), done: o.expect(rvNoSuchEntry)}} })
	case *model.Nat44StaticMapping:
		o.stages = append(o.stages, func() []call { return []call{{req: staticMsg(m, false, tag), done: o.expect(rvNoSuchEntry)}} })
	case *model.Nat44IdentityMapping:
		o.stages = append(o.stages, func() []call { return []call{{req: d.identityMsg(m, false, tag), done: o.expect(rvNoSuchEntry)}} })
	case *model.Nat44LbStaticMapping:
		o.stages = append(o.stages, func() []call {
			return []call{{req: &nat44_ed.Nat44AddDelLbStaticMapping{ExternalAddr: ip4(m.ExternalIp),
				ExternalPort: uint16(m.ExternalPort), Protocol: uint8(m.Protocol)}, done: o.expect(rvNoSuchEntry)}}
		})
	}
	return o
}

func poolMsg(m *model.Nat44AddressPool, add bool) *nat44_ed.Nat44AddDelAddressRange {
	r := &nat44_ed.Nat44AddDelAddressRange{FirstIPAddress: ip4(m.FirstIp), LastIPAddress: ip4(m.LastIp), VrfID: m.Vrf, IsAdd: add}
	if m.TwiceNat {
		r.Flags = nat_types.NAT_IS_TWICE_NAT
	}
	return r
}

func staticMsg(m *model.Nat44StaticMapping, add bool, tag string) *nat44_ed.Nat44AddDelStaticMappingV2 {
	r := &nat44_ed.Nat44AddDelStaticMappingV2{IsAdd: add, Flags: natFlags(m.Out2InOnly, m.TwiceNat, m.SelfTwiceNat),
		LocalIPAddress: ip4(m.LocalIp), ExternalIPAddress: ip4(m.ExternalIp), Protocol: uint8(m.Protocol),
		LocalPort: uint16(m.LocalPort), ExternalPort: uint16(m.ExternalPort),
		ExternalSwIfIndex: interface_types.InterfaceIndex(noIndex), VrfID: m.Vrf, Tag: tag}
	if m.Protocol == model.Nat44Protocol_NAT44_PROTOCOL_UNSPECIFIED {
		r.Flags |= nat_types.NAT_IS_ADDR_ONLY
	}
	return r
}

func (d *Driver) identityMsg(m *model.Nat44IdentityMapping, add bool, tag string) *nat44_ed.Nat44AddDelIdentityMapping {
	r := &nat44_ed.Nat44AddDelIdentityMapping{IsAdd: add, Protocol: uint8(m.Protocol), Port: uint16(m.Port),
		SwIfIndex: interface_types.InterfaceIndex(noIndex), VrfID: m.Vrf, Tag: tag}
	if m.Interface != "" {
		if dep := d.items[model.InterfaceKey(m.Interface)]; dep != nil {
			r.SwIfIndex = interface_types.InterfaceIndex(dep.swIfIndex)
		}
	} else {
		r.IPAddress = ip4(m.Ip)
	}
	if m.Protocol == model.Nat44Protocol_NAT44_PROTOCOL_UNSPECIFIED {
		r.Flags = nat_types.NAT_IS_ADDR_ONLY
	}
	return r
}

func lbLocal(b *model.Nat44Backend) nat44_ed.Nat44LbAddrPort {
	return nat44_ed.Nat44LbAddrPort{Addr: ip4(b.Ip), Port: uint16(b.Port), Probability: uint8(b.Probability), VrfID: b.Vrf}
}

func lbMsg(m *model.Nat44LbStaticMapping, add bool, tag string) *nat44_ed.Nat44AddDelLbStaticMapping {
	r := &nat44_ed.Nat44AddDelLbStaticMapping{IsAdd: add, Flags: natFlags(m.Out2InOnly, m.TwiceNat, m.SelfTwiceNat),
		ExternalAddr: ip4(m.ExternalIp), ExternalPort: uint16(m.ExternalPort), Protocol: uint8(m.Protocol),
		Affinity: m.Affinity, Tag: tag}
	for _, b := range m.Backends {
		r.Locals = append(r.Locals, lbLocal(b))
	}
	r.LocalNum = uint32(len(r.Locals))
	return r
}

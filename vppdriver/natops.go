package vppdriver

import (
	"fmt"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/nat44_ed"
	"go.fd.io/govpp/binapi/nat_types"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
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
		&nat44_ed.Nat44ForwardingEnableDisable{}, &nat44_ed.Nat44ForwardingEnableDisableReply{},
		&nat44_ed.Nat44EdAddDelOutputInterface{}, &nat44_ed.Nat44EdAddDelOutputInterfaceReply{},
		&nat44_ed.Nat44EdOutputInterfaceGet{}, &nat44_ed.Nat44EdOutputInterfaceGetReply{}, &nat44_ed.Nat44EdOutputInterfaceDetails{},
		&nat44_ed.Nat44AddDelInterfaceAddr{}, &nat44_ed.Nat44AddDelInterfaceAddrReply{},
		&nat44_ed.Nat44InterfaceAddrDump{}, &nat44_ed.Nat44InterfaceAddrDetails{},
	}
}

// VPP retvals of NAT44-ED meaning "already so".
const (
	rvNatDisabled      = -169 // disable while disabled
	rvNatEnabled       = -170 // enable while enabled
	natDefaultSessions = 64512
)

func natFlags(f natFlagsVal) nat_types.NatConfigFlags {
	var out nat_types.NatConfigFlags
	if f.out2in {
		out |= nat_types.NAT_IS_OUT2IN_ONLY
	}
	if f.twice {
		out |= nat_types.NAT_IS_TWICE_NAT
	}
	if f.selfTwice {
		out |= nat_types.NAT_IS_SELF_TWICE_NAT
	}
	return out
}

// swIfIndexOf returns the sw_if_index of the interface with key ifKey
// (~0 if the driver does not know it).
func (d *Driver) swIfIndexOf(ifKey string) interface_types.InterfaceIndex {
	if dep := d.items[ifKey]; dep != nil {
		return interface_types.InterfaceIndex(dep.index)
	}
	return interface_types.InterfaceIndex(noIndex)
}

func (d *Driver) natPut(it *item) *op {
	o := &op{it: it}
	if d.natErr != nil {
		o.err = d.natErr
		return o
	}
	tag := d.cfg.TagPrefix
	switch m := it.want.(type) {
	case *natGlobalVal:
		old, _ := it.have.(*natGlobalVal)
		if old == nil {
			// Enabling the plugin resets forwarding (to off).
			o.stages = append(o.stages, func() []call {
				return []call{{req: &nat44_ed.Nat44EdPluginEnableDisable{Enable: true, Sessions: m.sessions}, done: o.expect(rvNatEnabled)}}
			})
			old = &natGlobalVal{sessions: m.sessions}
		}
		if old.forwarding != m.forwarding {
			o.stages = append(o.stages, func() []call {
				return []call{{req: &nat44_ed.Nat44ForwardingEnableDisable{Enable: m.forwarding}, done: o.expect()}}
			})
		}
	case *natIfaceVal:
		if m.output {
			// Only created and deleted (a switch to or from inside/outside
			// re-creates, see needsRecreate).
			o.stages = append(o.stages, func() []call {
				return []call{{req: &nat44_ed.Nat44EdAddDelOutputInterface{IsAdd: true, SwIfIndex: d.swIfIndexOf(m.ifKey())}, done: o.expect()}}
			})
			break
		}
		old, _ := it.have.(*natIfaceVal)
		if old == nil {
			old = &natIfaceVal{}
		}
		o.stages = append(o.stages, func() []call {
			sw := d.swIfIndexOf(m.ifKey())
			var cs []call
			if m.inside && !old.inside {
				cs = append(cs, call{req: &nat44_ed.Nat44InterfaceAddDelFeature{IsAdd: true, Flags: nat_types.NAT_IS_INSIDE, SwIfIndex: sw}, done: o.expect()})
			}
			if m.outside && !old.outside {
				cs = append(cs, call{req: &nat44_ed.Nat44InterfaceAddDelFeature{IsAdd: true, Flags: nat_types.NAT_IS_OUTSIDE, SwIfIndex: sw}, done: o.expect()})
			}
			return cs
		})
		// Removing a feature the interface keeps the other one of: VPP
		// deletes an interface entirely when asked to remove a feature it
		// lacks, so only features that are set are removed.
		o.stages = append(o.stages, func() []call {
			sw := d.swIfIndexOf(m.ifKey())
			var cs []call
			if old.inside && !m.inside {
				cs = append(cs, call{req: &nat44_ed.Nat44InterfaceAddDelFeature{Flags: nat_types.NAT_IS_INSIDE, SwIfIndex: sw}, done: o.expect(rvNoSuchEntry)})
			}
			if old.outside && !m.outside {
				cs = append(cs, call{req: &nat44_ed.Nat44InterfaceAddDelFeature{Flags: nat_types.NAT_IS_OUTSIDE, SwIfIndex: sw}, done: o.expect(rvNoSuchEntry)})
			}
			return cs
		})
	case *poolVal:
		o.stages = append(o.stages, func() []call { return []call{{req: d.poolMsg(m, true), done: o.expect()}} })
	case *staticVal:
		o.stages = append(o.stages, func() []call { return []call{{req: staticMsg(m, true, tag), done: o.expect()}} })
	case *identityVal:
		o.stages = append(o.stages, func() []call { return []call{{req: d.identityMsg(m, true, tag), done: o.expect()}} })
	case *lbVal:
		old, _ := it.have.(*lbVal)
		if old == nil {
			o.stages = append(o.stages, func() []call { return []call{{req: lbMsg(m, true, tag), done: o.expect()}} })
			break
		}
		// Backends only: add the new ones, then remove the old ones, then
		// add back the changed ones (VPP needs >= 2 backends throughout).
		// Both lists are sorted by address and port.
		local := func(b backendVal, add bool) call {
			c := call{req: &nat44_ed.Nat44LbStaticMappingAddDelLocal{IsAdd: add, ExternalAddr: m.ext.As4(),
				ExternalPort: m.port, Protocol: uint8(m.proto), Local: lbLocal(b)}}
			if add {
				c.done = o.expect()
			} else {
				c.done = o.expect(rvNoSuchEntry)
			}
			return c
		}
		add, remove, readd := lbDiff(old.backends, m.backends)
		calls := func(bs []backendVal, isAdd bool) func() []call {
			return func() []call {
				cs := make([]call, 0, len(bs))
				for _, b := range bs {
					cs = append(cs, local(b, isAdd))
				}
				return cs
			}
		}
		o.stages = append(o.stages, calls(add, true), calls(remove, false), calls(readd, true))
	default:
		o.err = fmt.Errorf("unsupported value %T", it.want)
	}
	return o
}

// lbDiff compares the backends of a load-balanced mapping (both sorted by
// address and port) in one merge walk: add are the new backends whose
// address and port no old one has; remove the old ones that the first new
// one with their address and port is not equal to (or that no new one
// has); readd the new ones that the first old one with their address and
// port is not equal to (changed: removed, then added back).
func lbDiff(old, new []backendVal) (add, remove, readd []backendVal) {
	i, j := 0, 0
	for i < len(old) || j < len(new) {
		switch {
		case j == len(new) || (i < len(old) && old[i].cmp(&new[j]) < 0):
			remove = append(remove, old[i])
			i++
		case i == len(old) || old[i].cmp(&new[j]) > 0:
			add = append(add, new[j])
			j++
		default:
			firstOld, firstNew := &old[i], &new[j]
			for ; i < len(old) && old[i].cmp(firstNew) == 0; i++ {
				if old[i] != *firstNew {
					remove = append(remove, old[i])
				}
			}
			for ; j < len(new) && new[j].cmp(firstOld) == 0; j++ {
				if new[j] != *firstOld {
					readd = append(readd, new[j])
				}
			}
		}
	}
	return add, remove, readd
}

func (d *Driver) natDelete(it *item) *op {
	o := &op{it: it}
	if d.natErr != nil {
		o.err = d.natErr
		return o
	}
	tag := d.cfg.TagPrefix
	switch m := it.have.(type) {
	case *natGlobalVal:
		o.stages = append(o.stages, func() []call {
			return []call{{req: &nat44_ed.Nat44EdPluginEnableDisable{}, done: o.expect(rvNatDisabled)}}
		})
	case *natIfaceVal:
		if m.output {
			o.stages = append(o.stages, func() []call {
				return []call{{req: &nat44_ed.Nat44EdAddDelOutputInterface{SwIfIndex: d.swIfIndexOf(m.ifKey())}, done: o.expect(rvNoSuchEntry, rvInvalidSwIfIndex)}}
			})
		}
		if m.inside {
			o.stages = append(o.stages, func() []call {
				return []call{{req: &nat44_ed.Nat44InterfaceAddDelFeature{Flags: nat_types.NAT_IS_INSIDE, SwIfIndex: d.swIfIndexOf(m.ifKey())}, done: o.expect(rvNoSuchEntry, rvInvalidSwIfIndex)}}
			})
		}
		if m.outside {
			o.stages = append(o.stages, func() []call {
				return []call{{req: &nat44_ed.Nat44InterfaceAddDelFeature{Flags: nat_types.NAT_IS_OUTSIDE, SwIfIndex: d.swIfIndexOf(m.ifKey())}, done: o.expect(rvNoSuchEntry, rvInvalidSwIfIndex)}}
			})
		}
	case *poolVal:
		o.stages = append(o.stages, func() []call {
			return []call{{req: d.poolMsg(m, false), done: o.expect(rvNoSuchEntry, rvInvalidSwIfIndex)}}
		})
	case *staticVal:
		o.stages = append(o.stages, func() []call { return []call{{req: staticMsg(m, false, tag), done: o.expect(rvNoSuchEntry)}} })
	case *identityVal:
		o.stages = append(o.stages, func() []call { return []call{{req: d.identityMsg(m, false, tag), done: o.expect(rvNoSuchEntry)}} })
	case *lbVal:
		o.stages = append(o.stages, func() []call {
			return []call{{req: &nat44_ed.Nat44AddDelLbStaticMapping{ExternalAddr: m.ext.As4(),
				ExternalPort: m.port, Protocol: uint8(m.proto)}, done: o.expect(rvNoSuchEntry)}}
		})
	default:
		o.err = fmt.Errorf("unsupported value %T", it.have)
	}
	return o
}

// poolMsg builds nat44_add_del_address_range, or for the pool of an
// interface's address nat44_add_del_interface_addr.
func (d *Driver) poolMsg(m *poolVal, add bool) api.Message {
	var flags nat_types.NatConfigFlags
	if m.twice {
		flags = nat_types.NAT_IS_TWICE_NAT
	}
	if m.iface != "" {
		return &nat44_ed.Nat44AddDelInterfaceAddr{IsAdd: add, SwIfIndex: d.swIfIndexOf(m.ifKey()), Flags: flags}
	}
	return &nat44_ed.Nat44AddDelAddressRange{FirstIPAddress: m.first.As4(), LastIPAddress: m.last.As4(), VrfID: m.vrf, IsAdd: add, Flags: flags}
}

func staticMsg(m *staticVal, add bool, tag string) *nat44_ed.Nat44AddDelStaticMappingV2 {
	r := &nat44_ed.Nat44AddDelStaticMappingV2{IsAdd: add, Flags: natFlags(m.flags),
		LocalIPAddress: m.local.As4(), ExternalIPAddress: m.ext.As4(), Protocol: uint8(m.proto),
		LocalPort: m.lport, ExternalPort: m.eport,
		ExternalSwIfIndex: interface_types.InterfaceIndex(noIndex), VrfID: m.vrf, Tag: tag}
	if m.proto == vppmodel.Nat44Protocol_NAT44_PROTOCOL_UNSPECIFIED {
		r.Flags |= nat_types.NAT_IS_ADDR_ONLY
	}
	return r
}

func (d *Driver) identityMsg(m *identityVal, add bool, tag string) *nat44_ed.Nat44AddDelIdentityMapping {
	r := &nat44_ed.Nat44AddDelIdentityMapping{IsAdd: add, Protocol: uint8(m.proto), Port: m.port,
		SwIfIndex: interface_types.InterfaceIndex(noIndex), VrfID: m.vrf, Tag: tag}
	if m.iface != "" {
		r.SwIfIndex = d.swIfIndexOf(m.depKeys[1])
	} else {
		r.IPAddress = m.ip.As4()
	}
	if m.proto == vppmodel.Nat44Protocol_NAT44_PROTOCOL_UNSPECIFIED {
		r.Flags = nat_types.NAT_IS_ADDR_ONLY
	}
	return r
}

func lbLocal(b backendVal) nat44_ed.Nat44LbAddrPort {
	return nat44_ed.Nat44LbAddrPort{Addr: b.ip.As4(), Port: b.port, Probability: b.prob, VrfID: b.vrf}
}

func lbMsg(m *lbVal, add bool, tag string) *nat44_ed.Nat44AddDelLbStaticMapping {
	r := &nat44_ed.Nat44AddDelLbStaticMapping{IsAdd: add, Flags: natFlags(m.flags),
		ExternalAddr: m.ext.As4(), ExternalPort: m.port, Protocol: uint8(m.proto),
		Affinity: m.affinity, Tag: tag}
	for _, b := range m.backends {
		r.Locals = append(r.Locals, lbLocal(b))
	}
	r.LocalNum = uint32(len(r.Locals))
	return r
}

package vppdriver

import (
	"context"
	"net/netip"
	"strings"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/nat44_ed"
	"go.fd.io/govpp/binapi/nat_types"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/vppdriver/model"
)

// readbackNat adds the owned NAT44-ED configuration to out: the plugin
// state and pools if the driver knows their keys (they have no tag), the
// features of owned interfaces, and mappings tagged with TagPrefix.
func (d *Driver) readbackNat(ctx context.Context, out map[string]found, swName map[uint32]string) error {
	var sessions uint32
	err := d.cl.pipeline(ctx, []call{{req: &nat44_ed.Nat44ShowRunningConfig{}, done: func(r api.Message, err error) {
		if err == nil {
			sessions = r.(*nat44_ed.Nat44ShowRunningConfigReply).Sessions
		}
	}}})
	if err != nil {
		return err
	}
	if sessions == 0 {
		return nil // plugin disabled: no NAT configuration
	}
	known := func(key string) bool {
		it := d.items[key]
		return it != nil && (it.desired != nil || it.applied != nil)
	}
	if known(model.Nat44GlobalKey) {
		out[model.Nat44GlobalKey] = found{value: normalize(&model.Nat44Global{Sessions: sessions})}
	}
	res, err := d.cl.dumps(ctx, []api.Message{
		&nat44_ed.Nat44InterfaceDump{}, &nat44_ed.Nat44AddressDump{}, &nat44_ed.Nat44StaticMappingDump{},
		&nat44_ed.Nat44IdentityMappingDump{}, &nat44_ed.Nat44LbStaticMappingDump{},
	})
	if err != nil {
		return err
	}
	for _, m := range res[0] {
		r := m.(*nat44_ed.Nat44InterfaceDetails)
		name, ok := swName[uint32(r.SwIfIndex)]
		if !ok {
			continue
		}
		v := &model.Nat44Interface{Interface: name, Inside: r.Flags&nat_types.NAT_IS_INSIDE != 0,
			Outside: r.Flags&nat_types.NAT_IS_OUTSIDE != 0}
		out[model.Nat44InterfaceKey(name)] = found{value: normalize(v)}
	}

	type poolAddr struct {
		ip    netip.Addr
		twice bool
	}
	pool := map[poolAddr]uint32{}
	for _, m := range res[1] {
		r := m.(*nat44_ed.Nat44AddressDetails)
		pool[poolAddr{netip.AddrFrom4(r.IPAddress), r.Flags&nat_types.NAT_IS_TWICE_NAT != 0}] = r.VrfID
	}
	for k, it := range d.items {
		if !strings.HasPrefix(k, model.Nat44AddressPoolKeyPrefix) {
			continue
		}
		p, _ := it.desired.(*model.Nat44AddressPool)
		if p == nil {
			p, _ = it.applied.(*model.Nat44AddressPool)
		}
		if p == nil {
			continue
		}
		first, last := netip.MustParseAddr(p.FirstIp), netip.MustParseAddr(p.LastIp)
		vrf, complete := uint32(0), true
		for a := first; a.IsValid() && a.Compare(last) <= 0; a = a.Next() {
			v, ok := pool[poolAddr{a, p.TwiceNat}]
			if !ok || (a != first && v != vrf) {
				complete = false
				break
			}
			vrf = v
		}
		if complete {
			out[k] = found{value: normalize(&model.Nat44AddressPool{FirstIp: p.FirstIp, LastIp: p.LastIp, Vrf: vrf, TwiceNat: p.TwiceNat})}
		}
	}

	prefix := d.cfg.TagPrefix
	for _, m := range res[2] {
		r := m.(*nat44_ed.Nat44StaticMappingDetails)
		if !strings.HasPrefix(r.Tag, prefix) || uint32(r.ExternalSwIfIndex) != noIndex {
			continue
		}
		v := &model.Nat44StaticMapping{Protocol: model.Nat44Protocol(r.Protocol),
			LocalIp: netip.AddrFrom4(r.LocalIPAddress).String(), LocalPort: uint32(r.LocalPort),
			ExternalIp: netip.AddrFrom4(r.ExternalIPAddress).String(), ExternalPort: uint32(r.ExternalPort),
			Vrf: r.VrfID, Out2InOnly: r.Flags&nat_types.NAT_IS_OUT2IN_ONLY != 0,
			TwiceNat: r.Flags&nat_types.NAT_IS_TWICE_NAT != 0, SelfTwiceNat: r.Flags&nat_types.NAT_IS_SELF_TWICE_NAT != 0}
		if k, err := model.KeyOf(v); err == nil {
			out[k] = found{value: normalize(v)}
		}
	}

	// Identity mappings on an interface are dumped twice: as the record
	// (interface, address 0.0.0.0) and resolved (the address, no interface).
	type idKey struct {
		proto uint8
		port  uint16
		tag   string
	}
	onIface := map[idKey]bool{}
	for _, m := range res[3] {
		r := m.(*nat44_ed.Nat44IdentityMappingDetails)
		if uint32(r.SwIfIndex) != noIndex {
			onIface[idKey{r.Protocol, r.Port, r.Tag}] = true
		}
	}
	for _, m := range res[3] {
		r := m.(*nat44_ed.Nat44IdentityMappingDetails)
		if !strings.HasPrefix(r.Tag, prefix) {
			continue
		}
		v := &model.Nat44IdentityMapping{Protocol: model.Nat44Protocol(r.Protocol), Port: uint32(r.Port), Vrf: r.VrfID}
		if sw := uint32(r.SwIfIndex); sw != noIndex {
			name, ok := swName[sw]
			if !ok {
				continue
			}
			v.Interface = name
		} else {
			if onIface[idKey{r.Protocol, r.Port, r.Tag}] {
				continue
			}
			v.Ip = netip.AddrFrom4(r.IPAddress).String()
		}
		if k, err := model.KeyOf(v); err == nil {
			out[k] = found{value: normalize(v)}
		}
	}

	for _, m := range res[4] {
		r := m.(*nat44_ed.Nat44LbStaticMappingDetails)
		if !strings.HasPrefix(r.Tag, prefix) {
			continue
		}
		v := &model.Nat44LbStaticMapping{Protocol: model.Nat44Protocol(r.Protocol),
			ExternalIp: netip.AddrFrom4(r.ExternalAddr).String(), ExternalPort: uint32(r.ExternalPort),
			Out2InOnly: r.Flags&nat_types.NAT_IS_OUT2IN_ONLY != 0, TwiceNat: r.Flags&nat_types.NAT_IS_TWICE_NAT != 0,
			SelfTwiceNat: r.Flags&nat_types.NAT_IS_SELF_TWICE_NAT != 0}
		for _, l := range r.Locals {
			v.Backends = append(v.Backends, &model.Nat44Backend{Ip: netip.AddrFrom4(l.Addr).String(),
				Port: uint32(l.Port), Probability: uint32(l.Probability), Vrf: l.VrfID})
		}
		k, err := model.KeyOf(v)
		if err != nil {
			continue
		}
		// VPP does not report the affinity: take the one the driver set.
		if it := d.items[k]; it != nil {
			for _, known := range []proto.Message{it.applied, it.desired} {
				if lb, ok := known.(*model.Nat44LbStaticMapping); ok {
					v.Affinity = lb.Affinity
					break
				}
			}
		}
		out[k] = found{value: normalize(v)}
	}
	return nil
}

package vppdriver

import (
	"context"
	"net/netip"
	"strings"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/nat44_ed"
	"go.fd.io/govpp/binapi/nat_types"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// readbackNat adds the owned NAT44-ED configuration to out: the plugin
// state and pools if the driver knows their keys (they have no tag), the
// features of owned interfaces, and mappings tagged with TagPrefix.
func (d *Driver) readbackNat(ctx context.Context, out map[string]found, swName map[uint32]string) error {
	var running *nat44_ed.Nat44ShowRunningConfigReply
	err := d.cl.pipeline(ctx, []call{{req: &nat44_ed.Nat44ShowRunningConfig{}, done: func(r api.Message, err error) {
		if err == nil {
			running = r.(*nat44_ed.Nat44ShowRunningConfigReply)
		}
	}}})
	if err != nil {
		return err
	}
	if running == nil || running.Sessions == 0 {
		return nil // plugin disabled: no NAT configuration
	}
	if it := d.items[vppmodel.Nat44GlobalKey]; it != nil && (it.want != nil || it.have != nil) {
		out[vppmodel.Nat44GlobalKey] = found{value: &natGlobalVal{sessions: running.Sessions, forwarding: running.ForwardingEnabled}}
	}
	res, err := d.cl.dumps(ctx, []api.Message{
		&nat44_ed.Nat44InterfaceDump{}, &nat44_ed.Nat44AddressDump{}, &nat44_ed.Nat44StaticMappingDump{},
		&nat44_ed.Nat44IdentityMappingDump{}, &nat44_ed.Nat44LbStaticMappingDump{}, &nat44_ed.Nat44InterfaceAddrDump{},
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
		out[vppmodel.Nat44InterfaceKey(name)] = found{value: newNatIface(name, r.Flags&nat_types.NAT_IS_INSIDE != 0,
			r.Flags&nat_types.NAT_IS_OUTSIDE != 0, false)}
	}
	outputs, err := d.outputInterfaces(ctx)
	if err != nil {
		return err
	}
	for _, sw := range outputs {
		if name, ok := swName[sw]; ok {
			out[vppmodel.Nat44InterfaceKey(name)] = found{value: newNatIface(name, false, false, true)}
		}
	}
	for _, m := range res[5] {
		r := m.(*nat44_ed.Nat44InterfaceAddrDetails)
		if name, ok := swName[uint32(r.SwIfIndex)]; ok {
			v := newIfacePool(name, r.Flags&nat_types.NAT_IS_TWICE_NAT != 0)
			out[vppmodel.Nat44InterfaceAddressPoolKey(name, v.twice)] = found{value: v}
		}
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
		if it.kind != kindNat {
			continue
		}
		p, _ := it.want.(*poolVal)
		if p == nil {
			p, _ = it.have.(*poolVal)
		}
		if p == nil || p.iface != "" {
			continue
		}
		vrf, complete := uint32(0), true
		for a := p.first; a.IsValid() && a.Compare(p.last) <= 0; a = a.Next() {
			v, ok := pool[poolAddr{a, p.twice}]
			if !ok || (a != p.first && v != vrf) {
				complete = false
				break
			}
			vrf = v
		}
		if complete {
			out[k] = found{value: &poolVal{first: p.first, last: p.last, vrf: vrf, twice: p.twice}}
		}
	}

	prefix := d.cfg.TagPrefix
	for _, m := range res[2] {
		r := m.(*nat44_ed.Nat44StaticMappingDetails)
		if !strings.HasPrefix(r.Tag, prefix) || uint32(r.ExternalSwIfIndex) != noIndex {
			continue
		}
		v := &staticVal{proto: vppmodel.Nat44Protocol(r.Protocol), local: netip.AddrFrom4(r.LocalIPAddress), lport: r.LocalPort,
			ext: netip.AddrFrom4(r.ExternalIPAddress), eport: r.ExternalPort, vrf: r.VrfID, flags: natFlagsOf(r.Flags)}
		out[vppmodel.Nat44StaticMappingKey(v.proto, v.ext, uint32(v.eport))] = found{value: v}
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
		var v *identityVal
		if sw := uint32(r.SwIfIndex); sw != noIndex {
			name, ok := swName[sw]
			if !ok {
				continue
			}
			v = newIdentity(vppmodel.Nat44Protocol(r.Protocol), netip.Addr{}, name, r.Port, r.VrfID)
		} else {
			if onIface[idKey{r.Protocol, r.Port, r.Tag}] {
				continue
			}
			v = newIdentity(vppmodel.Nat44Protocol(r.Protocol), netip.AddrFrom4(r.IPAddress), "", r.Port, r.VrfID)
		}
		out[vppmodel.Nat44IdentityMappingKey(v.proto, v.ip, v.iface, uint32(v.port))] = found{value: v}
	}

	for _, m := range res[4] {
		r := m.(*nat44_ed.Nat44LbStaticMappingDetails)
		if !strings.HasPrefix(r.Tag, prefix) {
			continue
		}
		v := &lbVal{lbHead: lbHead{proto: vppmodel.Nat44Protocol(r.Protocol), ext: netip.AddrFrom4(r.ExternalAddr),
			port: r.ExternalPort, flags: natFlagsOf(r.Flags)}}
		for _, l := range r.Locals {
			v.backends = append(v.backends, newBackend(netip.AddrFrom4(l.Addr), l.Port, l.Probability, l.VrfID))
		}
		k := vppmodel.Nat44LbStaticMappingKey(v.proto, v.ext, uint32(v.port))
		// VPP does not report the affinity: take the one the driver set.
		if it := d.items[k]; it != nil {
			for _, known := range []value{it.have, it.want} {
				if lb, ok := known.(*lbVal); ok {
					v.affinity = lb.affinity
					break
				}
			}
		}
		out[k] = found{value: v.finish()}
	}
	return nil
}

// rvEAgain is VPP's retval of a *_get reply that stopped early: call again
// from the returned cursor.
const rvEAgain = -165

// outputInterfaces lists the sw_if_index of every NAT44 output-feature
// interface (nat44_ed_output_interface_get, page by page).
func (d *Driver) outputInterfaces(ctx context.Context) ([]uint32, error) {
	var out []uint32
	cursor := uint32(0)
	for {
		res, err := d.cl.dumps(ctx, []api.Message{&nat44_ed.Nat44EdOutputInterfaceGet{Cursor: cursor}})
		if err != nil {
			return nil, err
		}
		var reply *nat44_ed.Nat44EdOutputInterfaceGetReply
		for _, m := range res[0] {
			switch r := m.(type) {
			case *nat44_ed.Nat44EdOutputInterfaceDetails:
				out = append(out, uint32(r.SwIfIndex))
			case *nat44_ed.Nat44EdOutputInterfaceGetReply:
				reply = r
			}
		}
		if reply == nil || reply.Retval != rvEAgain || reply.Cursor == cursor {
			return out, nil
		}
		cursor = reply.Cursor
	}
}

func natFlagsOf(f nat_types.NatConfigFlags) natFlagsVal {
	return natFlagsVal{out2in: f&nat_types.NAT_IS_OUT2IN_ONLY != 0, twice: f&nat_types.NAT_IS_TWICE_NAT != 0,
		selfTwice: f&nat_types.NAT_IS_SELF_TWICE_NAT != 0}
}

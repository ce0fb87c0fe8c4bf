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

// readNat reads the NAT44-ED configuration the driver owns, kind by kind:
// the plugin state if the driver knows its key (it has no tag), the
// features of owned interfaces, the pools (of owned interfaces' addresses;
// address ranges if the driver knows their keys: they have no tag
// either), and the mappings tagged with TagPrefix. Nothing if the plugin
// is disabled.
func (d *Driver) readNat(ctx context.Context, ifs *ownedIfaces) ([]value, error) {
	global, err := d.readNatGlobal(ctx)
	if err != nil || global == nil {
		return nil, err
	}
	var out []value
	if it := d.items[vppmodel.Nat44GlobalKey]; it != nil && (it.want != nil || it.have != nil) {
		out = append(out, global)
	}
	x := &natDumped{}
	var b dumpBatch
	addDump(&b, &nat44_ed.Nat44InterfaceDump{}, &x.features)
	addDump(&b, &nat44_ed.Nat44InterfaceAddrDump{}, &x.ifacePools)
	addDump(&b, &nat44_ed.Nat44AddressDump{}, &x.addresses)
	addDump(&b, &nat44_ed.Nat44StaticMappingDump{}, &x.statics)
	addDump(&b, &nat44_ed.Nat44IdentityMappingDump{}, &x.identities)
	addDump(&b, &nat44_ed.Nat44LbStaticMappingDump{}, &x.lbs)
	if err := b.run(ctx, d.cl); err != nil {
		return nil, err
	}
	if x.outputs, err = d.outputInterfaces(ctx); err != nil {
		return nil, err
	}
	out = append(out, asValues(readNatInterfaces(x, ifs))...)
	out = append(out, asValues(d.readNatPools(x, ifs))...)
	out = append(out, asValues(d.readNatStatic(x))...)
	out = append(out, asValues(d.readNatIdentity(x, ifs))...)
	out = append(out, asValues(d.readNatLB(x))...)
	return out, nil
}

// natDumped is what a readback dumps of NAT44-ED, typed: one field per
// dump.
type natDumped struct {
	features   []*nat44_ed.Nat44InterfaceDetails
	outputs    []uint32 // sw_if_index of the output-feature interfaces
	ifacePools []*nat44_ed.Nat44InterfaceAddrDetails
	addresses  []*nat44_ed.Nat44AddressDetails
	statics    []*nat44_ed.Nat44StaticMappingDetails
	identities []*nat44_ed.Nat44IdentityMappingDetails
	lbs        []*nat44_ed.Nat44LbStaticMappingDetails
}

// readNatGlobal reads the plugin's state: nil if it is disabled.
func (d *Driver) readNatGlobal(ctx context.Context) (*natGlobalVal, error) {
	var running *nat44_ed.Nat44ShowRunningConfigReply
	err := d.cl.pipeline(ctx, []call{{req: &nat44_ed.Nat44ShowRunningConfig{}, done: func(r api.Message, err error) {
		if err == nil {
			running = r.(*nat44_ed.Nat44ShowRunningConfigReply)
		}
	}}})
	if err != nil || running == nil || running.Sessions == 0 {
		return nil, err // disabled: no NAT configuration
	}
	return &natGlobalVal{sessions: running.Sessions, forwarding: running.ForwardingEnabled}, nil
}

// readNatInterfaces reads the NAT44 features of owned interfaces: inside
// and outside, or the output feature (which replaces them).
func readNatInterfaces(x *natDumped, ifs *ownedIfaces) []*natIfaceVal {
	var out []*natIfaceVal
	for _, r := range x.features {
		if name, ok := ifs.nameOf(uint32(r.SwIfIndex)); ok {
			out = append(out, newNatIface(name, r.Flags&nat_types.NAT_IS_INSIDE != 0, r.Flags&nat_types.NAT_IS_OUTSIDE != 0, false))
		}
	}
	for _, sw := range x.outputs {
		if name, ok := ifs.nameOf(sw); ok {
			out = append(out, newNatIface(name, false, false, true))
		}
	}
	return out
}

// readNatPools reads the pools of owned interfaces' addresses, and the
// address-range pools whose keys the driver knows (applied or desired)
// that VPP holds completely (every address, one VRF).
func (d *Driver) readNatPools(x *natDumped, ifs *ownedIfaces) []*poolVal {
	var out []*poolVal
	for _, r := range x.ifacePools {
		if name, ok := ifs.nameOf(uint32(r.SwIfIndex)); ok {
			out = append(out, newIfacePool(name, r.Flags&nat_types.NAT_IS_TWICE_NAT != 0))
		}
	}
	type poolAddr struct {
		ip    netip.Addr
		twice bool
	}
	pool := make(map[poolAddr]uint32, len(x.addresses))
	for _, r := range x.addresses {
		pool[poolAddr{netip.AddrFrom4(r.IPAddress), r.Flags&nat_types.NAT_IS_TWICE_NAT != 0}] = r.VrfID
	}
	for _, it := range d.items {
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
			out = append(out, &poolVal{first: p.first, last: p.last, vrf: vrf, twice: p.twice})
		}
	}
	return out
}

// readNatStatic reads the static mappings tagged TagPrefix (of an
// address, not of an interface's).
func (d *Driver) readNatStatic(x *natDumped) []*staticVal {
	var out []*staticVal
	for _, r := range x.statics {
		if !strings.HasPrefix(r.Tag, d.cfg.TagPrefix) || uint32(r.ExternalSwIfIndex) != noIndex {
			continue
		}
		out = append(out, &staticVal{proto: vppmodel.Nat44Protocol(r.Protocol), local: netip.AddrFrom4(r.LocalIPAddress), lport: r.LocalPort,
			ext: netip.AddrFrom4(r.ExternalIPAddress), eport: r.ExternalPort, vrf: r.VrfID, flags: natFlagsOf(r.Flags)})
	}
	return out
}

// readNatIdentity reads the identity mappings tagged TagPrefix, of an
// address or of an owned interface's address.
func (d *Driver) readNatIdentity(x *natDumped, ifs *ownedIfaces) []*identityVal {
	res := x.identities
	// Identity mappings on an interface are dumped twice: as the record
	// (interface, address 0.0.0.0) and resolved (the address, no interface).
	type idKey struct {
		proto uint8
		port  uint16
		tag   string
	}
	onIface := map[idKey]bool{}
	for _, r := range res {
		if uint32(r.SwIfIndex) != noIndex {
			onIface[idKey{r.Protocol, r.Port, r.Tag}] = true
		}
	}
	var out []*identityVal
	for _, r := range res {
		if !strings.HasPrefix(r.Tag, d.cfg.TagPrefix) {
			continue
		}
		if sw := uint32(r.SwIfIndex); sw != noIndex {
			if name, ok := ifs.nameOf(sw); ok {
				out = append(out, newIdentity(vppmodel.Nat44Protocol(r.Protocol), netip.Addr{}, name, r.Port, r.VrfID))
			}
		} else if !onIface[idKey{r.Protocol, r.Port, r.Tag}] {
			out = append(out, newIdentity(vppmodel.Nat44Protocol(r.Protocol), netip.AddrFrom4(r.IPAddress), "", r.Port, r.VrfID))
		}
	}
	return out
}

// readNatLB reads the load-balanced mappings tagged TagPrefix. VPP does
// not report the affinity: it is taken from the driver's record.
func (d *Driver) readNatLB(x *natDumped) []*lbVal {
	var out []*lbVal
	for _, r := range x.lbs {
		if !strings.HasPrefix(r.Tag, d.cfg.TagPrefix) {
			continue
		}
		v := &lbVal{lbHead: lbHead{proto: vppmodel.Nat44Protocol(r.Protocol), ext: netip.AddrFrom4(r.ExternalAddr),
			port: r.ExternalPort, flags: natFlagsOf(r.Flags)}}
		for _, l := range r.Locals {
			v.backends = append(v.backends, newBackend(netip.AddrFrom4(l.Addr), l.Port, l.Probability, l.VrfID))
		}
		if it := d.items[v.key()]; it != nil {
			for _, known := range []value{it.have, it.want} {
				if lb, ok := known.(*lbVal); ok {
					v.affinity = lb.affinity
					break
				}
			}
		}
		out = append(out, v.finish())
	}
	return out
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

package vppdriver

import (
	"context"
	"net/netip"
	"slices"

	"go.fd.io/govpp/api"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/internal/binapi/cnat"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// cnatDumped is what a readback reads of the cnat plugin, typed.
type cnatDumped struct {
	translations []*cnat.CnatTranslationDetails
	snat         *cnat.CnatGetSnatAddressesReply // nil: no default entry
}

// readCnat reads the cnat configuration the driver owns. VPP tags none of
// it and reports only part of it, so:
//   - a translation (cnat_translation_dump) is the driver's if it knows
//     its key (applied or desired); VPP reports its VIP, protocol, port,
//     lb type and paths, not is_real_ip, its flags or its flow hash: those
//     are taken from the driver's record (see recordOf);
//   - the default SNAT entry (cnat_get_snat_addresses) is the driver's if
//     it knows its key; VPP reports its addresses, not its excluded
//     prefixes or policy (no dump): taken from the record;
//   - cnat on an interface (the feature, the SNAT tables) has no dump at
//     all: for an owned interface that VPP still has, it is the record.
//     After a VPP restart the interfaces are gone, and it with them.
//
// A record is what the driver applied or, for a key it has not sent
// anything for yet (a new driver on a populated VPP), what is desired:
// VPP is assumed to hold it. A feature that VPP lacks then is never
// enabled (and one it holds that the driver does not know of is never
// disabled) by this driver.
func (d *Driver) readCnat(ctx context.Context, ifs *ownedIfaces) ([]found, error) {
	x := &cnatDumped{}
	var b dumpBatch
	addDump(&b, &cnat.CnatTranslationDump{}, &x.translations)
	if err := b.run(ctx, d.cl); err != nil {
		return nil, err
	}
	err := d.cl.pipeline(ctx, []call{{req: &cnat.CnatGetSnatAddresses{}, done: func(r api.Message, err error) {
		if err == nil {
			x.snat = r.(*cnat.CnatGetSnatAddressesReply)
		}
	}}})
	if err != nil {
		return nil, err
	}
	var out []found
	for _, r := range x.translations {
		if v, ok := d.cnatTrFromVPP(&r.Translation); ok {
			out = append(out, found{value: v, index: r.Translation.ID})
		}
	}
	if v := d.cnatSnatFromVPP(x.snat); v != nil {
		out = append(out, found{value: v, index: noIndex})
	}
	for _, o := range ifs.list {
		rec, ok := d.recordOf(vppmodel.CnatInterfaceKey(o.v.name)).(*cnatIfaceVal)
		if !ok {
			continue
		}
		if rec.tables.any() && x.snat == nil {
			// The SNAT entry is gone, and its tables with it.
			if !rec.feature {
				continue
			}
			rec = newCnatIface(rec.iface, true, cnatTables{})
		}
		out = append(out, found{value: rec, index: noIndex})
	}
	return out, nil
}

// recordOf returns the driver's record of what VPP holds of key, for what
// VPP does not report: the applied value; for a key the driver has sent
// nothing for, the desired one; else nil.
func (d *Driver) recordOf(key string) value {
	it := d.items[key]
	switch {
	case it == nil:
		return nil
	case it.have != nil:
		return applied(it.have)
	case !it.tried && it.want != nil:
		return it.want
	}
	return nil
}

// cnatTrFromVPP converts a dumped translation the driver owns (false for
// the others: unknown keys, VIPs given by an interface, protocols and
// ports the model has no key for).
func (d *Driver) cnatTrFromVPP(t *cnat.CnatTranslation) (*cnatTrVal, bool) {
	vip := vppconv.AddrOf(t.Vip.Addr)
	proto := uint8(t.IPProto)
	if uint32(t.Vip.SwIfIndex) != noIndex || !vip.IsValid() || t.Vip.Port == 0 ||
		(proto != vppmodel.ProtoTCP && proto != vppmodel.ProtoUDP) {
		return nil, false
	}
	key := vppmodel.CnatTranslationKey(uint32(proto), vip, uint32(t.Vip.Port))
	it := d.items[key]
	if it == nil || (it.want == nil && it.have == nil) {
		return nil, false
	}
	v := &cnatTrVal{cnatTrHead: cnatTrHead{proto: proto, vip: vip, port: t.Vip.Port, lbType: uint8(t.LbType)},
		paths: make([]cnatPathVal, 0, len(t.Paths))}
	for _, known := range []value{applied(it.have), it.want} {
		if k, ok := known.(*cnatTrVal); ok {
			v.realIP, v.allocPort, v.noReturn, v.noClient, v.fhc = k.realIP, k.allocPort, k.noReturn, k.noClient, k.fhc
			break
		}
	}
	for _, p := range t.Paths {
		pv := cnatPathVal{dst: cnatEP{vppconv.AddrOf(p.DstEp.Addr), p.DstEp.Port}, src: cnatEP{port: p.SrcEp.Port},
			noNAT: p.Flags&uint8(cnat.CNAT_EPT_NO_NAT) != 0}
		if uint32(p.DstEp.SwIfIndex) != noIndex {
			pv.dst.addr = netip.Addr{} // a backend given by an interface is never the driver's
		}
		if a := vppconv.AddrOf(p.SrcEp.Addr); a.IsValid() && !a.IsUnspecified() {
			pv.src.addr = a
		}
		v.paths = append(v.paths, pv)
	}
	slices.SortFunc(v.paths, cmpCnatPath)
	return v, true
}

// cnatSnatFromVPP converts the default SNAT entry if the driver owns it
// (nil otherwise).
func (d *Driver) cnatSnatFromVPP(r *cnat.CnatGetSnatAddressesReply) *cnatSnatVal {
	it := d.items[vppmodel.CnatSnatKey]
	if r == nil || it == nil || (it.want == nil && it.have == nil) {
		return nil
	}
	v := &cnatSnatVal{}
	if a := netip.AddrFrom4(r.SnatIP4); !a.IsUnspecified() {
		v.ip4 = a
	}
	if a := netip.AddrFrom16(r.SnatIP6); !a.IsUnspecified() {
		v.ip6 = a
	}
	if rec, ok := d.recordOf(vppmodel.CnatSnatKey).(*cnatSnatVal); ok {
		v.exclude, v.policy, v.noClient = rec.exclude, rec.policy, rec.noClient
	}
	return v
}

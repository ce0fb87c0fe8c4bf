package vppdriver

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip"
	"go.fd.io/govpp/binapi/ip_types"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/internal/binapi/cnat"
	vppmemclnt "github.com/vswitchkit/vswitchkit/vppdriver/internal/binapi/memclnt"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// cnatMessages are the messages of the optional cnat plugin (VPP 26.06's,
// from internal/binapi/cnat): without them only cnat keys fail (with
// ErrIncompatible). cnat_session_purge is not among them: it deletes
// every translation too.
func cnatMessages() []api.Message {
	return []api.Message{
		&vppmemclnt.ControlPing{}, &vppmemclnt.ControlPingReply{}, // ends the cnat dumps
		&cnat.CnatTranslationUpdate{}, &cnat.CnatTranslationUpdateReply{},
		&cnat.CnatTranslationDel{}, &cnat.CnatTranslationDelReply{},
		&cnat.CnatTranslationDump{}, &cnat.CnatTranslationDetails{},
		&cnat.CnatSetSnatAddresses{}, &cnat.CnatSetSnatAddressesReply{},
		&cnat.CnatSetSnatAddressesV2{}, &cnat.CnatSetSnatAddressesV2Reply{},
		&cnat.CnatGetSnatAddresses{}, &cnat.CnatGetSnatAddressesReply{},
		&cnat.CnatSnatPolicyAddDelExcludePfx{}, &cnat.CnatSnatPolicyAddDelExcludePfxReply{},
		&cnat.CnatSetSnatPolicy{}, &cnat.CnatSetSnatPolicyReply{},
		&cnat.CnatSnatPolicyAddDelIf{}, &cnat.CnatSnatPolicyAddDelIfReply{},
		&cnat.FeatureCnatEnableDisable{}, &cnat.FeatureCnatEnableDisableReply{},
	}
}

// VPP retvals of the cnat plugin.
const (
	rvFeatureDisabled = -30 // no default SNAT entry
)

// ---- values

// cnatEP is an endpoint of a path: an address (invalid: none, for a
// source) and a port (0: none).
type cnatEP struct {
	addr netip.Addr
	port uint16
}

func (e cnatEP) cmp(o cnatEP) int {
	return cmp.Or(e.addr.Compare(o.addr), cmp.Compare(e.port, o.port))
}

// cnatPathVal is one backend of a translation (comparable).
type cnatPathVal struct {
	dst, src cnatEP
	noNAT    bool
}

func cmpCnatPath(a, b cnatPathVal) int {
	c := cmp.Or(a.dst.cmp(b.dst), a.src.cmp(b.src))
	if c == 0 && a.noNAT != b.noNAT {
		if a.noNAT {
			return 1
		}
		return -1
	}
	return c
}

// cnatTrHead is everything of a translation but its paths (comparable).
type cnatTrHead struct {
	proto     uint8
	vip       netip.Addr
	port      uint16
	lbType    uint8
	realIP    bool   // not reported by VPP: from the driver's record
	allocPort bool   // the same
	noReturn  bool   // the same
	noClient  bool   // the same
	fhc       uint32 // the same
}

// flags returns the translation flags VPP takes.
func (h *cnatTrHead) flags() uint8 {
	var f uint8
	if h.allocPort {
		f |= uint8(cnat.CNAT_TRANSLATION_ALLOC_PORT)
	}
	if h.noReturn {
		f |= uint8(cnat.CNAT_TRANSLATION_NO_RETURN_SESSION)
	}
	if h.noClient {
		f |= uint8(cnat.CNAT_TRANSLATION_NO_CLIENT)
	}
	return f
}

// cnatTrVal is a cnat translation; VPP's id of it is the item's index.
type cnatTrVal struct {
	cnatTrHead
	paths []cnatPathVal // sorted
}

func (v *cnatTrVal) kind() kind { return kindCnat }
func (v *cnatTrVal) key() string {
	return vppmodel.CnatTranslationKey(uint32(v.proto), v.vip, uint32(v.port))
}
func (v *cnatTrVal) deps() []string { return nil }
func (v *cnatTrVal) equal(o value) bool {
	w := o.(*cnatTrVal)
	return v.cnatTrHead == w.cnatTrHead && slices.Equal(v.paths, w.paths)
}

func (v *cnatTrVal) message() proto.Message {
	m := &vppmodel.CnatTranslation{Vip: v.vip.String(), Port: uint32(v.port), Protocol: uint32(v.proto),
		LbType: vppmodel.CnatTranslation_LbType(v.lbType), RealIp: v.realIP, AllocPort: v.allocPort,
		NoReturnSession: v.noReturn, NoClient: v.noClient, FlowHashConfig: v.fhc}
	for _, p := range v.paths {
		mp := &vppmodel.CnatPath{DstIp: p.dst.addr.String(), DstPort: uint32(p.dst.port), SrcPort: uint32(p.src.port), NoNat: p.noNAT}
		if p.src.addr.IsValid() {
			mp.SrcIp = p.src.addr.String()
		}
		m.Paths = append(m.Paths, mp)
	}
	return m
}

func parseCnatTr(m *vppmodel.CnatTranslation) (*cnatTrVal, error) {
	vip, err := netip.ParseAddr(m.GetVip())
	if err != nil {
		return nil, err
	}
	v := &cnatTrVal{cnatTrHead: cnatTrHead{proto: uint8(m.GetProtocol()), vip: vip, port: uint16(m.GetPort()),
		lbType: uint8(m.GetLbType()), realIP: m.GetRealIp(), allocPort: m.GetAllocPort(),
		noReturn: m.GetNoReturnSession(), noClient: m.GetNoClient(), fhc: m.GetFlowHashConfig()},
		paths: make([]cnatPathVal, 0, len(m.GetPaths()))}
	for _, p := range m.GetPaths() {
		dst, err := netip.ParseAddr(p.GetDstIp())
		if err != nil {
			return nil, err
		}
		pv := cnatPathVal{dst: cnatEP{dst, uint16(p.GetDstPort())}, src: cnatEP{port: uint16(p.GetSrcPort())}, noNAT: p.GetNoNat()}
		if s := p.GetSrcIp(); s != "" {
			if pv.src.addr, err = netip.ParseAddr(s); err != nil {
				return nil, err
			}
		}
		v.paths = append(v.paths, pv)
	}
	slices.SortFunc(v.paths, cmpCnatPath)
	return v, nil
}

// cnatSnatVal is the default SNAT entry with its excluded prefixes and
// policy.
type cnatSnatVal struct {
	ip4, ip6 netip.Addr     // invalid: not set
	exclude  []netip.Prefix // sorted; VPP does not report them: from the driver's record
	policy   uint8          // the same
	noClient bool           // the same
}

func (v *cnatSnatVal) kind() kind     { return kindCnatSnat }
func (v *cnatSnatVal) key() string    { return vppmodel.CnatSnatKey }
func (v *cnatSnatVal) deps() []string { return nil }
func (v *cnatSnatVal) equal(o value) bool {
	w := o.(*cnatSnatVal)
	return v.ip4 == w.ip4 && v.ip6 == w.ip6 && v.policy == w.policy && v.noClient == w.noClient && slices.Equal(v.exclude, w.exclude)
}

func (v *cnatSnatVal) message() proto.Message {
	m := &vppmodel.CnatSnat{Policy: vppmodel.CnatSnat_Policy(v.policy), NoClient: v.noClient}
	if v.ip4.IsValid() {
		m.Ip4 = v.ip4.String()
	}
	if v.ip6.IsValid() {
		m.Ip6 = v.ip6.String()
	}
	for _, p := range v.exclude {
		m.ExcludedPrefixes = append(m.ExcludedPrefixes, p.String())
	}
	return m
}

func parseCnatSnat(m *vppmodel.CnatSnat) (*cnatSnatVal, error) {
	v := &cnatSnatVal{policy: uint8(m.GetPolicy()), noClient: m.GetNoClient()}
	var err error
	if s := m.GetIp4(); s != "" {
		if v.ip4, err = netip.ParseAddr(s); err != nil {
			return nil, err
		}
	}
	if s := m.GetIp6(); s != "" {
		if v.ip6, err = netip.ParseAddr(s); err != nil {
			return nil, err
		}
	}
	for _, s := range m.GetExcludedPrefixes() {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		v.exclude = append(v.exclude, p)
	}
	slices.SortFunc(v.exclude, cmpPrefix)
	return v, nil
}

var cnatSnatDeps = []string{vppmodel.CnatSnatKey}

// cnatTables is an interface's membership in the SNAT policy's tables
// (comparable).
type cnatTables struct {
	v4, v6, pod, host bool
}

func (t cnatTables) any() bool { return t.v4 || t.v6 || t.pod || t.host }

// cnatIfaceVal is what cnat does on an interface.
type cnatIfaceVal struct {
	iface   string
	feature bool
	tables  cnatTables
	depKeys []string // the interface; the SNAT entry if in a table
}

func newCnatIface(iface string, feature bool, tables cnatTables) *cnatIfaceVal {
	v := &cnatIfaceVal{iface: iface, feature: feature, tables: tables, depKeys: []string{vppmodel.InterfaceKey(iface)}}
	if tables.any() {
		v.depKeys = append(v.depKeys, cnatSnatDeps...)
	}
	return v
}

func (v *cnatIfaceVal) kind() kind     { return kindCnatIface }
func (v *cnatIfaceVal) key() string    { return vppmodel.CnatInterfaceKey(v.iface) }
func (v *cnatIfaceVal) deps() []string { return v.depKeys }
func (v *cnatIfaceVal) ifKey() string  { return v.depKeys[0] }

// goesWith: VPP drops the cnat feature of an interface it deletes; it
// leaves the interface in the SNAT tables (the next interface with its
// index would be in them), so those are removed before, by request.
func (v *cnatIfaceVal) goesWith() string {
	if v.tables.any() {
		return ""
	}
	return v.depKeys[0]
}

func (v *cnatIfaceVal) equal(o value) bool {
	w := o.(*cnatIfaceVal)
	return v.iface == w.iface && v.feature == w.feature && v.tables == w.tables
}

func (v *cnatIfaceVal) message() proto.Message {
	return &vppmodel.CnatInterface{Interface: v.iface, Feature: v.feature, SnatPod: v.tables.pod, SnatHost: v.tables.host,
		SnatV4: v.tables.v4, SnatV6: v.tables.v6}
}

// ---- operations

// cnatEndpoint is an endpoint by address (sw_if_index ~0: never Go's 0,
// which VPP takes for local0's address, see the traces), of the family
// v6 when a is invalid (none).
func cnatEndpoint(a netip.Addr, port uint16, v6 bool) cnat.CnatEndpoint {
	if !a.IsValid() {
		a = netip.IPv4Unspecified()
		if v6 {
			a = netip.IPv6Unspecified()
		}
	}
	ep := cnat.CnatEndpoint{Addr: vppconv.Address(a), SwIfIndex: interface_types.InterfaceIndex(noIndex), Port: port}
	if v6 {
		ep.IfAf = ip_types.ADDRESS_IP6
	}
	return ep
}

func cnatTrMsg(m *cnatTrVal) *cnat.CnatTranslationUpdate {
	v6 := m.vip.Is6()
	t := cnat.CnatTranslation{Vip: cnatEndpoint(m.vip, m.port, v6), ID: noIndex, IPProto: ip_types.IPProto(m.proto),
		Flags: m.flags(), LbType: cnat.CnatLbType(m.lbType), FlowHashConfig: ip.IPFlowHashConfigV2(m.fhc), NPaths: uint32(len(m.paths)),
		Paths: make([]cnat.CnatEndpointTuple, len(m.paths))}
	if m.realIP {
		t.IsRealIP = 1
	}
	for i, p := range m.paths {
		t.Paths[i] = cnat.CnatEndpointTuple{DstEp: cnatEndpoint(p.dst.addr, p.dst.port, v6),
			SrcEp: cnatEndpoint(p.src.addr, p.src.port, v6)}
		if p.noNAT {
			t.Paths[i].Flags = uint8(cnat.CNAT_EPT_NO_NAT)
		}
	}
	return &cnat.CnatTranslationUpdate{Translation: t}
}

// cnatTrPut creates a translation or changes its paths and flags in
// place (cnat_translation_update: VPP finds it by VIP, protocol and port
// and keeps its id). Never with 0 paths: VPP 26.06 dies on them (model
// validation refuses them; this is the last guard).
func (d *Driver) cnatTrPut(it *item, m *cnatTrVal) *op {
	o := &op{it: it}
	if d.cnatErr != nil {
		o.err = d.cnatErr
		return o
	}
	if len(m.paths) == 0 {
		o.err = fmt.Errorf("%w: a cnat translation without paths (VPP 26.06 dies on it)", ErrInvalidValue)
		return o
	}
	o.stages = append(o.stages, func() []call {
		return []call{{req: cnatTrMsg(m), done: func(rep api.Message, err error) {
			if err != nil {
				o.fail(err)
				return
			}
			it.index = rep.(*cnat.CnatTranslationUpdateReply).ID
		}}}
	})
	return o
}

// cnatTrDelete deletes a translation. A VIP address that is also an
// address of the SNAT entry shares the entry's cnat client, which VPP
// frees with the address's last translation: the entry then works without
// it, and VPP 26.06 dies when the entry is deleted
// (12-cnat_sessions_crashes.json, part H). So after deleting such a
// translation the SNAT addresses are set again (once per batch of
// deletions, after all of them; not when the entry is deleted in the same
// pass), which makes the client again.
func (d *Driver) cnatTrDelete(it *item, old *cnatTrVal) *op {
	o := &op{it: it}
	if d.cnatErr != nil {
		o.err = d.cnatErr
		return o
	}
	batch := d.cnatBatch
	o.stages = append(o.stages, func() []call {
		if it.index == noIndex {
			return nil
		}
		return []call{{req: &cnat.CnatTranslationDel{ID: it.index}, done: o.expect(rvNoSuchEntry)}}
	}, func() []call {
		s := d.items[vppmodel.CnatSnatKey]
		if s == nil || d.cnatReset == batch || s.mark.del == d.gen {
			return nil // none; set again already; or deleted in this pass, which sets them again first
		}
		snat, ok := s.have.(*cnatSnatVal)
		if !ok || snat.noClient || (snat.ip4 != old.vip && snat.ip6 != old.vip) {
			return nil // an entry without clients shares none
		}
		d.cnatReset = batch
		return []call{{req: snatAddrs(snat), done: o.expect()}}
	})
	return o
}

// snatAddrs builds cnat_set_snat_addresses (FIB index 0 of both families,
// addresses only: sw_if_index ~0), or its v2 with the NO_CLIENT flag for
// an entry without clients; a nil v (all zero) deletes the entry.
func snatAddrs(v *cnatSnatVal) api.Message {
	var ip4, ip6 netip.Addr
	if v != nil {
		ip4, ip6 = v.ip4, v.ip6
	}
	var a4 ip_types.IP4Address
	var a6 ip_types.IP6Address
	if ip4.IsValid() {
		a4 = ip4.As4()
	}
	if ip6.IsValid() {
		a6 = ip6.As16()
	}
	if v != nil && v.noClient {
		return &cnat.CnatSetSnatAddressesV2{SnatIP4: a4, SnatIP6: a6, SwIfIndex: interface_types.InterfaceIndex(noIndex),
			Flags: cnat.CNAT_SNAT_POLICY_F_NO_CLIENT}
	}
	return &cnat.CnatSetSnatAddresses{SnatIP4: a4, SnatIP6: a6, SwIfIndex: interface_types.InterfaceIndex(noIndex)}
}

func excludeMsg(p netip.Prefix, add bool) *cnat.CnatSnatPolicyAddDelExcludePfx {
	r := &cnat.CnatSnatPolicyAddDelExcludePfx{Prefix: vppconv.Prefix(p)}
	if add {
		r.IsAdd = 1
	}
	return r
}

// cnatSnatPut sets the SNAT addresses, then adds and removes excluded
// prefixes and sets the policy. VPP 26.06 dies on an excluded prefix or
// a policy without a default entry: the addresses are set before them
// every time, also when they do not change (an entry deleted behind the
// driver's back is made again, not a crash).
func (d *Driver) cnatSnatPut(it *item, m *cnatSnatVal) *op {
	o := &op{it: it}
	if d.cnatErr != nil {
		o.err = d.cnatErr
		return o
	}
	old, _ := it.have.(*cnatSnatVal)
	addrs := old == nil || old.ip4 != m.ip4 || old.ip6 != m.ip6 || old.noClient != m.noClient
	if old == nil {
		old = &cnatSnatVal{}
	}
	var policy []call
	for _, p := range m.exclude {
		if !slices.Contains(old.exclude, p) {
			policy = append(policy, call{req: excludeMsg(p, true), done: o.expect()})
		}
	}
	for _, p := range old.exclude {
		if !slices.Contains(m.exclude, p) {
			policy = append(policy, call{req: excludeMsg(p, false), done: o.expect()})
		}
	}
	if old.policy != m.policy {
		policy = append(policy, call{req: &cnat.CnatSetSnatPolicy{Policy: cnat.CnatSnatPolicies(m.policy)}, done: o.expect()})
	}
	if addrs || len(policy) > 0 {
		o.stages = append(o.stages, func() []call { return []call{{req: snatAddrs(m), done: o.expect()}} })
	}
	if len(policy) > 0 {
		o.stages = append(o.stages, func() []call { return policy })
	}
	return o
}

// cnatSnatDelete deletes the default SNAT entry (its excluded prefixes and
// interface tables go with it). The addresses are set again first: a
// translation of the same VIP address may have taken the entry's cnat
// client along, and VPP 26.06 dies deleting an entry whose client is gone
// (12-cnat_sessions_crashes.json, part H); setting them makes it again.
func (d *Driver) cnatSnatDelete(it *item, old *cnatSnatVal) *op {
	o := &op{it: it}
	if d.cnatErr != nil {
		o.err = d.cnatErr
		return o
	}
	if !old.noClient { // an entry without clients shares none
		o.stages = append(o.stages, func() []call { return []call{{req: snatAddrs(old), done: o.expect()}} })
	}
	o.stages = append(o.stages, func() []call {
		return []call{{req: snatAddrs(nil), done: o.expect(rvFeatureDisabled)}}
	})
	return o
}

func cnatFeatureMsg(sw interface_types.InterfaceIndex, enable bool) *cnat.FeatureCnatEnableDisable {
	return &cnat.FeatureCnatEnableDisable{SwIfIndex: sw, EnableDisable: enable}
}

func cnatTableMsg(sw interface_types.InterfaceIndex, table cnat.CnatSnatPolicyTable, add bool) *cnat.CnatSnatPolicyAddDelIf {
	r := &cnat.CnatSnatPolicyAddDelIf{SwIfIndex: sw, Table: table}
	if add {
		r.IsAdd = 1
	}
	return r
}

// cnatIfacePut enables or disables the cnat feature and adds and removes
// the interface from the SNAT tables, from what VPP holds: VPP stacks the
// feature's nodes again at every enable, so the driver enables it once
// and remembers that it did.
func (d *Driver) cnatIfacePut(it *item, m *cnatIfaceVal) *op {
	o := &op{it: it}
	if d.cnatErr != nil {
		o.err = d.cnatErr
		return o
	}
	old, _ := it.have.(*cnatIfaceVal)
	if old == nil {
		old = &cnatIfaceVal{}
	}
	o.stages = append(o.stages, func() []call {
		dep := d.items[m.ifKey()]
		if dep == nil || !dep.created() {
			o.fail(fmt.Errorf("interface %q is not configured", m.iface))
			return nil
		}
		sw := interface_types.InterfaceIndex(dep.index)
		var cs []call
		if m.feature != old.feature {
			cs = append(cs, call{req: cnatFeatureMsg(sw, m.feature), done: o.expect()})
		}
		for _, t := range []struct {
			table      cnat.CnatSnatPolicyTable
			want, have bool
		}{{cnat.CNAT_POLICY_INCLUDE_V4, m.tables.v4, old.tables.v4}, {cnat.CNAT_POLICY_INCLUDE_V6, m.tables.v6, old.tables.v6},
			{cnat.CNAT_POLICY_POD, m.tables.pod, old.tables.pod}, {cnat.CNAT_POLICY_HOST, m.tables.host, old.tables.host}} {
			if t.want != t.have {
				cs = append(cs, call{req: cnatTableMsg(sw, t.table, t.want), done: o.expect()})
			}
		}
		return cs
	})
	return o
}

// cnatIfaceDelete disables the feature and removes the interface from the
// SNAT tables (nothing is sent for a feature alone when the interface goes
// in the same pass: VPP drops it with the interface, see planWith).
func (d *Driver) cnatIfaceDelete(it *item, old *cnatIfaceVal) *op {
	o := &op{it: it}
	if d.cnatErr != nil {
		o.err = d.cnatErr
		return o
	}
	o.stages = append(o.stages, func() []call {
		dep := d.items[old.ifKey()]
		if dep == nil || !dep.created() {
			return nil // the interface is gone, and the feature with it
		}
		sw := interface_types.InterfaceIndex(dep.index)
		var cs []call
		if old.feature {
			cs = append(cs, call{req: cnatFeatureMsg(sw, false), done: o.expect(rvInvalidSwIfIndex)})
		}
		// -30: the SNAT entry is gone, and its tables with it.
		for _, t := range []struct {
			table cnat.CnatSnatPolicyTable
			in    bool
		}{{cnat.CNAT_POLICY_INCLUDE_V4, old.tables.v4}, {cnat.CNAT_POLICY_INCLUDE_V6, old.tables.v6},
			{cnat.CNAT_POLICY_POD, old.tables.pod}, {cnat.CNAT_POLICY_HOST, old.tables.host}} {
			if t.in {
				cs = append(cs, call{req: cnatTableMsg(sw, t.table, false), done: o.expect(rvInvalidSwIfIndex, rvFeatureDisabled)})
			}
		}
		return cs
	})
	return o
}

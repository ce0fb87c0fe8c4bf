package vppdriver

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/acl"
	"go.fd.io/govpp/binapi/acl_types"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip_types"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// aclMessages are the messages of the optional ACL plugin: without them
// only ACL keys fail (with ErrIncompatible).
func aclMessages() []api.Message {
	return []api.Message{
		&acl.ACLAddReplace{}, &acl.ACLAddReplaceReply{},
		&acl.ACLDel{}, &acl.ACLDelReply{},
		&acl.ACLDump{}, &acl.ACLDetails{},
		&acl.ACLInterfaceSetACLList{}, &acl.ACLInterfaceSetACLListReply{},
		&acl.ACLInterfaceListDump{}, &acl.ACLInterfaceListDetails{},
	}
}

// ---- values

// aclRuleVal is an ACL rule as VPP echoes it in acl_dump (comparable).
type aclRuleVal struct {
	action   acl_types.ACLAction
	src, dst netip.Prefix
	proto    uint8
	// sport and dport are [first, last] (ICMP: type and code ranges).
	sport, dport       [2]uint16
	tcpMask, tcpValues uint8 // never set by the model; read back to notice foreign ones
}

// aclVal is an ACL: its rules in order. VPP's index of it is the item's
// index.
type aclVal struct {
	name  string
	rules []aclRuleVal
}

func (v *aclVal) kind() kind     { return kindACL }
func (v *aclVal) key() string    { return vppmodel.ACLKey(v.name) }
func (v *aclVal) deps() []string { return nil }
func (v *aclVal) equal(o value) bool {
	w := o.(*aclVal)
	return v.name == w.name && slices.Equal(v.rules, w.rules)
}

func (v *aclVal) message() proto.Message {
	m := &vppmodel.ACL{Name: v.name, Rules: make([]*vppmodel.ACLRule, 0, len(v.rules))}
	for _, r := range v.rules {
		m.Rules = append(m.Rules, &vppmodel.ACLRule{Action: vppmodel.ACLRule_Action(r.action),
			SrcPrefix: r.src.String(), DstPrefix: r.dst.String(), Protocol: uint32(r.proto),
			SrcPortFirst: uint32(r.sport[0]), SrcPortLast: uint32(r.sport[1]),
			DstPortFirst: uint32(r.dport[0]), DstPortLast: uint32(r.dport[1])})
	}
	return m
}

func parseACL(m *vppmodel.ACL) (*aclVal, error) {
	v := &aclVal{name: m.GetName(), rules: make([]aclRuleVal, 0, len(m.GetRules()))}
	for _, r := range m.GetRules() {
		src, err := netip.ParsePrefix(r.GetSrcPrefix())
		if err != nil {
			return nil, err
		}
		dst, err := netip.ParsePrefix(r.GetDstPrefix())
		if err != nil {
			return nil, err
		}
		v.rules = append(v.rules, aclRuleVal{action: acl_types.ACLAction(r.GetAction()), src: src, dst: dst,
			proto: uint8(r.GetProtocol()),
			sport: [2]uint16{uint16(r.GetSrcPortFirst()), uint16(r.GetSrcPortLast())},
			dport: [2]uint16{uint16(r.GetDstPortFirst()), uint16(r.GetDstPortLast())}})
	}
	return v, nil
}

// aclRuleOf converts a rule that VPP reports.
func aclRuleOf(r acl_types.ACLRule) aclRuleVal {
	return aclRuleVal{action: r.IsPermit, src: vppconv.PrefixOf(r.SrcPrefix), dst: vppconv.PrefixOf(r.DstPrefix),
		proto:   uint8(r.Proto),
		sport:   [2]uint16{r.SrcportOrIcmptypeFirst, r.SrcportOrIcmptypeLast},
		dport:   [2]uint16{r.DstportOrIcmpcodeFirst, r.DstportOrIcmpcodeLast},
		tcpMask: r.TCPFlagsMask, tcpValues: r.TCPFlagsValue}
}

func (r *aclRuleVal) vpp() acl_types.ACLRule {
	return acl_types.ACLRule{IsPermit: r.action, SrcPrefix: vppconv.Prefix(r.src), DstPrefix: vppconv.Prefix(r.dst),
		Proto:                  ip_types.IPProto(r.proto),
		SrcportOrIcmptypeFirst: r.sport[0], SrcportOrIcmptypeLast: r.sport[1],
		DstportOrIcmpcodeFirst: r.dport[0], DstportOrIcmpcodeLast: r.dport[1],
		TCPFlagsMask: r.tcpMask, TCPFlagsValue: r.tcpValues}
}

// aclIfaceVal is the ACL lists of an interface, by ACL name.
type aclIfaceVal struct {
	iface         string
	input, output []string
	depKeys       []string // the interface, then every ACL named
}

func newACLIface(iface string, input, output []string) *aclIfaceVal {
	v := &aclIfaceVal{iface: iface, input: input, output: output}
	deps := depsOf{vppmodel.InterfaceKey(iface)}
	for _, n := range input {
		deps.add(vppmodel.ACLKey(n))
	}
	for _, n := range output {
		deps.add(vppmodel.ACLKey(n))
	}
	v.depKeys = deps
	return v
}

func (v *aclIfaceVal) kind() kind     { return kindACLIface }
func (v *aclIfaceVal) key() string    { return vppmodel.ACLInterfaceKey(v.iface) }
func (v *aclIfaceVal) deps() []string { return v.depKeys }
func (v *aclIfaceVal) ifKey() string  { return v.depKeys[0] }

// goesWith: VPP drops the lists of an interface it deletes.
func (v *aclIfaceVal) goesWith() string { return v.depKeys[0] }

func (v *aclIfaceVal) equal(o value) bool {
	w := o.(*aclIfaceVal)
	return v.iface == w.iface && slices.Equal(v.input, w.input) && slices.Equal(v.output, w.output)
}

func (v *aclIfaceVal) message() proto.Message {
	return &vppmodel.ACLInterface{Interface: v.iface, Input: slices.Clone(v.input), Output: slices.Clone(v.output)}
}

func parseACLIface(m *vppmodel.ACLInterface) *aclIfaceVal {
	return newACLIface(m.GetInterface(), slices.Clone(m.GetInput()), slices.Clone(m.GetOutput()))
}

// ---- operations

// aclPut creates an ACL (acl_add_replace with index ~0: VPP picks the
// index) or replaces its rules in place (with its index: VPP keeps the
// index, and the ACL stays applied where it is). A replace of an index
// VPP no longer has (-6) forgets the index: the retry creates the ACL.
func (d *Driver) aclPut(it *item, m *aclVal) *op {
	o := &op{it: it}
	if d.aclErr != nil {
		o.err = d.aclErr
		return o
	}
	o.stages = append(o.stages, func() []call {
		rules := make([]acl_types.ACLRule, len(m.rules))
		for i := range m.rules {
			rules[i] = m.rules[i].vpp()
		}
		req := &acl.ACLAddReplace{ACLIndex: it.index, Tag: d.cfg.TagPrefix + m.name, Count: uint32(len(rules)), R: rules}
		return []call{{req: req, done: func(rep api.Message, err error) {
			var ve *VPPError
			if errors.As(err, &ve) && ve.Retval == rvNoSuchEntry && req.ACLIndex != noIndex {
				it.index = noIndex
			}
			if err != nil {
				o.fail(err)
				return
			}
			it.index = rep.(*acl.ACLAddReplaceReply).ACLIndex
		}}}
	})
	return o
}

// aclDelete deletes an ACL. VPP refuses while an interface's list names
// it (-142, -143): the driver changes or removes its own lists first (see
// planLocked); a foreign list keeps it failing, retried.
func (d *Driver) aclDelete(it *item) *op {
	o := &op{it: it}
	if d.aclErr != nil {
		o.err = d.aclErr
		return o
	}
	o.stages = append(o.stages, func() []call {
		if it.index == noIndex {
			return nil
		}
		return []call{{req: &acl.ACLDel{ACLIndex: it.index}, done: o.expect(rvNoSuchEntry)}}
	})
	return o
}

// aclListMsg builds acl_interface_set_acl_list for the interface of m,
// input ACLs first (nil m: an empty list, which clears the interface's).
func (d *Driver) aclListMsg(sw uint32, m *aclIfaceVal) (*acl.ACLInterfaceSetACLList, error) {
	req := &acl.ACLInterfaceSetACLList{SwIfIndex: interface_types.InterfaceIndex(sw)}
	if m == nil {
		return req, nil
	}
	req.Acls = make([]uint32, 0, len(m.input)+len(m.output))
	for _, names := range [][]string{m.input, m.output} {
		for _, n := range names {
			dep := d.items[vppmodel.ACLKey(n)]
			if dep == nil || dep.index == noIndex {
				return nil, fmt.Errorf("acl %q is not configured", n)
			}
			req.Acls = append(req.Acls, dep.index)
		}
	}
	req.Count, req.NInput = uint8(len(req.Acls)), uint8(len(m.input))
	return req, nil
}

// aclIfacePut sets an interface's ACL lists: one request, for a creation
// and a change alike.
func (d *Driver) aclIfacePut(it *item, m *aclIfaceVal) *op {
	o := &op{it: it}
	if d.aclErr != nil {
		o.err = d.aclErr
		return o
	}
	o.stages = append(o.stages, func() []call {
		dep := d.items[m.ifKey()]
		if dep == nil || !dep.created() {
			o.fail(fmt.Errorf("interface %q is not configured", m.iface))
			return nil
		}
		req, err := d.aclListMsg(dep.index, m)
		if err != nil {
			o.fail(err)
			return nil
		}
		return []call{{req: req, done: o.expect()}}
	})
	return o
}

// aclIfaceDelete clears an interface's ACL lists (not sent when the
// interface goes in the same pass: VPP drops them with it, see
// planWith).
func (d *Driver) aclIfaceDelete(it *item, m *aclIfaceVal) *op {
	o := &op{it: it}
	if d.aclErr != nil {
		o.err = d.aclErr
		return o
	}
	o.stages = append(o.stages, func() []call {
		dep := d.items[m.ifKey()]
		if dep == nil || !dep.created() {
			return nil // the interface is gone, and its lists with it
		}
		req, _ := d.aclListMsg(dep.index, nil)
		return []call{{req: req, done: o.expect(rvInvalidSwIfIndex)}}
	})
	return o
}

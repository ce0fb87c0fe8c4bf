package vppmodel

import (
	"net/netip"
)

// Key prefixes of the ACL kinds.
const (
	ACLKeyPrefix          = KeyRoot + "acl/"
	ACLInterfaceKeyPrefix = KeyRoot + "acl-interface/"
)

// ACLKey returns the key of the ACL named name.
func ACLKey(name string) string { return ACLKeyPrefix + name }

// ACLInterfaceKey returns the key of the ACLs applied to interface iface.
func ACLInterfaceKey(iface string) string { return ACLInterfaceKeyPrefix + iface }

// IP protocol numbers of ACL rules.
const (
	ProtoICMP   = 1
	ProtoTCP    = 6
	ProtoUDP    = 17
	ProtoICMPv6 = 58
	ProtoSCTP   = 132
)

// MaxACLRules bounds the rules of one ACL (VPP's message must fit its
// API buffer; the real VPP took 1000-rule ACLs as one message, see the
// traces).
const MaxACLRules = 65535

func validateACL(m *ACL) error {
	if m == nil {
		return invalid("nil acl")
	}
	if !validName(m.GetName()) {
		return invalid("acl name %q: want 1-%d bytes without '/', '=' or white space", m.GetName(), MaxInterfaceNameLen)
	}
	if len(m.GetRules()) > MaxACLRules {
		return invalid("acl %s: %d rules, at most %d", m.GetName(), len(m.GetRules()), MaxACLRules)
	}
	for i, r := range m.GetRules() {
		if err := validateACLRule(r); err != nil {
			return invalid("acl %s: rule %d: %v", m.GetName(), i, err)
		}
	}
	return nil
}

func validateACLRule(r *ACLRule) error {
	switch r.GetAction() {
	case ACLRule_DENY, ACLRule_PERMIT, ACLRule_PERMIT_REFLECT:
	default:
		return invalid("unknown action %d", r.GetAction())
	}
	src, err := netip.ParsePrefix(r.GetSrcPrefix())
	if err != nil {
		return invalid("source prefix %q: %v", r.GetSrcPrefix(), err)
	}
	dst, err := netip.ParsePrefix(r.GetDstPrefix())
	if err != nil {
		return invalid("destination prefix %q: %v", r.GetDstPrefix(), err)
	}
	if src.Addr().Is4() != dst.Addr().Is4() {
		return invalid("source %s and destination %s are of different families", src, dst)
	}
	if src.Masked() != src || dst.Masked() != dst {
		return invalid("prefix %s or %s has host bits set (VPP refuses them)", src, dst)
	}
	if r.GetProtocol() > 255 {
		return invalid("protocol %d", r.GetProtocol())
	}
	for _, pr := range [][2]uint32{{r.GetSrcPortFirst(), r.GetSrcPortLast()}, {r.GetDstPortFirst(), r.GetDstPortLast()}} {
		if pr[0] > pr[1] || pr[1] > 65535 {
			return invalid("port range %d-%d", pr[0], pr[1])
		}
	}
	return nil
}

func validateACLInterface(m *ACLInterface) error {
	if m == nil {
		return invalid("nil acl interface")
	}
	if !validName(m.GetInterface()) {
		return invalid("acl interface %q: not an interface name", m.GetInterface())
	}
	seen := map[string]bool{}
	for _, dir := range [][]string{m.GetInput(), m.GetOutput()} {
		clear(seen)
		for _, n := range dir {
			if !validName(n) {
				return invalid("acl interface %s: acl name %q", m.GetInterface(), n)
			}
			if seen[n] {
				// VPP answers +1 and leaves the list as it was.
				return invalid("acl interface %s: acl %s twice in one direction", m.GetInterface(), n)
			}
			seen[n] = true
		}
	}
	if len(m.GetInput())+len(m.GetOutput()) > 255 {
		return invalid("acl interface %s: more than 255 acls", m.GetInterface())
	}
	return nil
}

// ACLNames returns the ACLs an ACLInterface refers to, input first.
func (m *ACLInterface) ACLNames() []string {
	return append(append([]string(nil), m.GetInput()...), m.GetOutput()...)
}

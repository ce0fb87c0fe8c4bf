package vppdriver

import (
	"context"
	"fmt"
	"strings"

	"go.fd.io/govpp/binapi/acl"
	"go.fd.io/govpp/binapi/interface_types"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// aclDumped is what a readback dumps of the ACL plugin, typed.
type aclDumped struct {
	acls  []*acl.ACLDetails
	lists []*acl.ACLInterfaceListDetails
}

// readACLs reads the ACLs the driver owns (tagged TagPrefix + name: their
// rules as VPP echoes them, and their indexes) and the ACL lists of owned
// interfaces, by ACL name (an ACL the driver does not own is named by its
// index, which no desired value uses). An owned interface without ACLs
// has an (empty) ACLInterface only if the driver knows its key (applied
// or desired). Two ACLs with one owned tag: the one with the lowest index
// is the driver's, the other is left alone.
func (d *Driver) readACLs(ctx context.Context, ifs *ownedIfaces) ([]found, error) {
	x := &aclDumped{}
	var b dumpBatch
	addDump(&b, &acl.ACLDump{ACLIndex: noIndex}, &x.acls)
	addDump(&b, &acl.ACLInterfaceListDump{SwIfIndex: interface_types.InterfaceIndex(noIndex)}, &x.lists)
	if err := b.run(ctx, d.cl); err != nil {
		return nil, err
	}
	var out []found
	names := make(map[uint32]string, len(x.acls))
	seen := map[string]bool{}
	for _, r := range x.acls { // by ascending index
		name, ok := strings.CutPrefix(r.Tag, d.cfg.TagPrefix)
		if !ok || seen[name] || vppmodel.Validate(&vppmodel.ACL{Name: name}) != nil {
			continue
		}
		seen[name] = true
		names[r.ACLIndex] = name
		v := &aclVal{name: name, rules: make([]aclRuleVal, len(r.R))}
		for i, rule := range r.R {
			v.rules[i] = aclRuleOf(rule)
		}
		out = append(out, found{value: v, index: r.ACLIndex})
	}
	nameOf := func(idx uint32) string {
		if n, ok := names[idx]; ok {
			return n
		}
		return fmt.Sprintf("#acl_index=%d", idx)
	}
	for _, r := range x.lists {
		iface, owned := ifs.nameOf(uint32(r.SwIfIndex))
		if !owned {
			continue
		}
		if len(r.Acls) == 0 {
			if it := d.items[vppmodel.ACLInterfaceKey(iface)]; it == nil || (it.want == nil && it.have == nil) {
				continue
			}
		}
		n := min(int(r.NInput), len(r.Acls))
		var in, outACLs []string
		for i, idx := range r.Acls {
			if i < n {
				in = append(in, nameOf(idx))
			} else {
				outACLs = append(outACLs, nameOf(idx))
			}
		}
		out = append(out, found{value: newACLIface(iface, in, outACLs), index: noIndex})
	}
	return out, nil
}

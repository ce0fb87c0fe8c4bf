package gobgp

import (
	"fmt"
	"net/netip"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// pathTable is what a virtual router originates: prefix -> next hop, the
// union of the routes of all its peers (the export policy decides which
// peer gets which, with which attributes). It builds GoBGP paths only for
// the difference, and shares the attributes that are equal for many paths
// (origin, next hop).
//
// Not safe for concurrent use; owned by the Manager under its mutex.
type pathTable struct {
	srv     *server.BgpServer
	applied map[netip.Prefix]netip.Addr
	origin  gobgppkt.PathAttributeInterface
	nhAttrs map[netip.Addr]gobgppkt.PathAttributeInterface
}

func newPathTable(srv *server.BgpServer) *pathTable {
	return &pathTable{
		srv:     srv,
		applied: make(map[netip.Prefix]netip.Addr),
		origin:  gobgppkt.NewPathAttributeOrigin(gobgppkt.BGP_ORIGIN_ATTR_TYPE_IGP),
		nhAttrs: make(map[netip.Addr]gobgppkt.PathAttributeInterface),
	}
}

// retained reports whether prefix p is originated now and stays as it is
// in want (same next hop): its export decisions change only through the
// policy, which needs a soft reset to reach the peers.
func (t *pathTable) retained(p netip.Prefix, want map[netip.Prefix]netip.Addr) bool {
	cur, ok := t.applied[p]
	return ok && want[p] == cur
}

// withdraw withdraws the prefixes not in want. On error the table keeps
// what was applied, so that the next call completes the change.
func (t *pathTable) withdraw(want map[netip.Prefix]netip.Addr) error {
	var del []*apiutil.Path
	var delPrefixes []netip.Prefix
	for p, nh := range t.applied {
		if _, ok := want[p]; ok {
			continue // kept, or replaced by advertise when the next hop changed
		}
		path, err := t.path(p, nh, true)
		if err != nil {
			return err
		}
		del = append(del, path)
		delPrefixes = append(delPrefixes, p)
	}
	if len(del) == 0 {
		return nil
	}
	if err := t.srv.DeletePath(apiutil.DeletePathRequest{Paths: del}); err != nil {
		return fmt.Errorf("withdraw %d paths: %w", len(del), err)
	}
	for _, p := range delPrefixes {
		delete(t.applied, p)
	}
	return nil
}

// advertise originates the prefixes of want that are new or whose next hop
// changed (a new path with the same prefix replaces the old one).
func (t *pathTable) advertise(want map[netip.Prefix]netip.Addr) error {
	var add []*apiutil.Path
	var addPrefixes []netip.Prefix
	for p, nh := range want {
		if cur, ok := t.applied[p]; ok && cur == nh {
			continue
		}
		path, err := t.path(p, nh, false)
		if err != nil {
			return err
		}
		add = append(add, path)
		addPrefixes = append(addPrefixes, p)
	}
	if len(add) == 0 {
		return nil
	}
	resps, err := t.srv.AddPath(apiutil.AddPathRequest{Paths: add})
	if len(resps) == len(add) {
		for i, p := range addPrefixes {
			if resps[i].Error == nil {
				t.applied[p] = want[p]
			}
		}
	}
	if err != nil {
		return fmt.Errorf("advertise %d paths: %w", len(add), err)
	}
	return nil
}

// path returns the GoBGP path of prefix p with next hop nh.
func (t *pathTable) path(p netip.Prefix, nh netip.Addr, withdraw bool) (*apiutil.Path, error) {
	nlri, err := gobgppkt.NewIPAddrPrefix(p)
	if err != nil {
		return nil, fmt.Errorf("path %s: %w", p, err)
	}
	family := gobgppkt.RF_IPv4_UC
	if p.Addr().Is6() {
		family = gobgppkt.RF_IPv6_UC
	}
	nhAttr, ok := t.nhAttrs[nh]
	if !ok {
		// A NEXT_HOP attribute for IPv6 too: GoBGP turns it into the
		// MP_REACH_NLRI of each IPv6 path.
		a, err := gobgppkt.NewPathAttributeNextHop(nh)
		if err != nil {
			return nil, fmt.Errorf("path %s: next hop %s: %w", p, nh, err)
		}
		nhAttr = a
		t.nhAttrs[nh] = a
	}
	return &apiutil.Path{Family: family, Nlri: nlri, Withdrawal: withdraw,
		Attrs: []gobgppkt.PathAttributeInterface{t.origin, nhAttr}}, nil
}

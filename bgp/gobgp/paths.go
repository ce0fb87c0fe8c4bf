package gobgp

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// pathEntry is an originated route: a prefix and its next hop.
type pathEntry struct {
	prefix netip.Prefix
	nh     netip.Addr
}

func comparePath(a pathEntry, p netip.Prefix) int { return comparePrefixes(a.prefix, p) }

// pathTable is what a virtual router originates: the union of the routes
// of all its peers, sorted by prefix, each with its next hop (the export
// policy decides which peer gets which, with which attributes). It builds
// GoBGP paths only for the difference (a merge of two sorted lists, no map
// per route), and shares the attributes that are equal for many paths
// (origin, next hop).
//
// Not safe for concurrent use; owned by the Manager under its mutex.
type pathTable struct {
	srv     *server.BgpServer
	applied []pathEntry // sorted by prefix
	origin  gobgppkt.PathAttributeInterface
	nhAttrs map[netip.Addr]gobgppkt.PathAttributeInterface
}

func newPathTable(srv *server.BgpServer) *pathTable {
	return &pathTable{
		srv:     srv,
		origin:  gobgppkt.NewPathAttributeOrigin(gobgppkt.BGP_ORIGIN_ATTR_TYPE_IGP),
		nhAttrs: make(map[netip.Addr]gobgppkt.PathAttributeInterface),
	}
}

func find(l []pathEntry, p netip.Prefix) (netip.Addr, bool) {
	i, ok := slices.BinarySearchFunc(l, p, comparePath)
	if !ok {
		return netip.Addr{}, false
	}
	return l[i].nh, true
}

// retained reports whether prefix p is originated now and stays as it is
// in want (same next hop): its export decisions change only through the
// policy, which needs a soft reset to reach the peers.
func (t *pathTable) retained(p netip.Prefix, want []pathEntry) bool {
	cur, ok := find(t.applied, p)
	if !ok {
		return false
	}
	nh, ok := find(want, p)
	return ok && nh == cur
}

// diff returns the applied paths whose prefix want lacks (withdraw), and
// the paths of want that are new or whose next hop changed (advertise).
func (t *pathTable) diff(want []pathEntry) (withdraw, advertise []pathEntry) {
	i, j := 0, 0
	for i < len(t.applied) || j < len(want) {
		switch {
		case j == len(want) || (i < len(t.applied) && comparePrefixes(t.applied[i].prefix, want[j].prefix) < 0):
			withdraw = append(withdraw, t.applied[i])
			i++
		case i == len(t.applied) || comparePrefixes(want[j].prefix, t.applied[i].prefix) < 0:
			advertise = append(advertise, want[j])
			j++
		default:
			if t.applied[i].nh != want[j].nh {
				advertise = append(advertise, want[j])
			}
			i++
			j++
		}
	}
	return withdraw, advertise
}

// withdraw withdraws the prefixes not in want. On error the table keeps
// what was applied, so that the next call completes the change.
func (t *pathTable) withdraw(want []pathEntry) error {
	gone, _ := t.diff(want)
	if len(gone) == 0 {
		return nil
	}
	del := make([]*apiutil.Path, 0, len(gone))
	for _, e := range gone {
		path, err := t.path(e.prefix, e.nh, true)
		if err != nil {
			return err
		}
		del = append(del, path)
	}
	if err := t.srv.DeletePath(apiutil.DeletePathRequest{Paths: del}); err != nil {
		return fmt.Errorf("withdraw %d paths: %w", len(del), err)
	}
	t.applied = slices.DeleteFunc(t.applied, func(e pathEntry) bool {
		_, gone := slices.BinarySearchFunc(gone, e.prefix, comparePath)
		return gone
	})
	return nil
}

// advertise originates the prefixes of want that are new or whose next hop
// changed (a new path with the same prefix replaces the old one). Call it
// after withdraw: then the table equals want when it succeeds.
func (t *pathTable) advertise(want []pathEntry) error {
	_, add := t.diff(want)
	if len(add) == 0 {
		return nil
	}
	paths := make([]*apiutil.Path, 0, len(add))
	for _, e := range add {
		path, err := t.path(e.prefix, e.nh, false)
		if err != nil {
			return err
		}
		paths = append(paths, path)
	}
	resps, err := t.srv.AddPath(apiutil.AddPathRequest{Paths: paths})
	if len(resps) == len(add) {
		ok := make([]pathEntry, 0, len(add))
		for i, e := range add {
			if resps[i].Error == nil {
				ok = append(ok, e)
			}
		}
		t.applied = mergePaths(t.applied, ok)
	}
	if err != nil {
		return fmt.Errorf("advertise %d paths: %w", len(add), err)
	}
	return nil
}

// mergePaths returns a with b merged in (both sorted); b wins for equal
// prefixes.
func mergePaths(a, b []pathEntry) []pathEntry {
	if len(b) == 0 {
		return a
	}
	out := make([]pathEntry, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && comparePrefixes(a[i].prefix, b[j].prefix) < 0):
			out = append(out, a[i])
			i++
		case i == len(a) || comparePrefixes(b[j].prefix, a[i].prefix) < 0:
			out = append(out, b[j])
			j++
		default:
			out = append(out, b[j])
			i++
			j++
		}
	}
	return out
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

package gobgp

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/vswitchkit/vswitchkit/bgp"
)

// Names of the two global policies of every virtual router.
const (
	exportPolicyName = "vswitchkit-export"
	importPolicyName = "vswitchkit-import"
)

// policyTable keeps a virtual router's export and import policies in GoBGP
// equal to what its peers are to be sent and accept.
//
// Export: the global export policy rejects every route learned from a peer
// (the speaker is a leaf, never a transit), then has, per peer and per set
// of attributes of its routes (a group), and per family, a statement
// matching a neighbor set (the peer) and a prefix set (the group's routes,
// exact) that adds the group's communities, sets its local preference and
// accepts; the default rejects. Import: per peer and family with an import
// prefix list, a statement matching the peer and a prefix set of the list
// (with its length ranges) accepts; then routes from peers are rejected;
// the default accepts (locally originated paths).
//
// Changes of the prefixes of existing groups are applied by adding to and
// removing from their prefix sets in place; anything else (a peer, a group
// or a family appears or goes, an import list changes) rebuilds the
// policies at once (SetPolicies). Peers whose decisions change for routes
// that stay originated get a soft reset (out), and peers whose import list
// changed a soft reset in.
//
// Not safe for concurrent use; owned by the Manager under its mutex.
type policyTable struct {
	srv       *server.BgpServer
	peers     map[netip.Addr]*peerExport
	imports   map[netip.Addr][]bgp.PrefixMatch
	structure string // of the policies in GoBGP; "" before the first build
	nextID    int
}

// peerExport is what one peer is sent, by attributes.
type peerExport struct {
	groups map[string]*exportGroup // by attribute key
}

// exportGroup is the set of routes of one peer with equal attributes.
type exportGroup struct {
	id     int
	attrs  bgp.Attributes
	v4, v6 []netip.Prefix // sorted
}

func newPolicyTable(srv *server.BgpServer) *policyTable {
	return &policyTable{srv: srv, peers: map[netip.Addr]*peerExport{}, imports: map[netip.Addr][]bgp.PrefixMatch{}}
}

func neighborSetName(addr netip.Addr) string { return "vsk-nb-" + addr.String() }

func groupSetName(addr netip.Addr, id int, v4 bool) string {
	fam := "v6"
	if v4 {
		fam = "v4"
	}
	return "vsk-out-" + addr.String() + "-" + strconv.Itoa(id) + "-" + fam
}

func importSetName(addr netip.Addr, v4 bool) string {
	if v4 {
		return "vsk-in-" + addr.String() + "-v4"
	}
	return "vsk-in-" + addr.String() + "-v6"
}

// leafStatements reject what was learned from peers (route types external
// and internal); locally originated paths are neither.
func leafStatements(prefix string) []*api.Statement {
	reject := func(name string, rt api.Conditions_RouteType) *api.Statement {
		return &api.Statement{
			Name:       name,
			Conditions: &api.Conditions{RouteType: rt},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
		}
	}
	return []*api.Statement{
		reject(prefix+"-external", api.Conditions_ROUTE_TYPE_EXTERNAL),
		reject(prefix+"-internal", api.Conditions_ROUTE_TYPE_INTERNAL),
	}
}

// init installs the two global policies with nothing exported and nothing
// imported but locally originated paths.
func (t *policyTable) init(ctx context.Context) error {
	if err := t.srv.SetPolicies(ctx, t.policies(nil, nil)); err != nil {
		return fmt.Errorf("set policies: %w", err)
	}
	for _, a := range []*api.PolicyAssignment{
		{Name: "global", Direction: api.PolicyDirection_POLICY_DIRECTION_IMPORT,
			Policies: []*api.Policy{{Name: importPolicyName}}, DefaultAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
		{Name: "global", Direction: api.PolicyDirection_POLICY_DIRECTION_EXPORT,
			Policies: []*api.Policy{{Name: exportPolicyName}}, DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT},
	} {
		if err := t.srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: a}); err != nil {
			return fmt.Errorf("assign %s policy: %w", strings.ToLower(a.Direction.String()), err)
		}
	}
	return nil
}

// policies returns the whole policy configuration for peers and imports.
func (t *policyTable) policies(peers map[netip.Addr]*peerExport, imports map[netip.Addr][]bgp.PrefixMatch) *api.SetPoliciesRequest {
	req := &api.SetPoliciesRequest{}
	export := &api.Policy{Name: exportPolicyName, Statements: leafStatements("vsk-export-leaf")}
	imp := &api.Policy{Name: importPolicyName}
	nbSets := map[netip.Addr]bool{}
	nbSet := func(addr netip.Addr) string {
		if !nbSets[addr] {
			nbSets[addr] = true
			req.DefinedSets = append(req.DefinedSets, &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR,
				Name: neighborSetName(addr), List: []string{netip.PrefixFrom(addr, addr.BitLen()).String()}})
		}
		return neighborSetName(addr)
	}
	for _, addr := range slices.SortedFunc(maps.Keys(peers), netip.Addr.Compare) {
		pe := peers[addr]
		groups := slices.SortedFunc(maps.Values(pe.groups), func(a, b *exportGroup) int { return cmp.Compare(a.id, b.id) })
		for _, g := range groups {
			for _, v4 := range []bool{true, false} {
				prefixes := g.v6
				if v4 {
					prefixes = g.v4
				}
				// Empty sets too: prefixes are added to them in place later.
				ds := &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: groupSetName(addr, g.id, v4),
					Prefixes: exactPrefixes(prefixes)}
				req.DefinedSets = append(req.DefinedSets, ds)
				export.Statements = append(export.Statements, &api.Statement{
					Name: ds.Name,
					Conditions: &api.Conditions{
						NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: nbSet(addr)},
						PrefixSet:   &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: ds.Name},
					},
					Actions: attributeActions(g.attrs),
				})
			}
		}
	}
	for _, addr := range slices.SortedFunc(maps.Keys(imports), netip.Addr.Compare) {
		for _, v4 := range []bool{true, false} {
			ds := &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: importSetName(addr, v4)}
			for _, m := range imports[addr] {
				if m.Prefix.Addr().Is4() == v4 {
					ds.Prefixes = append(ds.Prefixes, &api.Prefix{IpPrefix: m.Prefix.String(),
						MaskLengthMin: uint32(m.MinLen()), MaskLengthMax: uint32(m.MaxLen())})
				}
			}
			if len(ds.Prefixes) == 0 {
				continue
			}
			req.DefinedSets = append(req.DefinedSets, ds)
			imp.Statements = append(imp.Statements, &api.Statement{
				Name: ds.Name,
				Conditions: &api.Conditions{
					NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: nbSet(addr)},
					PrefixSet:   &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: ds.Name},
				},
				Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
			})
		}
	}
	imp.Statements = append(imp.Statements, leafStatements("vsk-import-leaf")...)
	req.Policies = []*api.Policy{export, imp}
	return req
}

func exactPrefix(p netip.Prefix) *api.Prefix {
	return &api.Prefix{IpPrefix: p.String(), MaskLengthMin: uint32(p.Bits()), MaskLengthMax: uint32(p.Bits())}
}

func exactPrefixes(ps []netip.Prefix) []*api.Prefix {
	out := make([]*api.Prefix, len(ps))
	for i, p := range ps {
		out[i] = exactPrefix(p)
	}
	return out
}

// attributeActions accepts and sets the attributes.
func attributeActions(a bgp.Attributes) *api.Actions {
	acts := &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT}
	if len(a.Communities) > 0 {
		c := &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD}
		for _, v := range a.Communities {
			c.Communities = append(c.Communities, v.String())
		}
		acts.Community = c
	}
	if len(a.LargeCommunities) > 0 {
		c := &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD}
		for _, v := range a.LargeCommunities {
			c.Communities = append(c.Communities, v.String())
		}
		acts.LargeCommunity = c
	}
	if a.LocalPreference != nil {
		acts.LocalPref = &api.LocalPrefAction{Value: *a.LocalPreference}
	}
	return acts
}

// structureOf describes the statements the policies need: the peers, their
// groups (with their attributes; a statement per family, with a prefix set
// that may be empty), and the import lists.
func structureOf(peers map[netip.Addr]*peerExport, imports map[netip.Addr][]bgp.PrefixMatch) string {
	var b strings.Builder
	for _, addr := range slices.SortedFunc(maps.Keys(peers), netip.Addr.Compare) {
		pe := peers[addr]
		groups := slices.SortedFunc(maps.Values(pe.groups), func(a, b *exportGroup) int { return cmp.Compare(a.id, b.id) })
		for _, g := range groups {
			fmt.Fprintf(&b, "%s %d %s;", addr, g.id, g.attrs.Key())
		}
	}
	b.WriteByte('|')
	for _, addr := range slices.SortedFunc(maps.Keys(imports), netip.Addr.Compare) {
		fmt.Fprintf(&b, "%s %v;", addr, imports[addr])
	}
	return b.String()
}

// reconcile makes the originated paths equal to wantPaths and the policies
// send each peer its routes of export and accept from it what imports
// allows. established lists the peers a soft reset can reach.
func (t *policyTable) reconcile(ctx context.Context, paths *pathTable, wantPaths []pathEntry,
	export map[netip.Addr][]bgp.RouteGroup, imports map[netip.Addr][]bgp.PrefixMatch, established func() map[netip.Addr]bool) error {
	// The new groups; they keep their IDs (and so their set names) while
	// their attributes stay. A peer's groups that lose their routes stay,
	// empty, until the next rebuild, so that routes coming back (a
	// service re-created) need no rebuild either.
	newPeers := make(map[netip.Addr]*peerExport, len(export))
	for addr, groups := range export {
		cur := t.peers[addr]
		np := &peerExport{groups: make(map[string]*exportGroup, len(groups))}
		if cur != nil {
			for key, og := range cur.groups {
				np.groups[key] = &exportGroup{id: og.id, attrs: og.attrs}
			}
		}
		for _, rg := range groups {
			key := rg.Attributes.Key()
			g := np.groups[key]
			if g == nil {
				t.nextID++
				g = &exportGroup{id: t.nextID, attrs: rg.Attributes}
			}
			split, _ := slices.BinarySearchFunc(rg.Prefixes, true, func(p netip.Prefix, _ bool) int {
				if p.Addr().Is4() {
					return -1
				}
				return 1
			})
			g.v4, g.v6 = rg.Prefixes[:split], rg.Prefixes[split:]
			np.groups[key] = g
		}
		newPeers[addr] = np
	}
	newImports := make(map[netip.Addr][]bgp.PrefixMatch, len(imports))
	for addr, l := range imports {
		if len(l) > 0 {
			newImports[addr] = l
		}
	}
	if structureOf(newPeers, newImports) != t.structure {
		// Rebuild without the empty groups.
		for _, np := range newPeers {
			maps.DeleteFunc(np.groups, func(_ string, g *exportGroup) bool { return len(g.v4) == 0 && len(g.v6) == 0 })
		}
		return t.rebuild(ctx, paths, wantPaths, newPeers, newImports, structureOf(newPeers, newImports), established)
	}

	// Same statements (peers, groups, families): only prefixes move in and
	// out of the groups' sets.
	adds, dels := map[string][]*api.Prefix{}, map[string][]*api.Prefix{}
	var reset []netip.Addr
	for addr, np := range newPeers {
		cur := t.peers[addr]
		changed := false
		for key, g := range np.groups {
			og := cur.groups[key] // present: the structure is the same
			for _, v4 := range []bool{true, false} {
				name := groupSetName(addr, g.id, v4)
				now, was := g.v6, og.v6
				if v4 {
					now, was = g.v4, og.v4
				}
				added, removed := diffPrefixes(was, now)
				for _, p := range added {
					adds[name] = append(adds[name], exactPrefix(p))
					changed = changed || paths.retained(p, wantPaths)
				}
				for _, p := range removed {
					dels[name] = append(dels[name], exactPrefix(p))
					changed = changed || paths.retained(p, wantPaths)
				}
			}
		}
		if changed {
			reset = append(reset, addr)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(adds)) {
		if err := t.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
			DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: name, Prefixes: adds[name]}}); err != nil {
			t.structure = "" // rebuild next time
			return fmt.Errorf("add to prefix set %s: %w", name, err)
		}
	}
	if err := paths.withdraw(wantPaths); err != nil {
		t.structure = ""
		return err
	}
	if err := paths.advertise(wantPaths); err != nil {
		t.structure = ""
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(dels)) {
		if err := t.srv.DeleteDefinedSet(ctx, &api.DeleteDefinedSetRequest{DefinedSet: &api.DefinedSet{
			DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: name, Prefixes: dels[name]}}); err != nil {
			t.structure = ""
			return fmt.Errorf("remove from prefix set %s: %w", name, err)
		}
	}
	t.peers = newPeers
	if len(reset) == 0 {
		return nil
	}
	slices.SortFunc(reset, netip.Addr.Compare)
	return t.softReset(ctx, reset, api.ResetPeerRequest_DIRECTION_OUT, established())
}

// diffPrefixes returns what now has and was lacks, and the other way
// round; both are sorted.
func diffPrefixes(was, now []netip.Prefix) (added, removed []netip.Prefix) {
	i, j := 0, 0
	for i < len(was) || j < len(now) {
		switch {
		case j == len(now) || (i < len(was) && comparePrefixes(was[i], now[j]) < 0):
			removed = append(removed, was[i])
			i++
		case i == len(was) || comparePrefixes(now[j], was[i]) < 0:
			added = append(added, now[j])
			j++
		default:
			i++
			j++
		}
	}
	return added, removed
}

// rebuild replaces the policies: withdrawals first (the old policy lets
// them out), then the new policies, the new paths, and soft resets.
func (t *policyTable) rebuild(ctx context.Context, paths *pathTable, wantPaths []pathEntry,
	peers map[netip.Addr]*peerExport, imports map[netip.Addr][]bgp.PrefixMatch, structure string, established func() map[netip.Addr]bool) error {
	if err := paths.withdraw(wantPaths); err != nil {
		return err
	}
	t.structure = ""
	if err := t.srv.SetPolicies(ctx, t.policies(peers, imports)); err != nil {
		return fmt.Errorf("set policies: %w", err)
	}
	oldImports, oldPeers := t.imports, t.peers
	// Whose choice changes for routes that stay originated (new routes meet
	// the new policy when they are added): only they need a soft reset.
	var out []netip.Addr
	for addr, np := range peers {
		if membershipChanged(oldPeers[addr], np, paths, wantPaths) {
			out = append(out, addr)
		}
	}
	t.peers, t.imports, t.structure = peers, imports, structure
	if err := paths.advertise(wantPaths); err != nil {
		return err
	}
	est := established()
	var in []netip.Addr
	for addr := range est {
		if !slices.Equal(oldImports[addr], imports[addr]) {
			in = append(in, addr)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	slices.SortFunc(in, netip.Addr.Compare)
	if err := t.softReset(ctx, in, api.ResetPeerRequest_DIRECTION_IN, est); err != nil {
		return err
	}
	return t.softReset(ctx, out, api.ResetPeerRequest_DIRECTION_OUT, est)
}

// membershipChanged reports whether a route that stays originated (the
// path table before the change, want after) moves into, out of or between
// the groups of a peer from old to now (nil: no groups).
func membershipChanged(old, now *peerExport, paths *pathTable, want []pathEntry) bool {
	keys := map[string]bool{}
	if old != nil {
		for k := range old.groups {
			keys[k] = true
		}
	}
	for k := range now.groups {
		keys[k] = true
	}
	for k := range keys {
		var o, n exportGroup
		if old != nil && old.groups[k] != nil {
			o = *old.groups[k]
		}
		if now.groups[k] != nil {
			n = *now.groups[k]
		}
		for _, pair := range [][2][]netip.Prefix{{o.v4, n.v4}, {o.v6, n.v6}} {
			added, removed := diffPrefixes(pair[0], pair[1])
			for _, p := range append(added, removed...) {
				if paths.retained(p, want) {
					return true
				}
			}
		}
	}
	return false
}

// softReset re-evaluates the policy for the routes sent to (out) or
// received from (in) the established peers among addrs.
func (t *policyTable) softReset(ctx context.Context, addrs []netip.Addr, dir api.ResetPeerRequest_Direction, established map[netip.Addr]bool) error {
	for _, addr := range addrs {
		if !established[addr] {
			continue
		}
		if err := t.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: addr.String(), Soft: true, Direction: dir}); err != nil {
			return fmt.Errorf("soft reset of %s: %w", addr, err)
		}
	}
	return nil
}

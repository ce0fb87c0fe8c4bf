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

// peerExport is what one peer is sent: each route's group.
type peerExport struct {
	routes map[netip.Prefix]*exportGroup
	groups map[string]*exportGroup // by attribute key
}

// exportGroup is a set of routes of one peer with equal attributes.
type exportGroup struct {
	id     int
	attrs  bgp.Attributes
	n4, n6 int // routes per family
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
		sets := map[string]*api.DefinedSet{}
		for pfx, g := range pe.routes {
			name := groupSetName(addr, g.id, pfx.Addr().Is4())
			ds := sets[name]
			if ds == nil {
				ds = &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: name}
				sets[name] = ds
			}
			ds.Prefixes = append(ds.Prefixes, exactPrefix(pfx))
		}
		groups := slices.SortedFunc(maps.Values(pe.groups), func(a, b *exportGroup) int { return cmp.Compare(a.id, b.id) })
		for _, g := range groups {
			for _, v4 := range []bool{true, false} {
				ds := sets[groupSetName(addr, g.id, v4)]
				if ds == nil {
					continue
				}
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
// non-empty groups per family with attributes, and the import lists.
func structureOf(peers map[netip.Addr]*peerExport, imports map[netip.Addr][]bgp.PrefixMatch) string {
	var b strings.Builder
	for _, addr := range slices.SortedFunc(maps.Keys(peers), netip.Addr.Compare) {
		pe := peers[addr]
		groups := slices.SortedFunc(maps.Values(pe.groups), func(a, b *exportGroup) int { return cmp.Compare(a.id, b.id) })
		for _, g := range groups {
			fmt.Fprintf(&b, "%s %d %t %t %s;", addr, g.id, g.n4 > 0, g.n6 > 0, g.attrs.Key())
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
func (t *policyTable) reconcile(ctx context.Context, paths *pathTable, wantPaths map[netip.Prefix]netip.Addr,
	export map[netip.Addr]bgp.PeerRoutes, imports map[netip.Addr][]bgp.PrefixMatch, established func() map[netip.Addr]bool) error {
	// The new assignment of routes to groups; groups keep their IDs (and
	// so their set names) while their attributes stay.
	newPeers := make(map[netip.Addr]*peerExport, len(export))
	for addr, routes := range export {
		cur := t.peers[addr]
		np := &peerExport{routes: make(map[netip.Prefix]*exportGroup, len(routes)), groups: map[string]*exportGroup{}}
		for pfx, attrs := range routes {
			key := attrs.Key()
			g := np.groups[key]
			if g == nil {
				g = &exportGroup{attrs: attrs}
				if cur != nil && cur.groups[key] != nil {
					g.id = cur.groups[key].id
				} else {
					t.nextID++
					g.id = t.nextID
				}
				np.groups[key] = g
			}
			if pfx.Addr().Is4() {
				g.n4++
			} else {
				g.n6++
			}
			np.routes[pfx] = g
		}
		newPeers[addr] = np
	}
	newImports := make(map[netip.Addr][]bgp.PrefixMatch, len(imports))
	for addr, l := range imports {
		if len(l) > 0 {
			newImports[addr] = l
		}
	}
	structure := structureOf(newPeers, newImports)
	if structure != t.structure {
		return t.rebuild(ctx, paths, wantPaths, newPeers, newImports, structure, established)
	}

	// Same statements: only prefixes move in and out of group sets.
	adds, dels := map[string][]*api.Prefix{}, map[string][]*api.Prefix{}
	var reset []netip.Addr
	for addr, np := range newPeers {
		cur := t.peers[addr]
		if cur == nil {
			cur = &peerExport{}
		}
		changed := false
		for pfx, g := range np.routes {
			if og := cur.routes[pfx]; og == nil || og.id != g.id {
				name := groupSetName(addr, g.id, pfx.Addr().Is4())
				adds[name] = append(adds[name], exactPrefix(pfx))
				changed = changed || paths.retained(pfx, wantPaths)
			}
		}
		for pfx, og := range cur.routes {
			if g := np.routes[pfx]; g == nil || g.id != og.id {
				name := groupSetName(addr, og.id, pfx.Addr().Is4())
				dels[name] = append(dels[name], exactPrefix(pfx))
				changed = changed || paths.retained(pfx, wantPaths)
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
	return t.softReset(ctx, reset, api.ResetPeerRequest_DIRECTION_OUT, established())
}

// rebuild replaces the policies: withdrawals first (the old policy lets
// them out), then the new policies, the new paths, and soft resets.
func (t *policyTable) rebuild(ctx context.Context, paths *pathTable, wantPaths map[netip.Prefix]netip.Addr,
	peers map[netip.Addr]*peerExport, imports map[netip.Addr][]bgp.PrefixMatch, structure string, established func() map[netip.Addr]bool) error {
	if err := paths.withdraw(wantPaths); err != nil {
		return err
	}
	t.structure = ""
	if err := t.srv.SetPolicies(ctx, t.policies(peers, imports)); err != nil {
		return fmt.Errorf("set policies: %w", err)
	}
	oldImports := t.imports
	t.peers, t.imports, t.structure = peers, imports, structure
	if err := paths.advertise(wantPaths); err != nil {
		return err
	}
	est := established()
	var out, in []netip.Addr
	for addr := range peers {
		out = append(out, addr)
	}
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

package gobgp

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/vswitchkit/vswitchkit/bgp"
)

// routerView is what Peers needs of a router, copied under the lock.
type routerView struct {
	asn    uint32
	srv    *server.BgpServer
	status map[netip.Addr]neighborSpec // read-only: replaced, never modified
}

// views returns the running routers, sorted by ASN, under the lock.
func (m *Manager) views() ([]routerView, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateRunning {
		return nil, ErrNotRunning
	}
	out := make([]routerView, 0, len(m.routers))
	for _, asn := range slices.Sorted(maps.Keys(m.routers)) {
		r := m.routers[asn]
		out = append(out, routerView{asn: asn, srv: r.srv, status: r.status})
	}
	return out, nil
}

// Peers returns the status of every neighbor of every virtual router,
// sorted by local ASN and peer address. A neighbor that no address family
// can be offered to is listed in state Idle with the reasons in Disabled.
// It does not wait for a ConfigurePeers call in progress; a server stopped
// meanwhile is skipped.
func (m *Manager) Peers(ctx context.Context) ([]bgp.PeerStatus, error) {
	views, err := m.views()
	if err != nil {
		return nil, err
	}
	var out []bgp.PeerStatus
	for _, v := range views {
		seen := make(map[netip.Addr]bool, len(v.status))
		err := v.srv.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
			st := peerStatus(v.asn, p)
			seen[st.PeerAddress] = true
			if ns, ok := v.status[st.PeerAddress]; ok && len(ns.disabled) > 0 {
				st.Disabled = maps.Clone(ns.disabled)
			}
			out = append(out, st)
		})
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			continue // stopped meanwhile
		}
		for addr, ns := range v.status {
			if seen[addr] {
				continue
			}
			out = append(out, bgp.PeerStatus{LocalASN: v.asn, PeerAddress: addr, PeerASN: ns.PeerASN,
				State: bgp.SessionIdle, Disabled: maps.Clone(ns.disabled),
				Received: map[bgp.Family]int{}, Accepted: map[bgp.Family]int{}, Advertised: map[bgp.Family]int{}})
		}
	}
	m.countAccepted(out)
	slices.SortFunc(out, func(a, b bgp.PeerStatus) int {
		if a.LocalASN != b.LocalASN {
			if a.LocalASN < b.LocalASN {
				return -1
			}
			return 1
		}
		return a.PeerAddress.Compare(b.PeerAddress)
	})
	return out, nil
}

func peerStatus(asn uint32, p *api.Peer) bgp.PeerStatus {
	st := bgp.PeerStatus{LocalASN: asn, State: bgp.SessionUnknown,
		Received: make(map[bgp.Family]int), Accepted: make(map[bgp.Family]int), Advertised: make(map[bgp.Family]int)}
	if a, err := netip.ParseAddr(p.GetConf().GetNeighborAddress()); err == nil {
		st.PeerAddress = a
	}
	st.PeerASN = p.GetConf().GetPeerAsn()
	switch p.GetState().GetSessionState() {
	case api.PeerState_SESSION_STATE_IDLE:
		st.State = bgp.SessionIdle
	case api.PeerState_SESSION_STATE_CONNECT:
		st.State = bgp.SessionConnect
	case api.PeerState_SESSION_STATE_ACTIVE:
		st.State = bgp.SessionActive
	case api.PeerState_SESSION_STATE_OPENSENT:
		st.State = bgp.SessionOpenSent
	case api.PeerState_SESSION_STATE_OPENCONFIRM:
		st.State = bgp.SessionOpenConfirm
	case api.PeerState_SESSION_STATE_ESTABLISHED:
		st.State = bgp.SessionEstablished
		if up := p.GetTimers().GetState().GetUptime(); up != nil {
			st.Since = up.AsTime()
			st.Uptime = max(time.Since(st.Since), 0)
		}
		st.HoldTime = time.Duration(p.GetTimers().GetState().GetNegotiatedHoldTime()) * time.Second
		st.KeepaliveTime = time.Duration(p.GetTimers().GetState().GetKeepaliveInterval()) * time.Second
	}
	if st.State != bgp.SessionEstablished {
		return st
	}
	remote := remoteFamilies(p)
	for _, as := range p.GetAfiSafis() {
		fam, ok := familyFromAPI(as.GetConfig().GetFamily())
		if !ok || !remote[fam] {
			continue
		}
		st.Negotiated = append(st.Negotiated, fam)
		if as.GetState() == nil {
			continue
		}
		st.Received[fam] = int(as.GetState().GetReceived())
		st.Accepted[fam] = 0 // counted from the learned routes
		st.Advertised[fam] = int(as.GetState().GetAdvertised())
	}
	slices.Sort(st.Negotiated)
	return st
}

// remoteFamilies returns the unicast families of the multiprotocol
// capabilities in the peer's OPEN; a peer without any multiprotocol
// capability speaks IPv4 unicast only (RFC 4760).
func remoteFamilies(p *api.Peer) map[bgp.Family]bool {
	out := make(map[bgp.Family]bool)
	caps, err := apiutil.UnmarshalCapabilities(p.GetState().GetRemoteCap())
	if err != nil {
		return out
	}
	mp := false
	for _, c := range caps {
		if m, ok := c.(*gobgppkt.CapMultiProtocol); ok {
			mp = true
			switch m.CapValue {
			case gobgppkt.RF_IPv4_UC:
				out[bgp.IPv4Unicast] = true
			case gobgppkt.RF_IPv6_UC:
				out[bgp.IPv6Unicast] = true
			}
		}
	}
	if !mp {
		out[bgp.IPv4Unicast] = true
	}
	return out
}

func familyFromAPI(f *api.Family) (bgp.Family, bool) {
	if f.GetSafi() != api.Family_SAFI_UNICAST {
		return "", false
	}
	switch f.GetAfi() {
	case api.Family_AFI_IP:
		return bgp.IPv4Unicast, true
	case api.Family_AFI_IP6:
		return bgp.IPv6Unicast, true
	}
	return "", false
}

// RouteQuery selects the routes [Manager.Routes] returns.
type RouteQuery struct {
	// LocalASN selects the virtual router. Required.
	LocalASN uint32
	// Peer selects the neighbor. Required.
	Peer netip.Addr
	// Received selects the routes received from the peer (its Adj-RIB-In,
	// before the import policy); false selects the routes advertised to it.
	Received bool
	// Family selects the address family. Default IPv4 unicast.
	Family bgp.Family
}

// Routes returns the unicast routes advertised to (after the export
// policy: with the attributes the peer is sent) or received from a peer,
// sorted by prefix. An unknown local ASN is [ErrUnknownRouter].
func (m *Manager) Routes(ctx context.Context, q RouteQuery) ([]bgp.Route, error) {
	views, err := m.views()
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(views, func(v routerView) bool { return v.asn == q.LocalASN })
	if i < 0 {
		return nil, fmt.Errorf("routes of %d: %w", q.LocalASN, ErrUnknownRouter)
	}
	srv := views[i].srv
	fam := gobgppkt.RF_IPv4_UC
	switch q.Family {
	case "", bgp.IPv4Unicast:
	case bgp.IPv6Unicast:
		fam = gobgppkt.RF_IPv6_UC
	default:
		return nil, fmt.Errorf("routes: unsupported family %q", q.Family)
	}
	tt := api.TableType_TABLE_TYPE_ADJ_OUT
	if q.Received {
		tt = api.TableType_TABLE_TYPE_ADJ_IN
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []bgp.Route
	err = srv.ListPath(apiutil.ListPathRequest{TableType: tt, Name: q.Peer.Unmap().String(), Family: fam},
		func(nlri gobgppkt.NLRI, paths []*apiutil.Path) {
			pfx, ok := nlri.(*gobgppkt.IPAddrPrefix)
			if !ok || len(paths) == 0 {
				return
			}
			out = append(out, routeFromPath(pfx.Prefix, paths[0]))
		})
	if err != nil {
		return nil, fmt.Errorf("routes of %d to/from %s: %w", q.LocalASN, q.Peer, err)
	}
	slices.SortFunc(out, func(a, b bgp.Route) int {
		if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
			return c
		}
		return a.Prefix.Bits() - b.Prefix.Bits()
	})
	return out, nil
}

// routeFromPath converts a GoBGP path; its attributes come out normalized
// (sorted communities).
func routeFromPath(p netip.Prefix, path *apiutil.Path) bgp.Route {
	r := bgp.Route{Prefix: p}
	for _, a := range path.Attrs {
		switch a := a.(type) {
		case *gobgppkt.PathAttributeNextHop:
			r.NextHop = a.Value
		case *gobgppkt.PathAttributeMpReachNLRI:
			r.NextHop = a.Nexthop
		case *gobgppkt.PathAttributeAsPath:
			for _, seg := range a.Value {
				r.ASPath = append(r.ASPath, seg.GetAS()...)
			}
		case *gobgppkt.PathAttributeCommunities:
			for _, c := range a.Value {
				r.Attributes.Communities = append(r.Attributes.Communities, bgp.Community(c))
			}
		case *gobgppkt.PathAttributeLargeCommunities:
			for _, c := range a.Values {
				r.Attributes.LargeCommunities = append(r.Attributes.LargeCommunities, bgp.LargeCommunity{
					GlobalAdmin: c.ASN, LocalData1: c.LocalData1, LocalData2: c.LocalData2})
			}
		case *gobgppkt.PathAttributeLocalPref:
			lp := a.Value
			r.Attributes.LocalPreference = &lp
		}
	}
	r.Attributes = bgp.Attributes{}.Merge(r.Attributes)
	return r
}

// countAccepted sets Accepted of every Established peer: its learned
// routes (accepted by its import prefix lists and in use) per family.
func (m *Manager) countAccepted(peers []bgp.PeerStatus) {
	m.learnMu.Lock()
	defer m.learnMu.Unlock()
	for i := range peers {
		p := &peers[i]
		if p.State != bgp.SessionEstablished {
			continue
		}
		lt := m.learned[p.LocalASN]
		if lt == nil {
			continue
		}
		for _, r := range lt.routes {
			if r.Peer != p.PeerAddress.Unmap() {
				continue
			}
			fam := bgp.IPv4Unicast
			if r.Prefix.Addr().Is6() {
				fam = bgp.IPv6Unicast
			}
			if _, ok := p.Accepted[fam]; ok {
				p.Accepted[fam]++
			}
		}
	}
}

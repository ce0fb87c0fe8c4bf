package gobgp

import (
	"context"
	"net/netip"
	"time"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/vswitchkit/vswitchkit/bgp"
)

// learnedTable is what one virtual router learned: the best path of every
// prefix whose best path comes from a peer (it passed the import policy).
// Guarded by Manager.learnMu.
type learnedTable struct {
	stopped bool // the router stopped: late watch events are dropped
	routes  map[netip.Prefix]bgp.LearnedRoute
}

// watchLearned starts GoBGP's watch of r's best paths. GoBGP runs the
// callback on a goroutine of its own, which ends soon after r.stopWatch is
// called (stopLocked calls it before stopping the server).
func (m *Manager) watchLearned(r *router) error {
	lt := &learnedTable{routes: map[netip.Prefix]bgp.LearnedRoute{}}
	m.learnMu.Lock()
	m.learned[r.asn] = lt
	m.learnMu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	r.stopWatch = cancel
	asn := r.asn
	err := r.srv.WatchEvent(ctx, server.WatchEventMessageCallbacks{
		OnBestPath: func(paths []*apiutil.Path, _ time.Time) { m.onBestPaths(asn, lt, paths) },
	}, server.WatchBestPath(true))
	if err != nil {
		cancel()
		m.learnMu.Lock()
		delete(m.learned, asn)
		m.learnMu.Unlock()
	}
	return err
}

// onBestPaths updates a router's learned routes from best-path events: a
// best path from a peer is learned; a withdrawal, or a best path that is
// local, forgets the prefix.
func (m *Manager) onBestPaths(asn uint32, lt *learnedTable, paths []*apiutil.Path) {
	changed := false
	m.learnMu.Lock()
	if lt.stopped {
		m.learnMu.Unlock()
		return
	}
	for _, p := range paths {
		pfx, ok := p.Nlri.(*gobgppkt.IPAddrPrefix)
		if !ok {
			continue
		}
		prefix := pfx.Prefix.Masked()
		if p.Withdrawal || !p.PeerAddress.IsValid() {
			if _, had := lt.routes[prefix]; had {
				delete(lt.routes, prefix)
				changed = true
			}
			continue
		}
		r := routeFromPath(prefix, p)
		lr := bgp.LearnedRoute{Prefix: prefix, NextHop: r.NextHop, LocalASN: asn, Peer: p.PeerAddress.Unmap()}
		if cur, had := lt.routes[prefix]; !had || cur != lr {
			lt.routes[prefix] = lr
			changed = true
		}
	}
	m.learnMu.Unlock()
	if changed {
		m.cfg.LearnedRoutes.Event(nil)
	}
}

// forgetLearned stops r's watch and drops what r learned.
func (m *Manager) forgetLearned(r *router) {
	if r.stopWatch != nil {
		r.stopWatch()
	}
	m.learnMu.Lock()
	lt := m.learned[r.asn]
	if lt != nil {
		lt.stopped = true
		delete(m.learned, r.asn)
	}
	m.learnMu.Unlock()
	if lt != nil && len(lt.routes) > 0 {
		m.cfg.LearnedRoutes.Event(nil)
	}
}

// LearnedRoutes returns the routes learned from peers: for every prefix
// that an import prefix list accepted, the best path (with several virtual
// routers learning a prefix, the one of the lowest local ASN), in no
// particular order. Routes of a peer whose session went down stay while
// graceful restart keeps them, up to the restart time the peer announced; withdrawn routes, routes of peers that went down without
// graceful restart and routes of stopped routers are gone. It is safe to
// call at any time, also outside Run (then it returns none). The manager
// signals Config.LearnedRoutes after every change.
func (m *Manager) LearnedRoutes() []bgp.LearnedRoute {
	m.learnMu.Lock()
	defer m.learnMu.Unlock()
	if len(m.learned) == 1 {
		for _, lt := range m.learned {
			out := make([]bgp.LearnedRoute, 0, len(lt.routes))
			for _, r := range lt.routes {
				out = append(out, r)
			}
			return out
		}
	}
	best := map[netip.Prefix]bgp.LearnedRoute{}
	for _, lt := range m.learned {
		for p, r := range lt.routes {
			if cur, ok := best[p]; !ok || r.LocalASN < cur.LocalASN {
				best[p] = r
			}
		}
	}
	out := make([]bgp.LearnedRoute, 0, len(best))
	for _, r := range best {
		out = append(out, r)
	}
	return out
}

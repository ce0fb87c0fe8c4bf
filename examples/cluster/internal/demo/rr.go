package demo

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// routeReflector is a GoBGP server (the library, in-process) that reflects
// the routes of its clients, the nodes' speakers. It connects to them (see
// the package documentation). Safe for concurrent use.
type routeReflector struct {
	addr netip.Addr
	srv  *server.BgpServer
	done chan struct{} // closed when Serve returns

	mu      sync.Mutex
	clients map[netip.Addr]string // client address -> node name
}

// startRouteReflector starts the server (it does not listen: it opens the
// sessions itself).
func startRouteReflector(ctx context.Context, addr netip.Addr, log *slog.Logger) (*routeReflector, error) {
	lvl := new(slog.LevelVar)
	lvl.Set(slog.LevelWarn) // GoBGP logs every FSM step at Info
	srv := server.NewBgpServer(server.LoggerOption(log.With(slog.String("component", "route-reflector")), lvl))
	r := &routeReflector{addr: addr, srv: srv, done: make(chan struct{}), clients: map[netip.Addr]string{}}
	go func() {
		defer close(r.done)
		srv.Serve()
	}()
	err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: asn, RouterId: addr.String(), ListenPort: -1}})
	if err != nil {
		r.stop()
		return nil, fmt.Errorf("route reflector: %w", err)
	}
	return r, nil
}

// stop stops the server and waits for it.
func (r *routeReflector) stop() {
	r.srv.Stop()
	<-r.done
}

// addClient adds the speaker of node at addr:port as a route-reflector
// client; the server connects to it from its own address.
func (r *routeReflector) addClient(ctx context.Context, node string, addr netip.Addr, port uint16) error {
	err := r.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:           &api.PeerConf{NeighborAddress: addr.String(), PeerAsn: asn, Description: node},
		Transport:      &api.Transport{LocalAddress: r.addr.String(), RemotePort: uint32(port)},
		Timers:         &api.Timers{Config: &api.TimersConfig{ConnectRetry: 2, HoldTime: 90, KeepaliveInterval: 30}},
		RouteReflector: &api.RouteReflector{RouteReflectorClient: true, RouteReflectorClusterId: r.addr.String()},
		AfiSafis: []*api.AfiSafi{{Config: &api.AfiSafiConfig{
			Family: &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}, Enabled: true}}},
	}})
	if err != nil {
		return fmt.Errorf("route reflector: add client %s (%s): %w", node, addr, err)
	}
	r.mu.Lock()
	r.clients[addr] = node
	r.mu.Unlock()
	return nil
}

// removeClient removes the client at addr (its node left).
func (r *routeReflector) removeClient(ctx context.Context, addr netip.Addr) error {
	if err := r.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
		return fmt.Errorf("route reflector: remove client %s: %w", addr, err)
	}
	r.mu.Lock()
	delete(r.clients, addr)
	r.mu.Unlock()
	return nil
}

// RRSession is a session of the route reflector with a node's speaker.
type RRSession struct {
	Node     string     `json:"node"`
	Peer     netip.Addr `json:"peer"`
	State    string     `json:"state"`
	Received int        `json:"received"`
}

// RRRoute is a route the route reflector received from a node, with its
// communities.
type RRRoute struct {
	Prefix      netip.Prefix `json:"prefix"`
	NextHop     netip.Addr   `json:"nextHop"`
	From        string       `json:"from"`
	Communities []string     `json:"communities,omitempty"`
}

// clientNames returns a copy of the node names of the clients, by address.
func (r *routeReflector) clientNames() map[netip.Addr]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.clients)
}

// sessions returns the state of every client's session, by node name.
func (r *routeReflector) sessions(ctx context.Context) ([]RRSession, error) {
	clients := r.clientNames()
	var out []RRSession
	err := r.srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
		addr, err := netip.ParseAddr(p.GetConf().GetNeighborAddress())
		if err != nil {
			return
		}
		s := RRSession{Node: clients[addr], Peer: addr, State: sessionState(p.GetState().GetSessionState())}
		for _, as := range p.GetAfiSafis() {
			s.Received += int(as.GetState().GetReceived())
		}
		out = append(out, s)
	})
	if err != nil {
		return nil, fmt.Errorf("route reflector: list peers: %w", err)
	}
	slices.SortFunc(out, func(a, b RRSession) int { return comparePodNames(a.Node, b.Node) })
	return out, nil
}

// routes returns the IPv4 routes received from every client (its
// Adj-RIB-In), by prefix and node.
func (r *routeReflector) routes(ctx context.Context) ([]RRRoute, error) {
	clients := r.clientNames()
	var out []RRRoute
	for addr, node := range clients {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		err := r.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_IN, Name: addr.String(), Family: gobgppkt.RF_IPv4_UC},
			func(nlri gobgppkt.NLRI, paths []*apiutil.Path) {
				pfx, ok := nlri.(*gobgppkt.IPAddrPrefix)
				if !ok || len(paths) == 0 {
					return
				}
				rt := RRRoute{Prefix: pfx.Prefix, From: node}
				for _, a := range paths[0].Attrs {
					switch a := a.(type) {
					case *gobgppkt.PathAttributeNextHop:
						rt.NextHop = a.Value
					case *gobgppkt.PathAttributeMpReachNLRI:
						rt.NextHop = a.Nexthop
					case *gobgppkt.PathAttributeCommunities:
						for _, c := range a.Value {
							rt.Communities = append(rt.Communities, fmt.Sprintf("%d:%d", c>>16, c&0xffff))
						}
					}
				}
				slices.Sort(rt.Communities)
				out = append(out, rt)
			})
		if err != nil {
			return nil, fmt.Errorf("route reflector: routes from %s: %w", node, err)
		}
	}
	slices.SortFunc(out, func(a, b RRRoute) int {
		return cmp.Or(a.Prefix.Addr().Compare(b.Prefix.Addr()), cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()),
			comparePodNames(a.From, b.From))
	})
	return out, nil
}

func sessionState(s api.PeerState_SessionState) string {
	switch s {
	case api.PeerState_SESSION_STATE_IDLE:
		return "Idle"
	case api.PeerState_SESSION_STATE_CONNECT:
		return "Connect"
	case api.PeerState_SESSION_STATE_ACTIVE:
		return "Active"
	case api.PeerState_SESSION_STATE_OPENSENT:
		return "OpenSent"
	case api.PeerState_SESSION_STATE_OPENCONFIRM:
		return "OpenConfirm"
	case api.PeerState_SESSION_STATE_ESTABLISHED:
		return "Established"
	}
	return "Unknown"
}

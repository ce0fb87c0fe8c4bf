package gobgptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/vswitchkit/vswitchkit/bgp"
)

// runChild is the child side of Peer: a GoBGP server configured by commands
// on stdin, answering one line per command on stdout ("ok <reply>" or
// "err <message>"). It stops the server and returns when stdin is closed.
func runChild(spec string) int {
	parts := strings.Split(spec, ",")
	if len(parts) != 4 {
		fmt.Fprintln(os.Stderr, "gobgptest: bad", peerEnv, spec)
		return 2
	}
	addr := parts[0]
	asn, _ := strconv.ParseUint(parts[1], 10, 32)
	port, _ := strconv.Atoi(parts[2])
	srv := server.NewBgpServer()
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve()
	}()
	defer func() {
		srv.Stop()
		<-done
	}()
	ctx := context.Background()
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: uint32(asn), RouterId: parts[3], ListenPort: int32(port), ListenAddresses: []string{addr},
	}}); err != nil {
		fmt.Fprintln(os.Stderr, "gobgptest: start:", err)
		return 1
	}
	ServeLines(os.Stdin, os.Stdout, func(line string) (string, error) {
		return command(ctx, srv, addr, strings.Fields(line))
	})
	return 0
}

func family(s string) gobgppkt.Family {
	if s == string(bgp.IPv6Unicast) {
		return gobgppkt.RF_IPv6_UC
	}
	return gobgppkt.RF_IPv4_UC
}

func command(ctx context.Context, srv *server.BgpServer, local string, args []string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("empty command")
	}
	switch {
	case args[0] == "ping":
		return "pong", nil
	case args[0] == "neighbor" && len(args) >= 3:
		return "", addNeighbor(ctx, srv, local, args[1], args[2], args[3:])
	case (args[0] == "path" || args[0] == "unpath") && len(args) >= 3:
		pfx, err := netip.ParsePrefix(args[1])
		if err != nil {
			return "", err
		}
		nh, err := netip.ParseAddr(args[2])
		if err != nil {
			return "", err
		}
		nlri, err := gobgppkt.NewIPAddrPrefix(pfx)
		if err != nil {
			return "", err
		}
		nhAttr, err := gobgppkt.NewPathAttributeNextHop(nh)
		if err != nil {
			return "", err
		}
		fam := gobgppkt.RF_IPv4_UC
		if pfx.Addr().Is6() {
			fam = gobgppkt.RF_IPv6_UC
		}
		attrs := []gobgppkt.PathAttributeInterface{gobgppkt.NewPathAttributeOrigin(gobgppkt.BGP_ORIGIN_ATTR_TYPE_IGP), nhAttr}
		for _, c := range args[3:] {
			v, err := bgp.ParseCommunity(c)
			if err != nil {
				return "", err
			}
			attrs = append(attrs, gobgppkt.NewPathAttributeCommunities([]uint32{uint32(v)}))
		}
		p := &apiutil.Path{Family: fam, Nlri: nlri, Attrs: attrs, Withdrawal: args[0] == "unpath"}
		if p.Withdrawal {
			return "", srv.DeletePath(apiutil.DeletePathRequest{Paths: []*apiutil.Path{p}})
		}
		_, err = srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{p}})
		return "", err
	case args[0] == "paths" && len(args) >= 2:
		nh, err := netip.ParseAddr(args[1])
		if err != nil {
			return "", err
		}
		nhAttr, err := gobgppkt.NewPathAttributeNextHop(nh)
		if err != nil {
			return "", err
		}
		origin := gobgppkt.NewPathAttributeOrigin(gobgppkt.BGP_ORIGIN_ATTR_TYPE_IGP)
		var paths []*apiutil.Path
		for _, a := range args[2:] {
			pfx, err := netip.ParsePrefix(a)
			if err != nil {
				return "", err
			}
			nlri, err := gobgppkt.NewIPAddrPrefix(pfx)
			if err != nil {
				return "", err
			}
			fam := gobgppkt.RF_IPv4_UC
			if pfx.Addr().Is6() {
				fam = gobgppkt.RF_IPv6_UC
			}
			paths = append(paths, &apiutil.Path{Family: fam, Nlri: nlri, Attrs: []gobgppkt.PathAttributeInterface{origin, nhAttr}})
		}
		_, err = srv.AddPath(apiutil.AddPathRequest{Paths: paths})
		return "", err
	case args[0] == "rib" && len(args) == 2:
		out := map[string]Route{}
		err := srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: family(args[1])},
			func(nlri gobgppkt.NLRI, paths []*apiutil.Path) {
				pfx, ok := nlri.(*gobgppkt.IPAddrPrefix)
				if !ok || len(paths) == 0 {
					return
				}
				out[pfx.Prefix.String()] = routeOf(paths[0])
			})
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(out)
		return string(b), err
	case args[0] == "grcap" && len(args) == 2:
		flags := "none"
		err := srv.ListPeer(ctx, &api.ListPeerRequest{Address: args[1]}, func(p *api.Peer) {
			caps, err := apiutil.UnmarshalCapabilities(p.GetState().GetRemoteCap())
			if err != nil {
				return
			}
			for _, c := range caps {
				if gr, ok := c.(*gobgppkt.CapGracefulRestart); ok {
					flags = "-"
					if gr.Flags&0x08 != 0 {
						flags += "R"
					}
					if gr.Flags&0x04 != 0 {
						flags += "N"
					}
				}
			}
		})
		return flags, err
	case args[0] == "nstate" && len(args) == 2:
		st := NeighborState{State: bgp.SessionUnknown}
		err := srv.ListPeer(ctx, &api.ListPeerRequest{Address: args[1]}, func(p *api.Peer) {
			st.State = sessionState(p.GetState().GetSessionState())
			if a, err := netip.ParseAddr(p.GetState().GetRouterId()); err == nil && st.State == bgp.SessionEstablished {
				st.RouterID = a
			}
		})
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(st)
		return string(b), err
	case args[0] == "count" && len(args) == 2:
		n, err := count(ctx, srv, family(args[1]))
		return strconv.FormatUint(n, 10), err
	case args[0] == "wait" && len(args) == 3:
		// Poll in the child, sparingly: every count takes the server's
		// lock and competes with the UPDATE processing being measured.
		want, err := strconv.ParseUint(args[2], 10, 64)
		if err != nil {
			return "", err
		}
		return poll(5*time.Millisecond, func() (bool, string, error) {
			n, err := count(ctx, srv, family(args[1]))
			return n == want, fmt.Sprintf("have %d routes, want %d", n, want), err
		})
	case args[0] == "waitprefix" && len(args) == 4:
		want := args[3] == "true"
		return poll(time.Millisecond, func() (bool, string, error) {
			found := false
			err := srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: family(args[1]),
				Prefixes: []*apiutil.LookupPrefix{{Prefix: args[2], LookupOption: apiutil.LOOKUP_EXACT}}},
				func(gobgppkt.NLRI, []*apiutil.Path) { found = true })
			return found == want, fmt.Sprintf("prefix %s present=%v, want %v", args[2], found, want), err
		})
	}
	return "", fmt.Errorf("unknown command %q", args)
}

func poll(every time.Duration, done func() (bool, string, error)) (string, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ok, msg, err := done()
		if err != nil || ok {
			return "", err
		}
		if time.Now().After(deadline) {
			return "", errors.New(msg)
		}
		time.Sleep(every)
	}
}

func addNeighbor(ctx context.Context, srv *server.BgpServer, local, addr, asnStr string, opts []string) error {
	asn, err := strconv.ParseUint(asnStr, 10, 32)
	if err != nil {
		return err
	}
	o := make(map[string]string)
	for _, kv := range opts {
		k, v, _ := strings.Cut(kv, "=")
		o[k] = v
	}
	active := o["active"] == "true"
	port, _ := strconv.Atoi(o["port"])
	restart, _ := strconv.Atoi(o["gr"])
	families := []string{string(bgp.IPv4Unicast), string(bgp.IPv6Unicast)}
	if f := o["families"]; f != "" {
		families = strings.Split(f, ",")
	}
	peer := &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: addr, PeerAsn: uint32(asn), AuthPassword: o["password"]},
		Transport: &api.Transport{PassiveMode: !active, LocalAddress: local},
		Timers:    &api.Timers{Config: &api.TimersConfig{ConnectRetry: 1, HoldTime: 9, KeepaliveInterval: 3}},
	}
	if active {
		peer.Transport.RemotePort = uint32(port)
	}
	if restart > 0 {
		peer.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: uint32(restart), NotificationEnabled: true}
	}
	for _, f := range families {
		afi := api.Family_AFI_IP
		if f == string(bgp.IPv6Unicast) {
			afi = api.Family_AFI_IP6
		}
		as := &api.AfiSafi{Config: &api.AfiSafiConfig{Family: &api.Family{Afi: afi, Safi: api.Family_SAFI_UNICAST}, Enabled: true}}
		if restart > 0 {
			as.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
		}
		peer.AfiSafis = append(peer.AfiSafis, as)
	}
	return srv.AddPeer(ctx, &api.AddPeerRequest{Peer: peer})
}

func sessionState(s api.PeerState_SessionState) bgp.SessionState {
	switch s {
	case api.PeerState_SESSION_STATE_IDLE:
		return bgp.SessionIdle
	case api.PeerState_SESSION_STATE_CONNECT:
		return bgp.SessionConnect
	case api.PeerState_SESSION_STATE_ACTIVE:
		return bgp.SessionActive
	case api.PeerState_SESSION_STATE_OPENSENT:
		return bgp.SessionOpenSent
	case api.PeerState_SESSION_STATE_OPENCONFIRM:
		return bgp.SessionOpenConfirm
	case api.PeerState_SESSION_STATE_ESTABLISHED:
		return bgp.SessionEstablished
	}
	return bgp.SessionUnknown
}

// routeOf returns what a test needs of a path in the RIB.
func routeOf(p *apiutil.Path) Route {
	r := Route{NextHop: nextHop(p), Stale: p.Stale}
	for _, a := range p.Attrs {
		switch a := a.(type) {
		case *gobgppkt.PathAttributeCommunities:
			for _, c := range a.Value {
				r.Communities = append(r.Communities, bgp.Community(c).String())
			}
		case *gobgppkt.PathAttributeLargeCommunities:
			for _, c := range a.Values {
				r.LargeCommunities = append(r.LargeCommunities, bgp.LargeCommunity{GlobalAdmin: c.ASN, LocalData1: c.LocalData1, LocalData2: c.LocalData2}.String())
			}
		case *gobgppkt.PathAttributeLocalPref:
			lp := a.Value
			r.LocalPref = &lp
		}
	}
	slices.Sort(r.Communities)
	slices.Sort(r.LargeCommunities)
	return r
}

func nextHop(p *apiutil.Path) netip.Addr {
	for _, a := range p.Attrs {
		switch a := a.(type) {
		case *gobgppkt.PathAttributeNextHop:
			return a.Value
		case *gobgppkt.PathAttributeMpReachNLRI:
			return a.Nexthop
		}
	}
	return netip.Addr{}
}

func count(ctx context.Context, srv *server.BgpServer, f gobgppkt.Family) (uint64, error) {
	rsp, err := srv.GetTable(ctx, &api.GetTableRequest{
		TableType: api.TableType_TABLE_TYPE_GLOBAL,
		Family:    &api.Family{Afi: api.Family_Afi(f.Afi()), Safi: api.Family_Safi(f.Safi())},
	})
	if err != nil {
		return 0, err
	}
	return rsp.NumDestination, nil
}

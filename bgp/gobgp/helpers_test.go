package gobgp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

const waitFor = 20 * time.Second

// freePort returns a TCP port that was free on addr a moment ago.
func freePort(t testing.TB, addr string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// testPeer is a plain GoBGP speaker playing the remote router. It runs in a
// child process (the test binary re-executed, see runPeerProcess) because
// GoBGP's StartBgp writes package-level variables that every server in a
// process reads, which the race detector reports when a second server
// starts next to a running one.
type testPeer struct {
	addr netip.Addr
	port int
	asn  uint32

	mu  sync.Mutex
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

type peerOpts struct {
	neighbor netip.Addr // the manager's address
	asn      uint32     // the manager's ASN
	password string
	active   bool     // connect to the neighbor instead of waiting
	port     int      // the neighbor's port when active
	families []string // "v4" and/or "v6"; default both
	// restartTime > 0 enables graceful restart (helper, with the
	// notification flag) with this restart time in seconds.
	restartTime int
}

const peerEnv = "VSWITCHKIT_GOBGP_TEST_PEER"

// startTestPeer starts a peer speaker listening on addr (router ID addr, or
// 10.255.255.254 for an IPv6 addr).
func startTestPeer(t testing.TB, addr string, asn uint32, opts ...peerOpts) *testPeer {
	t.Helper()
	p := &testPeer{addr: netip.MustParseAddr(addr), port: freePort(t, addr), asn: asn}
	rid := addr
	if p.addr.Is6() {
		rid = "10.255.255.254"
	}
	p.start(t, fmt.Sprintf("%s=%s,%d,%d,%s", peerEnv, addr, asn, p.port, rid), nil)
	for _, o := range opts {
		p.addNeighbor(t, o)
	}
	return p
}

// start re-executes the test binary with env set (see TestMain), talks to
// it over stdin/stdout and stops it at cleanup.
func (p *testPeer) start(t testing.TB, env string, extra []string) {
	t.Helper()
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(append(os.Environ(), env), extra...)
	p.cmd.Stderr = os.Stderr
	var err error
	p.in, err = p.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	p.out = bufio.NewReader(stdout)
	require.NoError(t, p.cmd.Start())
	cmd, in := p.cmd, p.in
	t.Cleanup(func() {
		in.Close() // the child stops its server and exits on EOF
		_ = cmd.Wait()
	})
	_, err = p.do("ping")
	require.NoError(t, err, "child process did not start")
}

// do sends one command line and returns the reply after "ok".
func (p *testPeer) do(args ...string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := fmt.Fprintln(p.in, strings.Join(args, " ")); err != nil {
		return "", err
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSpace(line)
	if rest, ok := strings.CutPrefix(line, "ok"); ok {
		return strings.TrimSpace(rest), nil
	}
	return "", errors.New(line)
}

func (p *testPeer) addNeighbor(t testing.TB, o peerOpts) {
	t.Helper()
	args := []string{"neighbor", o.neighbor.String(), itoa(int(o.asn)),
		"active=" + strconv.FormatBool(o.active), "port=" + itoa(o.port), "gr=" + itoa(o.restartTime)}
	if o.password != "" {
		args = append(args, "password="+o.password)
	}
	if len(o.families) > 0 {
		args = append(args, "families="+strings.Join(o.families, ","))
	}
	_, err := p.do(args...)
	require.NoError(t, err)
}

func (p *testPeer) addPath(t testing.TB, prefix, nh string) {
	t.Helper()
	_, err := p.do("path", prefix, nh)
	require.NoError(t, err)
}

// peerRoute is a route in the peer's RIB.
type peerRoute struct {
	NextHop netip.Addr
	Stale   bool // kept by graceful restart, not refreshed yet
}

// routes returns the routes the peer holds in its RIB for a family ("v4" or
// "v6").
func (p *testPeer) routes(t testing.TB, fam string) map[netip.Prefix]peerRoute {
	t.Helper()
	rep, err := p.do("rib", fam)
	require.NoError(t, err)
	out := make(map[netip.Prefix]peerRoute)
	for f := range strings.FieldsSeq(rep) {
		pfx, rest, _ := strings.Cut(f, "=")
		nh, stale := strings.CutSuffix(rest, "*")
		out[netip.MustParsePrefix(pfx)] = peerRoute{NextHop: netip.MustParseAddr(nh), Stale: stale}
	}
	return out
}

// received returns the prefixes (and next hops) the peer holds in its RIB
// for a family ("v4" or "v6").
func (p *testPeer) received(t testing.TB, fam string) map[netip.Prefix]netip.Addr {
	t.Helper()
	out := make(map[netip.Prefix]netip.Addr)
	for pfx, r := range p.routes(t, fam) {
		out[pfx] = r.NextHop
	}
	return out
}

// count returns the number of prefixes in the peer's RIB for a family, -1
// on error.
func (p *testPeer) count(fam string) int {
	rep, err := p.do("count", fam)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(rep)
	if err != nil {
		return -1
	}
	return n
}

// grFlags returns the restart (R) and notification (N) flags of the graceful
// restart capability the neighbor sent in its last OPEN; ok is false when
// the capability is missing.
func (p *testPeer) grFlags(t testing.TB, neighbor netip.Addr) (r, n, ok bool) {
	t.Helper()
	rep, err := p.do("grcap", neighbor.String())
	require.NoError(t, err)
	if rep == "none" {
		return false, false, false
	}
	return strings.Contains(rep, "R"), strings.Contains(rep, "N"), true
}

// runPeerProcess is the child side of testPeer: a GoBGP server configured
// by commands on stdin, answering one line per command on stdout. It stops
// the server and returns when stdin is closed.
func runPeerProcess(spec string) int {
	parts := strings.Split(spec, ",")
	if len(parts) != 4 {
		fmt.Fprintln(os.Stderr, "bad", peerEnv, spec)
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
		fmt.Fprintln(os.Stderr, "start:", err)
		return 1
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		reply, err := peerCommand(ctx, srv, addr, strings.Fields(in.Text()))
		if err != nil {
			fmt.Printf("err %v\n", err)
			continue
		}
		fmt.Printf("ok %s\n", reply)
	}
	return 0
}

func peerCommand(ctx context.Context, srv *server.BgpServer, local string, args []string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("empty command")
	}
	fam := func(s string) gobgppkt.Family {
		if s == "v6" {
			return gobgppkt.RF_IPv6_UC
		}
		return gobgppkt.RF_IPv4_UC
	}
	switch {
	case args[0] == "ping":
		return "pong", nil
	case args[0] == "neighbor" && len(args) >= 3:
		asn, _ := strconv.ParseUint(args[2], 10, 32)
		opts := make(map[string]string)
		for _, kv := range args[3:] {
			k, v, _ := strings.Cut(kv, "=")
			opts[k] = v
		}
		active := opts["active"] == "true"
		port, _ := strconv.Atoi(opts["port"])
		restart, _ := strconv.Atoi(opts["gr"])
		families := []string{"v4", "v6"}
		if f := opts["families"]; f != "" {
			families = strings.Split(f, ",")
		}
		peer := &api.Peer{
			Conf:      &api.PeerConf{NeighborAddress: args[1], PeerAsn: uint32(asn), AuthPassword: opts["password"]},
			Transport: &api.Transport{PassiveMode: !active, LocalAddress: local},
			Timers:    &api.Timers{Config: &api.TimersConfig{ConnectRetry: 1, HoldTime: 9, KeepaliveInterval: 3}},
		}
		if restart > 0 {
			peer.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: uint32(restart), NotificationEnabled: true}
		}
		for _, f := range families {
			afi := api.Family_AFI_IP
			if f == "v6" {
				afi = api.Family_AFI_IP6
			}
			as := &api.AfiSafi{Config: &api.AfiSafiConfig{Family: &api.Family{Afi: afi, Safi: api.Family_SAFI_UNICAST}, Enabled: true}}
			if restart > 0 {
				as.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
			}
			peer.AfiSafis = append(peer.AfiSafis, as)
		}
		if active {
			peer.Transport.RemotePort = uint32(port)
		}
		return "", srv.AddPeer(ctx, &api.AddPeerRequest{Peer: peer})
	case args[0] == "path" && len(args) == 3:
		pfx, err := netip.ParsePrefix(args[1])
		if err != nil {
			return "", err
		}
		nh, err := netip.ParseAddr(args[2])
		if err != nil {
			return "", err
		}
		p, err := newPathTable(srv).path(pfx, nh, false)
		if err != nil {
			return "", err
		}
		_, err = srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{p}})
		return "", err
	case args[0] == "rib" && len(args) == 2:
		var b strings.Builder
		err := srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: fam(args[1])},
			func(nlri gobgppkt.NLRI, paths []*apiutil.Path) {
				pfx := nlri.(*gobgppkt.IPAddrPrefix).Prefix
				stale := ""
				if paths[0].Stale {
					stale = "*"
				}
				fmt.Fprintf(&b, "%s=%s%s ", pfx, routeFromPath(pfx, paths[0]).NextHop, stale)
			})
		return b.String(), err
	case args[0] == "adjin" && len(args) == 3:
		var b strings.Builder
		err := srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_IN, Name: args[2], Family: fam(args[1]), EnableFiltered: true},
			func(nlri gobgppkt.NLRI, paths []*apiutil.Path) {
				fmt.Fprintf(&b, "%s:%+v ", nlri, *paths[0])
			})
		return b.String(), err
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
	case args[0] == "waitprefix" && len(args) == 4:
		// waitprefix <fam> <prefix> <1|0>: until the prefix is (not) in
		// the RIB.
		want := args[3] == "1"
		deadline := time.Now().Add(2 * time.Minute)
		for {
			found := false
			err := srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: fam(args[1]),
				Prefixes: []*apiutil.LookupPrefix{{Prefix: args[2], LookupOption: apiutil.LOOKUP_EXACT}}},
				func(gobgppkt.NLRI, []*apiutil.Path) { found = true })
			if err != nil || found == want {
				return "", err
			}
			if time.Now().After(deadline) {
				return "", fmt.Errorf("prefix %s present=%v, want %v", args[2], found, want)
			}
			time.Sleep(time.Millisecond)
		}
	case args[0] == "count" && len(args) == 2:
		n, err := peerCount(ctx, srv, fam(args[1]))
		return strconv.FormatUint(n, 10), err
	case args[0] == "wait" && len(args) == 3:
		// Poll in the child, sparingly: every count takes the server's
		// lock and competes with the UPDATE processing being measured.
		want, err := strconv.ParseUint(args[2], 10, 64)
		if err != nil {
			return "", err
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			n, err := peerCount(ctx, srv, fam(args[1]))
			if err != nil || n == want {
				return strconv.FormatUint(n, 10), err
			}
			if time.Now().After(deadline) {
				return "", fmt.Errorf("have %d routes, want %d", n, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return "", fmt.Errorf("unknown command %q", args)
}

// runManager starts a manager's Run and stops it at cleanup.
func runManager(t testing.TB, cfg Config) *Manager {
	t.Helper()
	m, err := New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// Wait until Run has marked the manager running.
	require.Eventually(t, func() bool {
		_, err := m.Peers(context.Background())
		return err == nil
	}, waitFor, time.Millisecond)
	return m
}

func testNode(podCIDRs ...string) *kubemodel.Node {
	return &kubemodel.Node{Name: "node-1", Labels: map[string]string{"bgp": "yes"}, PodCidrs: podCIDRs}
}

func testState(node *kubemodel.Node) *bgp.ControlPlaneState {
	return &bgp.ControlPlaneState{Node: node, IPv4: net.ParseIP("127.0.0.1"), IPv6: net.ParseIP("fd00::1")}
}

func testPolicy(localASN uint32, peers ...bgp.Neighbor) *bgp.PeeringPolicy {
	return &bgp.PeeringPolicy{
		Name: "test",
		VirtualRouters: []bgp.VirtualRouter{{
			LocalASN:      localASN,
			ExportPodCIDR: true,
			Neighbors:     peers,
		}},
	}
}

func neighborOf(p *testPeer, local string) bgp.Neighbor {
	return bgp.Neighbor{
		PeerAddress:      p.addr,
		PeerPort:         uint16(p.port),
		PeerASN:          p.asn,
		LocalAddress:     netip.MustParseAddr(local),
		ConnectRetryTime: MinConnectRetryTime,
		HoldTime:         9 * time.Second,
		KeepaliveTime:    3 * time.Second,
	}
}

func waitEstablished(t testing.TB, m *Manager, peer netip.Addr) {
	t.Helper()
	require.Eventually(t, func() bool {
		ps, err := m.Peers(context.Background())
		if err != nil {
			return false
		}
		for _, p := range ps {
			if p.PeerAddress == peer && p.State == bgp.SessionEstablished {
				return true
			}
		}
		return false
	}, waitFor, 20*time.Millisecond, "session to %s not Established", peer)
}

func itoa(i int) string { return strconv.Itoa(i) }

// md5Supported tries to set TCP_MD5SIG on a socket, as GoBGP does.
func md5Supported(t testing.TB, p *testPeer) bool {
	t.Helper()
	return setMD5(p.addr.String()) == nil
}

func peerCount(ctx context.Context, srv *server.BgpServer, f gobgppkt.Family) (uint64, error) {
	rsp, err := srv.GetTable(ctx, &api.GetTableRequest{
		TableType: api.TableType_TABLE_TYPE_GLOBAL,
		Family:    &api.Family{Afi: api.Family_Afi(f.Afi()), Safi: api.Family_Safi(f.Safi())},
	})
	if err != nil {
		return 0, err
	}
	return rsp.NumDestination, nil
}

// waitPrefix blocks until the peer has (or no longer has) a prefix.
func (p *testPeer) waitPrefix(t testing.TB, fam, prefix string, present bool) {
	t.Helper()
	want := "0"
	if present {
		want = "1"
	}
	_, err := p.do("waitprefix", fam, prefix, want)
	require.NoError(t, err)
}

// waitCount blocks until the peer has exactly n routes of a family.
func (p *testPeer) waitCount(t testing.TB, fam string, n int) {
	t.Helper()
	_, err := p.do("wait", fam, itoa(n))
	require.NoError(t, err)
}

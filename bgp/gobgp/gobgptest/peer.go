package gobgptest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vswitchkit/vswitchkit/bgp"
)

// peerEnv marks a child process started by StartPeer; its value is the
// peer's address, ASN, port and router ID.
const peerEnv = "VSWITCHKIT_GOBGPTEST_PEER"

// Main runs the peer when the process is a child started by [StartPeer],
// and exits when the parent closes the child's stdin. Otherwise it returns
// at once. Call it first in the TestMain of every test binary that uses
// StartPeer:
//
//	func TestMain(m *testing.M) {
//		gobgptest.Main()
//		goleak.VerifyTestMain(m)
//	}
func Main() {
	if spec := os.Getenv(peerEnv); spec != "" {
		os.Exit(runChild(spec))
	}
}

// PeerConfig configures a [Peer].
type PeerConfig struct {
	// Address is the address the peer listens on and connects from: a
	// loopback address (127.0.0.0/8 or ::1). Required.
	Address netip.Addr
	// ASN is the peer's autonomous system number. Required.
	ASN uint32
	// RouterID is the peer's BGP identifier. Default: Address if it is
	// IPv4, else 10.255.255.254.
	RouterID netip.Addr
	// Port is the TCP port the peer listens on. Default: a port that was
	// free on Address a moment before.
	Port int
}

// Peer is a GoBGP speaker playing the remote router, in a child process:
// the test binary re-executed (see [Main]). Two GoBGP servers must not run
// in one process under the race detector (StartBgp writes package-level
// variables that running servers read), and a child process also keeps the
// peer's work out of the profile of the code under test.
//
// Learned routes are kept in the peer's RIB, which [Peer.Routes] and the
// Wait methods read; the peer re-advertises nothing to the neighbor it
// learned a route from.
//
// Peer is safe for concurrent use; commands to the child are serialized.
type Peer struct {
	addr netip.Addr
	port int
	asn  uint32

	child *Child
}

// StartPeer starts a peer and stops it when the test ends. It fails the test
// when the address is not a loopback address or the child does not start.
func StartPeer(t testing.TB, cfg PeerConfig) *Peer {
	t.Helper()
	if !cfg.Address.IsLoopback() {
		t.Fatalf("gobgptest: peer address %v is not a loopback address", cfg.Address)
	}
	if cfg.ASN == 0 {
		t.Fatalf("gobgptest: peer ASN is 0")
	}
	if !cfg.RouterID.IsValid() {
		cfg.RouterID = netip.MustParseAddr("10.255.255.254")
		if cfg.Address.Is4() {
			cfg.RouterID = cfg.Address
		}
	}
	if cfg.Port == 0 {
		cfg.Port = FreePort(t, cfg.Address)
	}
	p := &Peer{addr: cfg.Address, port: cfg.Port, asn: cfg.ASN}
	p.child = StartChild(t, fmt.Sprintf("%s=%s,%d,%d,%s", peerEnv, cfg.Address, cfg.ASN, cfg.Port, cfg.RouterID))
	if _, err := p.do("ping"); err != nil {
		t.Fatalf("gobgptest: peer did not start (is gobgptest.Main called in TestMain?): %v", err)
	}
	return p
}

// FreePort returns a TCP port that was free on addr a moment ago.
func FreePort(t testing.TB, addr netip.Addr) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr.String(), "0"))
	if err != nil {
		t.Fatalf("gobgptest: free port on %s: %v", addr, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Address returns the peer's address.
func (p *Peer) Address() netip.Addr { return p.addr }

// Port returns the TCP port the peer listens on.
func (p *Peer) Port() int { return p.port }

// ASN returns the peer's ASN.
func (p *Peer) ASN() uint32 { return p.asn }

// NeighborFor returns the bgp.Neighbor under which a speaker with source
// address local reaches this peer, with short timers for tests: connect
// retry 2s (GoBGP's minimum), hold time 9s, keepalive 3s.
func (p *Peer) NeighborFor(local netip.Addr) bgp.Neighbor {
	return bgp.Neighbor{
		PeerAddress:      p.addr,
		PeerPort:         uint16(p.port),
		PeerASN:          p.asn,
		LocalAddress:     local,
		ConnectRetryTime: 2 * time.Second,
		HoldTime:         9 * time.Second,
		KeepaliveTime:    3 * time.Second,
	}
}

// Neighbor is the speaker under test, as the peer is configured for it.
type Neighbor struct {
	// Address is the neighbor's address. Required.
	Address netip.Addr
	// ASN is the neighbor's ASN. Required.
	ASN uint32
	// Password enables TCP-MD5.
	Password string
	// Active makes the peer connect to Address:Port instead of waiting.
	Active bool
	Port   int
	// Families are the families the peer offers. Default both unicast
	// families.
	Families []bgp.Family
	// RestartTime, when positive, enables graceful restart (as helper and
	// restarting speaker, with the notification flag of RFC 8538) with
	// this restart time (whole seconds).
	RestartTime time.Duration
}

// AddNeighbor configures a neighbor (session timers: connect retry 1s,
// hold 9s, keepalive 3s).
func (p *Peer) AddNeighbor(t testing.TB, n Neighbor) {
	t.Helper()
	args := []string{"neighbor", n.Address.String(), strconv.FormatUint(uint64(n.ASN), 10),
		"active=" + strconv.FormatBool(n.Active), "port=" + strconv.Itoa(n.Port),
		"gr=" + strconv.Itoa(int(n.RestartTime/time.Second))}
	if n.Password != "" {
		args = append(args, "password="+n.Password)
	}
	if len(n.Families) > 0 {
		fams := make([]string, len(n.Families))
		for i, f := range n.Families {
			fams[i] = string(f)
		}
		args = append(args, "families="+strings.Join(fams, ","))
	}
	p.must(t, args...)
}

// AddPath originates a route at the peer, with the given standard
// communities ("65000:1").
func (p *Peer) AddPath(t testing.TB, prefix netip.Prefix, nextHop netip.Addr, communities ...string) {
	t.Helper()
	p.must(t, append([]string{"path", prefix.String(), nextHop.String()}, communities...)...)
}

// AddPaths originates many routes at the peer at once, all with next hop
// nextHop (for benchmarks: one command, one GoBGP call).
func (p *Peer) AddPaths(t testing.TB, prefixes []netip.Prefix, nextHop netip.Addr) {
	t.Helper()
	args := make([]string, 0, len(prefixes)+2)
	args = append(args, "paths", nextHop.String())
	for _, pfx := range prefixes {
		args = append(args, pfx.String())
	}
	p.must(t, args...)
}

// DeletePath withdraws a route the peer originated with [Peer.AddPath].
func (p *Peer) DeletePath(t testing.TB, prefix netip.Prefix, nextHop netip.Addr) {
	t.Helper()
	p.must(t, "unpath", prefix.String(), nextHop.String())
}

// Kill kills the peer's process with SIGKILL: no NOTIFICATION, no
// withdrawal; the kernel closes its sockets, as when a router dies.
func (p *Peer) Kill(t testing.TB) {
	t.Helper()
	p.child.Kill(t)
}

// Route is a route in the peer's RIB.
type Route struct {
	NextHop netip.Addr
	// Stale marks a route kept by graceful restart and not refreshed yet.
	Stale bool
	// Communities and LargeCommunities are the route's communities, sorted
	// ("65000:1", "65000:1:2"); LocalPref its LOCAL_PREF, nil if absent.
	Communities      []string `json:",omitempty"`
	LargeCommunities []string `json:",omitempty"`
	LocalPref        *uint32  `json:",omitempty"`
}

// Routes returns the routes of a family in the peer's RIB.
func (p *Peer) Routes(t testing.TB, fam bgp.Family) map[netip.Prefix]Route {
	t.Helper()
	rep := p.must(t, "rib", string(fam))
	var raw map[string]Route
	if err := json.Unmarshal([]byte(rep), &raw); err != nil {
		t.Fatalf("gobgptest: peer %s: rib: %v", p.addr, err)
	}
	out := make(map[netip.Prefix]Route, len(raw))
	for pfx, r := range raw {
		out[netip.MustParsePrefix(pfx)] = r
	}
	return out
}

// Count returns the number of prefixes of a family in the peer's RIB; -1 on
// error (use it in polling conditions).
func (p *Peer) Count(fam bgp.Family) int {
	rep, err := p.do("count", string(fam))
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(rep)
	if err != nil {
		return -1
	}
	return n
}

// WaitCount blocks until the peer has exactly n prefixes of a family
// (polled in the child every 5ms, at most 2 minutes).
func (p *Peer) WaitCount(t testing.TB, fam bgp.Family, n int) {
	t.Helper()
	p.must(t, "wait", string(fam), strconv.Itoa(n))
}

// WaitPrefix blocks until the peer has (present) or no longer has a prefix
// (polled in the child every millisecond, at most 2 minutes).
func (p *Peer) WaitPrefix(t testing.TB, prefix netip.Prefix, present bool) {
	t.Helper()
	fam := bgp.IPv4Unicast
	if prefix.Addr().Is6() {
		fam = bgp.IPv6Unicast
	}
	p.must(t, "waitprefix", string(fam), prefix.String(), strconv.FormatBool(present))
}

// NeighborState is a neighbor's session as the peer sees it.
type NeighborState struct {
	State bgp.SessionState
	// RouterID is the neighbor's BGP identifier; valid once Established.
	RouterID netip.Addr
}

// Neighbor returns the session of the neighbor at addr.
func (p *Peer) Neighbor(t testing.TB, addr netip.Addr) NeighborState {
	t.Helper()
	var st NeighborState
	if err := json.Unmarshal([]byte(p.must(t, "nstate", addr.String())), &st); err != nil {
		t.Fatalf("gobgptest: peer %s: nstate: %v", p.addr, err)
	}
	return st
}

// GracefulRestartFlags returns the restart (R) and notification (N) flags
// of the graceful-restart capability in the last OPEN of a neighbor; ok is
// false when that OPEN had no such capability (or none was received).
func (p *Peer) GracefulRestartFlags(t testing.TB, neighbor netip.Addr) (restart, notification, ok bool) {
	t.Helper()
	rep := p.must(t, "grcap", neighbor.String())
	if rep == "none" {
		return false, false, false
	}
	return strings.Contains(rep, "R"), strings.Contains(rep, "N"), true
}

func (p *Peer) must(t testing.TB, args ...string) string {
	t.Helper()
	rep, err := p.do(args...)
	if err != nil {
		t.Fatalf("gobgptest: peer %s: %s: %v", p.addr, strings.Join(args, " "), err)
	}
	return rep
}

// do sends one command line and returns the reply after "ok".
func (p *Peer) do(args ...string) (string, error) { return p.child.Do(args...) }

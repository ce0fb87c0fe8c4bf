package gobgptest

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// FRRConfig configures [StartFRR]: FRR's bgpd (AS ASN, default 65200) on
// Address with one passive neighbor, the speaker under test (AS
// NeighborASN, default 65009), for IPv4 and IPv6 unicast, and Extra lines
// inside the neighbor's address families (e.g. "default-originate").
type FRRConfig struct {
	// Address is where bgpd listens: a loopback address. Required.
	Address netip.Addr
	// Neighbor is the speaker under test. Required.
	Neighbor         netip.Addr
	ASN, NeighborASN uint32
	// Extra are lines added to the neighbor's IPv4 unicast address family.
	Extra []string
}

// FRR is FRR's bgpd run alone by a test (no zebra: it installs nothing in
// the kernel); it is stopped when the test ends (its log is printed if
// the test failed).
type FRR struct {
	addr     netip.Addr
	port     int
	asn      uint32
	neighbor netip.Addr
	dir      string
	vtysh    string
}

// FRRPaths are where Debian's frr package puts bgpd and vtysh.
const (
	frrBgpd  = "/usr/lib/frr/bgpd"
	frrVtysh = "vtysh"
)

// StartFRR runs FRR's bgpd as c says and waits until its vty answers; it
// skips the test when FRR is not installed and refuses a non-loopback
// address.
func StartFRR(t testing.TB, c FRRConfig) *FRR {
	t.Helper()
	if !c.Address.IsLoopback() {
		t.Fatalf("gobgptest: FRR address %v is not a loopback address", c.Address)
	}
	if c.ASN == 0 {
		c.ASN = 65200
	}
	if c.NeighborASN == 0 {
		c.NeighborASN = 65009
	}
	vtysh, err := exec.LookPath(frrVtysh)
	if err != nil {
		t.Skip("FRR is not installed (vtysh missing): install the Debian package frr to run this test")
	}
	if _, err := os.Stat(frrBgpd); err != nil {
		t.Skipf("FRR is not installed (%s missing): install the Debian package frr to run this test", frrBgpd)
	}
	f := &FRR{addr: c.Address, port: FreePort(t, c.Address), asn: c.ASN, neighbor: c.Neighbor, dir: t.TempDir(), vtysh: vtysh}
	var b strings.Builder
	fmt.Fprintf(&b, "frr defaults datacenter\nhostname gobgptest\nlog file %s debugging\n", filepath.Join(f.dir, "bgpd.log"))
	fmt.Fprintf(&b, "router bgp %d\n bgp router-id 10.255.0.101\n no bgp ebgp-requires-policy\n no bgp default ipv4-unicast\n", c.ASN)
	fmt.Fprintf(&b, " neighbor %s remote-as %d\n neighbor %s passive\n neighbor %s ebgp-multihop 2\n neighbor %s timers 3 9\n",
		c.Neighbor, c.NeighborASN, c.Neighbor, c.Neighbor, c.Neighbor)
	for _, af := range []string{"ipv4", "ipv6"} {
		fmt.Fprintf(&b, " address-family %s unicast\n  neighbor %s activate\n", af, c.Neighbor)
		if af == "ipv4" {
			for _, l := range c.Extra {
				fmt.Fprintf(&b, "  neighbor %s %s\n", c.Neighbor, l)
			}
		}
		b.WriteString(" exit-address-family\n")
	}
	cfg := filepath.Join(f.dir, "bgpd.conf")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		t.Fatalf("gobgptest: %v", err)
	}
	cmd := exec.Command(frrBgpd, "-f", cfg, "-i", filepath.Join(f.dir, "bgpd.pid"), "-Z", "-S",
		"-p", fmt.Sprint(f.port), "-l", c.Address.String(), "--vty_socket", f.dir, "-P", "0")
	out, err := os.Create(filepath.Join(f.dir, "bgpd.out"))
	if err != nil {
		t.Fatalf("gobgptest: %v", err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("gobgptest: start bgpd: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		_ = out.Close()
		if t.Failed() {
			for _, name := range []string{"bgpd.out", "bgpd.log"} {
				if b, err := os.ReadFile(filepath.Join(f.dir, name)); err == nil {
					t.Logf("%s:\n%s", name, b)
				}
			}
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(f.Vtysh("show bgp summary"), "BGP router identifier") {
		if time.Now().After(deadline) {
			t.Fatalf("gobgptest: bgpd did not start: %s", f.Vtysh("show bgp summary"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return f
}

// Address returns bgpd's address.
func (f *FRR) Address() netip.Addr { return f.addr }

// Port returns bgpd's BGP port.
func (f *FRR) Port() int { return f.port }

// ASN returns bgpd's ASN.
func (f *FRR) ASN() uint32 { return f.asn }

// Vtysh runs one vtysh command against this bgpd and returns its output.
func (f *FRR) Vtysh(command string) string {
	out, _ := exec.Command(f.vtysh, "--vty_socket", f.dir, "-d", "bgpd", "-c", command).CombinedOutput()
	return string(out)
}

// Configure runs configuration commands (as in "configure terminal")
// inside "router bgp" and its IPv4 unicast address family.
func (f *FRR) Configure(lines ...string) string {
	args := []string{"--vty_socket", f.dir, "-d", "bgpd", "-c", "configure terminal", "-c", fmt.Sprintf("router bgp %d", f.asn),
		"-c", "address-family ipv4 unicast"}
	for _, l := range lines {
		args = append(args, "-c", l)
	}
	out, _ := exec.Command(f.vtysh, args...).CombinedOutput()
	return string(out)
}

// Established reports whether the session with the neighbor is
// Established.
func (f *FRR) Established() bool {
	var n map[string]struct {
		State string `json:"bgpState"`
	}
	if err := json.Unmarshal([]byte(f.Vtysh("show bgp neighbors "+f.neighbor.String()+" json")), &n); err != nil {
		return false
	}
	return n[f.neighbor.String()].State == "Established"
}

// FRRPath is one path of a prefix in bgpd's table, as "show bgp ... json"
// gives it.
type FRRPath struct {
	LocalPref int `json:"locPrf"`
	Community *struct {
		String string `json:"string"`
	} `json:"community"`
	LargeCommunity *struct {
		String string `json:"string"`
	} `json:"largeCommunity"`
	NextHops []struct {
		IP string `json:"ip"`
	} `json:"nexthops"`
}

// Routes returns the prefixes bgpd holds for family ("ipv4" or "ipv6")
// with their paths.
func (f *FRR) Routes(family string) map[string][]FRRPath {
	var tab struct {
		Routes map[string][]FRRPath `json:"routes"`
	}
	_ = json.Unmarshal([]byte(f.Vtysh("show bgp "+family+" unicast json")), &tab)
	return tab.Routes
}

// Route returns the paths of one prefix with their attributes ("show bgp
// <prefix> json"), nil when bgpd has none.
func (f *FRR) Route(prefix netip.Prefix) []FRRPath {
	var r struct {
		Paths []FRRPath `json:"paths"`
	}
	family := "ipv4"
	if prefix.Addr().Is6() {
		family = "ipv6"
	}
	_ = json.Unmarshal([]byte(f.Vtysh("show bgp "+family+" unicast "+prefix.String()+" json")), &r)
	return r.Paths
}

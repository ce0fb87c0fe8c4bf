package gobgptest

import (
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

// BIRDConfig configures [StartBIRD]: BIRD 2 (AS ASN, default 65100) on
// Address with one passive BGP protocol named "gobgp" towards Neighbor (AS
// NeighborASN, default 65009), with the extra protocol Options, the
// channels' Import and Export filters (default "all" and "none"), and
// Extra top-level configuration (e.g. a static protocol).
type BIRDConfig struct {
	// Address is where BIRD listens: a loopback address. Required.
	Address netip.Addr
	// Neighbor is the speaker under test. Required.
	Neighbor         netip.Addr
	ASN, NeighborASN uint32
	Options          string
	Import, Export   string
	Extra            string
}

// BIRD is a BIRD 2 daemon run by a test; it is stopped when the test ends
// (its log is printed if the test failed).
type BIRD struct {
	addr netip.Addr
	port int
	asn  uint32
	sock string
	cli  string
}

// StartBIRD runs BIRD 2 as c says and waits until it is up; it skips the
// test when BIRD is not installed (CI installs it) and refuses a
// non-loopback address.
func StartBIRD(t testing.TB, c BIRDConfig) *BIRD {
	t.Helper()
	if !c.Address.IsLoopback() {
		t.Fatalf("gobgptest: BIRD address %v is not a loopback address", c.Address)
	}
	if c.ASN == 0 {
		c.ASN = 65100
	}
	if c.NeighborASN == 0 {
		c.NeighborASN = 65009
	}
	if c.Import == "" {
		c.Import = "all"
	}
	if c.Export == "" {
		c.Export = "none"
	}
	birdPath, err := exec.LookPath("bird")
	if err != nil {
		birdPath = "/usr/sbin/bird"
	}
	birdcPath, errc := exec.LookPath("birdc")
	if errc != nil {
		birdcPath = "/usr/sbin/birdc"
	}
	for _, p := range []string{birdPath, birdcPath} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("BIRD 2 is not installed (%s missing): install the Debian package bird2 to run this test", p)
		}
	}
	b := &BIRD{addr: c.Address, port: FreePort(t, c.Address), asn: c.ASN, cli: birdcPath}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "bird.conf")
	b.sock = filepath.Join(dir, "bird.ctl")
	cfg := fmt.Sprintf(`router id 10.255.0.100;
log "%s" all;
protocol device {}
protocol direct { ipv4; ipv6; interface "lo"; }
%s
protocol bgp gobgp {
	local %s port %d as %d;
	neighbor %s as %d;
	passive on;
	multihop 2;
	hold time 9;
	%s
	ipv4 { import %s; export %s; };
	ipv6 { import %s; export %s; };
}
`, filepath.Join(dir, "bird.log"), c.Extra, c.Address, b.port, c.ASN, c.Neighbor, c.NeighborASN, c.Options, c.Import, c.Export, c.Import, c.Export)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatalf("gobgptest: %v", err)
	}
	cmd := exec.Command(birdPath, "-f", "-c", cfgPath, "-s", b.sock, "-P", filepath.Join(dir, "bird.pid"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("gobgptest: start BIRD: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			if out, err := os.ReadFile(filepath.Join(dir, "bird.log")); err == nil {
				t.Logf("bird.log:\n%s", out)
			}
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(b.C("show", "status"), "Daemon is up") {
		if time.Now().After(deadline) {
			t.Fatalf("gobgptest: BIRD did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return b
}

// Address returns BIRD's address.
func (b *BIRD) Address() netip.Addr { return b.addr }

// Port returns BIRD's BGP port.
func (b *BIRD) Port() int { return b.port }

// ASN returns BIRD's ASN.
func (b *BIRD) ASN() uint32 { return b.asn }

// C runs birdc with the arguments and returns its output.
func (b *BIRD) C(args ...string) string {
	out, _ := exec.Command(b.cli, append([]string{"-s", b.sock}, args...)...).CombinedOutput()
	return string(out)
}

// Routes returns "show route protocol gobgp": what BIRD learned.
func (b *BIRD) Routes() string { return b.C("show", "route", "protocol", "gobgp") }

// Established reports whether the session is Established.
func (b *BIRD) Established() bool {
	return strings.Contains(b.C("show", "protocols", "gobgp"), "Established")
}

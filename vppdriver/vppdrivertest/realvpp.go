package vppdrivertest

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment variables that [StartRealVPP] and [RealVPPSocket] read.
const (
	// EnvScript names a vpp.sh-compatible control script. Its commands:
	// "start DIR" starts a VPP whose files live under DIR and prints a line
	// "VPP_API_SOCKET=<path of the binary-API socket>"; "stop DIR" stops
	// it (all state lost) and waits for it to exit; "restart DIR" is stop
	// then start; "cli DIR CMD..." runs a VPP CLI command.
	EnvScript = "VPP_SH"

	// EnvAPISocket names the binary-API socket of a VPP that is already
	// running, for tests that need a VPP but do not stop or restart it.
	EnvAPISocket = "VPP_API_SOCKET"
)

// scriptTimeout bounds one command of the control script.
const scriptTimeout = 2 * time.Minute

// RealVPP is a real VPP process started for one test by the control
// script named by $VPP_SH, in a directory of its own. It is owned by the
// test that started it; only APISocket may be called from other goroutines
// (a driver's adapter factory reconnecting while the test restarts VPP).
type RealVPP struct {
	t      testing.TB
	script string
	dir    string
	mu     sync.Mutex // guards socket: Restart sets it while a driver reconnects
	socket string
}

// StartRealVPP starts a real VPP for the test, in its own t.TempDir(), and
// stops it in t.Cleanup. It skips the test, saying what is missing, when
// $VPP_SH is not set or the test does not run as root (VPP needs root).
// It fails the test if the script fails.
func StartRealVPP(t testing.TB) *RealVPP {
	t.Helper()
	script := os.Getenv(EnvScript)
	if script == "" {
		t.Skipf("%s is not set: set it to a vpp.sh-compatible control script (start|stop|restart|cli DIR) to run this test against a real VPP", EnvScript)
	}
	if os.Geteuid() != 0 {
		t.Skip("a real VPP needs root: run this test as root")
	}
	v := &RealVPP{t: t, script: script, dir: t.TempDir()}
	v.Start()
	t.Cleanup(func() {
		if _, err := v.run("stop"); err != nil {
			t.Errorf("stop VPP in %s: %v", v.dir, err)
		}
	})
	return v
}

// RealVPPSocket returns the binary-API socket of a running VPP for a test
// that needs one but does not stop or restart it: $VPP_API_SOCKET if set,
// otherwise the socket of a VPP started with [StartRealVPP] (which skips
// the test when it cannot start one).
func RealVPPSocket(t testing.TB) string {
	t.Helper()
	if sock := os.Getenv(EnvAPISocket); sock != "" {
		return sock
	}
	if os.Getenv(EnvScript) == "" {
		t.Skipf("neither %s nor %s is set: set %s to the API socket of a running VPP, or %s to a vpp.sh-compatible control script, to run this test against a real VPP",
			EnvAPISocket, EnvScript, EnvAPISocket, EnvScript)
	}
	return StartRealVPP(t).APISocket()
}

// APISocket returns the path of the binary-API socket (the same after a
// restart).
func (v *RealVPP) APISocket() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.socket
}

// Dir returns the directory the VPP's files live in.
func (v *RealVPP) Dir() string { return v.dir }

// Start starts the VPP (with an empty state). The test fails if it does
// not start.
func (v *RealVPP) Start() {
	v.t.Helper()
	v.started(v.run("start"))
}

// Stop stops the VPP and waits for it to exit: its state is lost and its
// API socket refuses connections until Start.
func (v *RealVPP) Stop() {
	v.t.Helper()
	if out, err := v.run("stop"); err != nil {
		v.t.Fatalf("stop VPP in %s: %v\n%s", v.dir, err, out)
	}
}

// Restart stops and starts the VPP, as a real VPP restart: all state is
// lost and every connection is dropped.
func (v *RealVPP) Restart() {
	v.t.Helper()
	v.started(v.run("restart"))
}

// CLI runs a VPP CLI command (e.g. "show", "interface") and returns its
// output. The test fails if the command cannot be run.
func (v *RealVPP) CLI(args ...string) string {
	v.t.Helper()
	out, err := v.run("cli", args...)
	if err != nil {
		v.t.Fatalf("VPP CLI %q: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (v *RealVPP) started(out []byte, err error) {
	v.t.Helper()
	if err != nil {
		v.t.Fatalf("start VPP in %s: %v\n%s", v.dir, err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if sock, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), EnvAPISocket+"="); ok {
			v.mu.Lock()
			v.socket = sock
			v.mu.Unlock()
			return
		}
	}
	v.t.Fatalf("start VPP in %s: the script printed no %s= line:\n%s", v.dir, EnvAPISocket, out)
}

func (v *RealVPP) run(cmd string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	return exec.CommandContext(ctx, v.script, append([]string{cmd, v.dir}, args...)...).CombinedOutput()
}

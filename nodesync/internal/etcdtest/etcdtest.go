// Package etcdtest starts etcd servers on loopback for the tests of
// nodesync and its etcd adapter: in-process ([Start], a
// [etcdtest.Server] adapted to testing.TB) or, for benchmarks that
// measure the server's memory, as a separate process ([StartProcess]).
package etcdtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
)

// Start runs a single-member etcd with its data in a temporary directory on
// free loopback ports and returns its client URL. The server is stopped in
// tb.Cleanup. Fsync is disabled: the data dir is thrown away anyway.
func Start(tb testing.TB) string {
	tb.Helper()
	srv := StartServer(tb)
	return "http://" + srv.Endpoint()
}

// StartServer is Start returning the server, which tests can stop and
// restart (etcdtest.Server.Stop, Restart).
func StartServer(tb testing.TB) *etcdtest.Server {
	tb.Helper()
	var lastErr error
	for range 5 { // free ports can be taken between probing and binding
		srv, err := etcdtest.Start(tb.TempDir())
		if err != nil {
			lastErr = err
			continue
		}
		tb.Cleanup(srv.Close)
		return srv
	}
	tb.Fatalf("etcdtest: start embedded etcd: %v", lastErr)
	return nil
}

// serveEnv names the data directory of a server process; see MaybeServe.
const serveEnv = "NODESYNC_ETCDTEST_SERVE_DIR"

// MaybeServe turns the test binary into an etcd server process when it was
// started by [StartProcess]: it then serves until its standard input
// closes and exits. Call it first in TestMain; otherwise it returns at once.
func MaybeServe() {
	dir := os.Getenv(serveEnv)
	if dir == "" {
		return
	}
	srv, err := etcdtest.Start(dir)
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("ENDPOINT", "http://"+srv.Endpoint())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes stdin
	srv.Close()
	os.Exit(0)
}

// Process is an etcd server running in a child process.
type Process struct {
	Endpoint string // client URL
	Pid      int
}

// StartProcess starts an etcd server (the same as Start, fsync off) in a
// child process - the test binary itself, which must call [MaybeServe] in
// its TestMain - so that the server's memory can be measured apart from
// the test's ([Memory]). The process is stopped in tb.Cleanup.
func StartProcess(tb testing.TB) Process {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), serveEnv+"="+tb.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("etcdtest: start server process: %v", err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		line := lines.Text()
		if ep, ok := strings.CutPrefix(line, "ENDPOINT "); ok {
			go func() { _, _ = io.Copy(io.Discard, stdout) }() // ends when the process does
			return Process{Endpoint: ep, Pid: cmd.Process.Pid}
		}
		if strings.HasPrefix(line, "ERROR ") {
			tb.Fatalf("etcdtest: server process: %s", line)
		}
	}
	tb.Fatalf("etcdtest: server process ended without an endpoint: %v", lines.Err())
	return Process{}
}

// Memory returns the peak (VmHWM) and current (VmRSS) resident memory of
// process pid, in bytes, from /proc/<pid>/status.
func Memory(pid int) (hwm, rss int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmHWM:":
			hwm = n << 10
		case "VmRSS:":
			rss = n << 10
		}
	}
	if hwm == 0 || rss == 0 {
		return 0, 0, fmt.Errorf("etcdtest: no VmHWM/VmRSS in /proc/%d/status", pid)
	}
	return hwm, rss, nil
}

// CPUTime returns the user plus system CPU time that process pid has used,
// from /proc/<pid>/stat (resolution: one clock tick, 10ms on Linux).
func CPUTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("etcdtest: malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("etcdtest: malformed /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14 of the whole line
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("etcdtest: malformed /proc/%d/stat", pid)
	}
	const ticksPerSecond = 100 // USER_HZ, fixed at 100 on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, nil
}

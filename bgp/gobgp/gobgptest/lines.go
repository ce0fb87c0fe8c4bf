package gobgptest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// Child is a child process that runs a command loop ([ServeLines]) — the
// test binary itself, re-executed with an environment variable that its
// TestMain recognizes. Peer is one; tests use it for processes they must
// really kill (a BGP speaker killed with SIGKILL for graceful restart).
//
// Child is safe for concurrent use: commands are serialized.
type Child struct {
	// Cmd is the running process (e.g. for Cmd.Process.Signal).
	Cmd *exec.Cmd

	mu  sync.Mutex // serializes commands
	in  io.WriteCloser
	out *bufio.Reader
}

// StartChild re-executes the test binary (running no test) with env added
// to its environment, and stops it when the test ends: its stdin is closed,
// which ends ServeLines, and the process is waited for. It fails the test
// if the process cannot start.
func StartChild(t testing.TB, env string) *Child {
	t.Helper()
	c := &Child{Cmd: exec.Command(os.Args[0], "-test.run=^$")}
	c.Cmd.Env = append(os.Environ(), env)
	c.Cmd.Stderr = os.Stderr
	var err error
	if c.in, err = c.Cmd.StdinPipe(); err != nil {
		t.Fatalf("gobgptest: %v", err)
	}
	stdout, err := c.Cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("gobgptest: %v", err)
	}
	c.out = bufio.NewReader(stdout)
	if err := c.Cmd.Start(); err != nil {
		t.Fatalf("gobgptest: start child: %v", err)
	}
	t.Cleanup(func() {
		c.in.Close() // the child's ServeLines returns on EOF
		_ = c.Cmd.Wait()
	})
	return c
}

// Kill kills the process with SIGKILL (no clean-up of its own: its
// sockets are closed by the kernel) and waits for it.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	if err := c.Cmd.Process.Kill(); err != nil {
		t.Fatalf("gobgptest: kill child: %v", err)
	}
	_ = c.Cmd.Wait()
}

// Do sends one command line (the arguments joined by spaces) and returns
// the reply after "ok", or the child's error message as an error.
func (c *Child) Do(args ...string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := fmt.Fprintln(c.in, strings.Join(args, " ")); err != nil {
		return "", err
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSpace(line)
	if rest, ok := strings.CutPrefix(line, "ok"); ok {
		return strings.TrimSpace(rest), nil
	}
	return "", errors.New(strings.TrimPrefix(line, "err "))
}

// ServeLines is the child's side of [Child]: it reads command lines from
// in (lines up to 1 MiB) and answers each on out with "ok <reply>" or
// "err <message>", until in is closed.
func ServeLines(in io.Reader, out io.Writer, handle func(line string) (string, error)) {
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		reply, err := handle(sc.Text())
		if err != nil {
			fmt.Fprintf(out, "err %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
			continue
		}
		fmt.Fprintf(out, "ok %s\n", reply)
	}
}

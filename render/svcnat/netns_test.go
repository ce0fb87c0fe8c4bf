package svcnat_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// netnsLab creates network namespaces and veth pairs for one test and
// removes them in t.Cleanup. Names carry a random tag so that tests (and
// other users of the machine) never collide.
type netnsLab struct {
	t   *testing.T
	tag string // 4 hex digits

	mu      sync.Mutex
	servers []*tcpServer
	veths   []string // root-namespace ends
}

func newNetnsLab(t *testing.T) *netnsLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root: run this test as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the ip command (iproute2) is missing")
	}
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	l := &netnsLab{t: t, tag: hex.EncodeToString(b)}
	t.Cleanup(l.cleanup)
	return l
}

// hostIf is the name of the root-namespace end of the veth of the VPP
// interface named name (at most 15 bytes).
func (l *netnsLab) hostIf(name string) string {
	s := "v" + l.tag + "-" + name
	if len(s) > 15 {
		s = s[:15]
	}
	return s
}

func (l *netnsLab) ns(name string) string { return "svcnat-" + l.tag + "-" + name }

func (l *netnsLab) ip(args ...string) {
	l.t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		l.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// link creates namespace ns(name) with a veth pair: eth0 inside, hostIf(vppIf)
// in the root namespace (where VPP attaches af_packet to it).
func (l *netnsLab) link(name, vppIf string) {
	l.t.Helper()
	ns := l.ns(name)
	l.ip("netns", "add", ns)
	l.ip("link", "add", l.hostIf(vppIf), "type", "veth", "peer", "name", "eth0", "netns", ns)
	l.mu.Lock()
	l.veths = append(l.veths, l.hostIf(vppIf))
	l.mu.Unlock()
	l.ip("link", "set", l.hostIf(vppIf), "up")
	l.ip("-n", ns, "link", "set", "lo", "up")
	l.ip("-n", ns, "link", "set", "eth0", "up")
}

// addr configures eth0 of namespace name: addr/bits, then routes ("dst via
// gw" or "dst dev eth0").
func (l *netnsLab) addr(name, addr string, routes ...[]string) {
	l.t.Helper()
	ns := l.ns(name)
	l.ip("-n", ns, "addr", "add", addr, "dev", "eth0")
	for _, r := range routes {
		l.ip(append([]string{"-n", ns, "route", "add"}, r...)...)
	}
}

func (l *netnsLab) cleanup() {
	l.mu.Lock()
	servers, veths := l.servers, l.veths
	l.servers, l.veths = nil, nil
	l.mu.Unlock()
	for _, s := range servers {
		s.close()
	}
	// Deleting one end of a veth deletes both at once (a namespace with
	// sockets in TIME_WAIT would keep its end for a while).
	for _, v := range veths {
		_ = exec.Command("ip", "link", "del", v).Run()
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "svcnat-"+l.tag+"-") {
			_ = exec.Command("ip", "netns", "del", f[0]).Run() // removes its veths with it
		}
	}
}

// inNetns runs fn on a thread switched into namespace ns(name). Sockets
// created by fn stay in that namespace after it returns.
func (l *netnsLab) inNetns(name string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open(filepath.Join("/var/run/netns", l.ns(name)))
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", l.ns(name), err)
	}
	ferr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays in the wrong namespace: keep it locked, so that
		// it ends with this goroutine instead of serving others.
		return errors.Join(ferr, fmt.Errorf("setns back: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// tcpServer answers every connection with "<name> <client address>\n".
type tcpServer struct {
	ln net.Listener
	wg sync.WaitGroup
}

// serve starts a server in namespace name on port, answering as who.
func (l *netnsLab) serve(name, who string, port int) {
	l.t.Helper()
	var ln net.Listener
	err := l.inNetns(name, func() error {
		var err error
		ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		l.t.Fatalf("listen in %s: %v", name, err)
	}
	s := &tcpServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			_, _ = fmt.Fprintf(c, "%s %s\n", who, host)
			_ = c.Close()
		}
	}()
	l.mu.Lock()
	l.servers = append(l.servers, s)
	l.mu.Unlock()
}

func (s *tcpServer) close() {
	_ = s.ln.Close()
	s.wg.Wait()
}

// dial connects from namespace name to addr and returns the answer line
// ("" and the error if there is none within 3 s: the first packet to a
// neighbor VPP has not resolved yet is dropped, TCP sends its SYN again
// after a second).
func (l *netnsLab) dial(name, addr string) (string, error) {
	var conn net.Conn
	err := l.inNetns(name, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp4", addr)
		return err
	})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

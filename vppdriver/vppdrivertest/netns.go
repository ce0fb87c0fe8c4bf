package vppdrivertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// Netns is a Linux network namespace that a test created (with "ip netns
// add") and removes in t.Cleanup, with helpers to configure it and to send
// packets from it. It is owned by the test that created it.
type Netns struct {
	t    testing.TB
	name string
}

// NeedNetns skips the test, saying why, unless it runs as root on Linux
// with the ip command (iproute2): what [NewNetns] and [Veth] need.
func NeedNetns(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("network namespaces need root on Linux: run this test as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the ip command (iproute2) is not installed")
	}
}

// NewNetns creates the network namespace name (its loopback up) and
// deletes it when the test ends. It skips the test when namespaces cannot
// be made (see [NeedNetns]). A namespace of that name left by an earlier
// run is deleted first.
func NewNetns(t testing.TB, name string) *Netns {
	t.Helper()
	NeedNetns(t)
	_ = exec.Command("ip", "netns", "del", name).Run()
	IP(t, "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	n := &Netns{t: t, name: name}
	n.IP("link", "set", "lo", "up")
	return n
}

// Name returns the namespace's name.
func (n *Netns) Name() string { return n.name }

// Path returns the namespace's path (/var/run/netns/<name>), the form a
// CNI runtime passes as the pod's network namespace.
func (n *Netns) Path() string { return "/var/run/netns/" + n.name }

// IP runs "ip -n <namespace> args..." and fails the test if it fails.
func (n *Netns) IP(args ...string) string {
	n.t.Helper()
	return IP(n.t, append([]string{"-n", n.name}, args...)...)
}

// IP runs the ip command in the test's namespace and fails the test if it
// fails. It returns the output.
func IP(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Veth creates a veth pair: host in the test's own namespace (up), peer
// in ns named peer (not configured), and deletes it when the test ends.
// A link named host left by an earlier run is deleted first.
func Veth(t testing.TB, host string, ns *Netns, peer string) {
	t.Helper()
	NeedNetns(t)
	_ = exec.Command("ip", "link", "del", host).Run()
	IP(t, "link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns.name)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	IP(t, "link", "set", host, "up")
}

// Ping sends ICMP (ICMPv6) echo requests from the namespace to dst, one
// every 50ms, until one is answered or ctx ends. It returns the time until
// the answer. It needs root (a raw socket in the namespace).
func (n *Netns) Ping(ctx context.Context, dst netip.Addr) (time.Duration, error) {
	conn, err := n.icmpConn(dst.Is6())
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	start := time.Now()
	id := os.Getpid()&0xffff ^ int(start.UnixNano()&0xffff)
	typ, reply := icmp.Type(ipv4.ICMPTypeEcho), icmp.Type(ipv4.ICMPTypeEchoReply)
	proto := 1
	if dst.Is6() {
		typ, reply, proto = ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply, 58
	}
	buf := make([]byte, 1500)
	for seq := 1; ; seq++ {
		msg := icmp.Message{Type: typ, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("vswitchkit")}}
		b, err := msg.Marshal(nil) // the kernel fills in the ICMPv6 checksum
		if err != nil {
			return 0, err
		}
		if _, err := conn.WriteTo(b, &net.IPAddr{IP: dst.AsSlice()}); err != nil && !isTransient(err) {
			return 0, fmt.Errorf("ping %s from %s: %w", dst, n.name, err)
		}
		wait := time.Now().Add(50 * time.Millisecond)
		for {
			if err := ctx.Err(); err != nil {
				return 0, fmt.Errorf("ping %s from %s: no answer within the deadline: %w", dst, n.name, err)
			}
			_ = conn.SetReadDeadline(wait)
			k, from, err := conn.ReadFrom(buf)
			if err != nil {
				break // the next request
			}
			m, err := icmp.ParseMessage(proto, buf[:k])
			if err != nil || m.Type != reply {
				continue
			}
			echo, ok := m.Body.(*icmp.Echo)
			a, _ := netip.AddrFromSlice(from.(*net.IPAddr).IP)
			if ok && echo.ID == id && a.Unmap() == dst {
				return time.Since(start), nil
			}
		}
	}
}

func isTransient(err error) bool {
	return errors.Is(err, unix.ENETUNREACH) || errors.Is(err, unix.EHOSTUNREACH) || errors.Is(err, unix.EAGAIN)
}

// icmpConn opens a raw ICMP socket in the namespace.
func (n *Netns) icmpConn(v6 bool) (*icmp.PacketConn, error) {
	var conn *icmp.PacketConn
	err := n.Do(func() error {
		var err error
		if v6 {
			conn, err = icmp.ListenPacket("ip6:ipv6-icmp", "::")
		} else {
			conn, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("icmp socket in %s: %w", n.name, err)
	}
	return conn, nil
}

// Do runs f on an OS thread that is in the namespace: sockets f creates
// belong to the namespace (and keep working from any thread afterwards).
func (n *Netns) Do(f func() error) error {
	target, err := os.Open(n.Path())
	if err != nil {
		return err
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		// A thread that cannot be switched back is not handed back to the
		// runtime: the goroutine ends locked, and the thread goes with it.
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", n.name, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("setns back: %w", err))
			return // stays locked: the thread exits with the goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

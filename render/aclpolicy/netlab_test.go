package aclpolicy_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
)

// This file is the packet side of packets_test.go: servers in network
// namespaces and the probes between them, with nothing of VPP or of the
// agent.

// servers are the TCP and UDP servers a test runs in its namespaces.
type servers struct {
	mu    sync.Mutex
	close []func()
	wg    sync.WaitGroup
}

// stop closes every listener and connection and waits for the servers.
func (s *servers) stop() {
	s.mu.Lock()
	cl := s.close
	s.close = nil
	s.mu.Unlock()
	for _, c := range cl {
		c()
	}
	s.wg.Wait()
}

func (s *servers) onStop(f func()) {
	s.mu.Lock()
	s.close = append(s.close, f)
	s.mu.Unlock()
}

// serve runs, in ns, a TCP and a UDP server on port (IPv4) answering as
// who. The TCP server writes "<who> <client address>\n" to every
// connection, then echoes every line it reads until the client closes it
// (or a minute passes); the UDP server answers every datagram with
// "<who> <client address>".
func (s *servers) serve(t testing.TB, ns *vppdrivertest.Netns, who string, port int) {
	t.Helper()
	var ln net.Listener
	var pc net.PacketConn
	err := ns.Do(func() error {
		var err error
		if ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp4", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		t.Fatalf("servers in %s: %v", ns.Name(), err)
	}
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	s.onStop(func() {
		_ = ln.Close()
		_ = pc.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					_ = c.Close()
				}()
				host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
				_ = c.SetDeadline(time.Now().Add(time.Minute))
				if _, err := fmt.Fprintf(c, "%s %s\n", who, host); err != nil {
					return
				}
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(from.String())
			_, _ = pc.WriteTo([]byte(who+" "+host), from)
		}
	}()
}

// srcPorts hands out client source ports, each once per test binary: a
// probe never reuses the 5-tuple of an earlier one, so that a session
// that VPP's ACL plugin (or NAT44) still holds from an earlier stage
// cannot let it through.
var srcPorts atomic.Uint32

func nextSrcPort() int {
	const first, n = 20000, 40000
	return first + int(srcPorts.Add(1)-1)%n
}

// errNoAnswer is a probe without an answer within its timeout: the
// connection was dropped somewhere.
var errNoAnswer = errors.New("no answer")

// dialTCP connects from ns to dst within timeout (from a fresh source
// port) and returns the connection and the greeting line.
func dialTCP(ns *vppdrivertest.Netns, dst netip.AddrPort, timeout time.Duration) (net.Conn, string, error) {
	var conn net.Conn
	err := ns.Do(func() error {
		d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{Port: nextSrcPort()}}
		var err error
		conn, err = d.Dial("tcp4", dst.String())
		return err
	})
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, "", fmt.Errorf("%w: %w", errNoAnswer, err)
		}
		return nil, "", err
	}
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		_ = conn.Close()
		return nil, "", fmt.Errorf("%w: connected, no greeting: %w", errNoAnswer, err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return conn, strings.TrimSpace(line), nil
}

// probeTCP connects from ns to dst and returns the greeting ("<server>
// <client address as the server sees it>").
func probeTCP(ns *vppdrivertest.Netns, dst netip.AddrPort, timeout time.Duration) (string, error) {
	conn, line, err := dialTCP(ns, dst, timeout)
	if err != nil {
		return "", err
	}
	_ = conn.Close()
	return line, nil
}

// probeUDP sends one datagram from ns to dst (from a fresh source port)
// and returns the answer, which must come from dst.
func probeUDP(ns *vppdrivertest.Netns, dst netip.AddrPort, timeout time.Duration) (string, error) {
	_, answer, err := probeUDPAt(ns, dst, timeout)
	return answer, err
}

// probeUDPAt is probeUDP that also returns when the datagram was sent.
func probeUDPAt(ns *vppdrivertest.Netns, dst netip.AddrPort, timeout time.Duration) (sent time.Time, answer string, err error) {
	var conn *net.UDPConn
	err = ns.Do(func() error {
		var err error
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{Port: nextSrcPort()})
		return err
	})
	if err != nil {
		return time.Time{}, "", err
	}
	defer conn.Close()
	sent = time.Now()
	if _, err := conn.WriteToUDPAddrPort([]byte("probe"), dst); err != nil {
		return sent, "", err
	}
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return sent, "", errNoAnswer
			}
			return sent, "", err
		}
		if from.Addr().Unmap() == dst.Addr() && from.Port() == dst.Port() {
			return sent, string(buf[:n]), nil
		}
	}
}

// echo sends line on conn and waits for it to come back within timeout.
func echo(conn net.Conn, r *bufio.Reader, line string, timeout time.Duration) error {
	_ = conn.SetDeadline(time.Now().Add(timeout))
	defer func() { _ = conn.SetDeadline(time.Time{}) }()
	if _, err := conn.Write([]byte(line + "\n")); err != nil {
		return err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return errNoAnswer
		}
		return err
	}
	if strings.TrimSpace(got) != line {
		return fmt.Errorf("echo: sent %q, got %q", line, got)
	}
	return nil
}

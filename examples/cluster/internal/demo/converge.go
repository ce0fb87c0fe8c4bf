package demo

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
)

// tagPrefix is the VPP driver's tag prefix (vppdriver.Config.TagPrefix
// default).
const tagPrefix = "vsk:"

// check is how far a condition is met: done of total, and what is still
// missing or wrong.
type check struct {
	done, total int
	missing     []string
}

func (c check) ok() bool { return c.done >= c.total && len(c.missing) == 0 }

func (c *check) miss(format string, args ...any) {
	c.missing = append(c.missing, fmt.Sprintf(format, args...))
}

// await polls f until its check is met, reporting progress as stage name.
// It fails when ctx ends, a component failed, or Options.Timeout passed
// (with what is missing).
func (c *cluster) await(ctx context.Context, name string, f func(context.Context) (check, error)) error {
	var st *stage
	start := time.Now()
	defer func() {
		if st != nil {
			st.abort()
		}
	}()
	var last check
	err := c.poll(ctx, 50*time.Millisecond, func() (bool, string, error) {
		ch, err := f(ctx)
		if err != nil {
			return false, "", err
		}
		last = ch
		if st == nil {
			st = c.prog.stage(name, ch.total)
		}
		st.set(ch.done, ch.total)
		m := ch.missing
		if len(m) > 10 {
			m = append(slices.Clip(m[:10]), fmt.Sprintf("... and %d more", len(ch.missing)-10))
		}
		return ch.ok(), strings.Join(m, "; "), nil
	})
	if err != nil {
		return fmt.Errorf("%s (%d/%d): %w", name, last.done, last.total, err)
	}
	st.finish()
	c.step(name, start)
	return nil
}

// poll calls f every interval until it reports done. It fails with f's
// error, when ctx ends, when a component failed, or when Options.Timeout
// passed (with f's description of what is missing).
func (c *cluster) poll(ctx context.Context, interval time.Duration, f func() (done bool, missing string, err error)) error {
	deadline := time.Now().Add(c.opts.Timeout)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		done, missing, err := f()
		switch {
		case err != nil:
			return err
		case done:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("not done after %v: %s", c.opts.Timeout, missing)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.failed:
			return c.err()
		case <-tick.C:
		}
	}
}

// checkMesh: every live node has a VXLAN tunnel to every other live node
// and a route to its pod subnet, and no tunnel to a node that left.
func (c *cluster) checkMesh(context.Context) (check, error) {
	live := c.liveNodes()
	type info struct {
		id     uint32
		subnet netip.Prefix
	}
	infos := make(map[string]info, len(live))
	liveIDs := map[uint32]bool{}
	for _, n := range live {
		in := info{id: n.agent.NodeSync.GetNodeID(), subnet: n.agent.IPAM.PodSubnetThisNodePrefix()}
		infos[n.name] = in
		liveIDs[in.id] = true
	}
	ch := check{total: len(live) * (len(live) - 1)}
	for _, n := range live {
		snap := n.vpp.Snapshot()
		tunnels := map[string]bool{}
		for _, t := range tunnelsOf(snap, tagPrefix) {
			tunnels[t.Interface] = true
			if id, err := strconv.ParseUint(strings.TrimPrefix(t.Interface, "vxlan-"), 10, 32); err == nil && !liveIDs[uint32(id)] {
				ch.miss("%s: tunnel %s to a node that is gone", n.name, t.Interface)
			}
		}
		routes := map[netip.Prefix]bool{}
		for _, r := range snap.Routes {
			routes[r.Prefix] = true
		}
		for _, m := range live {
			if m == n {
				continue
			}
			in := infos[m.name]
			switch {
			case in.id == 0 || !in.subnet.IsValid():
				ch.miss("%s: %s has no ID and subnet yet", n.name, m.name)
			case !tunnels[fmt.Sprintf("vxlan-%d", in.id)]:
				ch.miss("%s: no tunnel to %s", n.name, m.name)
			case !routes[in.subnet]:
				ch.miss("%s: no route to %s's pod subnet %s", n.name, m.name, in.subnet)
			default:
				ch.done++
			}
		}
	}
	return ch, nil
}

// backends returns the ready backends of s: the pods that have an address,
// all of them or those on node.
func (c *cluster) backends(s *service, node string) []netip.AddrPort {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []netip.AddrPort
	for _, p := range c.pods {
		if p.service == s.name && p.ip.IsValid() && (node == "" || p.node == node) {
			out = append(out, netip.AddrPortFrom(p.ip, targetPort))
		}
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return out
}

// expectedNAT returns the NAT44 mappings node n must have, "tcp <frontend>"
// -> backends: every frontend of every service with its ready backends,
// only n's own for the external frontends of a service with
// externalTrafficPolicy Local, none where there is no backend. nodeIPs are
// n's addresses (the NodePort frontends).
func (c *cluster) expectedNAT(n *simNode, nodeIPs []netip.Addr) map[string][]netip.AddrPort {
	want := map[string][]netip.AddrPort{}
	add := func(fe netip.AddrPort, be []netip.AddrPort) {
		if len(be) > 0 {
			want["tcp "+fe.String()] = be
		}
	}
	for _, s := range c.svcs {
		all := c.backends(s, "")
		external := all
		if s.local {
			external = c.backends(s, n.name)
		}
		add(netip.AddrPortFrom(s.clusterIP, servicePort), all)
		if s.externalIP.IsValid() {
			add(netip.AddrPortFrom(s.externalIP, servicePort), external)
		}
		if s.lbIP.IsValid() {
			add(netip.AddrPortFrom(s.lbIP, servicePort), external)
		}
		if s.nodePort != 0 {
			for _, a := range nodeIPs {
				add(netip.AddrPortFrom(a, s.nodePort), external)
			}
		}
	}
	return want
}

// nat44 reads n's NAT44 static and load-balanced mappings from its VPP.
func (n *simNode) nat44(ctx context.Context) ([]NATMapping, error) {
	nat, err := vppdrivertest.ReadNAT44(ctx, n.vpp.NewAdapter(), tagPrefix)
	if err != nil {
		return nil, fmt.Errorf("%s: read NAT44: %w", n.name, err)
	}
	out := make([]NATMapping, 0, len(nat.Static)+len(nat.LB))
	for _, l := range append(slices.Clip(nat.Static), nat.LB...) {
		m, err := parseNATMapping(l)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.name, err)
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b NATMapping) int { return a.Frontend.Compare(b.Frontend) })
	return out, nil
}

// nodeIPv4s returns n's IPv4 node addresses (those its NodePorts are on).
func (n *simNode) nodeIPv4s() []netip.Addr {
	var out []netip.Addr
	for _, a := range n.agent.NodeIPs.NodeIPs() {
		if a.Is4() {
			out = append(out, a)
		}
	}
	return out
}

// vppIPv4 returns the node address n published in VPP (its uplink's), the
// next hop of the routes its speaker advertises; invalid while unknown.
func (n *simNode) vppIPv4() netip.Addr {
	if me := n.agent.NodeSync.GetAllNodes()[n.name]; me != nil {
		for _, a := range me.VppIPAddresses {
			if a.Address.Unmap().Is4() {
				return a.Address.Unmap()
			}
		}
	}
	return netip.Addr{}
}

// checkServices: every live node's VPP has exactly the expected NAT44
// mappings, with the right backends (with the cnat renderer:
// checkCnatServices).
func (c *cluster) checkServices(ctx context.Context) (check, error) {
	if c.opts.ServiceRenderer == agent.ServicesCnat {
		return c.checkCnatServices(ctx)
	}
	var ch check
	for _, n := range c.liveNodes() {
		ips := n.nodeIPv4s()
		if len(ips) == 0 {
			ch.total++
			ch.miss("%s: node address not known yet", n.name)
			continue
		}
		want := c.expectedNAT(n, ips)
		ch.total += len(want)
		have, err := n.nat44(ctx)
		if err != nil {
			return ch, err
		}
		seen := map[string]bool{}
		for _, m := range have {
			key := m.Protocol + " " + m.Frontend.String()
			seen[key] = true
			be, ok := want[key]
			if !ok {
				ch.miss("%s: unexpected mapping %s", n.name, key)
				continue
			}
			got := make([]netip.AddrPort, 0, len(m.Backends))
			for _, b := range m.Backends {
				got = append(got, b.Addr)
			}
			slices.SortFunc(got, netip.AddrPort.Compare)
			if slices.Equal(got, be) {
				ch.done++
			} else {
				ch.miss("%s: %s -> %v, want %v", n.name, key, got, be)
			}
		}
		for key := range want {
			if !seen[key] {
				ch.miss("%s: no mapping %s", n.name, key)
			}
		}
	}
	return ch, nil
}

// expectedRoutes returns what n's speaker advertises, with n's VPP address
// as next hop: its pod subnet (with podCommunity), and the load-balancer
// and external IPs of the services aggregated to /serviceAggregate — for a
// service with externalTrafficPolicy Local exact, and only if n has a
// ready backend of it — (with serviceCommunity).
func (c *cluster) expectedRoutes(n *simNode) (netip.Addr, map[netip.Prefix]string) {
	nh := n.vppIPv4()
	out := map[netip.Prefix]string{n.agent.IPAM.PodSubnetThisNodePrefix(): podCommunity}
	for _, s := range c.svcs {
		if s.local && len(c.backends(s, n.name)) == 0 {
			continue
		}
		for _, a := range []netip.Addr{s.lbIP, s.externalIP} {
			if !a.IsValid() {
				continue
			}
			p := netip.PrefixFrom(a, 32)
			if !s.local {
				p, _ = a.Prefix(serviceAggregate)
			}
			out[p] = serviceCommunity
		}
	}
	return nh, out
}

// checkReflector: the route reflector has an established session with
// every live node and received exactly the expected routes from each.
func (c *cluster) checkReflector(ctx context.Context) (check, error) {
	var ch check
	sessions, err := c.rr.sessions(ctx)
	if err != nil {
		return ch, err
	}
	routes, err := c.rr.routes(ctx)
	if err != nil {
		return ch, err
	}
	type key struct {
		node   string
		prefix netip.Prefix
	}
	have := map[key]RRRoute{}
	for _, r := range routes {
		have[key{r.From, r.Prefix}] = r
	}
	for _, n := range c.liveNodes() {
		ch.total++
		i := slices.IndexFunc(sessions, func(s RRSession) bool { return s.Node == n.name })
		if i < 0 || sessions[i].State != "Established" {
			ch.miss("%s: session not established", n.name)
		} else {
			ch.done++
		}
		nh, want := c.expectedRoutes(n)
		ch.total += len(want)
		for _, p := range slices.SortedFunc(maps.Keys(want), comparePrefixes) {
			got, ok := have[key{n.name, p}]
			switch {
			case !ok:
				ch.miss("%s: %s not received", n.name, p)
			case got.NextHop != nh:
				ch.miss("%s: %s with next hop %s, want %s", n.name, p, got.NextHop, nh)
			case !slices.Equal(got.Communities, []string{want[p]}):
				ch.miss("%s: %s with communities %v, want %s", n.name, p, got.Communities, want[p])
			default:
				ch.done++
			}
			delete(have, key{n.name, p})
		}
	}
	for k := range have {
		ch.miss("%s: unexpected route %s", k.node, k.prefix)
	}
	return ch, nil
}

func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// cnatTranslations reads n's cnat translations from its VPP, as
// vppdrivertest.ReadCnat formats them ("tcp 10.96.0.10:80 -> 10.1.1.2:8080
// 10.1.2.2:8080").
func (n *simNode) cnatTranslations(ctx context.Context) ([]string, error) {
	cn, err := vppdrivertest.ReadCnat(ctx, n.vpp.NewAdapter())
	if err != nil {
		return nil, fmt.Errorf("%s: read cnat: %w", n.name, err)
	}
	return cn.Translations, nil
}

// expectedCnat returns the cluster-IP translations every node must have
// with the cnat renderer, by frontend: each cluster IP of each family to
// every ready backend of that family, none where there is no backend.
// (Node ports and external IPs are served by each node's own backends
// only and are not checked here: the summary lists them.)
func (c *cluster) expectedCnat() map[string]string {
	want := map[string]string{}
	for _, s := range c.svcs {
		for _, fam := range []struct {
			vip netip.Addr
			ip  func(*pod) netip.Addr
		}{{s.clusterIP, func(p *pod) netip.Addr { return p.ip }}, {s.clusterIP6, func(p *pod) netip.Addr { return p.ip6 }}} {
			if !fam.vip.IsValid() {
				continue
			}
			var paths []string
			c.mu.Lock()
			for _, p := range c.pods {
				if p.service == s.name && fam.ip(p).IsValid() {
					paths = append(paths, netip.AddrPortFrom(fam.ip(p), targetPort).String())
				}
			}
			c.mu.Unlock()
			if len(paths) == 0 {
				continue
			}
			slices.Sort(paths)
			fe := "tcp " + netip.AddrPortFrom(fam.vip, servicePort).String()
			want[fe] = fe + " -> " + strings.Join(paths, " ")
		}
	}
	return want
}

// checkCnatServices: every live node's VPP has the cluster IPs of every
// service, of each family, as cnat translations to the right backends.
func (c *cluster) checkCnatServices(ctx context.Context) (check, error) {
	var ch check
	want := c.expectedCnat()
	for _, n := range c.liveNodes() {
		ch.total += len(want)
		have, err := n.cnatTranslations(ctx)
		if err != nil {
			return ch, err
		}
		got := map[string]string{}
		for _, l := range have {
			fe, _, _ := strings.Cut(l, " -> ")
			got[fe] = strings.TrimSuffix(l, " maglev")
		}
		for fe, w := range want {
			switch g, ok := got[fe]; {
			case !ok:
				ch.miss("%s: no translation %s", n.name, fe)
			case g != w:
				ch.miss("%s: %s, want %s", n.name, g, w)
			default:
				ch.done++
			}
		}
	}
	return ch, nil
}

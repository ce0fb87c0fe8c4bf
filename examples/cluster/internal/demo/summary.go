package demo

import (
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// Result is what [Run] saw: the cluster once it converged, the scripted
// change, and the cluster once it converged again.
type Result struct {
	// Etcd is the etcd the cluster used (client URLs).
	Etcd []string `json:"etcd"`
	// Before is the summary before the scripted change.
	Before Summary `json:"before"`
	// Changes describes the scripted change, step by step.
	Changes []string `json:"changes"`
	// After is the summary after the scripted change.
	After Summary `json:"after"`
	// Diff is what changed from Before to After, by section.
	Diff []DiffLine `json:"diff"`
	// Timings are the wall times of the run's phases.
	Timings Timings `json:"timings"`
}

// Timings are wall times of a run.
type Timings struct {
	// Setup is from the start of Run until the first summary: the
	// cluster built and converged.
	Setup Duration `json:"setup"`
	// Change is the scripted change until the cluster converged again.
	Change Duration `json:"change"`
	// Total is the whole run up to the printed diff (without RunFor and
	// the shutdown).
	Total Duration `json:"total"`
	// Steps are the steps of the run in order (the progress stages and the
	// steps of the scripted change) with their wall times.
	Steps []Step `json:"steps"`
}

// Step is a step of a run and its wall time.
type Step struct {
	Name     string   `json:"name"`
	Duration Duration `json:"duration"`
}

// Duration is a time.Duration that reads as "1.234s" in JSON.
type Duration time.Duration

// MarshalText renders the duration in seconds, rounded to milliseconds.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(strconv.FormatFloat(time.Duration(d).Seconds(), 'f', 3, 64) + "s"), nil
}

// UnmarshalText parses a duration as time.ParseDuration does.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Summary is the state of the cluster at one moment, read from where it
// lives: node IDs and subnets from the agents, VPP tables from the VPP
// stand-ins, BGP sessions from the speakers and the route reflector.
type Summary struct {
	Nodes          []NodeSummary    `json:"nodes"`
	Services       []ServiceSummary `json:"services"`
	Policies       []PolicySummary  `json:"policies"`
	RouteReflector RRSummary        `json:"routeReflector"`
}

// NodeSummary is one node.
type NodeSummary struct {
	Name       string         `json:"name"`
	ID         uint32         `json:"id"`
	PodSubnet  netip.Prefix   `json:"podSubnet"`
	VPPAddress netip.Addr     `json:"vppAddress"` // published by the node (uplink), BGP next hop
	InternalIP netip.Addr     `json:"internalIP"` // of the Kubernetes node
	NodeIPs    []netip.Addr   `json:"nodeIPs"`    // where its NodePorts are: both of the above
	BGPSpeaker netip.AddrPort `json:"bgpSpeaker"`
	Pods       []PodSummary   `json:"pods"`
	Tunnels    []Tunnel       `json:"tunnels"`
	Routes     []Route        `json:"routes"`
	NAT44      []NATMapping   `json:"nat44"`
	// Cnat are the node's cnat translations (with the cnat renderer), as
	// "protocol frontend -> backends", " maglev" for that lb type.
	Cnat []string     `json:"cnat,omitempty"`
	BGP  []BGPSession `json:"bgp"`
}

// PodSummary is a pod and its address.
type PodSummary struct {
	Name    string     `json:"name"`
	Service string     `json:"service,omitempty"`
	IP      netip.Addr `json:"ip"`
	IP6     netip.Addr `json:"ip6,omitzero"` // dual-stack: the IPv6 address
}

// Tunnel is a VXLAN tunnel in a node's VPP.
type Tunnel struct {
	Interface string     `json:"interface"` // the driver's name (tag), e.g. vxlan-2
	Src       netip.Addr `json:"src"`
	Dst       netip.Addr `json:"dst"`
	VNI       uint32     `json:"vni"`
}

// Route is a route in a node's VPP (connected routes are not listed).
type Route struct {
	Table  uint32       `json:"table"`
	Prefix netip.Prefix `json:"prefix"`
	Via    []string     `json:"via"`           // "<next hop> <interface>"
	Pod    string       `json:"pod,omitempty"` // the pod a host route leads to
}

// NATMapping is a NAT44-ED static or load-balanced mapping: a service
// frontend and its backends.
type NATMapping struct {
	Protocol string         `json:"protocol"`
	Frontend netip.AddrPort `json:"frontend"`
	Backends []Backend      `json:"backends"`
	Flags    []string       `json:"flags,omitempty"`
}

// Backend is a backend of a NAT mapping. Probability is VPP's probability
// of the backend in a load-balanced mapping, relative to the mapping's
// other backends (render/svcnat sets twice the backend's weight, see
// svcnat.Config.LocalBackendWeight); 0 for the backend of a static mapping
// (one backend).
type Backend struct {
	Addr        netip.AddrPort `json:"addr"`
	Probability int            `json:"probability,omitempty"`
}

// NATLegend explains the NAT44 lines of the text summary.
const NATLegend = `nat44 lines: a NAT44-ED mapping in the node's VPP, "protocol frontend -> backends flags". ` +
	`A backend written ADDR:PORT/N belongs to a load-balanced mapping and N is its probability in VPP, ` +
	`relative to the mapping's other backends: equal N, equal shares of the connections. ` +
	`render/svcnat sets N to twice the backend's weight (so 2 for every backend, unless ` +
	`svcnat.Config.LocalBackendWeight favours this node's own); a backend without /N is the one ` +
	`backend of a static mapping.`

// CnatLegend explains the cnat lines of the text summary.
const CnatLegend = `cnat lines: a cnat translation in the node's VPP (render/svccnat), "protocol frontend -> backends": ` +
	`cluster IPs of each family to every ready backend of that family, node ports (on the node's addresses of ` +
	`each family), external and load-balancer IPs to the node's own backends; connections are spread evenly ` +
	`(ecmp, or Maglev with the vswitchkit.io/lb annotation).`

// BGPSession is a session of a node's speaker.
type BGPSession struct {
	Peer       netip.Addr `json:"peer"`
	PeerASN    uint32     `json:"peerASN"`
	State      string     `json:"state"`
	Received   int        `json:"received"`
	Advertised int        `json:"advertised"`
}

// ServiceSummary is a service as the cluster defines it, with its ready
// backends.
type ServiceSummary struct {
	Name                  string      `json:"name"`
	Kind                  string      `json:"kind"`
	ClusterIP             netip.Addr  `json:"clusterIP"`
	ClusterIP6            netip.Addr  `json:"clusterIP6,omitzero"` // dual-stack
	Port                  uint16      `json:"port"`
	NodePort              uint16      `json:"nodePort,omitempty"`
	ExternalIP            netip.Addr  `json:"externalIP,omitzero"`
	LoadBalancerIP        netip.Addr  `json:"loadBalancerIP,omitzero"`
	ExternalTrafficPolicy string      `json:"externalTrafficPolicy,omitempty"`
	Backends              []PodOnNode `json:"backends"`
}

// PolicySummary is a NetworkPolicy of the cluster: what it says, the pods
// it isolates (with their ACLs in VPP) and connections checked against
// the ACLs the nodes' VPPs hold.
type PolicySummary struct {
	Name        string       `json:"name"`
	Says        string       `json:"says"`
	Isolated    []PodOnNode  `json:"isolated"`
	Connections []Connection `json:"connections"`
}

// Connection is the first packet of a connection from one pod to another,
// and what VPP's ACLs on its path do with it.
type Connection struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Port    string `json:"port"` // e.g. "tcp/8080"
	Allowed bool   `json:"allowed"`
	// DeniedBy names the interface whose ACLs deny it ("pod-… output on
	// node-2"); empty when allowed.
	DeniedBy string `json:"deniedBy,omitempty"`
}

// PodOnNode is a backend pod of a service.
type PodOnNode struct {
	Pod  string     `json:"pod"`
	Node string     `json:"node"`
	IP   netip.Addr `json:"ip"`
	Port uint16     `json:"port"`
}

// RRSummary is the route reflector: its sessions and the routes it
// received.
type RRSummary struct {
	Address  netip.Addr  `json:"address"`
	ASN      uint32      `json:"asn"`
	Sessions []RRSession `json:"sessions"`
	Routes   []RRRoute   `json:"routes"`
}

// DiffLine is a line of a summary that the scripted change removed ("-")
// or added ("+").
type DiffLine struct {
	Section string `json:"section"`
	Op      string `json:"op"`
	Text    string `json:"text"`
}

// section is a titled group of lines of the text summary; lines are
// tab-separated columns. Key identifies the section across summaries.
type section struct {
	key, title string
	lines      [][]string
}

// Node returns the summary of the named node.
func (s Summary) Node(name string) (NodeSummary, bool) {
	i := slices.IndexFunc(s.Nodes, func(n NodeSummary) bool { return n.Name == name })
	if i < 0 {
		return NodeSummary{}, false
	}
	return s.Nodes[i], true
}

// sections renders the summary as text sections.
func (s Summary) sections() []section {
	var out []section
	sv := section{key: "services", title: "Services (cluster IP, node port, external and load-balancer IP -> ready backends)"}
	for _, svc := range s.Services {
		var fe []string
		fe = append(fe, netip.AddrPortFrom(svc.ClusterIP, svc.Port).String())
		if svc.ClusterIP6.IsValid() {
			fe = append(fe, netip.AddrPortFrom(svc.ClusterIP6, svc.Port).String())
		}
		if svc.NodePort != 0 {
			fe = append(fe, "nodePort "+strconv.Itoa(int(svc.NodePort)))
		}
		if svc.ExternalIP.IsValid() {
			fe = append(fe, "externalIP "+svc.ExternalIP.String())
		}
		if svc.LoadBalancerIP.IsValid() {
			fe = append(fe, "LB "+svc.LoadBalancerIP.String())
		}
		if svc.ExternalTrafficPolicy == "Local" {
			fe = append(fe, "policy Local")
		}
		var be []string
		for _, b := range svc.Backends {
			be = append(be, fmt.Sprintf("%s@%s", b.Pod, b.Node))
		}
		if len(be) == 0 {
			be = []string{"(none)"}
		}
		sv.lines = append(sv.lines, []string{svc.Name, svc.Kind, strings.Join(fe, ", "), "-> " + strings.Join(be, " ")})
	}
	out = append(out, sv)

	for _, n := range s.Nodes {
		sec := section{key: "node " + n.Name, title: fmt.Sprintf("%s: ID %d, pod subnet %s, VPP address %s, InternalIP %s, BGP speaker %s",
			n.Name, n.ID, n.PodSubnet, n.VPPAddress, n.InternalIP, n.BGPSpeaker)}
		for _, p := range n.Pods {
			addr := p.IP.String()
			if p.IP6.IsValid() {
				addr += " " + p.IP6.String()
			}
			sec.lines = append(sec.lines, []string{"pod", p.Name, addr, cmp.Or(p.Service, "-")})
		}
		for _, t := range n.Tunnels {
			sec.lines = append(sec.lines, []string{"tunnel", t.Interface, t.Src.String() + " -> " + t.Dst.String(), fmt.Sprintf("VNI %d", t.VNI)})
		}
		for _, r := range n.Routes {
			via := "via " + strings.Join(r.Via, ", ")
			if r.Pod != "" {
				via += " (" + r.Pod + ")"
			}
			sec.lines = append(sec.lines, []string{"route", r.Prefix.String(), via, fmt.Sprintf("table %d", r.Table)})
		}
		for _, m := range n.NAT44 {
			be := make([]string, 0, len(m.Backends))
			for _, b := range m.Backends {
				if b.Probability > 0 {
					be = append(be, fmt.Sprintf("%s/%d", b.Addr, b.Probability))
				} else {
					be = append(be, b.Addr.String())
				}
			}
			sec.lines = append(sec.lines, []string{"nat44", m.Protocol + " " + m.Frontend.String(), "-> " + strings.Join(be, " "), strings.Join(m.Flags, " ")})
		}
		for _, l := range n.Cnat {
			fe, be, _ := strings.Cut(l, " -> ")
			sec.lines = append(sec.lines, []string{"cnat", fe, "-> " + be, ""})
		}
		for _, b := range n.BGP {
			sec.lines = append(sec.lines, []string{"bgp", fmt.Sprintf("%s AS%d", b.Peer, b.PeerASN), b.State,
				fmt.Sprintf("received %d, advertised %d", b.Received, b.Advertised)})
		}
		out = append(out, sec)
	}

	for _, p := range s.Policies {
		sec := section{key: "policy " + p.Name, title: fmt.Sprintf("NetworkPolicy %s: %s", p.Name, p.Says)}
		var iso []string
		for _, pod := range p.Isolated {
			iso = append(iso, pod.Pod+"@"+pod.Node)
		}
		sec.lines = append(sec.lines, []string{"isolated", strings.Join(iso, " ")})
		for _, c := range p.Connections {
			verdict := "allowed"
			if !c.Allowed {
				verdict = "denied by the ACLs on " + c.DeniedBy
			}
			sec.lines = append(sec.lines, []string{"connection", c.From + " -> " + c.To + " " + c.Port, verdict})
		}
		out = append(out, sec)
	}

	rr := section{key: "route reflector", title: fmt.Sprintf("Route reflector %s AS%d: sessions and the routes it received", s.RouteReflector.Address, s.RouteReflector.ASN)}
	for _, ss := range s.RouteReflector.Sessions {
		rr.lines = append(rr.lines, []string{"session", ss.Node, ss.Peer.String(), ss.State, fmt.Sprintf("received %d", ss.Received)})
	}
	for _, r := range s.RouteReflector.Routes {
		line := []string{"route", r.Prefix.String(), "next hop " + r.NextHop.String(), "from " + r.From}
		if len(r.Communities) > 0 {
			line = append(line, "communities "+strings.Join(r.Communities, " "))
		}
		rr.lines = append(rr.lines, line)
	}
	out = append(out, rr)
	return out
}

// WriteText writes the summary as aligned text sections.
func (s Summary) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, sec := range s.sections() {
		fmt.Fprintf(tw, "\n%s\n", sec.title)
		for _, l := range sec.lines {
			fmt.Fprintf(tw, "  %s\n", strings.Join(l, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// diffSummaries returns the lines only in a ("-") and only in b ("+"),
// section by section (in b's order, then a's sections that are gone),
// the section's title first if it changed, then removed lines, then added
// ones. Lines are compared whole, as multisets: a line that moved within
// its section is not reported.
func diffSummaries(a, b Summary) []DiffLine {
	as, bs := a.sections(), b.sections()
	byKey := func(secs []section) map[string]section {
		m := make(map[string]section, len(secs))
		for _, s := range secs {
			m[s.key] = s
		}
		return m
	}
	am, bm := byKey(as), byKey(bs)
	var keys []string
	for _, s := range bs {
		keys = append(keys, s.key)
	}
	for _, s := range as {
		if _, ok := bm[s.key]; !ok {
			keys = append(keys, s.key)
		}
	}
	var out []DiffLine
	for _, k := range keys {
		sa, sb := am[k], bm[k]
		join := func(l []string) string {
			return strings.Join(slices.DeleteFunc(slices.Clone(l), func(s string) bool { return s == "" }), " ")
		}
		count := map[string]int{}
		for _, l := range sa.lines {
			count[join(l)]++
		}
		for _, l := range sb.lines {
			count[join(l)]--
		}
		// A changed title (a node's ID, say) or a section that came or went.
		if sa.title != sb.title {
			if sa.title != "" {
				out = append(out, DiffLine{Section: k, Op: "-", Text: sa.title})
			}
			if sb.title != "" {
				out = append(out, DiffLine{Section: k, Op: "+", Text: sb.title})
			}
		}
		for _, l := range sa.lines {
			if t := join(l); count[t] > 0 {
				count[t]--
				out = append(out, DiffLine{Section: k, Op: "-", Text: t})
			}
		}
		for _, l := range sb.lines {
			if t := join(l); count[t] < 0 {
				count[t]++
				out = append(out, DiffLine{Section: k, Op: "+", Text: t})
			}
		}
	}
	return out
}

// writeDiff writes the diff grouped by section.
func writeDiff(w io.Writer, diff []DiffLine) error {
	if len(diff) == 0 {
		_, err := fmt.Fprintln(w, "  (no change)")
		return err
	}
	last := ""
	for _, d := range diff {
		if d.Section != last {
			if _, err := fmt.Fprintf(w, "  %s\n", d.Section); err != nil {
				return err
			}
			last = d.Section
		}
		if _, err := fmt.Fprintf(w, "    %s %s\n", d.Op, d.Text); err != nil {
			return err
		}
	}
	return nil
}

// tunnelsOf lists the VXLAN tunnels of a VPP snapshot.
func tunnelsOf(snap vppsim.Snapshot, tagPrefix string) []Tunnel {
	var out []Tunnel
	for _, i := range snap.Interfaces {
		if i.Vxlan == nil {
			continue
		}
		out = append(out, Tunnel{Interface: ifName(i, tagPrefix), Src: i.Vxlan.Src, Dst: i.Vxlan.Dst, VNI: i.Vxlan.Vni})
	}
	slices.SortFunc(out, func(a, b Tunnel) int { return comparePodNames(a.Interface, b.Interface) })
	return out
}

// routesOf lists the routes of a VPP snapshot with their paths' next hops
// and interface names.
func routesOf(snap vppsim.Snapshot, tagPrefix string) []Route {
	names := make(map[uint32]string, len(snap.Interfaces))
	for _, i := range snap.Interfaces {
		names[i.SwIfIndex] = ifName(i, tagPrefix)
	}
	out := make([]Route, 0, len(snap.Routes))
	for _, r := range snap.Routes {
		rt := Route{Table: r.Table, Prefix: r.Prefix}
		for _, p := range r.Paths {
			var via []string
			if p.NextHop.IsValid() && !p.NextHop.IsUnspecified() {
				via = append(via, p.NextHop.String())
			}
			if p.SwIfIndex != ^uint32(0) {
				via = append(via, cmp.Or(names[p.SwIfIndex], fmt.Sprintf("sw%d", p.SwIfIndex)))
			}
			rt.Via = append(rt.Via, strings.Join(via, " "))
		}
		out = append(out, rt)
	}
	return out
}

// ifName is the driver's name of an interface (its tag without the
// driver's prefix), else VPP's.
func ifName(i vppsim.Interface, tagPrefix string) string {
	if t, ok := strings.CutPrefix(i.Tag, tagPrefix); ok && i.Tag != "" {
		return t
	}
	return i.Name
}

// bgpSessions converts a speaker's peer status.
func bgpSessions(peers []bgp.PeerStatus) []BGPSession {
	out := make([]BGPSession, 0, len(peers))
	for _, p := range peers {
		s := BGPSession{Peer: p.PeerAddress, PeerASN: p.PeerASN, State: string(p.State)}
		for _, n := range p.Received {
			s.Received += n
		}
		for _, n := range p.Advertised {
			s.Advertised += n
		}
		out = append(out, s)
	}
	return out
}

// parseNATMapping parses a static or load-balanced mapping as
// vppdrivertest.ReadNAT44 formats it:
//
//	tcp 10.96.0.11:80 -> 10.1.1.3:8080 [vrf N] [flags...]
//	tcp 10.96.0.10:80 -> 10.1.1.3:8080/2[@vrfN] 10.1.1.4:8080/2 [flags...]
func parseNATMapping(line string) (NATMapping, error) {
	f := strings.Fields(line)
	if len(f) < 4 || f[2] != "->" {
		return NATMapping{}, fmt.Errorf("NAT44 mapping %q: want \"<protocol> <frontend> -> <backends...>\"", line)
	}
	fe, err := netip.ParseAddrPort(f[1])
	if err != nil {
		return NATMapping{}, fmt.Errorf("NAT44 mapping %q: frontend: %w", line, err)
	}
	m := NATMapping{Protocol: f[0], Frontend: fe}
	for i := 3; i < len(f); i++ {
		tok := f[i]
		if tok == "vrf" {
			i++ // a static mapping's VRF
			continue
		}
		addr, rest, _ := strings.Cut(tok, "/")
		rest, _, _ = strings.Cut(rest, "@")
		ap, err := netip.ParseAddrPort(strings.Split(addr, "@")[0])
		if err != nil {
			m.Flags = append(m.Flags, tok)
			continue
		}
		b := Backend{Addr: ap}
		if rest != "" {
			w, err := strconv.Atoi(rest)
			if err != nil || w < 0 {
				return NATMapping{}, fmt.Errorf("NAT44 mapping %q: backend %q: bad probability", line, tok)
			}
			b.Probability = w
		}
		m.Backends = append(m.Backends, b)
	}
	if len(m.Backends) == 0 {
		return NATMapping{}, fmt.Errorf("NAT44 mapping %q: no backend", line)
	}
	return m, nil
}

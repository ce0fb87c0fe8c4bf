package vppdrivertest

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/api"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/nat44_ed"
	"go.fd.io/govpp/binapi/nat_types"
	"go.fd.io/govpp/core"
)

// NAT44 is VPP's NAT44-ED configuration as VPP's own dumps report it, in a
// form that compares across VPP restarts and between the stand-in and a
// real VPP: interfaces are named by their tag without the driver's tag
// prefix (by VPP's name if untagged), lists are sorted, and each entry is
// a short text. The zero value is a VPP without the NAT44 plugin enabled.
// VPP does not report the ClientIP affinity of load-balanced mappings, so
// NAT44 has none.
type NAT44 struct {
	// Sessions is the number of sessions per thread; 0 when the plugin is
	// disabled (then every other field is empty).
	Sessions   uint32
	Forwarding bool
	// Interfaces maps interface names to their features: "in", "out",
	// "in out" or "output" (the post-routing output feature).
	Interfaces map[string]string
	// Pools are the address pools: "172.30.1.254" (vrf ~0 is not shown,
	// others are as " vrf N"), "if:uplink" for an interface's address,
	// each with " twice-nat" when it is a twice-NAT pool. Resolved
	// interface addresses are listed as addresses too.
	Pools []string
	// Static are the static mappings, e.g.
	// "tcp 10.96.0.11:80 -> 10.1.1.3:8080 out2in-only self-twice-nat".
	Static []string
	// LB are the load-balanced mappings with their backends and
	// probabilities, e.g.
	// "tcp 10.96.0.10:80 -> 10.1.1.3:8080/2 10.1.1.4:8080/2 out2in-only self-twice-nat".
	LB []string
	// Identity are the identity mappings, e.g. "udp 192.168.16.1:4789"
	// or "udp if:uplink:4789".
	Identity []string
}

// ReadNAT44 connects to a VPP (the stand-in's or a real VPP's adapter,
// e.g. socketclient.NewVppClient(socket)), reads its NAT44-ED
// configuration and disconnects. tagPrefix is the driver's tag prefix
// (vppdriver.Config.TagPrefix, "vsk:" by default), trimmed from interface
// tags.
func ReadNAT44(ctx context.Context, a adapter.VppAPI, tagPrefix string) (NAT44, error) {
	var out NAT44
	conn, err := core.Connect(a)
	if err != nil {
		return out, fmt.Errorf("connect: %w", err)
	}
	defer conn.Disconnect()
	st, err := conn.NewStream(ctx, core.WithReplySize(1024))
	if err != nil {
		return out, fmt.Errorf("new stream: %w", err)
	}
	defer func() { _ = st.Close() }()

	if err := st.SendMsg(&nat44_ed.Nat44ShowRunningConfig{}); err != nil {
		return out, err
	}
	m, err := st.RecvMsg()
	if err != nil {
		return out, err
	}
	rc, ok := m.(*nat44_ed.Nat44ShowRunningConfigReply)
	if !ok {
		return out, fmt.Errorf("nat44_show_running_config: unexpected reply %s", m.GetMessageName())
	}
	if rc.Sessions == 0 {
		return out, nil
	}
	out.Sessions, out.Forwarding = rc.Sessions, rc.ForwardingEnabled

	dump := func(req api.Message) ([]api.Message, error) { return DumpStream(st, req) }
	ifs, err := dump(&interfaces.SwInterfaceDump{SwIfIndex: interface_types.InterfaceIndex(^uint32(0))})
	if err != nil {
		return out, err
	}
	names := map[interface_types.InterfaceIndex]string{}
	for _, m := range ifs {
		d := m.(*interfaces.SwInterfaceDetails)
		names[d.SwIfIndex] = d.InterfaceName
		if tag, ok := strings.CutPrefix(d.Tag, tagPrefix); ok && d.Tag != "" {
			names[d.SwIfIndex] = tag
		}
	}
	name := func(sw interface_types.InterfaceIndex) string {
		if n, ok := names[sw]; ok {
			return n
		}
		return fmt.Sprintf("sw%d", sw)
	}

	out.Interfaces = map[string]string{}
	res, err := dump(&nat44_ed.Nat44InterfaceDump{})
	if err != nil {
		return out, err
	}
	for _, m := range res {
		d := m.(*nat44_ed.Nat44InterfaceDetails)
		var f []string
		if d.Flags&nat_types.NAT_IS_INSIDE != 0 {
			f = append(f, "in")
		}
		if d.Flags&nat_types.NAT_IS_OUTSIDE != 0 {
			f = append(f, "out")
		}
		out.Interfaces[name(d.SwIfIndex)] = strings.Join(f, " ")
	}
	if res, err = dump(&nat44_ed.Nat44EdOutputInterfaceGet{}); err != nil {
		return out, err
	}
	for _, m := range res {
		if d, ok := m.(*nat44_ed.Nat44EdOutputInterfaceDetails); ok {
			out.Interfaces[name(d.SwIfIndex)] = "output"
		}
	}

	twice := func(f nat_types.NatConfigFlags) string {
		if f&nat_types.NAT_IS_TWICE_NAT != 0 {
			return " twice-nat"
		}
		return ""
	}
	if res, err = dump(&nat44_ed.Nat44AddressDump{}); err != nil {
		return out, err
	}
	for _, m := range res {
		d := m.(*nat44_ed.Nat44AddressDetails)
		s := netip.AddrFrom4(d.IPAddress).String()
		if d.VrfID != ^uint32(0) {
			s += fmt.Sprintf(" vrf %d", d.VrfID)
		}
		out.Pools = append(out.Pools, s+twice(d.Flags))
	}
	if res, err = dump(&nat44_ed.Nat44InterfaceAddrDump{}); err != nil {
		return out, err
	}
	for _, m := range res {
		d := m.(*nat44_ed.Nat44InterfaceAddrDetails)
		out.Pools = append(out.Pools, "if:"+name(d.SwIfIndex)+twice(d.Flags))
	}

	proto := func(p uint8) string {
		switch p {
		case 6:
			return "tcp"
		case 17:
			return "udp"
		case 1:
			return "icmp"
		}
		return fmt.Sprintf("proto%d", p)
	}
	flags := func(f nat_types.NatConfigFlags) string {
		var s []string
		for _, x := range []struct {
			f nat_types.NatConfigFlags
			s string
		}{{nat_types.NAT_IS_ADDR_ONLY, "addr-only"}, {nat_types.NAT_IS_OUT2IN_ONLY, "out2in-only"},
			{nat_types.NAT_IS_TWICE_NAT, "twice-nat"}, {nat_types.NAT_IS_SELF_TWICE_NAT, "self-twice-nat"}} {
			if f&x.f != 0 {
				s = append(s, " "+x.s)
			}
		}
		return strings.Join(s, "")
	}
	ap := func(a [4]byte, port uint16) string { return netip.AddrPortFrom(netip.AddrFrom4(a), port).String() }
	if res, err = dump(&nat44_ed.Nat44StaticMappingDump{}); err != nil {
		return out, err
	}
	for _, m := range res {
		d := m.(*nat44_ed.Nat44StaticMappingDetails)
		ext := ap(d.ExternalIPAddress, d.ExternalPort)
		if d.ExternalSwIfIndex != interface_types.InterfaceIndex(^uint32(0)) {
			ext = fmt.Sprintf("if:%s:%d", name(d.ExternalSwIfIndex), d.ExternalPort)
		}
		s := fmt.Sprintf("%s %s -> %s", proto(d.Protocol), ext, ap(d.LocalIPAddress, d.LocalPort))
		if d.VrfID != 0 {
			s += fmt.Sprintf(" vrf %d", d.VrfID)
		}
		out.Static = append(out.Static, s+flags(d.Flags))
	}
	if res, err = dump(&nat44_ed.Nat44LbStaticMappingDump{}); err != nil {
		return out, err
	}
	for _, m := range res {
		d := m.(*nat44_ed.Nat44LbStaticMappingDetails)
		locals := slices.Clone(d.Locals)
		slices.SortFunc(locals, func(a, b nat44_ed.Nat44LbAddrPort) int {
			return cmp.Or(netip.AddrFrom4(a.Addr).Compare(netip.AddrFrom4(b.Addr)), cmp.Compare(a.Port, b.Port))
		})
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s ->", proto(d.Protocol), ap(d.ExternalAddr, d.ExternalPort))
		for _, l := range locals {
			fmt.Fprintf(&b, " %s/%d", ap(l.Addr, l.Port), l.Probability)
			if l.VrfID != 0 {
				fmt.Fprintf(&b, "@vrf%d", l.VrfID)
			}
		}
		out.LB = append(out.LB, b.String()+flags(d.Flags))
	}
	if res, err = dump(&nat44_ed.Nat44IdentityMappingDump{}); err != nil {
		return out, err
	}
	for _, m := range res {
		d := m.(*nat44_ed.Nat44IdentityMappingDetails)
		where := netip.AddrFrom4(d.IPAddress).String()
		if d.SwIfIndex != interface_types.InterfaceIndex(^uint32(0)) {
			where = "if:" + name(d.SwIfIndex)
		}
		out.Identity = append(out.Identity, fmt.Sprintf("%s %s:%d", proto(d.Protocol), where, d.Port))
	}
	for _, l := range [][]string{out.Pools, out.Static, out.LB, out.Identity} {
		slices.Sort(l)
	}
	return out, nil
}

package vppdrivertest

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/core"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/internal/binapi/cnat"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// Cnat is VPP's cnat configuration as VPP's own dumps report it, in a
// form that compares across VPP restarts and between the stand-in and a
// real VPP. VPP does not report a translation's flags, real_ip or flow
// hash, the SNAT entry's excluded prefixes, policy or flags, nor cnat on
// interfaces: Cnat has none of them.
type Cnat struct {
	// Translations are the translations, sorted, e.g.
	// "tcp 10.96.0.10:80 -> 10.1.1.3:8080 10.1.1.4:8080" or
	// "udp [fd00:96::10]:53 -> [fd00:1::2]:5353 maglev" (paths sorted;
	// " maglev" for that lb type).
	Translations []string
	// SNAT is the default SNAT entry's addresses, e.g. "192.168.16.1
	// fd00:16::1" (an unset family is left out); "" without an entry.
	SNAT string
}

// ReadCnat connects to a VPP (the stand-in's or a real VPP's adapter),
// reads its cnat translations and SNAT addresses and disconnects.
func ReadCnat(ctx context.Context, a adapter.VppAPI) (Cnat, error) {
	var out Cnat
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
	res, err := DumpStream(st, &cnat.CnatTranslationDump{})
	if err != nil {
		return out, err
	}
	for _, m := range res {
		t := m.(*cnat.CnatTranslationDetails).Translation
		line := fmt.Sprint(vppmodel.CnatProtocolName(uint32(t.IPProto)), " ", netip.AddrPortFrom(vppconv.AddrOf(t.Vip.Addr), t.Vip.Port), " ->")
		var paths []string
		for _, p := range t.Paths {
			paths = append(paths, netip.AddrPortFrom(vppconv.AddrOf(p.DstEp.Addr), p.DstEp.Port).String())
		}
		slices.Sort(paths)
		for _, p := range paths {
			line += " " + p
		}
		if t.LbType == cnat.CNAT_LB_TYPE_MAGLEV {
			line += " maglev"
		}
		out.Translations = append(out.Translations, line)
	}
	slices.Sort(out.Translations)
	if err := st.SendMsg(&cnat.CnatGetSnatAddresses{}); err != nil {
		return out, err
	}
	m, err := st.RecvMsg()
	if err != nil {
		return out, err
	}
	if r, ok := m.(*cnat.CnatGetSnatAddressesReply); ok && r.Retval == 0 {
		var addrs []string
		if a := netip.AddrFrom4(r.SnatIP4); !a.IsUnspecified() {
			addrs = append(addrs, a.String())
		}
		if a := netip.AddrFrom16(r.SnatIP6); !a.IsUnspecified() {
			addrs = append(addrs, a.String())
		}
		out.SNAT = fmt.Sprint(addrs)
		out.SNAT = out.SNAT[1 : len(out.SNAT)-1]
	}
	return out, nil
}

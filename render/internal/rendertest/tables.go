package rendertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"

	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/api"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/ip"
	"go.fd.io/govpp/binapi/ip_neighbor"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/binapi/vxlan"

	"github.com/vswitchkit/vswitchkit/internal/vppconv"
)

// TagPrefix is the driver's default interface tag prefix.
const TagPrefix = "vsk:"

// Tables reads VPP's tables over a connection of its own (the same dumps
// on the stand-in and on a real VPP) and returns what the driver owns in
// them, keyed and printed without sw_if_indexes (interfaces are named by
// their tags), so that two readings compare across restarts:
//
//	"interface <name>"        dev type, admin state, MAC, addresses, unnumbered source, VXLAN endpoints
//	"route <prefix>"          paths (via <name> <next hop>) of the entries through owned interfaces
//	"neighbor <name> <ip>"    MAC of a static neighbor
//
// Adopted interfaces are named "=<name>".
//
// A failure to read (VPP not up yet after a restart) fails t now: inside
// require.EventuallyWithT pass its CollectT, so that the attempt fails
// and the next one runs.
func Tables(t require.TestingT, newAdapter func() adapter.VppAPI) map[string]string {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := vppdrivertest.NewDumper(ctx, newAdapter())
	require.NoError(t, err)
	defer d.Close()
	dump := func(req api.Message) []api.Message {
		out, err := d.Dump(req)
		require.NoError(t, err)
		return out
	}
	all := interface_types.InterfaceIndex(^uint32(0))
	names := map[uint32]string{}
	var ifaces []*interfaces.SwInterfaceDetails
	for _, m := range dump(&interfaces.SwInterfaceDump{SwIfIndex: all}) {
		r := m.(*interfaces.SwInterfaceDetails)
		if strings.HasPrefix(r.Tag, TagPrefix) {
			names[uint32(r.SwIfIndex)] = strings.TrimPrefix(r.Tag, TagPrefix)
			ifaces = append(ifaces, r)
		}
	}
	nameOf := func(sw uint32) string {
		if n, ok := names[sw]; ok {
			return n
		}
		return fmt.Sprintf("#%d", sw)
	}
	unnumbered := map[uint32]uint32{}
	for _, m := range dump(&ip.IPUnnumberedDump{SwIfIndex: all}) {
		r := m.(*ip.IPUnnumberedDetails)
		unnumbered[uint32(r.SwIfIndex)] = uint32(r.IPSwIfIndex)
	}
	tunnels := map[uint32]*vxlan.VxlanTunnelV2Details{}
	for _, m := range dump(&vxlan.VxlanTunnelV2Dump{SwIfIndex: all}) {
		r := m.(*vxlan.VxlanTunnelV2Details)
		tunnels[uint32(r.SwIfIndex)] = r
	}
	out := map[string]string{}
	for _, r := range ifaces {
		sw := uint32(r.SwIfIndex)
		var addrs []string
		for _, v6 := range []bool{false, true} {
			for _, a := range dump(&ip.IPAddressDump{SwIfIndex: r.SwIfIndex, IsIPv6: v6}) {
				addrs = append(addrs, vppconv.PrefixOf(ip_types.Prefix(a.(*ip.IPAddressDetails).Prefix)).String())
			}
		}
		slices.Sort(addrs)
		v := fmt.Sprintf("%s up=%v mac=%s addrs=%v", r.InterfaceDevType, r.Flags&interface_types.IF_STATUS_API_FLAG_ADMIN_UP != 0,
			r.L2Address, addrs)
		if src, ok := unnumbered[sw]; ok {
			v += " unnumbered=" + nameOf(src)
		}
		if x := tunnels[sw]; x != nil {
			v += fmt.Sprintf(" vxlan=%s>%s/%d/decap%d", vppconv.AddrOf(x.SrcAddress), vppconv.AddrOf(x.DstAddress), x.Vni, x.DecapNextIndex)
		}
		out["interface "+nameOf(sw)] = v
	}
	for _, af := range []ip_types.AddressFamily{ip_types.ADDRESS_IP4, ip_types.ADDRESS_IP6} {
		for _, m := range dump(&ip_neighbor.IPNeighborDump{SwIfIndex: all, Af: af}) {
			n := m.(*ip_neighbor.IPNeighborDetails).Neighbor
			if _, owned := names[uint32(n.SwIfIndex)]; owned && n.Flags&ip_neighbor.IP_API_NEIGHBOR_FLAG_STATIC != 0 {
				out["neighbor "+nameOf(uint32(n.SwIfIndex))+" "+vppconv.AddrOf(n.IPAddress).String()] = n.MacAddress.String()
			}
		}
	}
	for _, v6 := range []bool{false, true} {
		for _, m := range dump(&ip.IPRouteDump{Table: ip.IPTable{IsIP6: v6}}) {
			r := m.(*ip.IPRouteDetails).Route
			var paths []string
			for _, p := range r.Paths {
				if _, owned := names[p.SwIfIndex]; !owned || p.Type != 0 {
					continue
				}
				paths = append(paths, "via "+nameOf(p.SwIfIndex)+" "+vppconv.UnionAddr(p.Nh.Address, v6).String())
			}
			if len(paths) > 0 {
				slices.Sort(paths)
				out["route "+vppconv.PrefixOf(r.Prefix).Masked().String()] = strings.Join(paths, ", ")
			}
		}
	}
	return out
}

// Dump runs one dump on a connection of its own and returns the details.
func Dump(t testing.TB, newAdapter func() adapter.VppAPI, req api.Message) []api.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := vppdrivertest.Dump(ctx, newAdapter(), req)
	require.NoError(t, err)
	return out
}

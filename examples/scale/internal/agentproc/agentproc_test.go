package agentproc

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/ip"
	"go.fd.io/govpp/binapi/ip_types"
	"go.fd.io/govpp/binapi/nat44_ed"
	"go.fd.io/govpp/binapi/vxlan"

	"github.com/vswitchkit/vswitchkit/controller"
)

func TestSignature(t *testing.T) {
	ext := netip.MustParseAddrPort("10.96.0.5:80")
	local := netip.MustParseAddrPort("10.128.3.7:8080")
	pfx := netip.MustParsePrefix("10.128.20.0/24")
	dst := netip.MustParseAddr("10.16.0.9")
	tests := []struct {
		msg  api.Message
		want string
	}{
		{&ip.IPRouteAddDel{IsAdd: true, Route: ip.IPRoute{Prefix: ip_types.NewPrefix(*pfxNet(pfx))}}, RouteAdd(pfx)},
		{&ip.IPRouteAddDel{Route: ip.IPRoute{Prefix: ip_types.NewPrefix(*pfxNet(pfx))}}, RouteDel(pfx)},
		{&vxlan.VxlanAddDelTunnelV3{IsAdd: true, DstAddress: ip_types.NewAddress(dst.AsSlice())}, VxlanAdd(dst)},
		{&vxlan.VxlanAddDelTunnelV3{DstAddress: ip_types.NewAddress(dst.AsSlice())}, VxlanDel(dst)},
		{&nat44_ed.Nat44AddDelLbStaticMapping{IsAdd: true, ExternalAddr: ext.Addr().As4(), ExternalPort: 80}, LBAdd(ext)},
		{&nat44_ed.Nat44AddDelLbStaticMapping{ExternalAddr: ext.Addr().As4(), ExternalPort: 80}, LBDel(ext)},
		{&nat44_ed.Nat44LbStaticMappingAddDelLocal{IsAdd: true, ExternalAddr: ext.Addr().As4(), ExternalPort: 80,
			Local: nat44_ed.Nat44LbAddrPort{Addr: local.Addr().As4(), Port: 8080}}, LBLocalAdd(ext, local)},
		{&nat44_ed.Nat44LbStaticMappingAddDelLocal{ExternalAddr: ext.Addr().As4(), ExternalPort: 80,
			Local: nat44_ed.Nat44LbAddrPort{Addr: local.Addr().As4(), Port: 8080}}, LBLocalDel(ext, local)},
		{&nat44_ed.Nat44ForwardingEnableDisable{}, ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, signature(tt.msg), "%T", tt.msg)
	}
}

func TestParseStatus(t *testing.T) {
	m := ParseStatus([]byte("Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nRssAnon:\t 1000 kB\nRssFile:\t 24 kB\n"))
	assert.Equal(t, Memory{RSS: 1 << 20, PeakRSS: 2 << 20, RSSAnon: 1000 << 10, RSSFile: 24 << 10}, m)
	assert.Positive(t, ReadMemory().PeakRSS)
}

func TestEventSummary(t *testing.T) {
	at := time.Now()
	rec := func(seq uint64, name, desc string, d time.Duration) controller.Record {
		return controller.Record{Seq: seq, Name: name, Description: desc, Start: at, End: at.Add(d),
			Handlers: []controller.HandlerOutcome{{Handler: "a", Duration: d / 4}, {Handler: "b", Duration: d / 2}}}
	}
	recs := []controller.Record{
		rec(1, "Add Pod", "Add Pod x", time.Millisecond), // before seq: left out
		rec(2, "Add Pod", "Add Pod y", 2*time.Millisecond),
		rec(3, "Kubernetes State Change", "Kubernetes State Change: update endpoints k8s/endpoints/a/b", time.Millisecond),
		rec(4, "Kubernetes State Change", "Kubernetes State Change: update endpoints k8s/endpoints/a/c", 3*time.Millisecond),
	}
	got, last := eventSummary(recs, 1)
	assert.Equal(t, uint64(4), last)
	assert.Equal(t, []Events{
		{Kind: "Add Pod", N: 1, P50: 2 * time.Millisecond, P99: 2 * time.Millisecond, Max: 2 * time.Millisecond,
			SlowHandler: "b", SlowDuration: time.Millisecond},
		{Kind: "Kubernetes State Change update endpoints", N: 2, P50: 3 * time.Millisecond, P99: 3 * time.Millisecond,
			Max: 3 * time.Millisecond, SlowHandler: "b", SlowDuration: 1500 * time.Microsecond},
	}, got)
}

func pfxNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

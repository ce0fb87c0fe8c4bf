package vppdriver_test

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// BenchmarkApplyRoutes10k applies 10000 routes through the stand-in (one
// update commit, pipelined) and deletes them again (another commit) per
// iteration; msgs/s counts the requests VPP handled.
func BenchmarkApplyRoutes10k(b *testing.B) {
	vpp := vppsim.New(vppsim.Config{})
	cfg := testCfg()
	cfg.HealthInterval = time.Hour
	d := startDriver(b, vpp, cfg)
	commit(b, d, controller.CommitUpdate, kv(b, loop("up", true, 0, "10.0.0.1/24")))
	waitConfigured(b, d, 1)

	const n = 10000
	add := controller.KeyValuePairs{}
	del := controller.KeyValuePairs{}
	for i := range n {
		dst := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 8), byte(i), 0}), 24)
		r := &vppmodel.Route{DstNetwork: dst.String(), Paths: []*vppmodel.Path{{OutgoingInterface: "up", NextHop: "10.0.0.2"}}}
		k := vppmodel.RouteKey(0, dst)
		add[k] = r
		del[k] = nil
	}
	before := vpp.Stats().Requests
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		commit(b, d, controller.CommitUpdate, add)
		commit(b, d, controller.CommitUpdate, del)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	msgs := vpp.Stats().Requests - before
	require.Equal(b, uint64(2*n*b.N), msgs)
	b.ReportMetric(float64(msgs)/elapsed.Seconds(), "msgs/s")
	s, _ := d.Status(vppmodel.InterfaceKey("up"))
	require.Equal(b, vppdriver.StateConfigured, s.State)
}

// installed builds a node state of n keys: an uplink and a pod-side
// loopback with NAT44-ED on them, and (n-5)/2 routes and as many NAT44
// load-balanced mappings (2 backends each) beside them.
func installed(n int) controller.KeyValuePairs {
	values := controller.KeyValuePairs{}
	add := func(m proto.Message) {
		k, err := vppmodel.KeyOf(m)
		if err != nil {
			panic(err)
		}
		values[k] = m
	}
	add(&vppmodel.Interface{Name: "up", Type: vppmodel.Interface_LOOPBACK, Enabled: true, IpAddresses: []string{"10.0.0.1/16"}})
	add(&vppmodel.Interface{Name: "pods", Type: vppmodel.Interface_LOOPBACK, Enabled: true, IpAddresses: []string{"10.1.0.1/16"}})
	add(&vppmodel.Nat44Global{})
	add(&vppmodel.Nat44Interface{Interface: "up", Outside: true})
	add(&vppmodel.Nat44Interface{Interface: "pods", Inside: true})
	for i := range (n - 5) / 2 {
		add(benchRoute(i, "10.0.0.2"))
		add(benchLB(i, "10.1.0.2"))
	}
	return values
}

func benchRoute(i int, nh string) *vppmodel.Route {
	dst := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
	return &vppmodel.Route{DstNetwork: dst.String(), Paths: []*vppmodel.Path{{OutgoingInterface: "up", NextHop: nh}}}
}

func benchLB(i int, backend string) *vppmodel.Nat44LbStaticMapping {
	ext := netip.AddrFrom4([4]byte{172, 16 + byte(i>>16), byte(i >> 8), byte(i)})
	return &vppmodel.Nat44LbStaticMapping{Protocol: vppmodel.Nat44Protocol_TCP, ExternalIp: ext.String(), ExternalPort: 80,
		Out2InOnly: true, Backends: []*vppmodel.Nat44Backend{
			{Ip: "10.1.0.10", Port: 8080, Probability: 50},
			{Ip: backend, Port: 8080, Probability: 50},
		}}
}

// BenchmarkOneKeyCommit measures one update commit that changes one key
// (a route's next hop; one backend of a NAT44 load-balanced mapping),
// through the stand-in, with 1,000 and 100,000 keys installed. Every
// iteration changes VPP (the value alternates between two versions).
func BenchmarkOneKeyCommit(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		for _, tc := range []struct {
			name string
			a, b proto.Message
		}{
			{"route", benchRoute(7, "10.0.0.2"), benchRoute(7, "10.0.0.3")},
			{"nat44-lb-backend", benchLB(7, "10.1.0.2"), benchLB(7, "10.1.0.3")},
		} {
			b.Run(fmt.Sprintf("%s/keys=%d", tc.name, n), func(b *testing.B) {
				vpp := vppsim.New(vppsim.Config{})
				cfg := testCfg()
				cfg.HealthInterval = time.Hour
				d := startDriver(b, vpp, cfg)
				require.Eventually(b, d.Connected, 10*time.Second, time.Millisecond)
				state := installed(n)
				commit(b, d, controller.CommitUpdate, state)
				waitConfigured(b, d, len(state))
				key, err := vppmodel.KeyOf(tc.a)
				require.NoError(b, err)
				va := controller.KeyValuePairs{key: tc.a}
				vb := controller.KeyValuePairs{key: tc.b}
				ctx := context.Background()
				before := vpp.Stats().Writes
				runtime.GC() // not the install's garbage in the timed loop
				b.ResetTimer()
				i := 0
				for b.Loop() {
					v := vb
					if i%2 == 1 {
						v = va
					}
					i++
					if _, err := d.Commit(ctx, &controller.Commit{Kind: controller.CommitUpdate, Values: v}); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				require.Greater(b, vpp.Stats().Writes, before)
				s, _ := d.Status(key)
				require.Equal(b, vppdriver.StateConfigured, s.State, s.String())
			})
		}
	}
}

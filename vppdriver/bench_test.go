package vppdriver_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/model"
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
		r := &model.Route{DstNetwork: dst.String(), Paths: []*model.Path{{OutgoingInterface: "up", NextHop: "10.0.0.2"}}}
		k := model.RouteKey(0, dst)
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
	s, _ := d.Status(model.InterfaceKey("up"))
	require.Equal(b, vppdriver.StateConfigured, s.State)
}

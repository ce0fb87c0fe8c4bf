package vppdriver_test

import (
	"context"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// TestInvalidExternalConfigDoesNotStopTheAgent: an invalid value in the
// external configuration (user input from etcd) next to valid ones, through
// a real event loop into the driver on the stand-in. The valid keys are
// applied, the invalid one is Failed in the driver's status and reported by
// the loop, and the loop is still alive after 10 × MaxHealingDelay (before,
// healing resyncs failed the same way and Run returned ErrHealingFailed
// after about 31 s with the defaults). Fixing the value clears the report.
func TestInvalidExternalConfigDoesNotStopTheAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vpp := vppsim.New(vppsim.Config{})
		cfg := testCfg()
		cfg.HealthInterval = time.Hour
		d := startDriver(t, vpp, cfg)
		loopCfg := controller.Config{} // defaults: MaxHealingDelay 1m, healing never gives up
		l, err := controller.New(nil, d, loopCfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		defer func() { cancel(); <-done }()

		uplink := loop("uplink", true, 0, "192.168.16.5/24")
		good := &vppmodel.Route{DstNetwork: "10.2.0.0/16", Paths: []*vppmodel.Path{{OutgoingInterface: "uplink", NextHop: "192.168.16.6"}}}
		badKey := vppmodel.RouteKey(0, netip.MustParsePrefix("10.3.0.0/16"))
		bad := &vppmodel.Route{DstNetwork: "10.3.0.0/16", Paths: []*vppmodel.Path{{OutgoingInterface: "uplink", NextHop: "192.168.16.300"}}}
		ext := kv(t, uplink, good)
		ext[badKey] = bad
		ext["handler/bookkeeping"] = uplink // a key the driver does not own
		resync := controller.NewDBResync()
		resync.ExternalConfig = ext
		require.NoError(t, l.PushEvent(resync))

		time.Sleep(10 * time.Minute) // 10 × MaxHealingDelay
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("the loop stopped: %v", err)
		default:
		}
		snap := vpp.Snapshot()
		_, ok := routeIn(snap, 0, "10.2.0.0/16")
		assert.True(t, ok, "the valid route is applied")
		_, ok = routeIn(snap, 0, "10.3.0.0/16")
		assert.False(t, ok)
		st, ok := d.Status(badKey)
		require.True(t, ok)
		assert.Equal(t, vppdriver.StateFailed, st.State)
		assert.Zero(t, st.NextRetry, "an invalid value is not retried")
		assert.ErrorIs(t, l.Healthy(), controller.ErrDegraded)
		assert.Contains(t, l.RejectedKeys(), badKey)
		assert.NotContains(t, l.RejectedKeys(), "handler/bookkeeping", "a key the driver does not own is not its error")
		assert.Zero(t, l.Stats().HealingScheduled, "nothing a resync could heal")

		// The operator fixes the value.
		fix := controller.NewExternalConfigChange(controller.RemoteDBSource, true)
		fix.UpdatedKVs[badKey] = proto.Clone(good).(*vppmodel.Route)
		fix.UpdatedKVs[badKey].(*vppmodel.Route).DstNetwork = "10.3.0.0/16"
		require.NoError(t, l.PushEvent(fix))
		require.NoError(t, fix.Wait())
		synctest.Wait()
		_, ok = routeIn(vpp.Snapshot(), 0, "10.3.0.0/16")
		assert.True(t, ok)
		assert.NoError(t, l.Healthy())
		assert.Empty(t, l.RejectedKeys())
	})
}

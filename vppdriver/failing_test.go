package vppdriver_test

import (
	"log/slog"
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/ip"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// keyLogs returns the Warn records about key.
func keyLogs(recs []map[string]any, key string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r["level"] == "WARN" && r["key"] == key {
			out = append(out, r)
		}
	}
	return out
}

// TestFailingKey: a pod interface whose host interface does not exist
// (af_packet_create_v3: -71, retried again and again) is logged at Warn
// once when it has failed Config.FailingAfter times in a row (not per
// retry), counted per kind in Stats, listed by Failing and Degraded; when
// the host interface appears, the retry succeeds and the recovery is
// logged at Warn once. The route through it waits: pending, not failing.
// (issue 27, item 3)
func TestFailingKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logBuffer
		var hostUp atomic.Bool
		vpp := vppsim.New(vppsim.Config{HostInterfaceExists: func(name string) bool { return name == "veth-pod1" && hostUp.Load() }})
		cfg := testCfg()
		cfg.RetryInitial, cfg.RetryMax, cfg.HealthInterval = time.Second, 4*time.Second, time.Hour
		cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		d := startDriver(t, vpp, cfg)
		synctest.Wait()

		ifKey := vppmodel.InterfaceKey("pod1")
		rtKey := vppmodel.RouteKey(0, netip.MustParsePrefix("10.1.1.2/32"))
		commit(t, d, controller.CommitUpdate, kv(t, afp("pod1", "veth-pod1"), route(0, "10.1.1.2/32", via("pod1", ""))))
		// Attempts at 0s, 1s, 3s: failing from the third; then 7s, 11s, 15s, ...
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Empty(t, keyLogs(logs.records(t), ifKey), "two failed attempts: retrying, not failing yet")
		require.NoError(t, d.Degraded())
		require.Zero(t, d.Stats().Failing)

		time.Sleep(time.Minute) // 14 more attempts
		synctest.Wait()
		s, _ := d.Status(ifKey)
		require.Equal(t, vppdriver.StateFailed, s.State)
		require.Greater(t, s.Attempts, 8)
		assert.Equal(t, time.Unix(946684800+3, 0).UTC(), s.FailingSince.UTC(), "the third attempt, at 3s")
		warns := keyLogs(logs.records(t), ifKey)
		require.Len(t, warns, 1, "once, not per retry")
		assert.Equal(t, "key failing", warns[0]["msg"])
		assert.Equal(t, "interface", warns[0]["kind"])
		assert.EqualValues(t, 3, warns[0]["attempts"])
		assert.Contains(t, warns[0]["error"], "af_packet_create_v3: VPPApiError: Invalid interface (-71)")

		st := d.Stats()
		assert.Equal(t, 1, st.Failing)
		assert.Equal(t, map[string]int{"interface": 1}, st.FailingByKind)
		assert.Equal(t, 1, st.Failed)
		assert.Equal(t, 1, st.Pending, "the route waits for the interface")
		failing := d.Failing()
		require.Len(t, failing, 1)
		assert.Equal(t, ifKey, failing[0].Key)
		var ve *vppdriver.VPPError
		require.ErrorAs(t, failing[0].Err, &ve)
		assert.Equal(t, int32(-71), ve.Retval)
		err := d.Degraded()
		require.ErrorIs(t, err, vppdriver.ErrDegraded)
		assert.ErrorContains(t, err, ifKey)
		assert.ErrorContains(t, err, "Invalid interface (-71)")
		assert.NotContains(t, err.Error(), rtKey)
		rs, _ := d.Status(rtKey)
		assert.Equal(t, vppdriver.StatePending, rs.State)
		assert.True(t, rs.FailingSince.IsZero())

		// The host interface appears (the pod's veth): the next retry works.
		hostUp.Store(true)
		time.Sleep(cfg.RetryMax)
		synctest.Wait()
		waitConfigured(t, d, 2)
		warns = keyLogs(logs.records(t), ifKey)
		require.Len(t, warns, 2)
		assert.Equal(t, "key no longer failing", warns[1]["msg"])
		assert.Equal(t, "configured", warns[1]["state"])
		assert.Zero(t, d.Stats().Failing)
		assert.Nil(t, d.Stats().FailingByKind)
		assert.Empty(t, d.Failing())
		assert.NoError(t, d.Degraded())
		require.NoError(t, d.CheckInvariants())
	})
}

// TestFailingKeyKinds: a permanent VPP failure is failing at once; a key
// that fails once and then works is never failing (nothing at Warn); a
// failing key that is deleted, or gets a new value, is no longer failing;
// one whose retries restart after a reconnect stays failing.
func TestFailingKeyKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logBuffer
		vpp := vppsim.New(vppsim.Config{})
		var failRoutes atomic.Int32 // routes fail: 0 no, -1 retriably (once), -7 permanently
		vpp.SetInterceptor(func(req api.Message) (int32, bool) {
			if _, ok := req.(*ip.IPRouteAddDel); ok {
				switch rv := failRoutes.Load(); rv {
				case -1:
					failRoutes.Store(0)
					return rv, true
				case -7:
					return rv, true
				}
			}
			return 0, false
		})
		cfg := testCfg()
		cfg.HealthInterval = time.Second
		cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		d, err := vppdriver.New(func() adapter.VppAPI { return vpp.NewAdapter() }, cfg)
		require.NoError(t, err)
		runDriver(t, d)
		synctest.Wait()
		commit(t, d, controller.CommitUpdate, kv(t, loop("a", true, 0, "10.0.0.1/24")))

		rtKey := vppmodel.RouteKey(0, netip.MustParsePrefix("10.5.0.0/16"))
		failRoutes.Store(-1)
		commit(t, d, controller.CommitUpdate, kv(t, route(0, "10.5.0.0/16", via("a", "10.0.0.2"))))
		time.Sleep(time.Second)
		synctest.Wait()
		s, _ := d.Status(rtKey)
		require.Equal(t, vppdriver.StateConfigured, s.State)
		assert.Empty(t, keyLogs(logs.records(t), rtKey), "failed once, then worked: never failing")

		failRoutes.Store(-7)
		commit(t, d, controller.CommitUpdate, kv(t, route(0, "10.5.0.0/16", via("a", "10.0.0.3"))))
		s, _ = d.Status(rtKey)
		require.Equal(t, vppdriver.StateFailed, s.State)
		assert.Equal(t, 1, s.Attempts)
		assert.False(t, s.FailingSince.IsZero(), "a permanent failure is failing at once")
		assert.Equal(t, map[string]int{"route": 1}, d.Stats().FailingByKind)
		require.Len(t, keyLogs(logs.records(t), rtKey), 1)

		// A reconnect retries it (VPP restarted): it fails again, and is
		// failing all along (not a recovery and a new failure).
		vpp.Restart()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		require.True(t, d.Stats().Connected)
		require.Equal(t, uint64(2), d.Stats().Connects)
		s, _ = d.Status(rtKey)
		require.Equal(t, vppdriver.StateFailed, s.State)
		assert.Equal(t, 1, d.Stats().Failing)
		require.Len(t, keyLogs(logs.records(t), rtKey), 1)

		// A new value is no longer the failing one.
		failRoutes.Store(0)
		commit(t, d, controller.CommitUpdate, kv(t, route(0, "10.5.0.0/16", via("a", "10.0.0.4"))))
		warns := keyLogs(logs.records(t), rtKey)
		require.Len(t, warns, 2)
		assert.Equal(t, "key no longer failing", warns[1]["msg"])
		assert.Equal(t, "configured", warns[1]["state"])

		// Deleted while failing.
		failRoutes.Store(-7)
		commit(t, d, controller.CommitUpdate, kv(t, route(0, "10.5.0.0/16", via("a", "10.0.0.5"))))
		require.Equal(t, 1, d.Stats().Failing)
		commit(t, d, controller.CommitUpdate, controller.KeyValuePairs{rtKey: nil})
		warns = keyLogs(logs.records(t), rtKey)
		require.Len(t, warns, 4)
		assert.Equal(t, "key no longer failing", warns[3]["msg"])
		assert.Equal(t, "deleted", warns[3]["state"])
		assert.Zero(t, d.Stats().Failing)
		require.NoError(t, d.CheckInvariants())
	})
}

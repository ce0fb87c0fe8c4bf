package vppdriver_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// commitErr commits and returns the error (for commits expected to fail).
func commitErr(t testing.TB, d *vppdriver.Driver, kind controller.CommitKind, values controller.KeyValuePairs) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := d.Commit(ctx, &controller.Commit{Kind: kind, Values: values})
	return err
}

func keyErrorKeys(err error) []string {
	var keys []string
	for _, ke := range controller.KeyErrors(err) {
		keys = append(keys, ke.Key)
	}
	slices.Sort(keys)
	return keys
}

// TestForeignKeysIgnored: keys outside vpp/ belong to someone else (another
// southbound, handlers' bookkeeping): no commit kind treats them as
// anything, and they never make a commit fail.
func TestForeignKeysIgnored(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	d := startDriver(t, vpp, testCfg())
	require.Eventually(t, d.Connected, 10*time.Second, time.Millisecond)
	foreignKeys := controller.KeyValuePairs{
		"nodesync/node/1":         loop("x", true, 0), // any message, even a VPP model
		"k8s/pod/default/web":     nil,
		"config/other/vpp/route/": route(0, "10.0.0.0/8", via("a", "")),
		"vpp":                     loop("y", true, 0), // not under "vpp/"
	}
	for _, kind := range []controller.CommitKind{controller.CommitUpdate, controller.CommitResync} {
		values := kv(t, loop("a", true, 0, "10.0.0.1/24"))
		for k, v := range foreignKeys {
			values[k] = v
		}
		require.NoError(t, commitErr(t, d, kind, values), kind)
		waitConfigured(t, d, 1)
	}
	// A resync without the foreign keys changes nothing either.
	before := vpp.Stats().Writes
	commit(t, d, controller.CommitResync, kv(t, loop("a", true, 0, "10.0.0.1/24")))
	waitConfigured(t, d, 1)
	assert.Equal(t, before, vpp.Stats().Writes)
	assert.Len(t, vpp.Snapshot().Interfaces, 2, "local0 and loop a only")
}

// TestInvalidValuesPerKey: invalid values are rejected key by key; every
// other key of the transaction is applied; the rejected keys are Failed
// with the error kept, not retried, and returned as controller.KeyErrors.
func TestInvalidValuesPerKey(t *testing.T) {
	tests := []struct {
		name string
		kind controller.CommitKind
	}{
		{"update", controller.CommitUpdate},
		{"resync", controller.CommitResync},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vpp := vppsim.New(vppsim.Config{})
			d := startDriver(t, vpp, testCfg())
			require.Eventually(t, d.Connected, 10*time.Second, time.Millisecond)
			values := kv(t, loop("a", true, 0, "10.0.0.1/24"), route(0, "10.5.0.0/16", via("a", "10.0.0.2")))
			bad := controller.KeyValuePairs{
				vppmodel.InterfaceKey("b"):                                 loop("b", true, 0, "10.0.0.300/24"),
				"vpp/route/0/10.6.0.0/16":                                  route(0, "10.6.0.0/16", via("a", "not-an-ip")),
				vppmodel.InterfaceKey("c"):                                 loop("other-name", true, 0),
				"vpp/unknown-kind/x":                                       loop("x", true, 0),
				vppmodel.RouteKey(0, netip.MustParsePrefix("10.7.0.0/16")): route(0, "10.7.0.0/16"),
			}
			for k, v := range bad {
				values[k] = v
			}
			err := commitErr(t, d, tc.kind, values)
			require.Error(t, err)
			assert.True(t, controller.IsPermanent(err), "only per-key rejections: %v", err)
			assert.ErrorIs(t, err, vppdriver.ErrInvalidValue)
			want := slices.Sorted(func(yield func(string) bool) {
				for k := range bad {
					if !yield(k) {
						return
					}
				}
			})
			assert.Equal(t, want, keyErrorKeys(err))

			// The valid keys are configured; the invalid ones Failed, kept.
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				for _, k := range []string{vppmodel.InterfaceKey("a"), vppmodel.RouteKey(0, netip.MustParsePrefix("10.5.0.0/16"))} {
					s, ok := d.Status(k)
					require.True(c, ok, k)
					require.Equal(c, vppdriver.StateConfigured, s.State, s.String())
				}
			}, 10*time.Second, time.Millisecond)
			for k := range bad {
				s, ok := d.Status(k)
				require.True(t, ok, k)
				assert.Equal(t, vppdriver.StateFailed, s.State, k)
				assert.ErrorIs(t, s.Err, vppdriver.ErrInvalidValue, k)
				assert.True(t, s.NextRetry.IsZero(), "not retried: %s", k)
			}
			assert.Len(t, d.Statuses(), 2+len(bad))
			_, ok := routeIn(vpp.Snapshot(), 0, "10.5.0.0/16")
			assert.True(t, ok)
		})
	}
}

// TestInvalidReplacesValid: a key whose value turns invalid no longer has
// a desired value VPP can hold: its old object is removed (with what
// depends on it, which waits), the key is Failed with the error; a valid
// value brings everything back. This is what a resync after an agent
// restart would do too (the driver then has no memory of the old value).
func TestInvalidReplacesValid(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	d := startDriver(t, vpp, testCfg())
	state := kv(t, loop("a", true, 0, "10.0.0.1/24"), route(0, "10.5.0.0/16", via("a", "10.0.0.2")))
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, 2)

	ikey := vppmodel.InterfaceKey("a")
	rkey := vppmodel.RouteKey(0, netip.MustParsePrefix("10.5.0.0/16"))
	err := commitErr(t, d, controller.CommitUpdate, controller.KeyValuePairs{ikey: loop("a", true, 0, "10.0.0.1/33")})
	require.Equal(t, []string{ikey}, keyErrorKeys(err))
	s, _ := d.Status(ikey)
	assert.Equal(t, vppdriver.StateFailed, s.State)
	assert.ErrorIs(t, s.Err, vppdriver.ErrInvalidValue)
	snap := vpp.Snapshot()
	_, ok := ifaceByTag(snap, "vsk:a")
	assert.False(t, ok, "the old interface is not kept as if desired")
	_, ok = routeIn(snap, 0, "10.5.0.0/16")
	assert.False(t, ok)
	s, _ = d.Status(rkey)
	assert.Equal(t, vppdriver.StatePending, s.State)
	assert.Equal(t, []string{ikey}, s.PendingOn)

	// The same invalid value in a resync is reported again.
	bad := kv(t, route(0, "10.5.0.0/16", via("a", "10.0.0.2")))
	bad[ikey] = loop("a", true, 0, "10.0.0.1/33")
	require.Equal(t, []string{ikey}, keyErrorKeys(commitErr(t, d, controller.CommitResync, bad)))

	commit(t, d, controller.CommitUpdate, kv(t, loop("a", true, 0, "10.0.0.1/24")))
	waitConfigured(t, d, 2)
	_, ok = routeIn(vpp.Snapshot(), 0, "10.5.0.0/16")
	assert.True(t, ok)
}

// TestIncompatiblePermanent: a VPP that lacks messages the driver needs is
// a permanent error for the loop (not a crash loop); the driver recovers
// by itself once it reconnects to a compatible VPP.
func TestIncompatiblePermanent(t *testing.T) {
	old := vppsim.New(vppsim.Config{Hide: []string{"ip_route_add_del"}})
	good := vppsim.New(vppsim.Config{})
	var useGood atomicBool
	d, err := vppdriver.New(func() adapter.VppAPI {
		if useGood.Load() {
			return good.NewAdapter()
		}
		return old.NewAdapter()
	}, testCfg())
	require.NoError(t, err)
	runDriver(t, d)
	require.Eventually(t, d.Connected, 10*time.Second, time.Millisecond)

	state := kv(t, loop("a", true, 0, "10.0.0.1/24"))
	err = commitErr(t, d, controller.CommitResync, state)
	require.ErrorIs(t, err, vppdriver.ErrIncompatible)
	assert.True(t, controller.IsPermanent(err), "%v", err)
	assert.Empty(t, controller.KeyErrors(err))
	s, _ := d.Status(vppmodel.InterfaceKey("a"))
	assert.Equal(t, vppdriver.StateFailed, s.State)

	// VPP is upgraded: the old one goes away, the driver reconnects.
	useGood.Store(true)
	old.Stop()
	waitConfigured(t, d, 1)
	require.NoError(t, d.Compatibility())
	_, ok := ifaceByTag(good.Snapshot(), "vsk:a")
	assert.True(t, ok)
}

// TestStatusWhileDisconnected: after the connection is lost nothing is
// reported as configured until the driver has reconnected and read VPP
// back (a restarted VPP holds nothing).
func TestStatusWhileDisconnected(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	d := startDriver(t, vpp, testCfg())
	state := kv(t, &vppmodel.VrfTable{Id: 9}, loop("a", true, 9, "10.0.0.1/24"), route(9, "10.8.0.0/16", via("a", "10.0.0.2")))
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))

	vpp.Stop() // VPP died and restarts slowly: it holds nothing
	require.Eventually(t, func() bool { return !d.Connected() }, 10*time.Second, time.Millisecond)
	st := d.Statuses()
	require.Len(t, st, len(state))
	for k, s := range st {
		assert.Equal(t, vppdriver.StatePending, s.State, "%s: %v", k, s)
		s1, _ := d.Status(k)
		assert.Equal(t, vppdriver.StatePending, s1.State, "%s: %v", k, s1)
	}
	vpp.Start()
	waitConfigured(t, d, len(state))
	_, ok := routeIn(vpp.Snapshot(), 9, "10.8.0.0/16")
	assert.True(t, ok)
}

package vppdriver_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/fib_types"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/ip"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

func afp(name, host string, addrs ...string) *vppmodel.Interface {
	return &vppmodel.Interface{Name: name, Type: vppmodel.Interface_AF_PACKET, Enabled: true,
		AfPacket: &vppmodel.AfPacketLink{HostIfName: host}, IpAddresses: addrs}
}

// TestApplyChangeResync applies a desired state, then a changed one, then
// resyncs with unknown objects in VPP: the ones the driver owns (by tag or
// table) are removed, foreign ones are kept.
func TestApplyChangeResync(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{HostInterfaces: []string{"veth0", "veth1"}, VhostNet: true})
	d := startDriver(t, vpp, testCfg())

	vrf10 := &vppmodel.VrfTable{Id: 10, Label: "pods"}
	vrf10v6 := &vppmodel.VrfTable{Id: 10, Protocol: vppmodel.VrfTable_IPV6}
	state1 := kv(t,
		vrf10, vrf10v6,
		loop("uplink", true, 0, "192.168.16.5/24", "fd00:16::5/64"),
		loop("bvi", false, 10, "10.1.5.1/24"),
		afp("pod1", "veth0", "10.1.5.2/32"),
		&vppmodel.Interface{Name: "tap1", Type: vppmodel.Interface_TAP, Enabled: true, MacAddress: "02:00:00:00:00:aa",
			Tap: &vppmodel.TapLink{HostIfName: "vpp1"}},
		route(0, "10.2.0.0/16", via("uplink", "192.168.16.6")),
		route(0, "10.3.0.0/16", via("uplink", "192.168.16.7"), via("uplink", "192.168.16.8")),
		route(10, "10.1.5.2/32", via("pod1", "")),
		route(0, "2001:db8::/48", via("uplink", "fd00:16::6")),
		route(0, "10.9.0.0/16", &vppmodel.Path{NextHop: "192.168.16.9"}),
	)
	commit(t, d, controller.CommitResync, state1)
	waitConfigured(t, d, len(state1))

	s := vpp.Snapshot()
	up, ok := ifaceByTag(s, "vsk:uplink")
	require.True(t, ok)
	assert.True(t, up.AdminUp)
	assert.Equal(t, pfxs("192.168.16.5/24", "fd00:16::5/64"), up.Addresses)
	bvi, ok := ifaceByTag(s, "vsk:bvi")
	require.True(t, ok)
	assert.False(t, bvi.AdminUp)
	assert.Equal(t, uint32(10), bvi.Vrf)
	pod, ok := ifaceByTag(s, "vsk:pod1")
	require.True(t, ok)
	assert.Equal(t, "host-veth0", pod.Name)
	tap, ok := ifaceByTag(s, "vsk:tap1")
	require.True(t, ok)
	assert.Equal(t, "vpp1", tap.HostIfName)
	r, ok := routeIn(s, 0, "10.3.0.0/16")
	require.True(t, ok)
	assert.Len(t, r.Paths, 2)
	r, ok = routeIn(s, 10, "10.1.5.2/32")
	require.True(t, ok)
	assert.Equal(t, pod.SwIfIndex, r.Paths[0].SwIfIndex)
	r, ok = routeIn(s, 0, "10.9.0.0/16")
	require.True(t, ok)
	assert.Equal(t, ^uint32(0), r.Paths[0].SwIfIndex)
	assert.Contains(t, s.Tables, vppsim.Table{ID: 10, Name: "vsk:pods"})

	// Change: move bvi's address, bring it up, drop one ECMP path, delete a
	// route and the af_packet interface (and the route through it), change
	// the tap's MAC (re-creation).
	changes := kv(t,
		loop("bvi", true, 10, "10.1.6.1/24"),
		route(0, "10.3.0.0/16", via("uplink", "192.168.16.8")),
		&vppmodel.Interface{Name: "tap1", Type: vppmodel.Interface_TAP, Enabled: true, MacAddress: "02:00:00:00:00:bb",
			Tap: &vppmodel.TapLink{HostIfName: "vpp1"}},
	)
	changes[vppmodel.RouteKey(0, netip.MustParsePrefix("10.2.0.0/16"))] = nil
	changes[vppmodel.InterfaceKey("pod1")] = nil
	changes[vppmodel.RouteKey(10, netip.MustParsePrefix("10.1.5.2/32"))] = nil
	commit(t, d, controller.CommitUpdate, changes)
	waitConfigured(t, d, len(state1)-3)

	s = vpp.Snapshot()
	bvi, _ = ifaceByTag(s, "vsk:bvi")
	assert.True(t, bvi.AdminUp)
	assert.Equal(t, pfxs("10.1.6.1/24"), bvi.Addresses)
	_, ok = ifaceByTag(s, "vsk:pod1")
	assert.False(t, ok)
	_, ok = routeIn(s, 0, "10.2.0.0/16")
	assert.False(t, ok)
	r, _ = routeIn(s, 0, "10.3.0.0/16")
	assert.Equal(t, []vppsim.Path{{SwIfIndex: up.SwIfIndex, NextHop: netip.MustParseAddr("192.168.16.8"), Weight: 1}}, r.Paths)
	assert.Equal(t, 1, countTag(s, "vsk:tap1"))

	// Objects the driver does not know: a foreign loopback with a route in
	// table 0 (kept), a loopback tagged as ours (removed) and a route in
	// our table 10 (removed).
	reps := foreign(t, vpp, &interfaces.CreateLoopback{}, &interfaces.CreateLoopback{})
	fsw := reps[0].(*interfaces.CreateLoopbackReply).SwIfIndex
	stale := reps[1].(*interfaces.CreateLoopbackReply).SwIfIndex
	foreign(t, vpp,
		&interfaces.SwInterfaceTagAddDel{IsAdd: true, SwIfIndex: fsw, Tag: "other-agent"},
		&interfaces.SwInterfaceTagAddDel{IsAdd: true, SwIfIndex: stale, Tag: "vsk:stale"},
		&ip.IPRouteAddDel{IsAdd: true, Route: routeMsg(0, "172.20.0.0/16", uint32(fsw))},
		&ip.IPRouteAddDel{IsAdd: true, Route: routeMsg(10, "172.21.0.0/16", uint32(up.SwIfIndex))},
	)
	final := kv(t,
		vrf10, vrf10v6,
		loop("uplink", true, 0, "192.168.16.5/24", "fd00:16::5/64"),
		loop("bvi", true, 10, "10.1.6.1/24"),
		route(0, "10.3.0.0/16", via("uplink", "192.168.16.8")),
	)
	commit(t, d, controller.CommitResync, final)
	waitConfigured(t, d, len(final))
	s = vpp.Snapshot()
	_, ok = ifaceByTag(s, "other-agent")
	assert.True(t, ok, "foreign interface kept")
	_, ok = routeIn(s, 0, "172.20.0.0/16")
	assert.True(t, ok, "foreign route kept")
	_, ok = ifaceByTag(s, "vsk:stale")
	assert.False(t, ok, "owned stale interface removed")
	_, ok = routeIn(s, 10, "172.21.0.0/16")
	assert.False(t, ok, "route in owned table removed")
	_, ok = ifaceByTag(s, "vsk:tap1")
	assert.False(t, ok)
	_, ok = routeIn(s, 0, "10.9.0.0/16")
	assert.False(t, ok, "route applied by the driver removed")
	assert.Len(t, d.Applied(), len(final))
	desired := d.Desired()
	require.Len(t, desired, len(final))
	for k, v := range final {
		assert.True(t, proto.Equal(v, desired[k]), "desired %s", k)
		assert.True(t, proto.Equal(v, d.Applied()[k]), "applied %s", k)
	}
}

func countTag(s vppsim.Snapshot, tag string) int {
	n := 0
	for _, i := range s.Interfaces {
		if i.Tag == tag {
			n++
		}
	}
	return n
}

func routeMsg(table uint32, dst string, sw uint32) ip.IPRoute {
	return ip.IPRoute{TableID: table, Prefix: vppconv.Prefix(netip.MustParsePrefix(dst)),
		Paths: []fib_types.FibPath{{SwIfIndex: sw, Weight: 1}}}
}

// TestParking: a route whose interface and table are missing waits and is
// applied when they appear; removing the interface removes the route from
// VPP first (checked on the requests VPP receives: the stand-in itself
// drops routes through a deleted interface) and parks it again.
func TestParking(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	d := startDriver(t, vpp, testCfg())
	require.Eventually(t, d.Connected, 10*time.Second, time.Millisecond)
	rt := route(7, "10.5.0.0/16", via("later", "10.0.0.2"))
	rkey, _ := vppmodel.KeyOf(rt)
	commit(t, d, controller.CommitUpdate, kv(t, rt))
	s, ok := d.Status(rkey)
	require.True(t, ok)
	assert.Equal(t, vppdriver.StatePending, s.State)
	assert.ElementsMatch(t, []string{vppmodel.InterfaceKey("later"), vppmodel.VrfTableKey(vppmodel.VrfTable_IPV4, 7)}, s.PendingOn)

	commit(t, d, controller.CommitUpdate, kv(t, &vppmodel.VrfTable{Id: 7}))
	s, _ = d.Status(rkey)
	assert.Equal(t, []string{vppmodel.InterfaceKey("later")}, s.PendingOn)
	commit(t, d, controller.CommitUpdate, kv(t, loop("later", true, 0, "10.0.0.1/24")))
	s, _ = d.Status(rkey)
	assert.Equal(t, vppdriver.StateConfigured, s.State, "applied in the pass that created the interface")
	waitConfigured(t, d, 3)
	_, ok = routeIn(vpp.Snapshot(), 7, "10.5.0.0/16")
	assert.True(t, ok)
	later, _ := ifaceByTag(vpp.Snapshot(), "vsk:later")

	rec := record(vpp)
	commit(t, d, controller.CommitUpdate, controller.KeyValuePairs{vppmodel.InterfaceKey("later"): nil})
	assert.Equal(t, []string{"del route 7 10.5.0.0/16", fmt.Sprintf("del loopback %d", later.SwIfIndex)}, writes(rec.take()),
		"route removed before its interface")
	s, _ = d.Status(rkey)
	assert.Equal(t, vppdriver.StatePending, s.State)
	assert.Equal(t, []string{vppmodel.InterfaceKey("later")}, s.PendingOn)
	_, ok = routeIn(vpp.Snapshot(), 7, "10.5.0.0/16")
	assert.False(t, ok)
}

// TestDependencyFailsInPass: the plan of a commit puts a route after the
// interface it goes through; the interface's creation fails, so the
// executor parks the route on it instead of sending it, and the retry
// that creates the interface applies the route (fake time).
func TestDependencyFailsInPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vpp := vppsim.New(vppsim.Config{})
		var fails atomic.Int32
		fails.Store(1)
		rec := &recorder{}
		vpp.SetInterceptor(func(req api.Message) (int32, bool) {
			if _, ok := req.(*interfaces.CreateLoopback); ok && fails.Add(-1) >= 0 {
				return -1, true
			}
			rec.mu.Lock()
			rec.reqs = append(rec.reqs, describe(req))
			rec.mu.Unlock()
			return 0, false
		})
		cfg := testCfg()
		cfg.HealthInterval = time.Hour
		d := startDriver(t, vpp, cfg)
		synctest.Wait()
		rt := route(0, "10.5.0.0/16", via("a", "10.0.0.2"))
		commit(t, d, controller.CommitUpdate, kv(t, loop("a", true, 0, "10.0.0.1/24"), rt))
		assert.Empty(t, writes(rec.take()), "the route is not sent")
		s, _ := d.Status(vppmodel.RouteKey(0, netip.MustParsePrefix("10.5.0.0/16")))
		assert.Equal(t, vppdriver.StatePending, s.State)
		assert.Equal(t, []string{vppmodel.InterfaceKey("a")}, s.PendingOn)
		s, _ = d.Status(vppmodel.InterfaceKey("a"))
		assert.Equal(t, vppdriver.StateFailed, s.State)

		time.Sleep(cfg.RetryInitial)
		synctest.Wait()
		waitConfigured(t, d, 2)
		assert.Contains(t, rec.take(), "add route 0 10.5.0.0/16")
		require.NoError(t, d.CheckInvariants())
	})
}

// TestRetry: a create that fails with a retriable retval is retried with
// exponential backoff (RetryInitial doubling up to RetryMax, exactly: fake
// time) until it succeeds; a permanent failure is not retried.
func TestRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vpp := vppsim.New(vppsim.Config{})
		var fails atomic.Int32
		fails.Store(4)
		vpp.SetInterceptor(func(req api.Message) (int32, bool) {
			if _, ok := req.(*interfaces.CreateLoopback); ok && fails.Add(-1) >= 0 {
				return -1, true // UNSPECIFIED
			}
			return 0, false
		})
		cfg := testCfg()
		cfg.RetryInitial, cfg.RetryMax = time.Second, 3*time.Second
		cfg.HealthInterval = time.Hour
		d := startDriver(t, vpp, cfg)
		synctest.Wait()
		require.True(t, d.Connected())

		key := vppmodel.InterfaceKey("flaky")
		start := time.Now()
		commit(t, d, controller.CommitUpdate, kv(t, loop("flaky", true, 0)))
		// Attempt n fails and schedules attempt n+1 after 1s, 2s, 3s (max).
		for n, wait := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second} {
			synctest.Wait()
			s, ok := d.Status(key)
			require.True(t, ok)
			require.Equal(t, vppdriver.StateFailed, s.State, s.String())
			assert.Equal(t, n+1, s.Attempts)
			assert.Equal(t, wait, time.Until(s.NextRetry), "attempt %d", n+1)
			var ve *vppdriver.VPPError
			require.ErrorAs(t, s.Err, &ve)
			assert.Equal(t, "create_loopback", ve.Request)
			time.Sleep(wait)
		}
		synctest.Wait()
		s, _ := d.Status(key)
		require.Equal(t, vppdriver.StateConfigured, s.State, s.String())
		assert.Equal(t, 9*time.Second, time.Since(start))
		assert.Equal(t, int32(-1), fails.Load())

		// Permanent: VPP rejects the value.
		vpp.SetInterceptor(func(req api.Message) (int32, bool) {
			if _, ok := req.(*ip.IPRouteAddDel); ok {
				return -7, true // INVALID_VALUE
			}
			return 0, false
		})
		rt := route(0, "10.7.0.0/16", via("flaky", "10.0.0.9"))
		rkey, _ := vppmodel.KeyOf(rt)
		commit(t, d, controller.CommitUpdate, kv(t, rt))
		s, _ = d.Status(rkey)
		require.Equal(t, vppdriver.StateFailed, s.State, s.String())
		assert.True(t, s.NextRetry.IsZero())
		assert.False(t, vppdriver.IsRetriable(s.Err))
		assert.ErrorIs(t, s.Err, api.INVALID_VALUE)
		time.Sleep(time.Hour)
		synctest.Wait()
		s, _ = d.Status(rkey)
		assert.Equal(t, 1, s.Attempts, "not retried")
	})
}

// TestRestartMidBulk: VPP restarts in the middle of a bulk apply; after the
// driver reconnects, VPP's tables equal the desired state.
func TestRestartMidBulk(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	var n atomic.Int32
	vpp.SetInterceptor(func(req api.Message) (int32, bool) {
		if _, ok := req.(*ip.IPRouteAddDel); ok && n.Add(1) == 700 {
			vpp.Restart()
		}
		return 0, false
	})
	cfg := testCfg()
	cfg.RequestTimeout = 300 * time.Millisecond
	d := startDriver(t, vpp, cfg)
	const routes = 2000
	msgs := []any{&vppmodel.VrfTable{Id: 3}, loop("up", true, 0, "10.0.0.1/24"), loop("v3", true, 3, "10.3.0.1/24")}
	values := kv(t, msgs[0].(*vppmodel.VrfTable), msgs[1].(*vppmodel.Interface), msgs[2].(*vppmodel.Interface))
	for i := range routes {
		dst := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 8), byte(i), 0}), 24)
		r := route(0, dst.String(), via("up", "10.0.0.2"))
		if i%2 == 1 {
			r = route(3, dst.String(), via("v3", "10.3.0.2"))
		}
		for k, v := range kv(t, r) {
			values[k] = v
		}
	}
	commit(t, d, controller.CommitResync, values)
	waitConfigured(t, d, len(values))
	require.Equal(t, uint64(1), vpp.Stats().Restarts)

	s := vpp.Snapshot()
	assert.Len(t, s.Routes, routes)
	assert.Contains(t, s.Tables, vppsim.Table{ID: 3, Name: "vsk:"})
	for _, r := range s.Routes {
		want := values[vppmodel.RouteKey(r.Table, r.Prefix)]
		require.NotNil(t, want, "unexpected route %v", r)
	}
	up, ok := ifaceByTag(s, "vsk:up")
	require.True(t, ok)
	assert.Equal(t, pfxs("10.0.0.1/24"), up.Addresses)
}

// TestIncompatibleMessage: a VPP without ip_route_add_del is reported, the
// missing message named, and nothing is half-applied.
func TestIncompatibleMessage(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{Hide: []string{"ip_route_add_del"}})
	d := startDriver(t, vpp, testCfg())
	require.Eventually(t, d.Connected, 10*time.Second, 5*time.Millisecond)
	err := d.Compatibility()
	require.ErrorIs(t, err, vppdriver.ErrIncompatible)
	assert.Contains(t, err.Error(), "ip_route_add_del_b8ecfe0d")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = d.Commit(ctx, &controller.Commit{Kind: controller.CommitUpdate, Values: kv(t, loop("x", true, 0))})
	require.ErrorIs(t, err, vppdriver.ErrIncompatible)
	s, _ := d.Status(vppmodel.InterfaceKey("x"))
	assert.Equal(t, vppdriver.StateFailed, s.State)
	assert.ErrorIs(t, s.Err, vppdriver.ErrIncompatible)
	assert.Len(t, vpp.Snapshot().Interfaces, 1, "only local0")
}

// TestCommitInvalid rejects bad keys and values, each as a
// controller.KeyError wrapping ErrInvalidValue: the key is Failed with the
// error, not retried, and counted (no VPP needed).
func TestCommitInvalid(t *testing.T) {
	d, err := vppdriver.New(func() adapter.VppAPI { return nil }, vppdriver.Config{})
	require.NoError(t, err)
	tests := []struct {
		name   string
		values controller.KeyValuePairs
	}{
		{"wrong key", controller.KeyValuePairs{"vpp/interface/b": loop("a", true, 0)}},
		{"bad address", kv0(loop("a", true, 0, "10.0.0.1"))},
		{"host bits", controller.KeyValuePairs{"vpp/route/0/10.0.0.1/8": route(0, "10.0.0.1/8", via("a", ""))}},
		{"no paths", kv0(route(0, "10.0.0.0/8"))},
		{"family mismatch", kv0(route(0, "10.0.0.0/8", via("a", "fd00::1")))},
		{"af_packet without host", kv0(&vppmodel.Interface{Name: "p", Type: vppmodel.Interface_AF_PACKET})},
		{"table 0", controller.KeyValuePairs{"vpp/vrf/ipv4/0": &vppmodel.VrfTable{}}},
		{"unknown kind", controller.KeyValuePairs{"vpp/bridge/x": &vppmodel.VrfTable{Id: 3}}},
	}
	keys := map[string]bool{}
	for i, tc := range tests {
		for k := range tc.values {
			keys[k] = true
		}
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.Commit(context.Background(), &controller.Commit{Kind: controller.CommitUpdate, Values: tc.values})
			require.ErrorIs(t, err, vppdriver.ErrInvalidValue)
			require.True(t, controller.IsPermanent(err))
			kes := controller.KeyErrors(err)
			require.Len(t, kes, 1)
			for k := range tc.values {
				assert.Equal(t, k, kes[0].Key)
				s, ok := d.Status(k)
				require.True(t, ok)
				assert.Equal(t, vppdriver.StateFailed, s.State)
				assert.ErrorIs(t, s.Err, vppdriver.ErrInvalidValue)
				assert.Equal(t, 0, s.Attempts)
				assert.True(t, s.NextRetry.IsZero())
				assert.True(t, proto.Equal(tc.values[k], d.Desired()[k]), "the invalid value is desired")
				assert.NotContains(t, d.Applied(), k)
			}
			st := d.Stats()
			assert.Equal(t, uint64(i+1), st.InvalidRejected)
			assert.Equal(t, len(keys), st.Invalid)
			assert.Equal(t, len(keys), st.Failed)
			assert.Equal(t, len(keys), st.Keys)
		})
	}
	// Deleting the keys clears them.
	del := controller.KeyValuePairs{}
	for k := range d.Statuses() {
		del[k] = nil
	}
	_, err = d.Commit(context.Background(), &controller.Commit{Kind: controller.CommitUpdate, Values: del})
	require.NoError(t, err)
	assert.Empty(t, d.Statuses())
	assert.Empty(t, d.Desired())
	assert.Zero(t, d.Stats().Keys)
}

// kv0 stores m under the key it would have if it were valid.
func kv0(m proto.Message) controller.KeyValuePairs {
	switch v := m.(type) {
	case *vppmodel.Interface:
		return controller.KeyValuePairs{vppmodel.InterfaceKey(v.GetName()): m}
	case *vppmodel.Route:
		return controller.KeyValuePairs{vppmodel.RouteKey(v.GetVrf(), netip.MustParsePrefix(v.GetDstNetwork())): m}
	}
	return nil
}

// TestNotConnected: commits before Run are kept and applied on connect.
func TestNotConnected(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	vpp.Stop()
	d := startDriver(t, vpp, testCfg())
	commit(t, d, controller.CommitResync, kv(t, loop("early", true, 0, "10.0.0.1/24")))
	s, _ := d.Status(vppmodel.InterfaceKey("early"))
	assert.Equal(t, vppdriver.StatePending, s.State)
	assert.False(t, d.Connected())
	vpp.Start()
	waitConfigured(t, d, 1)
	_, ok := ifaceByTag(vpp.Snapshot(), "vsk:early")
	assert.True(t, ok)
}

// TestCommitCancelled: a commit whose context ends mid-apply stops sending
// but reads the replies of what it sent, so nothing is orphaned; the
// half-created interface is re-created by a retry.
func TestCommitCancelled(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	d := startDriver(t, vpp, testCfg())
	require.Eventually(t, d.Connected, 10*time.Second, 5*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	vpp.SetInterceptor(func(req api.Message) (int32, bool) {
		if _, ok := req.(*interfaces.CreateLoopback); ok {
			cancel() // the caller gives up while VPP creates the loopback
		}
		return 0, false
	})
	values := kv(t, loop("a", true, 0, "10.0.0.1/24"), route(0, "10.5.0.0/16", via("a", "10.0.0.2")))
	_, err := d.Commit(ctx, &controller.Commit{Kind: controller.CommitUpdate, Values: values})
	require.NoError(t, err, "healed by the driver")
	s, _ := d.Status(vppmodel.InterfaceKey("a"))
	assert.Equal(t, vppdriver.StateFailed, s.State)
	assert.ErrorIs(t, s.Err, context.Canceled)
	waitConfigured(t, d, 2)
	assert.True(t, d.Connected())
	snap := vpp.Snapshot()
	assert.Len(t, snap.Interfaces, 2, "local0 and one loopback: none orphaned")
	assert.Equal(t, 1, countTag(snap, "vsk:a"))
	assert.Equal(t, uint64(0), vpp.Stats().Restarts)
}

// TestResyncWithInvalidValue: an invalid value in a resync is reported for
// its key, and the key's old object does not stay as if desired.
func TestResyncWithInvalidValue(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	d := startDriver(t, vpp, testCfg())
	commit(t, d, controller.CommitResync, kv(t, loop("keep", true, 0, "10.0.0.1/24"), loop("bad", true, 0, "10.0.1.1/24")))
	waitConfigured(t, d, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	values := kv(t, loop("keep", true, 0, "10.0.0.1/24"))
	values[vppmodel.InterfaceKey("bad")] = loop("bad", true, 0, "not-an-address")
	_, err := d.Commit(ctx, &controller.Commit{Kind: controller.CommitResync, Values: values})
	require.ErrorIs(t, err, vppdriver.ErrInvalidValue)
	require.Len(t, controller.KeyErrors(err), 1)
	assert.Equal(t, vppmodel.InterfaceKey("bad"), controller.KeyErrors(err)[0].Key)
	s, _ := d.Status(vppmodel.InterfaceKey("keep"))
	assert.Equal(t, vppdriver.StateConfigured, s.State)
	s, _ = d.Status(vppmodel.InterfaceKey("bad"))
	assert.Equal(t, vppdriver.StateFailed, s.State)
	snap := vpp.Snapshot()
	_, ok := ifaceByTag(snap, "vsk:keep")
	assert.True(t, ok)
	_, ok = ifaceByTag(snap, "vsk:bad")
	assert.False(t, ok)
}

// TestRestartIdle: VPP restarts while the driver is idle; the health probe
// notices, the driver reconnects, reads the empty VPP back and re-applies.
func TestRestartIdle(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	d := startDriver(t, vpp, testCfg())
	state := kv(t, &vppmodel.VrfTable{Id: 9}, loop("a", true, 9, "10.0.0.1/24"), route(9, "10.8.0.0/16", via("a", "10.0.0.2")))
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	want := vpp.Snapshot()
	vpp.Restart()
	require.Eventually(t, func() bool {
		s := vpp.Snapshot()
		_, ok := routeIn(s, 9, "10.8.0.0/16")
		return ok && countTag(s, "vsk:a") == 1
	}, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, want, vpp.Snapshot())
}

// TestVrfLabelChange: VPP keeps the name a table was created with (a
// second add with another name changes nothing, see the traces), so a new
// label re-creates the table and what is in it.
func TestVrfLabelChange(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	d := startDriver(t, vpp, testCfg())
	state := kv(t, &vppmodel.VrfTable{Id: 7, Label: "old"}, loop("a", true, 7, "10.0.0.1/24"), route(7, "10.5.0.0/16", via("a", "10.0.0.2")))
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	commit(t, d, controller.CommitUpdate, kv(t, &vppmodel.VrfTable{Id: 7, Label: "new"}))
	waitConfigured(t, d, len(state))
	s := vpp.Snapshot()
	assert.Contains(t, s.Tables, vppsim.Table{ID: 7, Name: "vsk:new"})
	_, ok := routeIn(s, 7, "10.5.0.0/16")
	assert.True(t, ok)
	a, _ := ifaceByTag(s, "vsk:a")
	assert.Equal(t, uint32(7), a.Vrf)

	before := vpp.Stats().Writes
	commit(t, d, controller.CommitResync, kv(t, &vppmodel.VrfTable{Id: 7, Label: "new"}, loop("a", true, 7, "10.0.0.1/24"),
		route(7, "10.5.0.0/16", via("a", "10.0.0.2"))))
	waitConfigured(t, d, len(state))
	assert.Equal(t, before, vpp.Stats().Writes, "read back as configured")
}

// TestReplyDeadline: a VPP that stops answering (the connection stays up)
// is given RequestTimeout per window of replies; then the driver drops the
// connection, reconnects and applies the state.
func TestReplyDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vpp := vppsim.New(vppsim.Config{})
		var stalls atomic.Int32
		vpp.SetInterceptor(func(req api.Message) (int32, bool) {
			if _, ok := req.(*ip.IPRouteAddDel); ok && stalls.Add(1) == 1 {
				time.Sleep(time.Minute) // VPP busy: the reply comes far too late
			}
			return 0, false
		})
		cfg := testCfg()
		cfg.RequestTimeout, cfg.HealthInterval = 3*time.Second, time.Hour
		d := startDriver(t, vpp, cfg)
		synctest.Wait()
		require.True(t, d.Connected())

		start := time.Now()
		state := kv(t, loop("a", true, 0, "10.0.0.1/24"), route(0, "10.5.0.0/16", via("a", "10.0.0.2")))
		commit(t, d, controller.CommitUpdate, state) // the transport failure is healed by the driver
		assert.Equal(t, 3*time.Second, time.Since(start), "the deadline of the stalled window")
		s, _ := d.Status(vppmodel.RouteKey(0, netip.MustParsePrefix("10.5.0.0/16")))
		assert.NotEqual(t, vppdriver.StateConfigured, s.State)

		time.Sleep(2 * time.Minute) // the stalled reply, the reconnect, the resync
		synctest.Wait()
		st := d.Stats()
		assert.Equal(t, uint64(2), st.Connects)
		assert.True(t, st.Connected)
		assert.Equal(t, 2, st.Configured)
		_, ok := routeIn(vpp.Snapshot(), 0, "10.5.0.0/16")
		assert.True(t, ok)
	})
}

// TestConnectBeforeFirstResync: a driver that starts on a populated VPP
// (an agent restart) and connects before the first resync commit removes
// nothing: it does not know the desired state yet. The resync commit then
// finds everything in place and sends nothing that changes VPP.
func TestConnectBeforeFirstResync(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	state := kv(t, &vppmodel.VrfTable{Id: 9}, loop("a", true, 9, "10.0.0.1/24"), route(9, "10.8.0.0/16", via("a", "10.0.0.2")),
		&vppmodel.Nat44Global{Forwarding: true}, &vppmodel.Nat44Interface{Interface: "a", Inside: true})
	first, err := vppdriver.New(func() adapter.VppAPI { return vpp.NewAdapter() }, testCfg())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	commit(t, first, controller.CommitResync, state)
	waitConfigured(t, first, len(state))
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	want := vpp.Snapshot()

	writes := vpp.Stats().Writes
	d := startDriver(t, vpp, testCfg())
	require.Eventually(t, func() bool { return d.Stats().Connected }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, writes, vpp.Stats().Writes, "connected, no desired state yet: nothing removed")
	assert.Equal(t, want, vpp.Snapshot())
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	assert.Equal(t, writes, vpp.Stats().Writes, "everything was in place")
	assert.Equal(t, want, vpp.Snapshot())

	// From then on a resync removes what is not desired.
	commit(t, d, controller.CommitResync, kv(t, &vppmodel.VrfTable{Id: 9}))
	waitConfigured(t, d, 1)
	_, ok := ifaceByTag(vpp.Snapshot(), "vsk:a")
	assert.False(t, ok)
}

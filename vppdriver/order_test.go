package vppdriver_test

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/api"
	interfaces "go.fd.io/govpp/binapi/interface"
	"go.fd.io/govpp/binapi/ip"
	"go.fd.io/govpp/binapi/nat44_ed"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// recorder records the write requests a VPP stand-in receives, in the
// order it handles them, as short descriptions ("del route 7 10.5.0.0/16").
type recorder struct {
	mu   sync.Mutex
	reqs []string
}

func record(vpp *vppsim.VPP) *recorder {
	r := &recorder{}
	vpp.SetInterceptor(func(req api.Message) (int32, bool) {
		r.mu.Lock()
		r.reqs = append(r.reqs, describe(req))
		r.mu.Unlock()
		return 0, false
	})
	return r
}

// take returns the requests recorded so far and forgets them.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

func describe(req api.Message) string {
	switch m := req.(type) {
	case *ip.IPRouteAddDel:
		return fmt.Sprintf("%s route %d %s", addDel(m.IsAdd), m.Route.TableID, vppconv.PrefixOf(m.Route.Prefix))
	case *ip.IPTableAddDel:
		return fmt.Sprintf("%s table %d", addDel(m.IsAdd), m.Table.TableID)
	case *interfaces.DeleteLoopback:
		return fmt.Sprintf("del loopback %d", m.SwIfIndex)
	case *interfaces.CreateLoopback:
		return "add loopback"
	case *nat44_ed.Nat44InterfaceAddDelFeature:
		return fmt.Sprintf("%s nat44 feature %d", addDel(m.IsAdd), m.SwIfIndex)
	case *nat44_ed.Nat44AddDelIdentityMapping:
		return fmt.Sprintf("%s nat44 identity %d:%d", addDel(m.IsAdd), m.SwIfIndex, m.Port)
	case *nat44_ed.Nat44EdPluginEnableDisable:
		if m.Enable {
			return "add nat44"
		}
		return "del nat44"
	}
	return req.GetMessageName()
}

func addDel(add bool) string {
	if add {
		return "add"
	}
	return "del"
}

// before asserts that every request in first comes before every request
// in then, all of them present.
func assertBefore(t *testing.T, reqs []string, first, then []string) {
	t.Helper()
	last := -1
	for _, f := range first {
		i := slices.Index(reqs, f)
		require.GreaterOrEqual(t, i, 0, "%q not sent in %v", f, reqs)
		last = max(last, i)
	}
	for _, n := range then {
		i := slices.Index(reqs, n)
		require.GreaterOrEqual(t, i, 0, "%q not sent in %v", n, reqs)
		assert.Greater(t, i, last, "%q must come after %v: %v", n, first, reqs)
	}
}

// TestDeleteOrder checks the order of the requests VPP receives when
// objects go: what is applied on top of an object (routes through an
// interface, NAT44 features and mappings on it, routes in a table) is
// deleted before it, an interface before its VRF table, and the NAT44
// plugin last. The stand-in would accept any order (deleting an interface
// drops its routes), so only the recorded requests show it.
func TestDeleteOrder(t *testing.T) {
	state := func() controller.KeyValuePairs {
		return kv(t,
			&vppmodel.VrfTable{Id: 7},
			loop("a", true, 7, "10.0.0.1/24"),
			loop("b", true, 0, "10.9.0.1/24"),
			route(7, "10.5.0.0/16", via("a", "10.0.0.2")),
			route(0, "10.6.0.0/16", via("b", "10.9.0.2"), via("a", "10.0.0.3")),
			&vppmodel.Nat44Global{},
			&vppmodel.Nat44Interface{Interface: "a", Inside: true},
			&vppmodel.Nat44IdentityMapping{Protocol: vppmodel.Nat44Protocol_UDP, Interface: "a", Port: 4789},
		)
	}
	swOf := func(vpp *vppsim.VPP, name string) uint32 {
		a, ok := ifaceByTag(vpp.Snapshot(), "vsk:"+name)
		require.True(t, ok)
		return a.SwIfIndex
	}
	swA := func(vpp *vppsim.VPP) uint32 { return swOf(vpp, "a") }

	t.Run("resync to nothing", func(t *testing.T) {
		vpp := vppsim.New(vppsim.Config{})
		rec := record(vpp)
		d := startDriver(t, vpp, testCfg())
		commit(t, d, controller.CommitResync, state())
		waitConfigured(t, d, len(state()))
		sw, swB := swA(vpp), swOf(vpp, "b") // creation order follows map order
		rec.take()
		commit(t, d, controller.CommitResync, controller.KeyValuePairs{})
		waitConfigured(t, d, 0)
		reqs := rec.take()
		loopA, loopB := fmt.Sprintf("del loopback %d", sw), fmt.Sprintf("del loopback %d", swB)
		feature, identity := fmt.Sprintf("del nat44 feature %d", sw), fmt.Sprintf("del nat44 identity %d:4789", sw)
		assertBefore(t, reqs, []string{"del route 7 10.5.0.0/16", "del route 0 10.6.0.0/16", feature, identity}, []string{loopA, loopB})
		assertBefore(t, reqs, []string{loopA}, []string{"del table 7"})
		assertBefore(t, reqs, []string{feature, identity}, []string{"del nat44"})
		assert.Len(t, vpp.Snapshot().Interfaces, 1)
	})

	t.Run("interface deleted, dependents still desired", func(t *testing.T) {
		vpp := vppsim.New(vppsim.Config{})
		rec := record(vpp)
		d := startDriver(t, vpp, testCfg())
		commit(t, d, controller.CommitResync, state())
		waitConfigured(t, d, len(state()))
		sw := swA(vpp)
		rec.take()
		commit(t, d, controller.CommitUpdate, controller.KeyValuePairs{vppmodel.InterfaceKey("a"): nil})
		reqs := rec.take()
		loopA := fmt.Sprintf("del loopback %d", sw)
		assertBefore(t, reqs, []string{"del route 7 10.5.0.0/16", "del route 0 10.6.0.0/16",
			fmt.Sprintf("del nat44 feature %d", sw), fmt.Sprintf("del nat44 identity %d:4789", sw)}, []string{loopA})
		assert.NotContains(t, reqs, "del table 7", "the table stays desired")
		assert.NotContains(t, reqs, "del nat44")
		for _, k := range []string{vppmodel.RouteKey(7, netip.MustParsePrefix("10.5.0.0/16")), vppmodel.Nat44InterfaceKey("a")} {
			s, _ := d.Status(k)
			assert.Equal(t, []string{vppmodel.InterfaceKey("a")}, s.PendingOn, k)
		}
	})

	t.Run("table deleted", func(t *testing.T) {
		vpp := vppsim.New(vppsim.Config{})
		rec := record(vpp)
		d := startDriver(t, vpp, testCfg())
		commit(t, d, controller.CommitResync, state())
		waitConfigured(t, d, len(state()))
		sw := swA(vpp)
		rec.take()
		commit(t, d, controller.CommitUpdate, controller.KeyValuePairs{vppmodel.VrfTableKey(vppmodel.VrfTable_IPV4, 7): nil})
		reqs := rec.take()
		assertBefore(t, reqs, []string{"del route 7 10.5.0.0/16"}, []string{fmt.Sprintf("del loopback %d", sw)})
		assertBefore(t, reqs, []string{fmt.Sprintf("del loopback %d", sw)}, []string{"del table 7"})
	})
}

// TestRemovalWaitsForUpdates: an object that goes while another one VPP
// holds on top of it is changed in place to stop referring to it waits
// for that change (the route moves to the other interface first, then the
// old interface goes: no moment without the route, no route deleted); if
// the change fails, the removal is not sent (VPP could refuse it, as it
// refuses to delete an ACL still applied) and both are retried.
func TestRemovalWaitsForUpdates(t *testing.T) {
	state := func() controller.KeyValuePairs {
		return kv(t, loop("a", true, 0, "10.0.0.1/24"), loop("b", true, 0, "10.9.0.1/24"),
			route(0, "10.6.0.0/16", via("a", "10.0.0.2")))
	}
	move := controller.KeyValuePairs{vppmodel.InterfaceKey("a"): nil}
	for k, v := range kv(t, route(0, "10.6.0.0/16", via("b", "10.9.0.2"))) {
		move[k] = v
	}

	t.Run("update first", func(t *testing.T) {
		vpp := vppsim.New(vppsim.Config{})
		rec := record(vpp)
		d := startDriver(t, vpp, testCfg())
		commit(t, d, controller.CommitResync, state())
		waitConfigured(t, d, 3)
		sw, _ := ifaceByTag(vpp.Snapshot(), "vsk:a")
		rec.take()
		commit(t, d, controller.CommitUpdate, move)
		waitConfigured(t, d, 2)
		assert.Equal(t, []string{"add route 0 10.6.0.0/16", fmt.Sprintf("del loopback %d", sw.SwIfIndex)}, writes(rec.take()))
		require.NoError(t, d.CheckInvariants())
	})

	t.Run("the update fails", func(t *testing.T) {
		vpp := vppsim.New(vppsim.Config{})
		d := startDriver(t, vpp, testCfg())
		commit(t, d, controller.CommitResync, state())
		waitConfigured(t, d, 3)
		sw, _ := ifaceByTag(vpp.Snapshot(), "vsk:a")
		var mu sync.Mutex
		var reqs []string
		failed := false
		vpp.SetInterceptor(func(req api.Message) (int32, bool) {
			mu.Lock()
			defer mu.Unlock()
			reqs = append(reqs, describe(req))
			if _, ok := req.(*ip.IPRouteAddDel); ok && !failed {
				failed = true
				return -1, true
			}
			return 0, false
		})
		commit(t, d, controller.CommitUpdate, move)
		mu.Lock()
		assert.Equal(t, []string{"add route 0 10.6.0.0/16"}, writes(slices.Clone(reqs)), "the loopback stays while the route uses it")
		mu.Unlock()
		waitConfigured(t, d, 2)
		require.Eventually(t, func() bool {
			_, ok := ifaceByTag(vpp.Snapshot(), "vsk:a")
			return !ok
		}, 10*time.Second, 5*time.Millisecond)
		mu.Lock()
		assert.Equal(t, []string{"add route 0 10.6.0.0/16", "add route 0 10.6.0.0/16", fmt.Sprintf("del loopback %d", sw.SwIfIndex)}, writes(slices.Clone(reqs)))
		mu.Unlock()
		require.NoError(t, d.CheckInvariants())
	})
}

package bgproutes_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/render/bgproutes"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// fakeLearned is a learned-route source a test sets.
type fakeLearned struct {
	mu     sync.Mutex
	routes []bgp.LearnedRoute
	sig    bgp.Signaler
}

func (f *fakeLearned) LearnedRoutes() []bgp.LearnedRoute {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bgp.LearnedRoute(nil), f.routes...)
}

func (f *fakeLearned) set(routes ...bgp.LearnedRoute) {
	f.mu.Lock()
	f.routes = routes
	f.mu.Unlock()
	f.sig.Event(nil)
}

func lr(prefix, nh string) bgp.LearnedRoute {
	return bgp.LearnedRoute{Prefix: netip.MustParsePrefix(prefix), NextHop: netip.MustParseAddr(nh), LocalASN: 65001,
		Peer: netip.MustParseAddr("127.0.0.2")}
}

// TestHandler: learned routes become VPP routes via the uplink, committed
// by the loop; reserved prefixes and mixed families are left out; a
// withdrawal deletes; a resync rebuilds.
func TestHandler(t *testing.T) {
	src := &fakeLearned{sig: bgp.NewSignaler()}
	sb := &controllertest.Southbound{}
	loop, err := controller.New(nil, sb, controller.Config{})
	require.NoError(t, err)
	h, err := bgproutes.New(src, src.sig, loop, bgproutes.Config{Uplink: "uplink",
		Reserved: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}})
	require.NoError(t, err)
	require.NoError(t, loop.Register(h))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = loop.Run(ctx) })
	wg.Go(func() { _ = h.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	require.NoError(t, loop.PushEvent(controller.NewDBResync()))

	committed := func() map[string]string {
		out := map[string]string{}
		for k, v := range sb.State() {
			r := v.(*vppmodel.Route)
			out[k] = r.GetPaths()[0].GetOutgoingInterface() + " " + r.GetPaths()[0].GetNextHop()
		}
		return out
	}
	src.set(lr("0.0.0.0/0", "192.168.16.254"), lr("10.1.3.0/24", "192.168.16.254"), lr("2001:db8::/32", "192.168.16.254"),
		lr("198.51.100.0/24", "192.168.16.253"))
	require.Eventually(t, func() bool { return len(committed()) == 2 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, map[string]string{
		vppmodel.RouteKey(0, netip.MustParsePrefix("0.0.0.0/0")):       "uplink 192.168.16.254",
		vppmodel.RouteKey(0, netip.MustParsePrefix("198.51.100.0/24")): "uplink 192.168.16.253",
	}, committed(), "a route within the cluster's range and one with a next hop of the other family are left out")
	assert.Equal(t, 2, h.Stats().Left)

	src.set(lr("198.51.100.0/24", "192.168.16.252"))
	require.Eventually(t, func() bool {
		c := committed()
		return len(c) == 1 && c[vppmodel.RouteKey(0, netip.MustParsePrefix("198.51.100.0/24"))] == "uplink 192.168.16.252"
	}, 10*time.Second, 5*time.Millisecond, "the withdrawn route deleted, the changed one updated: %v", committed())

	// A burst coalesces: far fewer events than signals.
	for i := range 200 {
		src.set(lr("198.51.100.0/24", "192.168.16."+[]string{"1", "2"}[i%2]))
	}
	src.set()
	require.Eventually(t, func() bool { return len(committed()) == 0 }, 10*time.Second, 5*time.Millisecond)
	assert.Less(t, h.Stats().Events, uint64(150), "signals roll up into queued events")

	src.set(lr("0.0.0.0/0", "192.168.16.254"))
	require.Eventually(t, func() bool { return len(committed()) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, loop.PushEvent(controller.NewDBResync()))
	require.Eventually(t, func() bool { return loop.Stats().Processed >= 2 }, 10*time.Second, 5*time.Millisecond)
	assert.Len(t, committed(), 1, "a resync keeps them")
	require.ErrorIs(t, h.Run(ctx), bgproutes.ErrAlreadyRunning)
}

func TestNewChecks(t *testing.T) {
	_, err := bgproutes.New(nil, bgp.Signaler{}, nil, bgproutes.Config{Reserved: []netip.Prefix{{}}})
	require.Error(t, err)
	for _, s := range []string{"source is nil", "Signaler", "event loop is nil", "Reserved[0]"} {
		assert.ErrorContains(t, err, s)
	}
}

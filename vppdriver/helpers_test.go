package vppdriver_test

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/core"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// testCfg keeps timers short so that tests and failure recovery are quick.
func testCfg() vppdriver.Config {
	return vppdriver.Config{
		RequestTimeout:    2 * time.Second,
		RetryInitial:      10 * time.Millisecond,
		RetryMax:          100 * time.Millisecond,
		ReconnectInterval: 20 * time.Millisecond,
		HealthInterval:    50 * time.Millisecond,
	}
}

// startDriver runs a driver against vpp until the test ends.
func startDriver(t testing.TB, vpp *vppsim.VPP, cfg vppdriver.Config) *vppdriver.Driver {
	t.Helper()
	d, err := vppdriver.New(func() adapter.VppAPI { return vpp.NewAdapter() }, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := d.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return d
}

func kv(t testing.TB, msgs ...proto.Message) controller.KeyValuePairs {
	t.Helper()
	out := controller.KeyValuePairs{}
	for _, m := range msgs {
		k, err := vppmodel.KeyOf(m)
		require.NoError(t, err)
		out[k] = m
	}
	return out
}

func commit(t testing.TB, d *vppdriver.Driver, kind controller.CommitKind, values controller.KeyValuePairs) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := d.Commit(ctx, &controller.Commit{Kind: kind, Values: values})
	require.NoError(t, err)
}

// waitConfigured waits until every desired key is configured.
func waitConfigured(t testing.TB, d *vppdriver.Driver, n int) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st := d.Statuses()
		require.Len(c, st, n)
		for k, s := range st {
			require.Equal(c, vppdriver.StateConfigured, s.State, "%s: %v", k, s)
		}
	}, 20*time.Second, 5*time.Millisecond)
}

// foreign runs requests on its own connection to the VPP (another agent).
func foreign(t testing.TB, vpp *vppsim.VPP, reqs ...api.Message) []api.Message {
	t.Helper()
	conn, err := core.Connect(vpp.NewAdapter())
	require.NoError(t, err)
	defer conn.Disconnect()
	var out []api.Message
	for _, r := range reqs {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := conn.NewStream(ctx)
		require.NoError(t, err)
		require.NoError(t, st.SendMsg(r))
		rep, err := st.RecvMsg()
		require.NoError(t, err)
		_ = st.Close()
		cancel()
		out = append(out, rep)
	}
	return out
}

func loop(name string, up bool, vrf uint32, addrs ...string) *vppmodel.Interface {
	return &vppmodel.Interface{Name: name, Type: vppmodel.Interface_LOOPBACK, Enabled: up, Vrf: vrf, IpAddresses: addrs}
}

func route(vrf uint32, dst string, paths ...*vppmodel.Path) *vppmodel.Route {
	return &vppmodel.Route{Vrf: vrf, DstNetwork: dst, Paths: paths}
}

func via(iface, nh string) *vppmodel.Path {
	return &vppmodel.Path{OutgoingInterface: iface, NextHop: nh}
}

// ifaceByTag finds an interface of the snapshot by tag.
func ifaceByTag(s vppsim.Snapshot, tag string) (vppsim.Interface, bool) {
	for _, i := range s.Interfaces {
		if i.Tag == tag {
			return i, true
		}
	}
	return vppsim.Interface{}, false
}

func routeIn(s vppsim.Snapshot, table uint32, dst string) (vppsim.Route, bool) {
	p := netip.MustParsePrefix(dst)
	for _, r := range s.Routes {
		if r.Table == table && r.Prefix == p {
			return r, true
		}
	}
	return vppsim.Route{}, false
}

func pfxs(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

type atomicBool = atomic.Bool

// newRecordedDriver runs a driver against vpp until the test ends; rec
// records the requests it sends.
func newRecordedDriver(t testing.TB, vpp *vppsim.VPP, rec *vppdrivertest.RequestRecorder) *vppdriver.Driver {
	t.Helper()
	d, err := vppdriver.New(func() adapter.VppAPI { return rec.Wrap(vpp.NewAdapter()) }, testCfg())
	require.NoError(t, err)
	runDriver(t, d)
	return d
}

// runDriver runs d until the test ends.
func runDriver(t testing.TB, d *vppdriver.Driver) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := d.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

package nodesync_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
)

// loopWithNodeSync runs a real event loop with a NodeSync (Run not
// started) registered as its only handler. Call it inside a synctest
// bubble. stop cancels the loop's context and returns what its Run
// returned.
func loopWithNodeSync(t *testing.T, db nodesync.ClusterWideDB, cfg nodesync.Config, loopCfg ...controller.Config) (loop *controller.Loop, ns *nodesync.NodeSync, stop func() error) {
	t.Helper()
	var lc controller.Config
	if len(loopCfg) > 0 {
		lc = loopCfg[0]
	}
	loop, err := controller.New(nil, &controllertest.Southbound{}, lc)
	require.NoError(t, err)
	ns, err = nodesync.New("node-a", db, loop, cfg)
	require.NoError(t, err)
	require.NoError(t, loop.Register(ns))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	var stopped bool
	var runErr error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return loop, ns, stop
}

// firstRecord waits (polling in fake time) until the loop has processed an
// event and returns its record.
func firstRecord(t *testing.T, loop *controller.Loop) controller.Record {
	t.Helper()
	for loop.History().Len() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	return loop.History().First(1)[0]
}

// TestStartupResyncWithoutRun: an agent that forgets to call Run. The
// start-up resync fails within seconds (not after StartupTimeout, 2
// minutes by default) with an error that names nodesync and says that Run
// was not called.
func TestStartupResyncWithoutRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop, ns, stop := loopWithNodeSync(t, nodesynctest.NewMemDB(), nodesync.Config{})
		start := time.Now()
		require.NoError(t, loop.PushEvent(controller.NewDBResync()))
		rec := firstRecord(t, loop)
		took := rec.End.Sub(start)
		t.Logf("the start-up resync failed after %v: %v", took, rec.Err)
		require.ErrorIs(t, rec.Err, nodesync.ErrNotRunning)
		require.ErrorIs(t, rec.Err, nodesync.ErrNotReady, "it is also the not-ready error that callers check")
		assert.Contains(t, rec.Err.Error(), "nodesync: Run has not been called")
		assert.LessOrEqual(t, took, 5*time.Second, "detected within seconds")
		assert.Zero(t, ns.GetNodeID())
		require.ErrorIs(t, stop(), context.Canceled)
	})
}

// TestStartupResyncRunStartsLate: Run started shortly after the start-up
// resync began (the goroutines of an errgroup start in any order) is not
// a missing Run: the resync waits for the ID and succeeds.
func TestStartupResyncRunStartsLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop, ns, _ := loopWithNodeSync(t, nodesynctest.NewMemDB(), nodesync.Config{})
		require.NoError(t, loop.PushEvent(controller.NewDBResync()))
		time.Sleep(time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ns.Run(ctx) }()
		defer func() { cancel(); <-done }()
		rec := firstRecord(t, loop)
		require.NoError(t, rec.Err)
		assert.Equal(t, uint32(1), ns.GetNodeID())
	})
}

// TestStartupResyncHonoursLoopContext: the start-up resync waiting for the
// node ID (Run runs, the database is unreachable) ends when the loop's
// context for the event ends — ShutdownTimeout after the loop's own
// context, which lets an event in progress finish — instead of after
// StartupTimeout (2m).
func TestStartupResyncHonoursLoopContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop, ns, stop := loopWithNodeSync(t, nodesynctest.NewDisconnectedMemDB(), nodesync.Config{},
			controller.Config{ShutdownTimeout: time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ns.Run(ctx) }()
		defer func() { cancel(); <-done }()
		require.NoError(t, loop.PushEvent(controller.NewDBResync()))
		time.Sleep(10 * time.Second)
		start := time.Now()
		require.ErrorIs(t, stop(), context.Canceled)
		assert.LessOrEqual(t, time.Since(start), 2*time.Second, "the loop stops within its ShutdownTimeout")
		rec := firstRecord(t, loop)
		require.ErrorIs(t, rec.Err, context.Canceled)
		require.ErrorIs(t, rec.Err, nodesync.ErrNotReady)
		require.NotErrorIs(t, rec.Err, nodesync.ErrNotRunning)
	})
}

// ctxTxn is a transaction that carries an event's context, as the loop's
// do (see controller.ContextOf).
type ctxTxn struct {
	*controllertest.Txn
	ctx context.Context
}

func (t ctxTxn) Context() context.Context { return t.ctx }

// TestHandlersUseTheEventContext: the handlers' waits and DB requests end
// with the context of the event (CONTRIBUTING R6).
func TestHandlersUseTheEventContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	txn := ctxTxn{controllertest.NewTxn(), ctx}

	t.Run("start-up resync", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			db := nodesynctest.NewDisconnectedMemDB()
			h := launchHarness(t, db, "node-a", nodesync.Config{}, &controllertest.EventRecorder{})
			synctest.Wait() // Run waits for the connection
			start := time.Now()
			err := h.ns.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, txn)
			require.ErrorIs(t, err, context.Canceled)
			require.ErrorIs(t, err, nodesync.ErrNotReady)
			assert.Contains(t, err.Error(), "database not connected since", "it says what Run waits for")
			assert.Zero(t, time.Since(start))
		})
	})
	t.Run("publish node IPs", func(t *testing.T) {
		db := nodesynctest.NewMemDB()
		h := startHarness(t, db, "node-a", nodesync.Config{})
		h.resync(1)
		err := h.ns.PublishNodeIPsContext(ctx, nodesync.IPsWithNetworks{ipNet("192.168.16.1", "192.168.16.0/24")}, nodesync.IPv4)
		require.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, h.ns.GetAllNodes()["node-a"].VppIPAddresses, "nothing published")
		require.NoError(t, h.ns.PublishNodeIPsContext(context.Background(), nodesync.IPsWithNetworks{ipNet("192.168.16.1", "192.168.16.0/24")}, nodesync.IPv4))
		assert.Len(t, h.ns.GetAllNodes()["node-a"].VppIPAddresses, 1)
	})
	t.Run("releaser", func(t *testing.T) {
		db := nodesynctest.NewMemDB()
		seedNode(t, db, 1, "node-a")
		r, err := nodesync.NewReleaser(db, nodesync.Config{})
		require.NoError(t, err)
		del := &controller.KubeStateChange{Key: kubemodel.NodeKey("node-a"), Resource: kubemodel.NodeResource, PrevValue: kubeNode("node-a", nil)}
		_, err = r.Update(del, txn)
		require.ErrorIs(t, err, context.Canceled)
		require.Contains(t, db.Keys(), testPrefix+"node/node-a", "nothing released")
	})
}

// TestStartupResyncEndsWithRun: in an agent, Ctrl-C stops the producers
// (nodesync.Run) before the loop: the start-up resync waiting for the node
// ID ends at once when Run ends.
func TestStartupResyncEndsWithRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loop, ns, stop := loopWithNodeSync(t, nodesynctest.NewDisconnectedMemDB(), nodesync.Config{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ns.Run(ctx) }()
		require.NoError(t, loop.PushEvent(controller.NewDBResync()))
		time.Sleep(10 * time.Second)
		start := time.Now()
		cancel()
		<-done
		rec := firstRecord(t, loop)
		assert.Less(t, rec.End.Sub(start), time.Second, "the resync ends when Run ends")
		require.ErrorIs(t, rec.Err, nodesync.ErrNotReady)
		assert.ErrorContains(t, rec.Err, "Run ended")
		require.ErrorIs(t, stop(), context.Canceled)
	})
}

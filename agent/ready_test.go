package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/cniserver/cniservertest"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// TestWaitReady: WaitReady returns once the agent is ready, with the node
// ID known; an agent whose Run was never called is named within seconds,
// not waited for (issue 27, item 7: readiness was polled from
// Loop.Stats().StartupResyncDone, and a forgotten Run was a hang).
func TestWaitReady(t *testing.T) {
	cli := startEtcd(t, "node-1")
	t.Run("ready", func(t *testing.T) {
		n := startNodeWith(t, cli, "node-1", nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, n.agent.WaitReady(ctx))
		assert.NoError(t, n.agent.Ready())
		assert.NotZero(t, n.agent.NodeSync.GetNodeID())
		require.NoError(t, n.stop())
	})
	t.Run("Run never called", func(t *testing.T) {
		dir, err := os.MkdirTemp("", "vskagent")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(dir) })
		vpp := vppsim.New(vppsim.Config{})
		a, err := agent.Open(agent.Config{NodeName: "node-2", StateDir: dir, CNISocket: filepath.Join(dir, "cni.sock"),
			BGP: agent.BGPConfig{Disabled: true}},
			agent.Deps{Etcd: cli, VPP: func() adapter.VppAPI { return vpp.NewAdapter() }, Linux: cniservertest.NewFakeLinux()})
		require.NoError(t, err)
		defer a.Close()
		assert.EqualError(t, a.Ready(), "agent: no start-up resync yet")
		start := time.Now()
		err = a.WaitReady(context.Background())
		require.ErrorIs(t, err, controller.ErrNotRunning)
		assert.Contains(t, err.Error(), "agent: not ready: Run was not called")
		assert.Less(t, time.Since(start), controller.NotRunningGrace+5*time.Second)

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		assert.ErrorIs(t, a.WaitReady(ctx), context.Canceled)
	})
}

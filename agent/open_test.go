package agent_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/cniserver/cniservertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// TestOpenFailures: every failure of Open is returned as an error that says
// what failed, and what Open had opened before it failed is closed again
// (issue 27, item 1: Open's cleanup closed a nil agent and panicked, for a
// state directory under a plain file or one another agent holds).
func TestOpenFailures(t *testing.T) {
	cli := startEtcd(t)
	vpp := vppsim.New(vppsim.Config{})
	deps := agent.Deps{Etcd: cli, VPP: func() adapter.VppAPI { return vpp.NewAdapter() }, Linux: cniservertest.NewFakeLinux()}
	open := func(dir string, edit ...func(*agent.Config)) (*agent.Agent, error) {
		cfg := agent.Config{NodeName: "node-1", StateDir: dir, CNISocket: filepath.Join(dir, "cni.sock"),
			BGP: agent.BGPConfig{Disabled: true}}
		for _, e := range edit {
			e(&cfg)
		}
		return agent.Open(cfg, deps)
	}

	t.Run("state directory under a plain file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		require.NoError(t, os.WriteFile(file, nil, 0o600))
		a, err := open(filepath.Join(file, "state"))
		require.Error(t, err)
		assert.Nil(t, a)
		assert.Contains(t, err.Error(), "agent: state directory:")
		assert.Contains(t, err.Error(), "not a directory")
	})

	for _, store := range []string{agent.StoreBolt, agent.StoreEtcd} {
		t.Run("state directory in use, IPAM store "+store, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "vskagent") // short: the socket path must fit sun_path
			require.NoError(t, err)
			t.Cleanup(func() { os.RemoveAll(dir) })
			first, err := open(dir, func(c *agent.Config) { c.IPAMStore = store })
			require.NoError(t, err)
			a, err := open(dir, func(c *agent.Config) { c.IPAMStore = store })
			require.Error(t, err, "another agent holds the state files")
			assert.Nil(t, a)
			assert.Contains(t, err.Error(), "locked")
			require.NoError(t, first.Close())

			// The failed Open closed what it had opened: the files are free.
			a, err = open(dir, func(c *agent.Config) { c.IPAMStore = store })
			require.NoError(t, err)
			require.NoError(t, a.Close())
		})
	}

	t.Run("a later step fails: the files opened before are closed", func(t *testing.T) {
		dir, err := os.MkdirTemp("", "vskagent")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(dir) })
		// The CNI store's path is a directory: the IPAM store (opened
		// before it) must be closed again.
		require.NoError(t, os.Mkdir(filepath.Join(dir, "cni.db"), 0o700))
		_, err = open(dir)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "agent: CNI attachment store:")
		require.NoError(t, os.Remove(filepath.Join(dir, "cni.db")))
		a, err := open(dir)
		require.NoError(t, err, "the IPAM store was released")
		require.NoError(t, a.Close())
	})
}

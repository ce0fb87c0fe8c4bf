package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/ipam/etcdstore"
)

// TestCrashTakesOverIPAMLease: the daemon with the etcd IPAM store is
// killed (SIGKILL: its lease is not revoked) and started again on the
// same state directory: the new process takes over the crashed one's
// lease from the file in the state directory instead of waiting for it
// to expire (etcdstore's TTL is 60 s), and keeps the same owner key.
func TestCrashTakesOverIPAMLease(t *testing.T) {
	ctx := context.Background()
	etcd, cli := startEtcd(t)
	ownerKey := func() (lease, create int64) {
		t.Helper()
		resp, err := cli.Get(ctx, etcdstore.DefaultPrefix+"node-1")
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1)
		return resp.Kvs[0].Lease, resp.Kvs[0].CreateRevision
	}

	dir := shortDir(t)
	cfgFile := filepath.Join(dir, "vswitch.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(`
nodeName: node-1
stateDir: `+filepath.Join(dir, "state")+`
etcd: {endpoints: [`+etcd.Endpoints()[0]+`]}
vpp: {mode: sim}
linux: fake
ipamStore: etcd
cniSocket: `+filepath.Join(dir, "cni.sock")+`
uplink: {afPacketHostIf: eth1}
hostInterconnect: {afPacketHostIf: vpp1}
bgp: {disabled: true}
http: {listen: 127.0.0.1:0}
log: {format: json}
`), 0o600))
	first := startDaemon(t, "-config", cfgFile)
	first.waitReady()
	lease, create := ownerKey()
	require.FileExists(t, filepath.Join(dir, "state", "ipam-etcd.lease"))
	require.NoError(t, first.cmd.Process.Kill())
	<-first.exited

	second := startDaemon(t, "-config", cfgFile)
	second.waitReady()
	gotLease, gotCreate := ownerKey()
	assert.Equal(t, lease, gotLease, "the same lease")
	assert.Equal(t, create, gotCreate, "the same owner key")
	assert.Contains(t, strings.Join(second.lines(), "\n"), "took over the lease of this node's previous agent")
	assert.Equal(t, 0, second.stop())
	assert.NoFileExists(t, filepath.Join(dir, "state", "ipam-etcd.lease"), "a graceful stop revokes the lease and removes the file")
}

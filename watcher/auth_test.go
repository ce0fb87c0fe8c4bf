package watcher

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
)

// TestUsernamePasswordAndNoSecretInLogs runs against an etcd with
// authentication enabled: the right password gets the snapshot, a wrong
// one is retried and counted, and no password appears in any log record.
func TestUsernamePasswordAndNoSecretInLogs(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	const rootPassword, wrongPassword = "root-Pa55-secret", "wrong-Pa55-secret"
	putPod(t, ctx, cli, pod("default", "a", "10.0.0.1"))
	_, err := cli.UserAdd(ctx, "root", rootPassword)
	require.NoError(t, err)
	_, err = cli.UserGrantRole(ctx, "root", "root")
	require.NoError(t, err)
	_, err = cli.AuthEnable(ctx)
	require.NoError(t, err)

	for _, tc := range []struct {
		name     string
		password string
		ok       bool
	}{
		{"right password", rootPassword, true},
		{"wrong password", wrongPassword, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logBuffer{}
			rec := &controllertest.EventRecorder{}
			cfg := baseConfig(srv)
			cfg.Etcd.Username, cfg.Etcd.Password = "root", tc.password
			cfg.Logger = logs.logger()
			w, err := New(rec, cfg)
			require.NoError(t, err)
			r := start(t, w)
			if tc.ok {
				evs, err := rec.WaitFor(ctx, 1)
				require.NoError(t, err)
				assert.Len(t, evs[0].(*controller.DBResync).KubeState["pod"], 1)
			} else {
				waitFor(t, ctx, "failed attempts", func() bool { return w.Stats().ConnectErrors >= 2 })
				assert.Zero(t, rec.Len())
				assert.Contains(t, logs.String(), "cannot read a snapshot")
			}
			r.stop(t)
			assert.NotContains(t, logs.String(), tc.password)
		})
	}
}

// TestMutualTLS runs against an etcd that requires client certificates.
func TestMutualTLS(t *testing.T) {
	ctx := testCtx(t)
	files, err := etcdtest.GenerateCerts(t.TempDir())
	require.NoError(t, err)
	srv, err := etcdtest.StartTLS(t.TempDir(), files)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	cli, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	putPod(t, ctx, cli, pod("default", "a", "10.0.0.1"))

	for _, tc := range []struct {
		name string
		etcd EtcdConfig
		ok   bool
	}{
		{"CA and client certificate", EtcdConfig{CAFile: files.CAFile, CertFile: files.ClientCert, KeyFile: files.ClientKey}, true},
		{"https endpoint", EtcdConfig{Endpoints: []string{"https://" + srv.Endpoint()}, CAFile: files.CAFile, CertFile: files.ClientCert, KeyFile: files.ClientKey}, true},
		{"no client certificate", EtcdConfig{CAFile: files.CAFile}, false},
		{"server not trusted", EtcdConfig{CertFile: files.ClientCert, KeyFile: files.ClientKey}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &controllertest.EventRecorder{}
			cfg := baseConfig(srv)
			if tc.etcd.Endpoints == nil {
				tc.etcd.Endpoints = cfg.Etcd.Endpoints
			}
			tc.etcd.DialTimeout = time.Second
			cfg.Etcd = tc.etcd
			cfg.RequestTimeout = time.Second // a refused handshake fails each request at its deadline
			w, err := New(rec, cfg)
			require.NoError(t, err)
			r := start(t, w)
			if tc.ok {
				evs, err := rec.WaitFor(ctx, 1)
				require.NoError(t, err)
				assert.Len(t, evs[0].(*controller.DBResync).KubeState["pod"], 1)
			} else {
				waitFor(t, ctx, "failed attempts", func() bool { return w.Stats().ConnectErrors >= 2 })
				assert.Zero(t, rec.Len())
			}
			r.stop(t)
		})
	}
}

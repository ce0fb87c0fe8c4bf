package embedetcd_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/vswitchkit/vswitchkit/embedetcd"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestTempDirRemovedOnClose(t *testing.T) {
	ctx := testCtx(t)
	srv, err := embedetcd.Start(ctx, embedetcd.Config{UnsafeNoFsync: true})
	require.NoError(t, err)
	dir := srv.Dir()
	assert.DirExists(t, dir)
	assert.True(t, strings.HasPrefix(srv.Endpoints()[0], "http://127.0.0.1:"))
	require.NoError(t, srv.Close())
	assert.NoDirExists(t, dir)
	require.NoError(t, srv.Close(), "Close twice")
	assert.Error(t, srv.Restart(ctx), "no restart after Close")
}

func TestStopRestartKeepsDataAndPort(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "data")
	srv, err := embedetcd.Start(ctx, embedetcd.Config{Dir: dir, UnsafeNoFsync: true})
	require.NoError(t, err)
	defer srv.Close()
	cli, err := srv.Client()
	require.NoError(t, err)
	defer cli.Close()
	_, err = cli.Put(ctx, "/k", "v")
	require.NoError(t, err)

	endpoint := srv.Endpoint()
	srv.Stop()
	assert.False(t, srv.Running())
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = cli.Get(short, "/k")
	cancel()
	assert.Error(t, err, "stopped")

	require.NoError(t, srv.Restart(ctx))
	assert.Equal(t, endpoint, srv.Endpoint())
	resp, err := cli.Get(ctx, "/k")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	assert.Equal(t, "v", string(resp.Kvs[0].Value))

	require.NoError(t, srv.Close())
	_, err = os.Stat(dir)
	assert.NoError(t, err, "a caller's directory is kept")
}

func TestRootPasswordEnablesAuth(t *testing.T) {
	ctx := testCtx(t)
	srv, err := embedetcd.Start(ctx, embedetcd.Config{UnsafeNoFsync: true, RootPassword: "s3cret"})
	require.NoError(t, err)
	defer srv.Close()

	cli, err := srv.Client()
	require.NoError(t, err)
	defer cli.Close()
	_, err = cli.Put(ctx, "/k", "v")
	require.NoError(t, err, "Client logs in as root")

	for _, tc := range []struct{ name, user, pass string }{
		{"anonymous", "", ""},
		{"wrong password", "root", "wrong"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), Username: tc.user, Password: tc.pass,
				DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
			if err == nil {
				defer other.Close()
				_, err = other.Get(ctx, "/k")
			}
			assert.Error(t, err)
		})
	}
}

func TestMutualTLS(t *testing.T) {
	ctx := testCtx(t)
	files, err := etcdtest.GenerateCerts(t.TempDir())
	require.NoError(t, err)
	srv, err := embedetcd.Start(ctx, embedetcd.Config{
		UnsafeNoFsync: true,
		CertFile:      files.ServerCert, KeyFile: files.ServerKey, ClientCAFile: files.CAFile,
		ClientCertFile: files.ClientCert, ClientKeyFile: files.ClientKey, CAFile: files.CAFile,
	})
	require.NoError(t, err)
	defer srv.Close()
	assert.True(t, strings.HasPrefix(srv.Endpoints()[0], "https://"))
	cli, err := srv.Client()
	require.NoError(t, err)
	defer cli.Close()
	_, err = cli.Put(ctx, "/k", "v")
	require.NoError(t, err)

	cfg, err := srv.ClientConfig()
	require.NoError(t, err)
	cfg.TLS.Certificates, cfg.TLS.GetClientCertificate = nil, nil // no client certificate
	anon, err := clientv3.New(cfg)
	if err == nil {
		defer anon.Close()
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = anon.Get(short, "/k")
	}
	assert.Error(t, err, "a client without certificate is refused")
}

func TestConfigErrors(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		cfg  embedetcd.Config
		want string
	}{
		{"cert without key", embedetcd.Config{CertFile: "c.pem"}, "CertFile and KeyFile"},
		{"client CA without TLS", embedetcd.Config{ClientCAFile: "ca.pem"}, "ClientCAFile needs"},
		{"client cert without key", embedetcd.Config{ClientCertFile: "c.pem"}, "ClientCertFile and ClientKeyFile"},
		{"bad address", embedetcd.Config{ClientAddr: "no-port"}, "address"},
		{"negative start timeout", embedetcd.Config{StartTimeout: -1}, "StartTimeout -1ns is negative"},
		{"negative quota", embedetcd.Config{QuotaBackendBytes: -1}, "QuotaBackendBytes -1 is negative"},
		{"negative retention", embedetcd.Config{AutoCompactionRetention: -1}, "AutoCompactionRetention -1 is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := embedetcd.Start(ctx, tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
	// Every bad field at once (CONTRIBUTING R7).
	_, err := embedetcd.Start(ctx, embedetcd.Config{CertFile: "c.pem", ClientCertFile: "c.pem", StartTimeout: -1})
	require.Error(t, err)
	for _, want := range []string{"CertFile and KeyFile", "ClientCertFile and ClientKeyFile", "StartTimeout"} {
		assert.ErrorContains(t, err, want)
	}
	assert.Equal(t, 1, strings.Count(err.Error(), "embedetcd:"), "the package named once: %v", err)
}

// TestStartFailureReturnsTheCause: etcd cannot start in a data directory
// that is a file. Start returns that failure, probing fresh ports a few
// times, instead of retrying each attempt until StartTimeout (the retry
// of Restart, for ports briefly unavailable after a Stop): with a
// StartTimeout longer than ctx, it used to end only with ctx's error.
func TestStartFailureReturnsTheCause(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, err := embedetcd.Start(ctx, embedetcd.Config{Dir: file, StartTimeout: time.Hour})
	if err == nil {
		srv.Close()
	}
	require.Error(t, err)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "Start kept retrying the same failure: %v", err)
	assert.NoError(t, ctx.Err())
}

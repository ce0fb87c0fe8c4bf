package etcdtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServerRestartKeepsData(t *testing.T) {
	start := time.Now()
	s, err := Start(t.TempDir())
	require.NoError(t, err)
	t.Logf("start took %v", time.Since(start))
	defer s.Close()
	c, err := s.Client()
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = Put(ctx, c, "/a", []byte("1"))
	require.NoError(t, err)

	s.Stop()
	require.False(t, s.Running())
	start = time.Now()
	require.NoError(t, s.Restart())
	t.Logf("restart took %v", time.Since(start))
	require.True(t, s.Running())

	start = time.Now()
	resp, err := c.Get(ctx, "/a")
	t.Logf("get after restart took %v", time.Since(start))
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, "1", string(resp.Kvs[0].Value))
}

func TestProxyDisconnect(t *testing.T) {
	s, err := Start(t.TempDir())
	require.NoError(t, err)
	defer s.Close()
	p, err := NewProxy(s.Endpoint())
	require.NoError(t, err)
	defer p.Close()

	direct, err := s.Client()
	require.NoError(t, err)
	defer direct.Close()
	cfg, err := s.ClientConfig()
	require.NoError(t, err)
	cfg.Endpoints = []string{p.Addr()}
	viaProxy, err := clientv3.New(cfg)
	require.NoError(t, err)
	defer viaProxy.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = viaProxy.Put(ctx, "/k", "v1")
	require.NoError(t, err)

	p.Disconnect()
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = viaProxy.Get(short, "/k")
	cancelShort()
	require.Error(t, err, "the proxy is cut")
	_, err = direct.Put(ctx, "/k", "v2")
	require.NoError(t, err, "the server keeps running")

	p.Reconnect()
	resp, err := viaProxy.Get(ctx, "/k")
	require.NoError(t, err)
	require.Equal(t, "v2", string(resp.Kvs[0].Value))
}

func TestTLSServerRequiresClientCertificate(t *testing.T) {
	files, err := GenerateCerts(t.TempDir())
	require.NoError(t, err)
	s, err := StartTLS(t.TempDir(), files)
	require.NoError(t, err)
	defer s.Close()
	c, err := s.Client() // with the client certificate
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = Put(ctx, c, "/a", []byte("1"))
	require.NoError(t, err)

	plain, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}) // no TLS at all
	require.NoError(t, err)
	defer plain.Close()
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()
	_, err = plain.Get(short, "/a")
	require.Error(t, err)
}

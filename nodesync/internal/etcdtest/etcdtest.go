// Package etcdtest starts an in-process etcd server on loopback for the
// tests of nodesync and its etcd adapter.
package etcdtest

import (
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Start runs a single-member etcd with its data in a temporary directory on
// free loopback ports and returns its client URL. The server is stopped in
// tb.Cleanup. Fsync is disabled: the data dir is thrown away anyway.
func Start(tb testing.TB) string {
	tb.Helper()
	var lastErr error
	for range 5 { // free ports can be taken between probing and binding
		e, err := start(tb.TempDir())
		if err != nil {
			lastErr = err
			continue
		}
		tb.Cleanup(func() {
			e.Close()
			<-e.Server.StopNotify()
		})
		return "http://" + e.Clients[0].Addr().String()
	}
	tb.Fatalf("etcdtest: start embedded etcd: %v", lastErr)
	return ""
}

func start(dir string) (*embed.Etcd, error) {
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.Name = "etcdtest"
	curl := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", cport)}
	purl := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", pport)}
	cfg.ListenClientUrls = []url.URL{curl}
	cfg.AdvertiseClientUrls = []url.URL{curl}
	cfg.ListenPeerUrls = []url.URL{purl}
	cfg.AdvertisePeerUrls = []url.URL{purl}
	cfg.InitialCluster = cfg.Name + "=" + purl.String()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = "error"
	cfg.UnsafeNoFsync = true
	cfg.MaxTxnOps = 1024
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcd not ready after 30s")
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

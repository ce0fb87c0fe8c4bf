package watchertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startTimeout bounds how long Start and Restart wait for the server to
// become ready.
const startTimeout = 60 * time.Second

// Server is a single-member etcd server running in-process on loopback, for
// tests and examples. It can be stopped and restarted on the same ports and
// data directory to simulate an outage.
//
// Server is safe for concurrent use.
type Server struct {
	dir       string
	tls       *TLSFiles // nil: plain HTTP
	clientURL url.URL
	peerURL   url.URL

	mu   sync.Mutex
	etcd *embed.Etcd // nil while stopped; guarded by mu
}

// Start starts an etcd server that keeps its data in dir (which should be an
// empty, private directory such as t.TempDir()) and listens on free
// loopback ports. fsync is disabled: the data survives Stop/Restart but not
// a machine crash.
func Start(dir string) (*Server, error) { return start(dir, nil) }

// StartTLS is Start with TLS on the client port: the server presents
// files.ServerCert and requires client certificates signed by
// files.CAFile.
func StartTLS(dir string, files TLSFiles) (*Server, error) { return start(dir, &files) }

func start(dir string, files *TLSFiles) (*Server, error) {
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if files != nil {
		scheme = "https"
	}
	s := &Server{
		dir:       dir,
		tls:       files,
		clientURL: url.URL{Scheme: scheme, Host: net.JoinHostPort("127.0.0.1", fmt.Sprint(cport))},
		peerURL:   url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", fmt.Sprint(pport))},
	}
	if err := s.Restart(); err != nil {
		return nil, err
	}
	return s, nil
}

// Endpoint returns the client endpoint, "127.0.0.1:<port>". It stays the
// same across Stop and Restart, and is valid even while the server is
// stopped (connections are refused then).
func (s *Server) Endpoint() string { return s.clientURL.Host }

// Running tells whether the server is started.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.etcd != nil
}

// Restart starts the server again after Stop, on the same ports and data
// directory. It does nothing if the server is running.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.etcd != nil {
		return nil
	}
	cfg := embed.NewConfig()
	cfg.Name = "watchertest"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{s.clientURL}
	cfg.ListenPeerUrls = []url.URL{s.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{s.peerURL}
	cfg.InitialCluster = cfg.Name + "=" + s.peerURL.String()
	cfg.UnsafeNoFsync = true
	if s.tls != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{
			CertFile:       s.tls.ServerCert,
			KeyFile:        s.tls.ServerKey,
			TrustedCAFile:  s.tls.CAFile,
			ClientCertAuth: true,
		}
	}
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	var e *embed.Etcd
	var err error
	// The ports may be briefly unavailable right after a Stop; retry.
	deadline := time.Now().Add(startTimeout)
	for {
		e, err = embed.StartEtcd(cfg)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcd failed while starting: %w", err)
	case <-time.After(startTimeout):
		e.Close()
		return errors.New("etcd did not become ready in time")
	}
	s.etcd = e
	return nil
}

// Stop stops the server and keeps its data. Clients see connection errors
// until Restart. It does nothing if the server is stopped.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.etcd == nil {
		return
	}
	s.etcd.Close()
	s.etcd = nil
}

// Close stops the server. The data directory is left for the caller to
// remove.
func (s *Server) Close() { s.Stop() }

// Client returns a new client of the server with logging disabled. The
// caller closes it.
func (s *Server) Client() (*clientv3.Client, error) { return s.clientFor(s.Endpoint()) }

// Put writes key=value with a fresh short-lived client context, retrying
// while the server is unreachable until ctx is done.
func Put(ctx context.Context, c *clientv3.Client, key string, value []byte) (rev int64, err error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := c.Put(cctx, key, string(value))
		cancel()
		if err == nil {
			return resp.Header.Revision, nil
		}
		if ctx.Err() != nil {
			return 0, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Delete deletes key, retrying while the server is unreachable until ctx is
// done.
func Delete(ctx context.Context, c *clientv3.Client, key string) (rev int64, err error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := c.Delete(cctx, key)
		cancel()
		if err == nil {
			return resp.Header.Revision, nil
		}
		if ctx.Err() != nil {
			return 0, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) clientFor(endpoint string) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	}
	if s.tls != nil {
		tlsCfg, err := transport.TLSInfo{
			CertFile:      s.tls.ClientCert,
			KeyFile:       s.tls.ClientKey,
			TrustedCAFile: s.tls.CAFile,
		}.ClientConfig()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tlsCfg
	}
	return clientv3.New(cfg)
}

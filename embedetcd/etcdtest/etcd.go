package etcdtest

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vswitchkit/vswitchkit/embedetcd"
)

// Server is a single-member etcd server running in-process on loopback, for
// tests and examples: an [embedetcd.Server] with fsync off and a
// caller-chosen data directory. It can be stopped and restarted on the same
// ports and data directory to simulate an outage.
//
// Server is safe for concurrent use.
type Server struct {
	srv *embedetcd.Server
}

// Start starts an etcd server that keeps its data in dir (which should be an
// empty, private directory such as t.TempDir()) and listens on free
// loopback ports. fsync is disabled: the data survives Stop/Restart but not
// a machine crash.
func Start(dir string) (*Server, error) {
	return start(embedetcd.Config{Dir: dir, Name: "etcdtest", UnsafeNoFsync: true})
}

// StartTLS is Start with TLS on the client port: the server presents
// files.ServerCert and requires client certificates signed by
// files.CAFile. [Server.Client] presents files.ClientCert.
func StartTLS(dir string, files TLSFiles) (*Server, error) {
	return start(embedetcd.Config{
		Dir: dir, Name: "etcdtest", UnsafeNoFsync: true,
		CertFile: files.ServerCert, KeyFile: files.ServerKey, ClientCAFile: files.CAFile,
		ClientCertFile: files.ClientCert, ClientKeyFile: files.ClientKey, CAFile: files.CAFile,
	})
}

func start(cfg embedetcd.Config) (*Server, error) {
	srv, err := embedetcd.Start(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	return &Server{srv: srv}, nil
}

// Endpoint returns the client endpoint, "127.0.0.1:<port>". It stays the
// same across Stop and Restart, and is valid even while the server is
// stopped (connections are refused then).
func (s *Server) Endpoint() string { return s.srv.Endpoint() }

// Running tells whether the server is started.
func (s *Server) Running() bool { return s.srv.Running() }

// Restart starts the server again after Stop, on the same ports and data
// directory. It does nothing if the server is running.
func (s *Server) Restart() error { return s.srv.Restart(context.Background()) }

// Stop stops the server and keeps its data. Clients see connection errors
// until Restart. It does nothing if the server is stopped.
func (s *Server) Stop() { s.srv.Stop() }

// Close stops the server. The data directory is left for the caller to
// remove.
func (s *Server) Close() { s.srv.Stop() }

// Client returns a new client of the server with logging disabled. The
// caller closes it.
func (s *Server) Client() (*clientv3.Client, error) { return s.srv.Client() }

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

// ClientConfig returns the client configuration that Client uses (TLS
// files included), for tests that reach the server another way, e.g.
// through a [Proxy].
func (s *Server) ClientConfig() (clientv3.Config, error) { return s.srv.ClientConfig() }

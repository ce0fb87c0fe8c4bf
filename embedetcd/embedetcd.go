package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/vswitchkit/vswitchkit/internal/cfgutil"
)

// Config configures an embedded etcd server. The zero value is valid: one
// member named "vswitchkit" on free loopback ports, plain HTTP, no
// authentication, fsync on, data in a new temporary directory that Close
// removes. Config is a plain value, copied by Start.
type Config struct {
	// Dir is the data directory. Default: a new temporary directory,
	// removed by Close.
	Dir string

	// Name is the member name. Default: "vswitchkit".
	Name string

	// ClientAddr and PeerAddr are the host:port the server listens on for
	// clients and peers. Port 0 (the default, "127.0.0.1:0") picks a free
	// port once; Restart keeps it.
	ClientAddr string
	PeerAddr   string

	// CertFile and KeyFile are the PEM server certificate and key; setting
	// them enables TLS on the client port. ClientCAFile, when set, requires
	// clients to present a certificate signed by it (mutual TLS).
	CertFile, KeyFile string
	ClientCAFile      string

	// ClientCertFile and ClientKeyFile are the client certificate and key
	// that [Server.Client] presents (needed with ClientCAFile). CAFile is
	// the CA that [Server.Client] trusts for the server certificate.
	ClientCertFile, ClientKeyFile string
	CAFile                        string

	// RootPassword, when set, makes Start create the user "root" with this
	// password and enable authentication; [Server.Client] logs in as root.
	RootPassword string

	// UnsafeNoFsync disables fsync: faster, and the data survives Stop and
	// Restart but not a machine crash. For tests and demos.
	UnsafeNoFsync bool

	// QuotaBackendBytes is the backend size limit. Default (zero): etcd's
	// (2 GiB); negative is an error.
	QuotaBackendBytes int64

	// AutoCompactionRetention keeps the history of this many revisions and
	// compacts older ones every five minutes, so a long-running embedded
	// server does not grow without bound. Default: 0, no compaction;
	// negative is an error.
	AutoCompactionRetention int64

	// StartTimeout bounds how long Start and Restart wait for the server to
	// serve clients. Default (zero): 60s; negative is an error.
	StartTimeout time.Duration

	// Logger receives lifecycle messages (started, stopped). etcd's own
	// logging is discarded. Default: discard.
	Logger *slog.Logger
}

// withDefaults fills in defaults and reports every bad field at once.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("CertFile and KeyFile must be set together"))
	}
	if c.ClientCAFile != "" && c.CertFile == "" {
		errs = append(errs, errors.New("ClientCAFile needs CertFile and KeyFile (TLS)"))
	}
	if (c.ClientCertFile == "") != (c.ClientKeyFile == "") {
		errs = append(errs, errors.New("ClientCertFile and ClientKeyFile must be set together"))
	}
	errs = append(errs, cfgutil.Durations([]cfgutil.Duration{
		{Name: "StartTimeout", Value: &c.StartTimeout, Default: 60 * time.Second},
	})...)
	for _, f := range []struct {
		name string
		v    int64
	}{{"QuotaBackendBytes", c.QuotaBackendBytes}, {"AutoCompactionRetention", c.AutoCompactionRetention}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s %d is negative", f.name, f.v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("embedetcd: %w", err)
	}
	if c.Name == "" {
		c.Name = "vswitchkit"
	}
	if c.ClientAddr == "" {
		c.ClientAddr = "127.0.0.1:0"
	}
	if c.PeerAddr == "" {
		c.PeerAddr = "127.0.0.1:0"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Server is an embedded etcd server. It is safe for concurrent use.
type Server struct {
	cfg       Config
	tempDir   bool // Dir was created by Start: Close removes it
	clientURL url.URL
	peerURL   url.URL
	log       *slog.Logger

	mu     sync.Mutex
	etcd   *embed.Etcd // nil while stopped; guarded by mu
	closed bool        // guarded by mu
}

// Start starts a server and waits until it serves clients, at most
// Config.StartTimeout or until ctx ends.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With(slog.String("component", "embedetcd"))}
	if s.cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "embedetcd-")
		if err != nil {
			return nil, fmt.Errorf("embedetcd: data directory: %w", err)
		}
		s.cfg.Dir, s.tempDir = dir, true
	}
	scheme := "http"
	if cfg.CertFile != "" {
		scheme = "https"
	}
	var lastErr error
	// A port probed free can be taken before etcd binds it: probe again.
	for range 5 {
		if s.clientURL, err = resolveAddr(scheme, cfg.ClientAddr); err != nil {
			break
		}
		if s.peerURL, err = resolveAddr("http", cfg.PeerAddr); err != nil {
			break
		}
		if lastErr = s.start(ctx, false); lastErr == nil {
			break
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err == nil {
		err = lastErr
	}
	if err != nil {
		if s.tempDir {
			os.RemoveAll(s.cfg.Dir)
		}
		return nil, err
	}
	if cfg.RootPassword != "" {
		if err := s.enableAuth(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// resolveAddr turns host:port into a URL, picking a free port for port 0.
func resolveAddr(scheme, addr string) (url.URL, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return url.URL{}, fmt.Errorf("embedetcd: address %q: %w", addr, err)
	}
	if port == "0" {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return url.URL{}, fmt.Errorf("embedetcd: find a free port on %s: %w", host, err)
		}
		port = fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
		l.Close()
	}
	return url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port)}, nil
}

func (s *Server) enableAuth(ctx context.Context) error {
	cli, err := s.client(false)
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.UserAdd(ctx, "root", s.cfg.RootPassword); err != nil {
		return fmt.Errorf("embedetcd: add user root: %w", err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		return fmt.Errorf("embedetcd: grant role root: %w", err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("embedetcd: enable authentication: %w", err)
	}
	return nil
}

// Endpoint returns the client address, "host:port". It stays the same
// across Stop and Restart.
func (s *Server) Endpoint() string { return s.clientURL.Host }

// Endpoints returns the client URL ("http://host:port" or
// "https://host:port") as a list, ready for clientv3.Config.Endpoints.
func (s *Server) Endpoints() []string { return []string{s.clientURL.String()} }

// Dir returns the data directory.
func (s *Server) Dir() string { return s.cfg.Dir }

// Running tells whether the server is started.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.etcd != nil
}

// Restart starts the server again after Stop, on the same ports and data
// directory, and waits until it serves clients. It does nothing if the
// server is running, and returns an error after Close.
func (s *Server) Restart(ctx context.Context) error { return s.start(ctx, true) }

// start starts etcd on the server's ports. retryBind retries a failed
// start until StartTimeout (the ports of a stopped server may be briefly
// unavailable); without it a failure returns at once, so that Start can
// probe other ports.
func (s *Server) start(ctx context.Context, retryBind bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("embedetcd: server closed")
	}
	if s.etcd != nil {
		return nil
	}
	cfg := embed.NewConfig()
	cfg.Name = s.cfg.Name
	cfg.Dir = s.cfg.Dir
	cfg.ListenClientUrls = []url.URL{s.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{s.clientURL}
	cfg.ListenPeerUrls = []url.URL{s.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{s.peerURL}
	cfg.InitialCluster = cfg.Name + "=" + s.peerURL.String()
	cfg.UnsafeNoFsync = s.cfg.UnsafeNoFsync
	if s.cfg.QuotaBackendBytes > 0 {
		cfg.QuotaBackendBytes = s.cfg.QuotaBackendBytes
	}
	if s.cfg.AutoCompactionRetention > 0 {
		cfg.AutoCompactionMode = "revision"
		cfg.AutoCompactionRetention = fmt.Sprint(s.cfg.AutoCompactionRetention)
	}
	if s.cfg.CertFile != "" {
		cfg.ClientTLSInfo = transport.TLSInfo{
			CertFile:       s.cfg.CertFile,
			KeyFile:        s.cfg.KeyFile,
			TrustedCAFile:  s.cfg.ClientCAFile,
			ClientCertAuth: s.cfg.ClientCAFile != "",
		}
	}
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	deadline := time.Now().Add(s.cfg.StartTimeout)
	var e *embed.Etcd
	var err error
	// The ports may be briefly unavailable right after a Stop: retry.
	for {
		e, err = embed.StartEtcd(cfg)
		if err == nil || !retryBind || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("embedetcd: start: %w", err)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("embedetcd: failed while starting: %w", err)
	case <-timer.C:
		e.Close()
		return fmt.Errorf("embedetcd: not ready after %v", s.cfg.StartTimeout)
	case <-ctx.Done():
		e.Close()
		return fmt.Errorf("embedetcd: start: %w", ctx.Err())
	}
	s.etcd = e
	s.log.Info("etcd started", slog.String("endpoint", s.clientURL.String()), slog.String("dir", s.cfg.Dir))
	return nil
}

// Stop stops the server and keeps its data. Clients see connection errors
// until Restart. It does nothing if the server is stopped.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.etcd == nil {
		return
	}
	s.etcd.Close()
	s.etcd = nil
	s.log.Info("etcd stopped", slog.String("endpoint", s.clientURL.String()))
}

// Close stops the server for good and removes the data directory if Start
// created it. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.tempDir {
		if err := os.RemoveAll(s.cfg.Dir); err != nil {
			return fmt.Errorf("embedetcd: remove data directory: %w", err)
		}
	}
	return nil
}

// Client returns a new client of the server, with the configured TLS files
// and, with RootPassword, logged in as root. etcd's client logging is
// discarded. The caller closes it.
func (s *Server) Client() (*clientv3.Client, error) { return s.client(true) }

// ClientConfig returns the clientv3 configuration that Client uses, for
// callers that build their own client (for example with other timeouts).
func (s *Server) ClientConfig() (clientv3.Config, error) { return s.clientConfig(true) }

func (s *Server) client(auth bool) (*clientv3.Client, error) {
	cfg, err := s.clientConfig(auth)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: client: %w", err)
	}
	return cli, nil
}

func (s *Server) clientConfig(auth bool) (clientv3.Config, error) {
	cfg := clientv3.Config{
		Endpoints:   s.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	}
	if auth && s.cfg.RootPassword != "" {
		cfg.Username, cfg.Password = "root", s.cfg.RootPassword
	}
	if s.cfg.CertFile != "" {
		tlsCfg, err := transport.TLSInfo{
			CertFile:      s.cfg.ClientCertFile,
			KeyFile:       s.cfg.ClientKeyFile,
			TrustedCAFile: s.cfg.CAFile,
		}.ClientConfig()
		if err != nil {
			return clientv3.Config{}, fmt.Errorf("embedetcd: client TLS: %w", err)
		}
		cfg.TLS = tlsCfg
	}
	return cfg, nil
}

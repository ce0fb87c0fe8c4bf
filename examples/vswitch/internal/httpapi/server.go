package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/controller"
)

// Config configures a [Server].
type Config struct {
	// Listen is the host:port to listen on. Default: 127.0.0.1:0 (a free
	// port; see Server.Addr).
	Listen string
	// Logger receives the server's logs. Default: discard.
	Logger *slog.Logger
}

// Server is the daemon's HTTP endpoint. It is safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	registry *prometheus.Registry
	mux      *http.ServeMux

	a     atomic.Pointer[agent.Agent]
	phase atomic.Pointer[string]

	mu   sync.Mutex
	addr net.Addr // guarded by mu; set by Run once listening
}

// New returns a server with a Prometheus registry of its own: the
// agent's metrics plus the Go runtime's and the process's.
func New(cfg Config) *Server {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With(slog.String("component", "http")), registry: prometheus.NewRegistry()}
	s.SetPhase("starting")
	s.registry.MustRegister(collector{s}, bgpStatusCollector{s}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn), ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /debug/events", s.withAgent(debugEvents))
	mux.HandleFunc("GET /debug/ipam", s.withAgent(debugIPAM))
	mux.HandleFunc("GET /debug/nodes", s.withAgent(debugNodes))
	mux.HandleFunc("GET /debug/services", s.withAgent(debugServices))
	mux.HandleFunc("GET /debug/vpp", s.withAgent(debugVPP))
	mux.HandleFunc("GET /debug/bgp", s.withAgent(debugBGP))
	mux.HandleFunc("GET /debug/bgp/status", s.withAgent(debugBGPStatus))
	mux.HandleFunc("GET /{$}", s.index)
	s.mux = mux
	return s
}

// Handler returns the server's routes.
func (s *Server) Handler() http.Handler { return s.mux }

// SetAgent attaches the agent whose state the server shows.
func (s *Server) SetAgent(a *agent.Agent) { s.a.Store(a) }

// SetPhase records what the daemon is doing before the agent is attached
// (shown by /readyz).
func (s *Server) SetPhase(phase string) { s.phase.Store(&phase) }

func (s *Server) agent() *agent.Agent { return s.a.Load() }

// Addr returns the address the server listens on; nil before Run
// listens.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Run listens on Config.Listen and serves until ctx ends, then shuts the
// server down (requests in progress get 5s) and returns nil; an error if
// it cannot listen or serve.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	s.mu.Lock()
	s.addr = ln.Addr()
	s.mu.Unlock()
	hs := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.log.Info("HTTP listening", slog.String("address", ln.Addr().String()))
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("http: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err = hs.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("http: shutdown: %w", err)
	}
	return nil
}

func (s *Server) index(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "vswitchkit vswitch daemon: /metrics /healthz /readyz /debug/events /debug/ipam /debug/nodes /debug/services /debug/vpp /debug/bgp /debug/bgp/status")
}

func stopping(a *agent.Agent) bool {
	select {
	case <-a.Stopping():
		return true
	default:
		return false
	}
}

// healthz answers 200 while the daemon runs: a degraded agent (keys
// rejected for good) is alive, restarting it would not help; 503 once it
// stops or while the loop misses its start-up resync.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	a := s.agent()
	switch {
	case a == nil:
		text(w, http.StatusOK, "ok ("+*s.phase.Load()+")")
	case stopping(a):
		text(w, http.StatusServiceUnavailable, "stopping")
	default:
		err := a.Loop.Healthy()
		switch {
		case errors.Is(err, controller.ErrStartupResyncMissing):
			text(w, http.StatusServiceUnavailable, err.Error())
		case err != nil:
			text(w, http.StatusOK, "ok (degraded: "+err.Error()+")")
		default:
			text(w, http.StatusOK, "ok")
		}
	}
}

// readyz answers 200 once the agent is ready.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	a := s.agent()
	switch {
	case a == nil:
		text(w, http.StatusServiceUnavailable, "not ready: "+*s.phase.Load())
	case stopping(a):
		text(w, http.StatusServiceUnavailable, "not ready: stopping")
	default:
		if err := a.Ready(); err != nil {
			text(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
			return
		}
		text(w, http.StatusOK, "ok")
	}
}

func text(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}

// withAgent serves a debug view once the agent is attached.
func (s *Server) withAgent(view func(*http.Request, *agent.Agent) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := s.agent()
		if a == nil {
			text(w, http.StatusServiceUnavailable, "no agent yet: "+*s.phase.Load())
			return
		}
		v, err := view(r, a)
		if err != nil {
			text(w, http.StatusBadRequest, err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			s.log.Debug("cannot write a debug view", slog.String("path", r.URL.Path), slog.Any("error", err))
		}
	}
}

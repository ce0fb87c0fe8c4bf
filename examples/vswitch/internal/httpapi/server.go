package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
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

	mu sync.Mutex
	ln net.Listener // guarded by mu; set by Listen
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
	s.registry.MustRegister(collector{s}, bgpStatusCollector{s}, cnatCollector{s}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn), ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	for _, v := range debugViews {
		mux.HandleFunc("GET "+v.Path, s.withAgent(v.serve))
	}
	mux.HandleFunc("GET /debug/{$}", s.debugIndex)
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

// Addr returns the address the server listens on; nil before Listen
// (or Run) bound it.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Listen binds Config.Listen now, so that an address that is taken is an
// error before anything else starts; Run then serves on it. It is called
// once, before Run.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return errors.New("http: Listen called twice")
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	s.ln = ln
	s.log.Info("HTTP listening", slog.String("address", ln.Addr().String()))
	return nil
}

// Run serves until ctx ends, then shuts the server down (requests in
// progress get 5s) and returns nil; an error if it cannot listen or serve.
// It listens on Config.Listen first unless Listen was called.
func (s *Server) Run(ctx context.Context) error {
	if s.Addr() == nil {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	hs := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("http: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := hs.Shutdown(sctx)
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
	paths := []string{"/metrics", "/healthz", "/readyz", "/debug/"}
	for _, v := range debugViews {
		paths = append(paths, v.Path)
	}
	fmt.Fprintln(w, "vswitchkit vswitch daemon:", strings.Join(paths, " "))
}

// debugIndex lists the debug views (JSON), also before the agent is
// attached.
func (s *Server) debugIndex(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, s.log, "/debug/", struct {
		Views []debugView `json:"views"`
	}{debugViews})
}

func stopping(a *agent.Agent) bool {
	select {
	case <-a.Stopping():
		return true
	default:
		return false
	}
}

// healthz answers 200 while the daemon runs: "ok", or "ok (degraded)"
// followed by a line per problem (see degradation): a degraded agent is
// alive, restarting it would not help; 503 once it stops or while the loop
// misses its start-up resync.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	a := s.agent()
	switch {
	case a == nil:
		text(w, http.StatusOK, "ok ("+*s.phase.Load()+")")
	case stopping(a):
		text(w, http.StatusServiceUnavailable, "stopping")
	default:
		if err := a.Loop.Healthy(); errors.Is(err, controller.ErrStartupResyncMissing) {
			text(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		problems := degradation(a)
		if len(problems) == 0 {
			text(w, http.StatusOK, "ok")
			return
		}
		text(w, http.StatusOK, "ok (degraded)\n"+strings.Join(problems, "\n"))
	}
}

// maxSkipped is how many skipped parts of services degradation names.
const maxSkipped = 10

// degradation returns what makes the agent degraded, one line each, none
// when it is not: the loop's rejected keys and permanent errors, and its
// healing resyncs failing in a row (controller.Loop.Healthy: etcd or VPP
// failing; the loop keeps healing), the VPP keys that keep failing
// (vppdriver.Driver.Degraded, the driver retries them), and the malformed
// parts of services that the service processor skipped
// (svcprocessor.ServiceProcessor.Skipped), and the parts of services and
// pods' hostPorts the cnat renderer does not render (svccnat.Problem).
// Each says what and why; a restart would not end it.
func degradation(a *agent.Agent) []string {
	var out []string
	if err := a.Loop.Healthy(); err != nil && !errors.Is(err, controller.ErrStartupResyncMissing) {
		out = append(out, err.Error())
	}
	if err := a.Driver.Degraded(); err != nil {
		out = append(out, err.Error())
	}
	if skipped := a.Services.Skipped(); len(skipped) > 0 {
		parts := make([]string, 0, min(len(skipped), maxSkipped)+1)
		for i, sk := range skipped {
			if i == maxSkipped {
				parts = append(parts, fmt.Sprintf("and %d more", len(skipped)-i))
				break
			}
			parts = append(parts, strings.TrimPrefix(sk.Error(), "svcprocessor: "))
		}
		out = append(out, fmt.Sprintf("svcprocessor: %d malformed parts of services skipped: %s", len(skipped), strings.Join(parts, "; ")))
	}
	return append(out, cnatDegradation(a)...)
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

// errNotFound marks a debug view's error that answers 404: what the query
// names does not exist (other errors answer 400).
var errNotFound = errors.New("not found")

// withAgent serves a debug view once the agent is attached.
func (s *Server) withAgent(view func(*http.Request, *agent.Agent) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := s.agent()
		if a == nil {
			text(w, http.StatusServiceUnavailable, "no agent yet: "+*s.phase.Load())
			return
		}
		v, err := view(r, a)
		switch {
		case errors.Is(err, errNotFound):
			text(w, http.StatusNotFound, err.Error())
			return
		case err != nil:
			text(w, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, s.log, r.URL.Path, v)
	}
}

// writeJSON writes v as indented JSON.
func writeJSON(w http.ResponseWriter, log *slog.Logger, path string, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		log.Debug("cannot write a debug view", slog.String("path", path), slog.Any("error", err))
	}
}

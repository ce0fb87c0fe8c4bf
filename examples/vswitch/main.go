// Command vswitch is the vswitchkit per-node daemon: run it on every node
// next to VPP. It runs the whole agent (the etcd watcher with its local
// mirror, node sync, IPAM with a durable store, the service processor with
// the NAT44 renderer, node and pod connectivity, BGP and the CNI server)
// against a real VPP over its binary-API socket, or against the in-process
// VPP stand-in with -vpp=sim, and serves Prometheus metrics, health and
// debug views over HTTP.
//
//	vswitch -config /etc/vswitchkit/vswitch.yaml
//
// The configuration is a YAML file with flags overriding it (see
// README.md); it is validated as a whole before anything starts, and a bad
// one exits with status 2 and a message naming every problem. Then the
// daemon binds its HTTP address, connects to etcd, opens its state and
// runs the agent; it logs "vswitch ready" once the agent can serve pods.
// SIGTERM or SIGINT stop the daemon gracefully (status 0): the CNI server
// stops accepting requests and finishes those in progress, the event in
// progress finishes, etcd and BGP are closed cleanly, and VPP is left
// configured, so pods keep working until the next agent takes over. A
// second signal ends the daemon at once.
//
// # Exit statuses
//
//   - 0: stopped by SIGTERM or SIGINT (or -h).
//   - 1: failed while running, after it was ready (logged).
//   - 2: an invalid command line or configuration: every problem is listed.
//   - 3: it could not start: the configuration is valid but the machine
//     does not match it: a file it names (the configuration, TLS, password)
//     is missing or unreadable, the state directory is unusable or held by
//     another daemon, the HTTP address is taken, VPP's API socket is
//     missing, etcd refuses the login, or the agent failed before it was
//     ready (say, the CNI socket cannot be created). Restarting may help
//     once the machine is fixed; for status 2 it does not.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/adapter/socketclient"
	"go.fd.io/govpp/core"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/cniserver/linuxpod"
	"github.com/vswitchkit/vswitchkit/examples/vswitch/internal/config"
	"github.com/vswitchkit/vswitchkit/examples/vswitch/internal/httpapi"
	"github.com/vswitchkit/vswitchkit/examples/vswitch/internal/simlinux"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// Exit statuses (see the package documentation and config.ExitStatuses).
const (
	exitOK      = 0
	exitFailed  = 1
	exitConfig  = 2
	exitStartup = 3
)

// startupError is a failure before the daemon was ready: it exits with
// exitStartup.
type startupError struct{ err error }

func (e *startupError) Error() string { return e.err.Error() }
func (e *startupError) Unwrap() error { return e.err }

func startup(err error) error { return &startupError{err} }

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	cfg, err := config.Load(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "vswitch:", err)
		var ce *config.Error
		if errors.As(err, &ce) && ce.FilesOnly() {
			return exitStartup
		}
		return exitConfig
	}
	log := newLogger(cfg.Log, stderr)
	routeGoVPPLogs(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// After the first signal the default handling is back: a second one
	// ends the daemon at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := serve(ctx, cfg, log); err != nil {
		var se *startupError
		if errors.As(err, &se) {
			log.Error("vswitch cannot start", slog.Any("error", err))
			return exitStartup
		}
		log.Error("vswitch failed", slog.Any("error", err))
		return exitFailed
	}
	log.Info("vswitch stopped")
	return exitOK
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel()}
	if c.Format == config.LogJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// routeGoVPPLogs sends GoVPP's logs (it logs through global logrus
// loggers) to log at debug level: the VPP driver reports what matters
// itself, and GoVPP's own messages (e.g. replies dropped after a
// disconnect) are noise at any other level.
func routeGoVPPLogs(log *slog.Logger) {
	l := logrus.New()
	l.SetOutput(io.Discard)
	l.SetLevel(logrus.DebugLevel)
	l.AddHook(slogHook{log.With(slog.String("component", "govpp"))})
	core.SetLogger(l)
	socketclient.SetLogger(l)
}

type slogHook struct{ log *slog.Logger }

func (slogHook) Levels() []logrus.Level { return logrus.AllLevels }

func (h slogHook) Fire(e *logrus.Entry) error {
	if !h.log.Enabled(context.Background(), slog.LevelDebug) {
		return nil
	}
	attrs := make([]slog.Attr, 0, len(e.Data)+1)
	attrs = append(attrs, slog.String("govppLevel", e.Level.String()))
	for k, v := range e.Data {
		attrs = append(attrs, slog.Any(k, v))
	}
	h.log.LogAttrs(context.Background(), slog.LevelDebug, e.Message, attrs...)
	return nil
}

// serve runs the daemon until ctx ends (nil) or it fails: a
// *startupError when it failed before it was ready.
func serve(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	log.Info("vswitch starting", slog.String("node", cfg.NodeName), slog.String("vpp", cfg.VPP.Mode),
		slog.String("linux", cfg.Linux), slog.Any("etcd", cfg.Etcd.Endpoints))
	// The HTTP address first: a health probe must not reach another
	// process while this one runs without its endpoint.
	web := httpapi.New(httpapi.Config{Listen: cfg.HTTP.Listen, Logger: log})
	if err := web.Listen(); err != nil {
		return startup(err)
	}
	// HTTP outlives the agent: /healthz and /readyz say "stopping" while
	// the agent shuts down.
	webCtx, stopWeb := context.WithCancel(context.WithoutCancel(ctx))
	webDone := make(chan error, 1)
	go func() { webDone <- web.Run(webCtx) }()
	stopHTTP := func() error { stopWeb(); return <-webDone }

	err := runAgent(ctx, cfg, log, web)
	if herr := stopHTTP(); herr != nil && err == nil {
		err = herr
	}
	return err
}

func runAgent(ctx context.Context, cfg config.Config, log *slog.Logger, web *httpapi.Server) error {
	if cfg.VPP.Mode == config.VPPSocket {
		if err := checkVPPSocket(cfg.VPP.APISocket); err != nil {
			return startup(err)
		}
	}
	web.SetPhase("connecting to etcd")
	etcd, err := connectEtcd(ctx, cfg, log)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return startup(err)
	}
	defer etcd.Close()

	linux, hostIfExists := podLinux(cfg)
	deps := agent.Deps{Etcd: etcd, Linux: linux, Logger: log}
	switch cfg.VPP.Mode {
	case config.VPPSim:
		vpp := vppsim.New(vppsim.Config{
			HostInterfaces:      nonEmpty(cfg.Uplink.AfPacketHostIf, cfg.HostInterconnect.AfPacketHostIf),
			HostInterfaceExists: hostIfExists,
			NICs:                nonEmpty(cfg.Uplink.VPPName),
			Logger:              log,
		})
		deps.VPP = func() adapter.VppAPI { return vpp.NewAdapter() }
	default:
		deps.VPP = func() adapter.VppAPI { return socketclient.NewVppClient(cfg.VPP.APISocket) }
	}
	a, err := agent.Open(cfg.Agent(), deps)
	if err != nil {
		return startup(err)
	}
	web.SetAgent(a)
	ready := make(chan struct{})
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		if a.WaitReady(ctx) == nil {
			close(ready)
			log.Info("vswitch ready", slog.Uint64("nodeID", uint64(a.NodeSync.GetNodeID())))
		}
	}()
	err = a.Run(ctx)
	<-waited // WaitReady returns once Run stopped the agent
	if errors.Is(err, context.Canceled) {
		return nil // stopped by a signal
	}
	select {
	case <-ready:
		return err
	default:
		return startup(err) // failed before it was ready
	}
}

// checkVPPSocket checks that VPP's API socket exists: a daemon started
// without VPP says so at once (status 3) instead of waiting unready. Once
// running, the VPP driver reconnects by itself when VPP restarts.
func checkVPPSocket(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("vpp: API socket: %w (is VPP running, with socksvr { socket-name %s }?)", err, path)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("vpp: API socket: %s is not a socket", path)
	}
	return nil
}

// podLinux returns the pod side of pod interfaces and how the VPP
// stand-in learns which host interfaces exist.
func podLinux(cfg config.Config) (cniserver.Linux, func(string) bool) {
	if cfg.Linux == config.LinuxFake {
		l := simlinux.New()
		return l, l.HostInterfaceExists
	}
	return linuxpod.New(), func(name string) bool {
		_, err := net.InterfaceByName(name)
		return err == nil
	}
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// connectEtcd creates the etcd client. Without a password that does not
// wait for etcd (the agent starts from its local state while etcd is
// down); with one, the client logs in when it is created, so this retries
// with backoff until etcd answers. Wrong credentials are an error.
func connectEtcd(ctx context.Context, cfg config.Config, log *slog.Logger) (*clientv3.Client, error) {
	cc, err := cfg.EtcdClientConfig()
	if err != nil {
		return nil, err
	}
	b := backoff.NewExponentialBackOff()
	b.MaxInterval = 30 * time.Second
	return backoff.Retry(ctx, func() (*clientv3.Client, error) {
		cli, err := clientv3.New(cc)
		if errors.Is(err, rpctypes.ErrAuthFailed) || errors.Is(err, rpctypes.ErrPermissionDenied) {
			return nil, backoff.Permanent(fmt.Errorf("etcd login as %q: %w", cc.Username, err))
		}
		if err != nil {
			return nil, fmt.Errorf("etcd: %w", err)
		}
		// The client does not end with ctx: the agent still uses etcd
		// while it stops (lease revocation); it is closed after that.
		return cli, nil
	}, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(0), backoff.WithNotify(func(err error, next time.Duration) {
		log.Warn("cannot connect to etcd; retrying", slog.Any("error", err), slog.Duration("retryIn", next))
	}))
}

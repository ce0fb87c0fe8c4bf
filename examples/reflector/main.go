// Command reflector runs the vswitchkit Kubernetes reflector: it watches
// the Kubernetes API and writes pods, services, endpoints, nodes,
// namespaces and (with -bgp) the BGP configuration (v1 peering policies,
// v2 cluster configs, peer configs, advertisements, node overrides and
// auth secrets) into etcd, where every
// vswitchkit agent's watcher reads them. Run two or more replicas: one is
// elected leader and writes, the others stand by with warm caches.
//
// See README.md in this directory for flags, RBAC and deployment.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vswitchkit/vswitchkit/bgp/bgpreflector"
	"github.com/vswitchkit/vswitchkit/reflector"
)

type options struct {
	kubeconfig     string
	endpoints      string
	caFile         string
	certFile       string
	keyFile        string
	serverName     string
	username       string
	passwordFile   string
	dialTimeout    time.Duration
	prefix         string
	electionPrefix string
	identity       string
	sessionTTL     time.Duration
	batchSize      int
	bgp            bool
	bgpSecrets     string
	bgpStatus      bool
	bgpStatusEvery time.Duration
	statsInterval  time.Duration
	logLevel       string
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("reflector", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file; empty: the in-cluster configuration (service account)")
	fs.StringVar(&o.endpoints, "etcd-endpoints", "127.0.0.1:2379", "comma-separated etcd client URLs (host:port, http://..., https://...)")
	fs.StringVar(&o.caFile, "etcd-ca", "", "PEM file of the CAs that sign the etcd server certificates; setting -etcd-ca, -etcd-cert or -etcd-key enables TLS")
	fs.StringVar(&o.certFile, "etcd-cert", "", "PEM client certificate for mutual TLS (with -etcd-key)")
	fs.StringVar(&o.keyFile, "etcd-key", "", "PEM key of -etcd-cert")
	fs.StringVar(&o.serverName, "etcd-server-name", "", "name checked against the etcd server certificate; default: the endpoint's host")
	fs.StringVar(&o.username, "etcd-user", "", "etcd user (role-based access control); the password comes from -etcd-password-file or $ETCD_PASSWORD")
	fs.StringVar(&o.passwordFile, "etcd-password-file", "", "file holding the etcd password (never pass a password on the command line)")
	fs.DurationVar(&o.dialTimeout, "etcd-dial-timeout", 5*time.Second, "timeout of one connection attempt to etcd")
	fs.StringVar(&o.prefix, "prefix", reflector.DefaultPrefix, "etcd prefix of the Kubernetes state; must equal the agents' watcher KubeStatePrefix")
	fs.StringVar(&o.electionPrefix, "election-prefix", reflector.DefaultElectionPrefix, "etcd prefix of the leader election")
	fs.StringVar(&o.identity, "identity", "", "this replica's name in the election key; default: <hostname>-<pid>")
	fs.DurationVar(&o.sessionTTL, "session-ttl", reflector.DefaultSessionTTL, "lease TTL of the leadership: a dead leader is replaced after at most this long")
	fs.IntVar(&o.batchSize, "batch-size", reflector.DefaultBatchSize, "operations per etcd transaction; at most the server's --max-txn-ops")
	fs.BoolVar(&o.bgp, "bgp", false, "also reflect the BGP configuration: BGPPeeringPolicy (vswitchkit.io/v1, bgp/bgpreflector/crd.yaml) and the v2 objects (bgp.vswitchkit.io/v2, bgp/bgpreflector/crd-v2.yaml; install both first)")
	fs.StringVar(&o.bgpSecrets, "bgp-secret-namespace", bgpreflector.DefaultSecretNamespace, "with -bgp: the namespace whose Secrets (key \"password\") are the BGP auth secrets; every Secret there is reflected")
	fs.BoolVar(&o.bgpStatus, "bgp-status", true, "with -bgp: the leader writes the agents' BGP status into BGPNodeStatus objects; false switches the writes off")
	fs.DurationVar(&o.bgpStatusEvery, "bgp-status-interval", bgpreflector.DefaultStatusMinInterval, "with -bgp-status: at most one status write per node per interval")
	fs.DurationVar(&o.statsInterval, "stats-interval", time.Minute, "how often to log the reflector's counters; 0: never")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "reflector:", err)
		os.Exit(2)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "reflector: -log-level:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, log); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("reflector failed", slog.Any("error", err))
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, log *slog.Logger) error {
	restCfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubernetes client configuration: %w", err)
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	resources := reflector.KubernetesResources(kube)
	var dyn dynamic.Interface
	if o.bgp {
		if dyn, err = dynamic.NewForConfig(restCfg); err != nil {
			return fmt.Errorf("kubernetes dynamic client: %w", err)
		}
		resources = append(resources, bgpreflector.Resource(dyn))
		resources = append(resources, bgpreflector.V2Resources(dyn, kube, bgpreflector.V2Config{SecretNamespace: o.bgpSecrets})...)
	}
	etcd, err := etcdClient(o)
	if err != nil {
		return err
	}
	defer etcd.Close()

	r, err := reflector.New(etcd, resources, reflector.Config{
		Prefix:         o.prefix,
		ElectionPrefix: o.electionPrefix,
		Identity:       o.identity,
		SessionTTL:     o.sessionTTL,
		BatchSize:      o.batchSize,
		Logger:         log,
	})
	if err != nil {
		return err
	}
	if o.statsInterval > 0 {
		sctx, stopStats := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); logStats(sctx, r, o.statsInterval, log) }()
		defer func() { stopStats(); <-done }()
	}
	if o.bgp {
		sw, err := bgpreflector.NewStatusWriter(etcd, dyn, func() bool { return r.Stats().Leader }, bgpreflector.StatusWriterConfig{
			Disabled: !o.bgpStatus, MinInterval: o.bgpStatusEvery, Logger: log,
		})
		if err != nil {
			return err
		}
		sctx, stopStatus := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = sw.Run(sctx) }()
		defer func() { stopStatus(); <-done }()
	}
	return r.Run(ctx)
}

// etcdClient creates the etcd client; it does not wait for a connection.
func etcdClient(o options) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:            strings.Split(o.endpoints, ","),
		DialTimeout:          o.dialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Username:             o.username,
		Logger:               zap.NewNop(),
	}
	if o.username != "" {
		pw := os.Getenv("ETCD_PASSWORD")
		if o.passwordFile != "" {
			b, err := os.ReadFile(o.passwordFile)
			if err != nil {
				return nil, fmt.Errorf("read the etcd password: %w", err)
			}
			pw = strings.TrimSpace(string(b))
		}
		if pw == "" {
			return nil, errors.New("-etcd-user needs a password (-etcd-password-file or $ETCD_PASSWORD)")
		}
		cfg.Password = pw
	}
	if o.caFile != "" || o.certFile != "" || o.keyFile != "" {
		if (o.certFile == "") != (o.keyFile == "") {
			return nil, errors.New("-etcd-cert and -etcd-key must be given together")
		}
		tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.serverName}
		if o.caFile != "" {
			pem, err := os.ReadFile(o.caFile)
			if err != nil {
				return nil, fmt.Errorf("read the etcd CA file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("etcd CA file %s: no PEM certificate", o.caFile)
			}
			tc.RootCAs = pool
		}
		if o.certFile != "" {
			cert, err := tls.LoadX509KeyPair(o.certFile, o.keyFile)
			if err != nil {
				return nil, fmt.Errorf("load the etcd client certificate: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		cfg.TLS = tc
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return c, nil
}

// logStats logs the reflector's counters every interval until ctx is done.
func logStats(ctx context.Context, r *reflector.Reflector, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := r.Stats()
		attrs := []slog.Attr{
			slog.Bool("leader", s.Leader), slog.Uint64("puts", s.Puts), slog.Uint64("deletes", s.Deletes),
			slog.Uint64("write_errors", s.WriteErrors), slog.Uint64("reconciles", s.Reconciles),
			slog.Duration("last_reconcile", s.LastReconcile),
		}
		for name, rs := range s.Resources {
			attrs = append(attrs, slog.Group(name, slog.Int("objects", rs.Objects), slog.Int("bad", rs.BadObjects)))
		}
		log.LogAttrs(ctx, slog.LevelInfo, "stats", attrs...)
	}
}

// Command cluster runs a working vswitchkit cluster on one machine, without
// root and without flags:
//
//	go run ./examples/cluster
//
// It starts an embedded etcd, the Kubernetes reflector over a simulated
// Kubernetes API, three simulated nodes (each the full agent on a VPP
// stand-in, with a GoBGP speaker on loopback) and a route reflector; adds
// pods through the agents' pod servers; waits until every node's VPP and
// the route reflector agree with the cluster; prints a summary; then
// deletes a pod, adds a backend, lets a node leave, and prints what
// changed. Package internal/demo has the details.
//
// Flags:
//
//	--nodes N        simulated nodes (default 3)
//	--pods N         pods per node (default 4)
//	--services N     services, of every kind in turn (default 5)
//	--services R     the service renderer: nat44 (default) or cnat; give
//	                 --services twice for both (--services cnat --services 10)
//	--ip-family F    ipv4 (default) or dual (dual-stack: needs --services cnat)
//	--etcd URLS      use this etcd (comma-separated client URLs) instead of an embedded one
//	--run-for D      keep the cluster running for D after the change, then exit
//	--json           print the result as JSON (progress goes to stderr)
//	--timeout D      how long to wait for the cluster to converge (default 2m)
//	--log-level L    log the components at this level to stderr (debug, info, warn, error; default: off)
//	--kube K         the Kubernetes API: fake (client-go's fake clientsets, the default) or real (kube-apiserver
//	                 and kube-controller-manager on loopback; the first run builds them: ~35 CPU-minutes)
//
// Ctrl-C stops it at any time; everything it started is stopped and its
// temporary files are removed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"go.fd.io/govpp/core"
	"golang.org/x/term"

	"github.com/vswitchkit/vswitchkit/examples/cluster/internal/demo"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		opts     demo.Options
		etcd     string
		logLevel string
		kube     string
	)
	fs.IntVar(&opts.Nodes, "nodes", demo.DefaultNodes, fmt.Sprintf("number of simulated nodes, 1..%d", demo.MaxNodes))
	fs.IntVar(&opts.PodsPerNode, "pods", demo.DefaultPodsPerNode, fmt.Sprintf("pods per node, 1..%d", demo.MaxPodsPerNode))
	opts.Services = demo.DefaultServices
	fs.Func("services", fmt.Sprintf("a number of services, 1..%d (ClusterIP, NodePort, LoadBalancer, external IP, LoadBalancer with externalTrafficPolicy Local, in turn; default %d), or the service renderer: nat44 (default) or cnat; give it twice for both", demo.MaxServices, demo.DefaultServices),
		func(v string) error {
			if n, err := strconv.Atoi(v); err == nil {
				opts.Services = n
				return nil
			}
			if v != "nat44" && v != "cnat" {
				return fmt.Errorf("%q is neither a number nor nat44 or cnat", v)
			}
			opts.ServiceRenderer = v
			return nil
		})
	fs.StringVar(&opts.IPFamily, "ip-family", "ipv4", "the cluster's IP family: ipv4 or dual (dual-stack pods and services; needs --services cnat)")
	fs.StringVar(&etcd, "etcd", "", "comma-separated client URLs of an etcd to use instead of an embedded one (its /vswitchkit/ keys must be empty)")
	fs.DurationVar(&opts.RunFor, "run-for", 0, "keep the cluster running this long after the scripted change, then exit (Ctrl-C exits earlier)")
	fs.BoolVar(&opts.JSON, "json", false, "print the result as JSON on stdout; progress goes to stderr")
	fs.DurationVar(&opts.Timeout, "timeout", demo.DefaultTimeout, "how long to wait for the cluster to converge before giving up")
	fs.StringVar(&logLevel, "log-level", "", "log the components at this level (debug, info, warn, error) to stderr; default: no logs")
	fs.StringVar(&kube, "kube", "fake", `the Kubernetes API: "fake" (client-go's fake clientsets) or "real" (kube-apiserver and kube-controller-manager on loopback; the first run builds them, ~35 CPU-minutes)`)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cluster: unexpected arguments %q\n", fs.Args())
		return 2
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"nodes", opts.Nodes}, {"pods", opts.PodsPerNode}, {"services", opts.Services}} {
		if f.v < 1 {
			fmt.Fprintf(stderr, "cluster: --%s must be at least 1\n", f.name)
			return 2
		}
	}
	switch kube {
	case "fake":
	case "real":
		opts.RealKube = true
	default:
		fmt.Fprintf(stderr, "cluster: --kube must be fake or real, not %q\n", kube)
		return 2
	}
	for _, e := range strings.Split(etcd, ",") {
		if e = strings.TrimSpace(e); e != "" {
			opts.Etcd = append(opts.Etcd, e)
		}
	}
	if logLevel != "" {
		var lvl slog.Level
		if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
			fmt.Fprintf(stderr, "cluster: --log-level: %v\n", err)
			return 2
		}
		opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	}
	// GoVPP logs through its own global logrus logger; this program
	// decides where that goes: nowhere unless logging is on.
	govppLog := logrus.New()
	govppLog.SetOutput(io.Discard)
	if logLevel != "" {
		govppLog.SetOutput(stderr)
		govppLog.SetLevel(logrus.WarnLevel)
	}
	core.SetLogger(govppLog)

	// Progress: live bars on a terminal, plain lines otherwise; with
	// --json on stderr, so that stdout is only the document.
	progress := stdout
	if opts.JSON {
		progress = stderr
	}
	opts.Progress = progress
	if f, ok := progress.(*os.File); ok && term.IsTerminal(int(f.Fd())) && logLevel == "" {
		// Bars need the terminal's width (a pseudo-terminal may have none).
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			opts.Live = true
		}
	}

	// Output piped into a program that exits early (| head) makes writes
	// fail instead of killing the process, so that it still cleans up.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal the demo shuts down; a second one kills it.
	defer context.AfterFunc(ctx, stop)()
	start := time.Now()
	_, err := demo.Run(ctx, opts, stdout)
	switch {
	case err == nil:
		return 0
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "cluster: interrupted after %.1fs; everything stopped and cleaned up\n", time.Since(start).Seconds())
		return 130
	default:
		fmt.Fprintf(stderr, "cluster: %v\n", err)
		return 1
	}
}

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/term"

	"github.com/vswitchkit/vswitchkit/examples/scale/internal/clustersim"
	"github.com/vswitchkit/vswitchkit/examples/scale/internal/envelope"
)

// runCluster runs the cluster simulation ("scale cluster ...").
func runCluster(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scale cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	agents := fs.String("agents", "500,1000,2000,5000", "comma-separated numbers of agents (nodes), one run each")
	procs := fs.Int("processes", 4, "agent processes")
	members := fs.Int("members", 3, "etcd members")
	election := fs.Uint("election-ms", 1000, "etcd election timeout in ms (heartbeat 100 ms)")
	pods := fs.Int("pods-per-node", 0, "pods per node before the start")
	services := fs.Float64("services-per-node", 0, "services per node (10 endpoints each)")
	layout := fs.Int("layout", 0, "key layout of the Kubernetes state: 1 (every pod under k8s/pod/) or 2 (pods per node, the reflector's; default)")
	kill := fs.String("kill", "", "kill one etcd member when a quarter of the agents are Ready: leader or follower")
	churn := fs.Float64("churn", 100, "pod changes per second across the cluster in the steady-state measure (negative: none)")
	churnFor := fs.Duration("churn-for", 0, "length of the steady-state measure (default 20s)")
	leaseTTL := fs.Duration("lease-ttl", 0, "lease TTL of the agents' IPAM etcd stores (default: etcdstore's, 15s)")
	timeout := fs.Duration("timeout", 0, "how long to wait for every agent to be Ready (default 10m)")
	gogc := fs.Int("gogc", 100, "GOGC of the agent processes")
	nice := fs.Int("agent-nice", 10, "nice value of the agent processes, so that the etcd members (on cores of their own in a cluster) are not starved by them (-1: off)")
	maxRSS := fs.Float64("max-rss", 16, "GiB: stop when the agent processes together hold more (each gets a GOMEMLIMIT of its share of 80%)")
	plotPath := fs.String("plot", "cluster.png", "PNG file to write the plot to (empty: none)")
	jsonOut := fs.String("json", "", "file to write the results to as JSON (durations in nanoseconds)")
	from := fs.String("from", "", "comma-separated JSON files of earlier runs (-json) to report instead of running")
	rate := fs.Float64("extrapolate-rate", 100, "pod changes per second of the extrapolation")
	extraPlot := fs.String("extrapolation-plot", "", "PNG file to write the extrapolation's plot to (empty: none)")
	logs := fs.String("logs", "", "file for the children's standard error")
	verbose := fs.Bool("v", false, "log the runner's steps")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := clustersim.Config{Processes: *procs, Members: *members, ElectionMs: *election, PodsPerNode: *pods,
		ServicesPerNode: *services, Layout: *layout, Kill: *kill, ChurnRate: *churn, ChurnDuration: *churnFor, LeaseTTL: *leaseTTL,
		Timeout: *timeout, GOGC: *gogc, AgentNice: *nice, MaxRSS: uint64(*maxRSS * (1 << 30))}
	for s := range strings.SplitSeq(*agents, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			fmt.Fprintf(stderr, "scale cluster: -agents: %v\n", err)
			return 2
		}
		cfg.Agents = append(cfg.Agents, n)
	}
	if *logs != "" {
		f, err := os.Create(*logs)
		if err != nil {
			fmt.Fprintf(stderr, "scale cluster: %v\n", err)
			return 1
		}
		defer f.Close()
		cfg.Logs = f
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	var bars *envelope.BarProgress
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) && !*verbose {
		bars = envelope.Bars(stderr)
		cfg.Progress = bars
	} else {
		cfg.Progress = envelope.Lines(stderr)
	}
	var results []clustersim.Result
	var err error
	if *from != "" {
		for name := range strings.SplitSeq(*from, ",") {
			var rs []clustersim.Result
			raw, rerr := os.ReadFile(strings.TrimSpace(name))
			if rerr == nil {
				rerr = json.Unmarshal(raw, &rs)
			}
			if rerr != nil {
				fmt.Fprintf(stderr, "scale cluster: -from: %v\n", rerr)
				return 1
			}
			results = append(results, rs...)
		}
		*jsonOut = ""
	} else {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		results, err = clustersim.Run(ctx, cfg)
	}
	if bars != nil {
		bars.Wait()
	}
	if len(results) > 0 {
		if err := report(stdout, func(w io.Writer) error { return clustersim.Table(w, results) }, results,
			*jsonOut, *plotPath, func(path string) error { return clustersim.Plot(path, results) }); err != nil {
			fmt.Fprintf(stderr, "scale cluster: %v\n", err)
			return 1
		}
		if slices.ContainsFunc(results, func(r clustersim.Result) bool { return r.Churn != nil }) {
			fmt.Fprintf(stdout, "\nextrapolation (a line fitted to the measured points per layout) to %.0f pod changes/s:\n", *rate)
			if err := clustersim.ExtrapolationTable(stdout, results, *rate); err != nil {
				fmt.Fprintf(stderr, "scale cluster: %v\n", err)
				return 1
			}
			if *extraPlot != "" {
				if err := clustersim.PlotExtrapolation(*extraPlot, results, *rate); err != nil {
					fmt.Fprintf(stderr, "scale cluster: extrapolation plot: %v\n", err)
					return 1
				}
				fmt.Fprintf(stdout, "\nextrapolation plot: %s\n", *extraPlot)
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "scale cluster: %v\n", err)
		return 1
	}
	return 0
}

// Command scale measures the scale envelope of one vswitchkit agent: for
// clusters of 500, 1000, 2000 and 5000 nodes (30 pods and 2 services per
// node: 150k pods and 10k services at 5000) it fills an in-process etcd
// with a synthetic cluster, starts one full agent (the daemon's wiring, on
// the VPP stand-in with simulated Linux) in a child process, and measures
// its start-up, its memory and the latency of incremental changes. It
// prints a table and writes a plot.
//
//	go run ./examples/scale                       # the four sizes
//	go run ./examples/scale -sizes 50,200 -events 50
//	go run ./examples/scale -profile /tmp/prof    # CPU and heap profiles of the agent
//	go run ./examples/scale -v                    # log the steps and the agent loop's event times
//
// With "cluster" as its first argument it runs the cluster simulation
// instead: the cluster-facing parts of N agents at once against a
// three-member etcd (see package clustersim and BENCHMARKS.md):
//
//	go run ./examples/scale cluster                       # 500, 1000, 2000 and 5000 agents
//	go run ./examples/scale cluster -agents 1000 -kill leader
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
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/term"

	"github.com/vswitchkit/vswitchkit/examples/scale/internal/agentproc"
	"github.com/vswitchkit/vswitchkit/examples/scale/internal/clustersim"
	"github.com/vswitchkit/vswitchkit/examples/scale/internal/envelope"
)

func main() {
	if agentproc.IsChild() {
		os.Exit(agentproc.Main())
	}
	if clustersim.IsChild() {
		os.Exit(clustersim.ChildMain())
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "cluster" {
		return runCluster(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sizes := fs.String("sizes", "500,1000,2000,5000", "comma-separated cluster sizes (nodes)")
	events := fs.Int("events", 200, "samples per incremental measure")
	out := fs.String("plot", "envelope.png", "PNG file to write the plot to (empty: none)")
	jsonOut := fs.String("json", "", "file to write the results to as JSON (durations in nanoseconds)")
	profile := fs.String("profile", "", "directory for CPU and heap profiles of the agent, per size")
	logs := fs.String("agent-logs", "", "file for the agent's logs (warnings and errors)")
	verbose := fs.Bool("v", false, "log the runner's steps")
	layout := fs.Int("layout", 0, "key layout of the cluster: 1 (every pod under k8s/pod/) or 2 (pods per node, the reflector's; default)")
	policies := fs.Bool("network-policies", false, "two NetworkPolicies per namespace (the agent's policy processor indexes every pod as a peer)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := envelope.Config{Events: *events, ProfileDir: *profile, Layout: *layout, NetworkPolicies: *policies}
	for s := range strings.SplitSeq(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			fmt.Fprintf(stderr, "scale: -sizes: %v\n", err)
			return 2
		}
		cfg.Sizes = append(cfg.Sizes, n)
	}
	if *profile != "" {
		if err := os.MkdirAll(*profile, 0o755); err != nil {
			fmt.Fprintf(stderr, "scale: %v\n", err)
			return 1
		}
	}
	if *logs != "" {
		f, err := os.Create(*logs)
		if err != nil {
			fmt.Fprintf(stderr, "scale: %v\n", err)
			return 1
		}
		defer f.Close()
		cfg.ChildLogs = f
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

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, err := envelope.Run(ctx, cfg)
	if bars != nil {
		bars.Wait()
	}
	if len(results) > 0 {
		if err := report(stdout, func(w io.Writer) error { return envelope.Table(w, results) }, results,
			*jsonOut, *out, func(path string) error { return envelope.Plot(path, results) }); err != nil {
			fmt.Fprintf(stderr, "scale: %v\n", err)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "scale: %v\n", err)
		return 1
	}
	return 0
}

// report prints a run's table and writes its results as JSON and its plot
// where asked (empty paths: not).
func report(stdout io.Writer, table func(io.Writer) error, results any, jsonPath, plotPath string, plot func(string) error) error {
	fmt.Fprintln(stdout)
	if err := table(stdout); err != nil {
		return err
	}
	if jsonPath != "" {
		raw, err := json.MarshalIndent(results, "", "  ")
		if err == nil {
			err = os.WriteFile(jsonPath, append(raw, '\n'), 0o644)
		}
		if err != nil {
			return err
		}
	}
	if plotPath != "" {
		if err := plot(plotPath); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		fmt.Fprintf(stdout, "\nplot: %s\n", plotPath)
	}
	return nil
}

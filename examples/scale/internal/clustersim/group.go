package clustersim

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vswitchkit/vswitchkit/examples/scale/internal/agentproc"
)

// envGroup holds the JSON [groupConfig] of an agent-group child.
const envGroup = "VSWITCHKIT_SIM_AGENTS"

// File descriptors of a group child's pipes (ExtraFiles 0 and 1).
const (
	commandFD = 3
	reportFD  = 4
)

// groupConfig configures one agent-group process: agents First to
// First+Count-1 of the simulation.
type groupConfig struct {
	First, Count int
	Nodes        int // agents in the whole simulation
	Endpoints    []string
	Layout       int
	LeaseTTL     time.Duration // the IPAM etcd stores' lease TTL (0: etcdstore's default)
	Seed         uint64
}

// command is sent by the runner to a group.
type command struct {
	// Op: "start" (start every agent at once), "stats", "churn" (Rate
	// changes per second for Duration, then report "churned"), "quit".
	Op       string
	Rate     float64       `json:",omitempty"`
	Duration time.Duration `json:",omitempty"`
}

// report is sent by a group to the runner.
type report struct {
	// Type: "created" (the process runs and waits for "start"),
	// "ready" (agent Agent is Ready: At), "stats", "churned", "error".
	Type  string
	Agent int   `json:",omitempty"`
	At    int64 `json:",omitempty"`
	// Phases are the unix nanos of the phases of the agent's start.
	Phases  map[string]int64 `json:",omitempty"`
	Stats   *groupStats      `json:",omitempty"`
	Churn   *churnStats      `json:",omitempty"`
	Err     string           `json:",omitempty"`
	Started int64            `json:",omitempty"` // "created": unix nanos
}

// groupStats is what a group reports about its agents.
type groupStats struct {
	// IDs are the agents' node IDs (0 for an agent without one), in
	// agent order.
	IDs []uint32
	// Traffic per agent, in agent order.
	Traffic []Traffic
	// Delivered counts the KubeStateChange events the agents' watchers
	// delivered, per agent; Resyncs their DBResyncs from etcd.
	Delivered, Resyncs []uint64
	// Failed names the agents whose component ended with an error.
	Failed []string
	// Warnings counts the Warn lines of the agents' components by
	// message (a degraded state is logged once when it starts).
	Warnings map[string]int
	Memory   agentproc.Memory
	Ready    int
	// NumGoroutine of the process.
	Goroutines int
	// LiveHeap is the heap in use after a forced GC, bytes.
	LiveHeap uint64
}

// groupMain runs an agent group until the runner sends "quit" or closes
// the command pipe.
func groupMain() int {
	out := &reporter{w: os.NewFile(reportFD, "reports")}
	var cfg groupConfig
	if err := json.Unmarshal([]byte(os.Getenv(envGroup)), &cfg); err != nil {
		out.send(report{Type: "error", Err: fmt.Sprintf("agent group: config: %v", err)})
		return 2
	}
	g := &group{cfg: cfg, out: out, warns: &warnCounter{counts: map[string]int{}}}
	if err := g.run(os.NewFile(commandFD, "commands")); err != nil {
		out.send(report{Type: "error", Err: err.Error()})
		return 1
	}
	return 0
}

// reporter writes reports; safe for concurrent use.
type reporter struct {
	mu sync.Mutex
	w  io.Writer
}

func (r *reporter) send(rep report) {
	raw, _ := json.Marshal(rep)
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.w.Write(append(raw, '\n'))
}

type group struct {
	cfg   groupConfig
	out   *reporter
	warns *warnCounter

	mu     sync.Mutex
	agents []*agent
	ready  atomic.Int64
	nstats int
}

func writeHeapProfile(path string) {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup("heap").WriteTo(f, 0)
}

func (g *group) run(commands io.Reader) error {
	g.out.send(report{Type: "created", Started: time.Now().UnixNano()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer g.stopAll()
	sc := bufio.NewScanner(commands)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var c command
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return fmt.Errorf("agent group: command: %w", err)
		}
		switch c.Op {
		case "start":
			if err := g.startAll(ctx); err != nil {
				return err
			}
		case "stats":
			st := g.stats()
			g.nstats++
			if dir := os.Getenv(envProfile); dir != "" {
				writeHeapProfile(filepath.Join(dir, fmt.Sprintf("agents-%d-heap-%d.pprof", os.Getpid(), g.nstats)))
			}
			g.out.send(report{Type: "stats", Stats: &st})
		case "churn":
			cs, err := g.churn(ctx, c.Rate, c.Duration)
			if err != nil {
				return err
			}
			g.out.send(report{Type: "churned", Churn: &cs})
		case "quit":
			return nil
		default:
			return fmt.Errorf("agent group: unknown command %q", c.Op)
		}
	}
	return nil
}

// startAll starts every agent of the group at once, each on a goroutine
// of its own, as many processes on many nodes would.
func (g *group) startAll(ctx context.Context) error {
	log := slog.New(g.warns)
	opts := agentOptions{Endpoints: g.cfg.Endpoints, Layout: g.cfg.Layout, LeaseTTL: g.cfg.LeaseTTL, Logger: log}
	agents := make([]*agent, g.cfg.Count)
	errs := make([]error, g.cfg.Count)
	var wg sync.WaitGroup
	for i := range g.cfg.Count {
		wg.Go(func() {
			agents[i], errs[i] = startAgent(ctx, g.cfg.First+i, opts, func(a *agent) {
				g.ready.Add(1)
				g.out.send(report{Type: "ready", Agent: a.idx, At: a.readyAt.Load(), Phases: a.phases()})
			})
		})
	}
	wg.Wait()
	g.mu.Lock()
	g.agents = slices.DeleteFunc(agents, func(a *agent) bool { return a == nil })
	g.mu.Unlock()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (g *group) stopAll() {
	g.mu.Lock()
	agents := g.agents
	g.agents = nil
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Go(a.stop)
	}
	wg.Wait()
}

func (g *group) stats() groupStats {
	g.mu.Lock()
	agents := g.agents
	g.mu.Unlock()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := groupStats{Warnings: g.warns.snapshot(), Memory: agentproc.ReadMemory(), Ready: int(g.ready.Load()),
		Goroutines: runtime.NumGoroutine(), LiveHeap: ms.HeapAlloc}
	for _, a := range agents {
		st.IDs = append(st.IDs, a.ns.GetNodeID())
		st.Traffic = append(st.Traffic, a.rpc.snapshot())
		ws := a.w.Stats()
		st.Delivered = append(st.Delivered, ws.KubeChanges)
		st.Resyncs = append(st.Resyncs, ws.RemoteResyncs)
		if err := a.err(); err != nil {
			st.Failed = append(st.Failed, a.name+": "+err.Error())
		}
	}
	return st
}

// warnCounter is a slog.Handler that counts the records at Warn and above
// by message and drops everything.
type warnCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (w *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnCounter) Handle(_ context.Context, r slog.Record) error {
	key := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" {
			key += ": " + digits.ReplaceAllString(a.Value.String(), "#")
			if len(key) > 200 {
				key = key[:200]
			}
			return false
		}
		return true
	})
	w.mu.Lock()
	w.counts[key]++
	w.mu.Unlock()
	return nil
}

// digits matches the numbers in errors (revisions, IDs, durations), so
// that errors that differ only in them count as one.
var digits = regexp.MustCompile(`[0-9a-f]*[0-9][0-9a-f.]*`)

func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnCounter) WithGroup(string) slog.Handler      { return w }

func (w *warnCounter) snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.counts))
	for k, v := range w.counts {
		out[k] = v
	}
	return out
}

// Package clustersim is the cluster simulation of the scale program: it
// runs the cluster-facing parts of N agents — each with its own etcd
// client, the real watcher, nodesync (with its etcd adapter) and IPAM with
// its etcd store, in a real event loop, no VPP — in a few processes
// against a real etcd cluster of three members on loopback, which it
// starts as child processes built from the module's
// go.etcd.io/etcd/server/v3 (the embed package). It measures the cold
// start of all agents at once (until every agent is Ready: node ID
// claimed, node records read, the start-up resync done, watches running,
// its VPP address published), optionally with one etcd member killed
// during it; etcd's CPU, memory and database size; what every agent sent
// and received; and, under a steady pod churn written as the reflector
// writes it, the watch events every agent receives and etcd's CPU per
// change.
package clustersim

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/examples/scale/internal/envelope"
)

// IsChild tells whether this process was started as a child of the
// simulation (an etcd member or an agent group).
func IsChild() bool { return os.Getenv(envMember) != "" || os.Getenv(envGroup) != "" }

// ChildMain runs the child this process was started as and returns its
// exit code.
func ChildMain() int {
	name := "agents"
	main := groupMain
	if os.Getenv(envMember) != "" {
		name, main = "etcd", memberMain
	}
	if dir := os.Getenv(envProfile); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", name, os.Getpid())))
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer f.Close()
			defer pprof.StopCPUProfile()
		}
	}
	return main()
}

// envProfile names a directory: every child writes a CPU profile of its
// whole life there (etcd-<pid>.pprof, agents-<pid>.pprof).
const envProfile = "VSWITCHKIT_SIM_PROFILE"

// Config configures a simulation run. The zero value runs the sizes of
// the issue (500, 1000, 2000 and 5000 agents) with the defaults below.
type Config struct {
	// Agents are the numbers of agents (= nodes) to simulate, one run
	// each. Default: 500, 1000, 2000, 5000.
	Agents []int
	// Processes is the number of agent processes (the agents are spread
	// evenly). Default: 4 (fewer for fewer agents).
	Processes int
	// Members is the size of the etcd cluster. Default: 3.
	Members int
	// ElectionMs is etcd's election timeout (heartbeat 100 ms).
	// Default: 1000 (etcd's).
	ElectionMs uint
	// PodsPerNode is the number of pods per node in the cluster before the
	// agents start (with a peer record each). Default: 0.
	PodsPerNode int
	// ServicesPerNode is the number of services per node (10 endpoints
	// each). Default: 0; negative: none.
	ServicesPerNode float64
	// Layout is the key layout of the Kubernetes state: 1 (every pod under
	// k8s/pod/, read by every agent) or 2 (pods per node). Default:
	// kubemodel.CurrentLayout, the reflector's.
	Layout int
	// Kill, when set, kills one etcd member (SIGKILL) during the cold
	// start, once a quarter of the agents are Ready: "leader" or
	// "follower".
	Kill string
	// ChurnRate is the pod changes per second across the cluster of the
	// steady-state measure, and ChurnDuration its length. Defaults: 100/s,
	// 20s; a negative rate skips it.
	ChurnRate     float64
	ChurnDuration time.Duration
	// LeaseTTL is the lease TTL of every agent's IPAM etcd store.
	// Default: etcdstore's (15s).
	LeaseTTL time.Duration
	// Timeout bounds the wait for every agent to be Ready. Default: 10m.
	Timeout time.Duration
	// GOGC is the GOGC of the agent processes. Default: 100.
	GOGC int
	// AgentNice is the nice value the agent processes run at (started
	// through nice(1)), so that the etcd members, which in a cluster have
	// cores of their own, are not starved by the agents sharing this
	// machine's: starved members miss raft heartbeats, elect leaders and
	// refuse requests, which no cluster of 5000 separate nodes would
	// see. The agents still use every cycle etcd leaves. Default: 10;
	// negative: off (the agents at etcd's priority).
	AgentNice int
	// MaxRSS bounds the resident memory of all agent processes together:
	// the run is stopped (the processes killed) when they exceed it, so
	// that the simulation never takes the machine's memory from others.
	// Every agent process gets a GOMEMLIMIT of its share of 80% of it.
	// Default: 16 GiB.
	MaxRSS uint64
	// Executable is the program to start as children (it must call
	// ChildMain when IsChild). Default: this program.
	Executable string
	// Logs receives the children's standard error. Default: discard.
	Logs io.Writer
	// Progress shows the progress. Default: none.
	Progress envelope.Progress
	// Logger receives the runner's steps. Default: discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Agents) == 0 {
		c.Agents = []int{500, 1000, 2000, 5000}
	}
	for _, n := range c.Agents {
		if n < 2 || n > 16000 {
			return c, fmt.Errorf("%d agents: want 2 to 16000", n)
		}
	}
	c.Processes = cmp.Or(c.Processes, 4)
	c.Members = cmp.Or(c.Members, 3)
	c.ElectionMs = cmp.Or(c.ElectionMs, 1000)
	c.Layout = cmp.Or(c.Layout, kubemodel.CurrentLayout)
	if c.Layout != 1 && c.Layout != 2 {
		return c, fmt.Errorf("layout %d: want 1 or 2", c.Layout)
	}
	if c.Kill != "" && c.Kill != "leader" && c.Kill != "follower" {
		return c, fmt.Errorf("kill %q: want leader or follower", c.Kill)
	}
	c.ChurnRate = cmp.Or(c.ChurnRate, 100)
	c.ChurnDuration = cmp.Or(c.ChurnDuration, 20*time.Second)
	c.Timeout = cmp.Or(c.Timeout, 10*time.Minute)
	c.GOGC = cmp.Or(c.GOGC, 100)
	switch {
	case c.AgentNice == 0:
		c.AgentNice = 10
	case c.AgentNice < 0:
		c.AgentNice = 0
	case c.AgentNice > 19:
		return c, fmt.Errorf("agent nice %d: want at most 19", c.AgentNice)
	}
	c.MaxRSS = cmp.Or(c.MaxRSS, 16<<30)
	if c.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return c, err
		}
		c.Executable = exe
	}
	if c.Logs == nil {
		c.Logs = io.Discard
	}
	if c.Progress == nil {
		c.Progress = envelope.Lines(io.Discard)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Result is what one run measured.
type Result struct {
	Agents, Processes, Members int
	Layout                     int
	PodsPerNode                int
	ServicesPerNode            float64
	Keys                       int // Kubernetes-state keys written before the start
	Killed                     string
	AgentNice                  int     // the agent processes' nice value (0: etcd's priority)
	LoadBefore, LoadAfter      float64 // 1-minute load averages

	// Ready holds, sorted, the time from the start of the storm to each
	// agent's Ready; AllReady is the last of them (0 if not all were).
	Ready    []time.Duration
	AllReady time.Duration
	// Phases holds, per phase of the start ("nodesync": ID claimed and
	// records read; "snapshot": the watcher's first DBResync; "ipam
	// store": the node's IPAM records owned; "ready"), sorted, the time
	// from the start of the storm to each agent's end of it.
	Phases map[string][]time.Duration
	// NotReady is the number of agents not Ready within Config.Timeout;
	// LateReady those of them that became Ready while the stats were
	// collected.
	NotReady, LateReady int
	// IDsUnique and IDsDense: the node IDs the agents have are distinct,
	// and they are exactly 1..N; NoID is the number of agents without one.
	IDsUnique, IDsDense bool
	NoID                int
	MaxID               uint32
	// Failed lists agents whose component gave up (its Run ended with an
	// error); Warnings counts the Warn lines of all agents by message.
	Failed   []string
	Warnings map[string]int

	// Etcd per member: peak RSS (VmHWM), CPU during the storm (from the
	// start to all Ready), database size at the end.
	EtcdPeakRSS  []uint64
	EtcdStormCPU []time.Duration
	EtcdDBSize   []int64
	EtcdTerms    []uint64 // raft terms at the end (elections happened if > 2)
	// EtcdRSS is the resident set of every member over time; StormAt is
	// when the storm started on the same clock.
	EtcdRSS [][]Sample
	StormAt time.Duration
	// SimPeakRSS is the peak RSS of every agent process.
	SimPeakRSS []uint64
	// SimStormCPU is the CPU time the agent processes used in the storm.
	SimStormCPU time.Duration
	// SimLiveHeap is the live heap of all agent processes after the
	// storm (after a forced GC), and SimGoroutines their goroutines.
	SimLiveHeap   uint64
	SimGoroutines int

	// Storm is what the agents sent and received from their start until
	// all were Ready (sums over agents); StormMax the agent that received
	// most.
	Storm    Traffic
	StormMax Traffic

	// Churn is the steady-state measure (zero without it).
	Churn *ChurnResult
}

// ChurnResult is the steady-state measure under pod churn.
type ChurnResult struct {
	Rate     float64
	Duration time.Duration
	Changes  map[string]int
	Errors   int
	LastErr  string
	// Traffic is what the agents received during the churn window
	// (sums over agents); Idle the same for an idle window as long
	// before it.
	Traffic, Idle Traffic
	// Delivered is the number of KubeStateChange events the watchers
	// delivered to their loops in the window.
	Delivered uint64
	// EtcdCPU and IdleCPU are the CPU time of all members in the churn
	// window and in the idle window; Window and IdleWindow their lengths.
	EtcdCPU, IdleCPU   time.Duration
	Window, IdleWindow time.Duration
	// Settle is how long the runner waited after the storm for etcd's
	// CPU to come down (the storm's tail: lease renewals, watches
	// catching up) before the idle window.
	Settle time.Duration
}

// Run runs every size in turn.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, n := range cfg.Agents {
		r, err := runOne(ctx, cfg, n)
		if errors.Is(err, errNotAllReady) {
			out = append(out, r) // the table shows how far it got
		}
		if err != nil {
			return out, fmt.Errorf("%d agents: %w", n, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// groupProc is a running agent-group child.
type groupProc struct {
	cfg     groupConfig
	cmd     *exec.Cmd
	cmds    *os.File
	reports chan report
	exited  chan struct{}
	waitErr error
}

func startGroup(exe string, cfg groupConfig, gogc, nice int, memLimit uint64, logs io.Writer) (*groupProc, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		return nil, err
	}
	cmd := exec.Command(exe)
	if nice > 0 {
		// Every thread of the child starts at the nice value (setpriority
		// after the start would miss the threads already running).
		cmd = exec.Command("nice", "-n", strconv.Itoa(nice), exe)
	}
	cmd.Env = append(os.Environ(), envGroup+"="+string(raw), "GOGC="+strconv.Itoa(gogc), "GOMAXPROCS=2",
		"GOMEMLIMIT="+strconv.FormatUint(memLimit, 10))
	cmd.ExtraFiles = []*os.File{cmdR, repW}
	cmd.Stdout, cmd.Stderr = logs, logs
	g := &groupProc{cfg: cfg, cmd: cmd, cmds: cmdW, reports: make(chan report, 1024), exited: make(chan struct{})}
	err = cmd.Start()
	cmdR.Close()
	repW.Close()
	if err != nil {
		cmdW.Close()
		repR.Close()
		return nil, fmt.Errorf("start agent group: %w", err)
	}
	go func() {
		defer close(g.reports)
		sc := bufio.NewScanner(repR)
		sc.Buffer(make([]byte, 64<<10), 256<<20)
		for sc.Scan() {
			var r report
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				g.reports <- r
			}
		}
		repR.Close()
	}()
	go func() {
		g.waitErr = cmd.Wait()
		close(g.exited)
	}()
	return g, nil
}

func (g *groupProc) send(c command) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = g.cmds.Write(append(raw, '\n'))
	return err
}

// stop asks the group to quit and waits; it kills it after two minutes.
func (g *groupProc) stop() {
	_ = g.send(command{Op: "quit"})
	g.cmds.Close()
	select {
	case <-g.exited:
	case <-time.After(2 * time.Minute):
		_ = g.cmd.Process.Kill()
		<-g.exited
	}
	for range g.reports {
	}
}

// run is the state of one size's run.
type run struct {
	cfg    Config
	n      int
	log    *slog.Logger
	etcd   *cluster
	groups []*groupProc
	smp    *sampler
	res    Result

	// reports of every group, merged.
	reports chan taggedReport
	// overMemory says why guardMemory killed the agent processes.
	overMemory atomic.Pointer[string]
}

// guardMemory kills the agent processes when together they hold more than
// Config.MaxRSS, until stop is closed.
func (r *run) guardMemory(stop <-chan struct{}) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		var total uint64
		for _, g := range r.groups {
			total += memory(g.cmd.Process.Pid).RSS
		}
		if total > r.cfg.MaxRSS {
			msg := fmt.Sprintf("the agent processes hold %s MiB, more than the limit of %s MiB (-max-rss)", mib(total), mib(r.cfg.MaxRSS))
			r.overMemory.Store(&msg)
			for _, g := range r.groups {
				_ = g.cmd.Process.Kill()
			}
			return
		}
	}
}

type taggedReport struct {
	group int
	report
	closed bool
}

func runOne(ctx context.Context, cfg Config, n int) (res Result, err error) {
	dir, err := os.MkdirTemp("", "vsksim")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	r := &run{cfg: cfg, n: n, log: cfg.Logger.With(slog.Int("agents", n)), smp: newSampler(250 * time.Millisecond),
		reports: make(chan taggedReport, 4096)}
	defer r.smp.close()
	procs := min(cfg.Processes, n)
	r.res = Result{Agents: n, Processes: procs, Members: cfg.Members, Layout: cfg.Layout, PodsPerNode: cfg.PodsPerNode,
		ServicesPerNode: max(cfg.ServicesPerNode, 0), Killed: cfg.Kill, AgentNice: cfg.AgentNice, LoadBefore: loadAverage()}

	st := cfg.Progress.Stage(n, fmt.Sprintf("start %d etcd members", cfg.Members), cfg.Members)
	r.etcd, err = startCluster(ctx, cfg.Executable, filepath.Join(dir, "etcd"), cfg.Members, cfg.ElectionMs, cfg.Logs)
	if err != nil {
		return res, err
	}
	defer r.etcd.stop()
	for i, m := range r.etcd.members {
		r.smp.track(memberName(i), m.pid())
	}
	st.Add(cfg.Members)
	st.Done()
	cli, err := r.etcd.client()
	if err != nil {
		return res, err
	}
	defer cli.Close()

	total := len(slicesOfState(n, cfg))
	st = cfg.Progress.Stage(n, fmt.Sprintf("write %d keys", total), total)
	r.res.Keys, err = writeState(ctx, cli, n, cfg.PodsPerNode, max(cfg.ServicesPerNode, 0), cfg.Layout, st.Add)
	st.Done()
	if err != nil {
		return res, fmt.Errorf("write the cluster state: %w", err)
	}

	// The agent processes, each waiting for "start".
	st = cfg.Progress.Stage(n, fmt.Sprintf("start %d agent processes", procs), procs)
	var wg sync.WaitGroup
	defer func() {
		for _, g := range r.groups {
			wg.Go(g.stop)
		}
		wg.Wait()
	}()
	first := 0
	for p := range procs {
		count := n/procs + b2i(p < n%procs)
		g, err := startGroup(cfg.Executable, groupConfig{First: first, Count: count, Nodes: n, Endpoints: r.etcd.endpoints(),
			Layout: cfg.Layout, LeaseTTL: cfg.LeaseTTL, Seed: uint64(n)}, cfg.GOGC, cfg.AgentNice, cfg.MaxRSS*8/10/uint64(procs), cfg.Logs)
		if err != nil {
			return res, err
		}
		first += count
		r.groups = append(r.groups, g)
		r.smp.track(groupName(p), g.cmd.Process.Pid)
		go func() {
			for rep := range g.reports {
				r.reports <- taggedReport{group: p, report: rep}
			}
			r.reports <- taggedReport{group: p, closed: true}
		}()
	}
	guard := make(chan struct{})
	defer close(guard)
	go r.guardMemory(guard)
	for range procs {
		rep, err := r.next(ctx, time.Minute)
		if err != nil {
			return res, err
		}
		if rep.Type != "created" {
			return res, fmt.Errorf("agent group %d: got %q, want created", rep.group, rep.Type)
		}
		st.Add(1)
	}
	st.Done()

	// A storm that did not end with every agent Ready still reports what
	// it measured (etcd's memory, who gave up), without the churn.
	stormErr := r.storm(ctx)
	if stormErr != nil && !errors.Is(stormErr, errNotAllReady) {
		return r.res, stormErr
	}
	if cfg.ChurnRate > 0 && stormErr == nil {
		if err := r.churn(ctx); err != nil {
			return r.res, err
		}
	}
	status := r.etcd.status(ctx, cli)
	for i, s := range status {
		r.res.EtcdDBSize = append(r.res.EtcdDBSize, s.DBSize)
		r.res.EtcdTerms = append(r.res.EtcdTerms, s.RaftTerm)
		r.res.EtcdPeakRSS = append(r.res.EtcdPeakRSS, r.smp.peakRSS(memberName(i)))
		r.res.EtcdRSS = append(r.res.EtcdRSS, r.smp.seriesOf(memberName(i)))
	}
	for p := range procs {
		r.res.SimPeakRSS = append(r.res.SimPeakRSS, r.smp.peakRSS(groupName(p)))
	}
	r.res.LoadAfter = loadAverage()
	return r.res, stormErr
}

// errNotAllReady is returned (wrapped) by a run whose agents were not all
// Ready within Config.Timeout.
var errNotAllReady = errors.New("not every agent Ready")

func memberName(i int) string { return "etcd-" + strconv.Itoa(i) }
func groupName(i int) string  { return "agents-" + strconv.Itoa(i) }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// slicesOfState counts the keys of the cluster state (for the progress).
func slicesOfState(n int, cfg Config) []struct{} {
	k := max(1, n/50) + n + 2*n*cfg.PodsPerNode + 2*int(max(cfg.ServicesPerNode, 0)*float64(n))
	return make([]struct{}, k)
}

// next returns the next report of any group; a group's error or exit
// fails it.
func (r *run) next(ctx context.Context, timeout time.Duration) (taggedReport, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case rep := <-r.reports:
		if rep.closed {
			g := r.groups[rep.group]
			<-g.exited
			if over := r.overMemory.Load(); over != nil {
				return rep, fmt.Errorf("stopped: %s", *over)
			}
			return rep, fmt.Errorf("agent group %d exited: %v", rep.group, g.waitErr)
		}
		if rep.Type == "error" {
			return rep, fmt.Errorf("agent group %d: %s", rep.group, rep.Err)
		}
		return rep, nil
	case <-t.C:
		return taggedReport{}, fmt.Errorf("no report from the agent groups within %v", timeout)
	case <-ctx.Done():
		return taggedReport{}, ctx.Err()
	}
}

// storm starts every agent at once and waits until all are Ready.
func (r *run) storm(ctx context.Context) error {
	n := r.n
	etcdCPU0 := r.etcdCPUs()
	simCPU0 := r.simCPU()
	st := r.cfg.Progress.Stage(n, "agents Ready", n)
	defer st.Done()
	start := time.Now()
	r.res.StormAt = start.Sub(r.smp.start)
	for _, g := range r.groups {
		if err := g.send(command{Op: "start"}); err != nil {
			return err
		}
	}
	deadline := start.Add(r.cfg.Timeout)
	killAt := n / 4
	killed := r.cfg.Kill == ""
	for len(r.res.Ready) < n {
		rep, err := r.next(ctx, time.Until(deadline))
		if err != nil {
			if ctx.Err() == nil && time.Now().After(deadline) {
				break
			}
			return err
		}
		if rep.Type != "ready" {
			return fmt.Errorf("agent group %d: unexpected report %q", rep.group, rep.Type)
		}
		r.res.Ready = append(r.res.Ready, time.Unix(0, rep.At).Sub(start))
		if r.res.Phases == nil {
			r.res.Phases = map[string][]time.Duration{}
		}
		for k, at := range rep.Phases {
			if at != 0 {
				r.res.Phases[k] = append(r.res.Phases[k], time.Unix(0, at).Sub(start))
			}
		}
		st.Add(1)
		if !killed && len(r.res.Ready) >= killAt {
			killed = true
			r.kill(ctx)
		}
	}
	slices.Sort(r.res.Ready)
	for _, ds := range r.res.Phases {
		slices.Sort(ds)
	}
	r.res.NotReady = n - len(r.res.Ready)
	if r.res.NotReady == 0 {
		r.res.AllReady = r.res.Ready[n-1]
	}
	for i, c := range r.etcdCPUs() {
		r.res.EtcdStormCPU = append(r.res.EtcdStormCPU, c-etcdCPU0[i])
	}
	r.res.SimStormCPU = r.simCPU() - simCPU0
	r.log.Info("storm over", slog.Duration("allReady", r.res.AllReady), slog.Int("notReady", r.res.NotReady))

	stats, err := r.stats(ctx)
	if err != nil {
		return err
	}
	var ids []uint32
	r.res.Warnings = map[string]int{}
	for _, s := range stats {
		r.res.SimLiveHeap += s.LiveHeap
		r.res.SimGoroutines += s.Goroutines
		ids = append(ids, s.IDs...)
		r.res.Failed = append(r.res.Failed, s.Failed...)
		for k, v := range s.Warnings {
			r.res.Warnings[k] += v
		}
		for _, t := range s.Traffic {
			r.res.Storm = r.res.Storm.add(t)
			if t.BytesIn > r.res.StormMax.BytesIn {
				r.res.StormMax = t
			}
		}
	}
	slices.Sort(ids)
	r.res.NoID = len(ids)
	ids = slices.DeleteFunc(ids, func(id uint32) bool { return id == 0 })
	r.res.NoID -= len(ids)
	r.res.IDsUnique = len(slices.Compact(slices.Clone(ids))) == len(ids)
	r.res.IDsDense = len(ids) == n
	for i, id := range ids {
		if id != uint32(i+1) {
			r.res.IDsDense = false
		}
	}
	if len(ids) > 0 {
		r.res.MaxID = ids[len(ids)-1]
	}
	if r.res.NotReady > 0 {
		return fmt.Errorf("%w: %d of %d agents not Ready within %v", errNotAllReady, r.res.NotReady, n, r.cfg.Timeout)
	}
	return nil
}

// kill kills the etcd member the configuration names.
func (r *run) kill(ctx context.Context) {
	cli, err := r.etcd.client()
	if err != nil {
		return
	}
	defer cli.Close()
	leader := r.etcd.leader(ctx, cli)
	victim := leader
	if r.cfg.Kill == "follower" || leader < 0 {
		victim = (max(leader, 0) + 1) % len(r.etcd.members)
	}
	r.log.Info("killing an etcd member", slog.Int("member", victim), slog.Bool("leader", victim == leader))
	r.etcd.members[victim].kill()
	r.smp.untrack(memberName(victim))
	r.res.Killed = fmt.Sprintf("%s (member %d) after %d Ready", r.cfg.Kill, victim, len(r.res.Ready))
}

// stats asks every group for its stats.
func (r *run) stats(ctx context.Context) ([]groupStats, error) {
	for _, g := range r.groups {
		if err := g.send(command{Op: "stats"}); err != nil {
			return nil, err
		}
	}
	out := make([]groupStats, len(r.groups))
	for got := 0; got < len(r.groups); {
		rep, err := r.next(ctx, 5*time.Minute)
		if err != nil {
			return nil, err
		}
		if rep.Type == "ready" {
			r.res.LateReady++ // after Config.Timeout
			continue
		}
		got++
		if rep.Type != "stats" {
			return nil, fmt.Errorf("agent group %d: got %q, want stats", rep.group, rep.Type)
		}
		out[rep.group] = *rep.Stats
	}
	return out, nil
}

func (r *run) etcdCPUs() []time.Duration {
	var out []time.Duration
	for i := range r.etcd.members {
		out = append(out, r.smp.cpu(memberName(i)))
	}
	return out
}

func (r *run) simCPU() time.Duration {
	var t time.Duration
	for i := range r.groups {
		t += r.smp.cpu(groupName(i))
	}
	return t
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

// totals sums the traffic and delivered events of every agent.
func totals(stats []groupStats) (Traffic, uint64) {
	var t Traffic
	var d uint64
	for _, s := range stats {
		for i, tr := range s.Traffic {
			t = t.add(tr)
			d += s.Delivered[i]
		}
	}
	return t, d
}

// churn measures an idle window, then a window of pod churn of the same
// length.
func (r *run) churn(ctx context.Context) error {
	d := r.cfg.ChurnDuration
	// Let the storm's tail settle: until the members together use less
	// than a third of a core over 5 s (3 s at least, 3 min at most).
	settleStart := time.Now()
	if err := sleep(ctx, min(3*time.Second, d)); err != nil {
		return err
	}
	for time.Since(settleStart) < 3*time.Minute {
		c0 := sum(r.etcdCPUs())
		if err := sleep(ctx, 5*time.Second); err != nil {
			return err
		}
		if sum(r.etcdCPUs())-c0 < 5*time.Second/3 {
			break
		}
	}
	cr := &ChurnResult{Rate: r.cfg.ChurnRate, Duration: d, Changes: map[string]int{}, Settle: time.Since(settleStart)}
	r.res.Churn = cr
	st0, err := r.stats(ctx)
	if err != nil {
		return err
	}
	cpu0 := sum(r.etcdCPUs())
	idleStart := time.Now()
	idle := r.cfg.Progress.Stage(r.n, "idle window", 1)
	if err := sleep(ctx, d); err != nil {
		return err
	}
	idle.Add(1)
	idle.Done()
	st1, err := r.stats(ctx)
	if err != nil {
		return err
	}
	cpu1 := sum(r.etcdCPUs())
	cr.IdleWindow = time.Since(idleStart)
	churnStart := time.Now()
	t0, _ := totals(st0)
	t1, d1 := totals(st1)
	cr.Idle, cr.IdleCPU = t1.sub(t0), cpu1-cpu0

	ps := r.cfg.Progress.Stage(r.n, fmt.Sprintf("pod churn %.0f/s for %v", r.cfg.ChurnRate, d), len(r.groups))
	for _, g := range r.groups {
		share := r.cfg.ChurnRate * float64(g.cfg.Count) / float64(r.n)
		if err := g.send(command{Op: "churn", Rate: share, Duration: d}); err != nil {
			return err
		}
	}
	for range r.groups {
		rep, err := r.next(ctx, d+5*time.Minute)
		if err != nil {
			return err
		}
		if rep.Type != "churned" {
			return fmt.Errorf("agent group %d: got %q, want churned", rep.group, rep.Type)
		}
		for k, v := range rep.Churn.Changes {
			cr.Changes[k] += v
		}
		cr.Errors += rep.Churn.Errors
		if rep.Churn.LastErr != "" {
			cr.LastErr = rep.Churn.LastErr
		}
		ps.Add(1)
	}
	ps.Done()
	// The last changes reach the watchers.
	if err := sleep(ctx, min(2*time.Second, d)); err != nil {
		return err
	}
	st2, err := r.stats(ctx)
	if err != nil {
		return err
	}
	cr.EtcdCPU = sum(r.etcdCPUs()) - cpu1
	cr.Window = time.Since(churnStart)
	t2, d2 := totals(st2)
	cr.Traffic, cr.Delivered = t2.sub(t1), d2-d1
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

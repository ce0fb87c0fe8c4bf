package agentproc

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/core"
	"go.uber.org/zap"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/cniserver/cniservertest"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/examples/scale/internal/synth"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// Main runs the agent child with the Config in [EnvConfig] until the
// runner sends "quit" or closes the command pipe, and returns the exit
// code.
func Main() int {
	start := time.Now()
	out := &reporter{w: os.NewFile(ReportFD, "reports")}
	var cfg Config
	if err := json.Unmarshal([]byte(os.Getenv(EnvConfig)), &cfg); err != nil {
		out.fail(fmt.Errorf("agent child: config: %w", err))
		return 2
	}
	if err := run(cfg, start, os.NewFile(CommandFD, "commands"), out); err != nil {
		out.fail(err)
		return 1
	}
	return 0
}

// reporter writes reports; it is safe for concurrent use.
type reporter struct {
	mu sync.Mutex
	w  io.Writer
}

func (r *reporter) send(rep Report) {
	raw, _ := json.Marshal(rep)
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.w.Write(append(raw, '\n'))
}

func (r *reporter) fail(err error) { r.send(Report{Type: "error", Err: err.Error()}) }

func run(cfg Config, start time.Time, commands io.Reader, out *reporter) (err error) {
	if cfg.Stable <= 0 {
		cfg.Stable = 300 * time.Millisecond
	}
	stopProfile, err := startCPUProfile(cfg.ProfilePrefix, "cpu-startup.pprof")
	if err != nil {
		return err
	}
	defer func() { stopProfile() }()
	level := slog.LevelWarn
	if cfg.Debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	// GoVPP logs through a global logrus logger; this is the program's
	// main, which may configure it.
	govppLog := logrus.New()
	govppLog.SetOutput(os.Stderr)
	govppLog.SetLevel(logrus.ErrorLevel)
	core.SetLogger(govppLog)

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.Etcd}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()

	linux := &podLinux{FakeLinux: cniservertest.NewFakeLinux()}
	if err := linux.restore(filepath.Join(cfg.StateDir, "cni.db")); err != nil {
		return err
	}
	vpp := vppsim.New(vppsim.Config{HostInterfaces: []string{"eth1", "vpp1"}, HostInterfaceExists: linux.hostLinkExists})
	probes := newProbes(out)
	vpp.SetInterceptor(probes.observe)

	a, err := agent.Open(agent.Config{
		NodeName: cfg.NodeName, StateDir: cfg.StateDir, CNISocket: cfg.CNISocket,
		IPAM:             synth.IPAMConfig(),
		Uplink:           nodeconn.Uplink{AfPacketHostIf: "eth1"},
		HostInterconnect: nodeconn.HostInterconnect{AfPacketHostIf: "vpp1"},
	}, agent.Deps{Etcd: cli, VPP: func() adapter.VppAPI { return vpp.NewAdapter() }, Linux: linux, Logger: log})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	stats := func(gc bool) Stats {
		ds, ls, vs := a.Driver.Stats(), a.Loop.Stats(), vpp.Stats()
		st := Stats{VPPRequests: vs.Requests, DriverRequests: ds.Requests, Keys: ds.Keys, Configured: ds.Configured,
			Pending: ds.Pending, Failed: ds.Failed, Events: ls.Processed, EventErrors: ls.Failed}
		ps := a.Policy.Stats()
		st.Policies, st.PolicyPeers, st.PolicyIsolated = ps.Policies, ps.Peers, ps.IsolatedIngress
		if gc {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			st.LiveHeap, st.HeapSys = ms.HeapAlloc, ms.HeapSys
		}
		st.Memory = ReadMemory()
		return st
	}

	// Wait for the start-up: the loop's start-up resync, then every key
	// configured with no event processed for cfg.Stable.
	select {
	case err := <-done:
		return fmt.Errorf("agent stopped during start-up: %w", err)
	case <-a.Loop.Ready():
	}
	resyncDone := time.Now()
	var programmed time.Time
	var programmedStats Stats
	tick := time.NewTicker(time.Millisecond)
	lastEvents := uint64(0)
	for programmed.IsZero() || time.Since(programmed) < cfg.Stable {
		select {
		case err := <-done:
			return fmt.Errorf("agent stopped during start-up: %w", err)
		case <-tick.C:
		}
		ls := a.Loop.Stats()
		ds := a.Driver.Stats()
		ok := ds.Connected && ds.Keys > 0 && ds.Configured == ds.Keys && ls.Queued == 0 && a.Ready() == nil
		switch {
		case !ok || ls.Processed != lastEvents:
			programmed = time.Time{}
		case programmed.IsZero():
			programmed = time.Now()
			programmedStats = stats(false)
		}
		lastEvents = ls.Processed
	}
	tick.Stop()
	if cfg.Mode == Prepare {
		out.send(Report{Type: "ready"})
	} else {
		after := stats(true)
		programmedStats.LiveHeap, programmedStats.HeapSys = after.LiveHeap, after.HeapSys
		programmedStats.Memory = after.Memory
		if cfg.ProfilePrefix != "" {
			stopProfile()
			if err := writeHeapProfile(cfg.ProfilePrefix + "heap.pprof"); err != nil {
				return err
			}
			if stopProfile, err = startCPUProfile(cfg.ProfilePrefix, "cpu-changes.pprof"); err != nil {
				return err
			}
		}
		up := &Startup{Main: start.UnixNano(), ResyncStart: resyncDone.UnixNano(), ResyncDone: resyncDone.UnixNano(),
			Programmed: programmed.UnixNano(), Stats: programmedStats}
		// The loop's record of the start-up resync has the exact times.
		for _, r := range a.Loop.History().First(100) {
			if r.Name == (&controller.DBResync{}).GetName() {
				var handlers time.Duration
				for _, h := range r.Handlers {
					handlers += h.Duration
				}
				up.ResyncStart, up.ResyncDone = r.Start.UnixNano(), r.Start.Add(handlers).UnixNano()
				break
			}
		}
		out.send(Report{Type: "programmed", Startup: up})
	}

	var lastSeq uint64
	if recs := a.Loop.History().Last(1); len(recs) > 0 {
		lastSeq = recs[0].Seq
	}
	cmds := make(chan Command)
	go readCommands(commands, cmds)
	for {
		select {
		case err := <-done:
			return fmt.Errorf("agent stopped: %w", err)
		case c, ok := <-cmds:
			if !ok || c.Op == "quit" {
				if cfg.ProfilePrefix != "" && cfg.Mode == Measure {
					// The allocations of the changes: compare with heap.pprof
					// (go tool pprof -sample_index=alloc_space -base).
					if err := writeHeapProfile(cfg.ProfilePrefix + "heap-end.pprof"); err != nil {
						return err
					}
				}
				cancel()
				if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
					return fmt.Errorf("agent stopped with: %w", err)
				}
				return nil
			}
			switch c.Op {
			case "probe":
				probes.arm(c.ID, c.Want)
			case "stats":
				st := stats(true)
				out.send(Report{Type: "stats", Stats: &st})
			case "events":
				var evs []Events
				evs, lastSeq = eventSummary(a.Loop.History().Last(a.Loop.History().Cap()), lastSeq)
				out.send(Report{Type: "events", Events: evs})
			default:
				return fmt.Errorf("unknown command %q", c.Op)
			}
		}
	}
}

func readCommands(r io.Reader, out chan<- Command) {
	defer close(out)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var c Command
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return
		}
		out <- c
	}
}

// startCPUProfile starts a CPU profile into prefix+name, if prefix is
// set, and returns the function that stops it.
func startCPUProfile(prefix, name string) (stop func(), err error) {
	if prefix == "" {
		return func() {}, nil
	}
	f, err := os.Create(prefix + name)
	if err != nil {
		return nil, fmt.Errorf("CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("CPU profile: %w", err)
	}
	return sync.OnceFunc(func() {
		pprof.StopCPUProfile()
		f.Close()
	}), nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	return nil
}

// probes reports when the stand-in has received every request a probe
// waits for.
type probes struct {
	out     *reporter
	pending atomic.Int32 // number of armed probes: observe is free without
	mu      sync.Mutex
	want    map[string][]*probe // signature -> probes waiting for it
}

type probe struct {
	id   int
	left int
}

func newProbes(out *reporter) *probes { return &probes{out: out, want: map[string][]*probe{}} }

func (p *probes) arm(id int, want []string) {
	pr := &probe{id: id, left: len(want)}
	p.mu.Lock()
	for _, w := range want {
		p.want[w] = append(p.want[w], pr)
	}
	p.pending.Add(1)
	p.mu.Unlock()
	p.out.send(Report{Type: "armed", ID: id})
}

// observe is the stand-in's interceptor: it never intercepts.
func (p *probes) observe(req api.Message) (int32, bool) {
	if p.pending.Load() == 0 {
		return 0, false
	}
	sig := signature(req)
	if sig == "" {
		return 0, false
	}
	at := time.Now()
	p.mu.Lock()
	waiting := p.want[sig]
	delete(p.want, sig)
	var done []int
	for _, pr := range waiting {
		if pr.left--; pr.left == 0 {
			done = append(done, pr.id)
			p.pending.Add(-1)
		}
	}
	p.mu.Unlock()
	for _, id := range done {
		p.out.send(Report{Type: "seen", ID: id, At: at.UnixNano()})
	}
	return 0, false
}

// podLinux is the simulated Linux of the measured node: the pod server's
// namespaces appear when first used (the runner adds pods the runtime
// would have made namespaces for), and the pods of an earlier run of the
// agent are restored from its attachment store (they kept running while
// the agent restarted).
type podLinux struct {
	*cniservertest.FakeLinux
	mu    sync.Mutex
	known map[string]bool
}

func (l *podLinux) ensureNetns(netns string) {
	if netns == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.known == nil {
		l.known = map[string]bool{}
	}
	if !l.known[netns] {
		_ = l.AddNetns(netns)
		l.known[netns] = true
	}
}

func (l *podLinux) EnsureVeth(ctx context.Context, v cniserver.Veth) (net.HardwareAddr, error) {
	l.ensureNetns(v.Netns)
	return l.FakeLinux.EnsureVeth(ctx, v)
}

func (l *podLinux) InspectLink(ctx context.Context, netns, name string) (cniserver.LinkState, error) {
	l.ensureNetns(netns)
	return l.FakeLinux.InspectLink(ctx, netns, name)
}

func (l *podLinux) hostLinkExists(name string) bool {
	_, err := l.FakeLinux.InspectLink(context.Background(), "", name)
	return err == nil
}

// restore recreates the pods of the attachment store at path (if any).
func (l *podLinux) restore(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	st, err := cniserver.OpenBoltStore(path)
	if err != nil {
		return fmt.Errorf("restore pods: %w", err)
	}
	defer st.Close()
	atts, err := st.ListAttachments(context.Background())
	if err != nil {
		return fmt.Errorf("restore pods: %w", err)
	}
	for _, a := range atts {
		if !a.Ready || a.HostIfName == "" {
			continue
		}
		_, err := l.EnsureVeth(context.Background(), cniserver.Veth{
			HostName: a.HostIfName, PeerName: "vsp" + a.HostIfName[len(cniserver.HostIfPrefix):],
			Netns: a.Netns, IfName: a.ID.IfName,
		})
		if err != nil {
			return fmt.Errorf("restore pod %s: %w", a.Pod, err)
		}
	}
	return nil
}

// eventSummary summarizes the records after seq by kind and returns the
// last sequence number seen.
func eventSummary(recs []controller.Record, seq uint64) ([]Events, uint64) {
	byKind := map[string][]controller.Record{}
	var kinds []string
	last := seq
	for _, r := range recs {
		if r.Seq <= seq {
			continue
		}
		last = max(last, r.Seq)
		kind := r.Name
		if f := strings.Fields(r.Description); r.Name == "Kubernetes State Change" && len(f) >= 6 {
			kind += " " + f[3] + " " + f[4] // "add pod", "update endpoints"
		}
		if byKind[kind] == nil {
			kinds = append(kinds, kind)
		}
		byKind[kind] = append(byKind[kind], r)
	}
	slices.Sort(kinds)
	var out []Events
	for _, k := range kinds {
		rs := byKind[k]
		slices.SortFunc(rs, func(a, b controller.Record) int { return cmp.Compare(a.Duration(), b.Duration()) })
		at := func(p float64) time.Duration { return rs[min(len(rs)-1, int(p*float64(len(rs))))].Duration() }
		ev := Events{Kind: k, N: len(rs), P50: at(0.5), P99: at(0.99), Max: rs[len(rs)-1].Duration()}
		for _, h := range rs[len(rs)-1].Handlers {
			if h.Duration > ev.SlowDuration {
				ev.SlowHandler, ev.SlowDuration = h.Handler, h.Duration
			}
		}
		out = append(out, ev)
	}
	return out, last
}

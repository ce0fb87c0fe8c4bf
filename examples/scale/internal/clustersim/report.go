package clustersim

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/vswitchkit/vswitchkit/examples/scale/internal/envelope"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

func mib(b uint64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 0, 64) }

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) }

// quantile returns the q-quantile (nearest rank) of sorted ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(q*float64(len(ds))+0.999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

func maxOf[T uint64 | int64 | time.Duration](vs []T) T {
	var m T
	for _, v := range vs {
		m = max(m, v)
	}
	return m
}

// PerChange is the steady-state figures per pod change.
type PerChange struct {
	Changes int
	// EventsPerAgent is the watch events an agent received per pod
	// change, on average over agents, by kind (pod, podpeer, all), net
	// of the idle window's.
	PodEvents, PeerEvents, AllEvents float64
	// Delivered is the KubeStateChange events a watcher delivered per
	// change, on average over agents.
	Delivered float64
	// EtcdCPU is the CPU time of etcd (all members) per change, net of
	// the idle window's rate.
	EtcdCPU time.Duration
	// BytesOut is what etcd sent to the agents per change (client-side
	// wire bytes received, all agents), net of idle.
	BytesOut float64
	// IdleCPUPerSecond is etcd's CPU per second with nothing changing
	// (lease keep-alives of the IPAM stores, watch progress).
	IdleCPUPerSecond time.Duration
}

// PerChange computes the steady-state figures of r (zero without churn).
func (r Result) PerChange() PerChange {
	c := r.Churn
	if c == nil {
		return PerChange{}
	}
	n := 0
	for _, v := range c.Changes {
		n += v
	}
	if n == 0 {
		return PerChange{}
	}
	scale := c.Window.Seconds() / max(c.IdleWindow.Seconds(), 1e-9)
	net := func(a, idle uint64) float64 { return float64(a) - float64(idle)*scale }
	agents, changes := float64(r.Agents), float64(n)
	pod := net(c.Traffic.Events["pod"], c.Idle.Events["pod"])
	peer := net(c.Traffic.Events["podpeer"], c.Idle.Events["podpeer"])
	all := net(c.Traffic.events(), c.Idle.events())
	cpu := float64(c.EtcdCPU) - float64(c.IdleCPU)*scale
	return PerChange{
		Changes:          n,
		PodEvents:        pod / agents / changes,
		PeerEvents:       peer / agents / changes,
		AllEvents:        all / agents / changes,
		Delivered:        float64(c.Delivered) / agents / changes,
		EtcdCPU:          time.Duration(cpu / changes),
		BytesOut:         net(c.Traffic.BytesIn, c.Idle.BytesIn) / changes,
		IdleCPUPerSecond: time.Duration(float64(c.IdleCPU) / max(c.IdleWindow.Seconds(), 1e-9)),
	}
}

// Table writes the results: the cold start, then the steady state.
func Table(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "agents\tlayout\tkilled\tall Ready s\tp50 s\tp99 s\tnot Ready\tIDs 1..N\tgave up\tetcd peak RSS MiB (max member)\tetcd CPU s\tetcd DB MiB\tsim peak RSS MiB\tsim heap MiB\tsim CPU s\treq/agent\tKiB out/agent\tKiB in/agent\twarnings\tload\t")
	for _, r := range results {
		warns := 0
		for _, v := range r.Warnings {
			warns += v
		}
		killed := "-"
		if r.Killed != "" {
			killed = r.Killed
		}
		n := float64(r.Agents)
		var simRSS uint64
		for _, v := range r.SimPeakRSS {
			simRSS += v
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%d\t%v\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.1f\t%.1f\t%d\t%.1f→%.1f\t\n",
			r.Agents, r.Layout, killed, secs(r.AllReady), secs(quantile(r.Ready, 0.5)), secs(quantile(r.Ready, 0.99)), r.NotReady,
			r.IDsUnique && r.IDsDense, len(r.Failed), mib(maxOf(r.EtcdPeakRSS)), secs(sum(r.EtcdStormCPU)), strconv.FormatFloat(float64(maxOf(r.EtcdDBSize))/(1<<20), 'f', 1, 64),
			mib(simRSS), mib(r.SimLiveHeap), secs(r.SimStormCPU),
			float64(r.Storm.MsgsOut)/n, float64(r.Storm.BytesOut)/n/1024, float64(r.Storm.BytesIn)/n/1024, warns, r.LoadBefore, r.LoadAfter)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nphases of the cold start, seconds from the start to the phase's end, p50 / p99 / max:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	phases := []string{"nodesync", "ipam store", "snapshot", "ready"}
	fmt.Fprint(tw, "agents\t")
	for _, p := range phases {
		fmt.Fprintf(tw, "%s\t", p)
	}
	fmt.Fprintln(tw)
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t", r.Agents)
		for _, p := range phases {
			ds := r.Phases[p]
			fmt.Fprintf(tw, "%s / %s / %s\t", secs(quantile(ds, 0.5)), secs(quantile(ds, 0.99)), secs(quantile(ds, 1)))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !slices.ContainsFunc(results, func(r Result) bool { return r.Churn != nil }) {
		return nil
	}
	fmt.Fprintln(w, "\nsteady state under pod churn (per pod change; events per agent, net of an idle window as long):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "agents\tlayout\tchanges\trate/s\terrors\tpod events/agent\tpeer events/agent\tall events/agent\tdelivered/agent\tetcd CPU/change µs\tetcd idle CPU ms/s\tKiB sent/change\tsettled after s\t")
	for _, r := range results {
		if r.Churn == nil {
			continue
		}
		p := r.PerChange()
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.1f\t%d\t%.4f\t%.4f\t%.4f\t%.4f\t%.0f\t%.1f\t%.1f\t%.1f\t\n", r.Agents, r.Layout, p.Changes,
			float64(p.Changes)/r.Churn.Duration.Seconds(), r.Churn.Errors, p.PodEvents, p.PeerEvents, p.AllEvents, p.Delivered,
			float64(p.EtcdCPU)/float64(time.Microsecond), float64(p.IdleCPUPerSecond)/float64(time.Millisecond), p.BytesOut/1024, r.Churn.Settle.Seconds())
	}
	return tw.Flush()
}

// Plot writes a PNG: agents Ready over time, and etcd's memory over time,
// one line per run.
func Plot(path string, results []Result) error {
	ready := plot.New()
	ready.Title.Text = "Cold start: agents Ready"
	ready.X.Label.Text = "seconds since every agent started"
	ready.Y.Label.Text = "agents Ready"
	ready.Add(plotter.NewGrid())
	ready.Legend.Top, ready.Legend.Left = false, false
	mem := plot.New()
	mem.Title.Text = "etcd resident memory (largest member)"
	mem.X.Label.Text = "seconds since every agent started"
	mem.Y.Label.Text = "MiB"
	mem.Add(plotter.NewGrid())
	var rs, ms []any
	for _, r := range results {
		label := fmt.Sprintf("%d agents", r.Agents)
		if r.Layout == 1 {
			label += ", flat layout"
		}
		if r.Killed != "" {
			label += ", member killed"
		}
		pts := make(plotter.XYs, 0, len(r.Ready)+1)
		pts = append(pts, plotter.XY{})
		for i, d := range r.Ready {
			pts = append(pts, plotter.XY{X: d.Seconds(), Y: float64(i + 1)})
		}
		rs = append(rs, label, pts)
		var top []Sample
		for _, s := range r.EtcdRSS {
			if maxRSS(s) > maxRSS(top) {
				top = s
			}
		}
		mp := make(plotter.XYs, 0, len(top))
		for _, s := range top {
			mp = append(mp, plotter.XY{X: (s.At - r.StormAt).Seconds(), Y: float64(s.RSS) / (1 << 20)})
		}
		if len(mp) > 0 {
			ms = append(ms, label, mp)
		}
	}
	if err := plotutil.AddLines(ready, rs...); err != nil {
		return err
	}
	if len(ms) > 0 {
		if err := plotutil.AddLines(mem, ms...); err != nil {
			return err
		}
	}
	return envelope.WritePNG(path, 6*vg.Inch, [][]*plot.Plot{{ready, mem}})
}

func maxRSS(ss []Sample) uint64 {
	var m uint64
	for _, s := range ss {
		m = max(m, s.RSS)
	}
	return m
}

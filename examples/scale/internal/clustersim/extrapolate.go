package clustersim

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/vswitchkit/vswitchkit/examples/scale/internal/envelope"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Fit is a straight line a + b·agents fitted (least squares) to the
// per-change figures of the measured runs of one key layout.
type Fit struct{ A, B float64 }

// At returns the line's value at n agents.
func (f Fit) At(n int) float64 { return f.A + f.B*float64(n) }

// fit fits a line to the points (x, y); with one point, a line through
// the origin.
func fit(xs, ys []float64) Fit {
	n := float64(len(xs))
	if len(xs) == 1 {
		return Fit{B: ys[0] / xs[0]}
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	b := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	return Fit{A: (sy - b*sx) / n, B: b}
}

// Model is the steady state of one key layout fitted to measured runs:
// etcd's CPU (all members) and the bytes it sends (to all agents) per pod
// change, as lines in the number of agents, and the watch events an agent
// receives per pod change (their mean: it does not depend on the number
// of agents).
type Model struct {
	Layout         int
	Points         []int // the measured numbers of agents
	CPU            Fit   // seconds of etcd CPU per change
	Bytes          Fit   // bytes sent per change
	EventsPerAgent float64
	measured       map[int]PerChange
}

// NewModel fits the steady-state figures of the results of the given
// layout (those with a churn measure).
func NewModel(results []Result, layout int) (Model, error) {
	m := Model{Layout: layout, measured: map[int]PerChange{}}
	var xs, cpu, bytes []float64
	for _, r := range results {
		p := r.PerChange()
		if r.Layout != layout || p.Changes == 0 {
			continue
		}
		m.Points = append(m.Points, r.Agents)
		m.measured[r.Agents] = p
		xs = append(xs, float64(r.Agents))
		cpu = append(cpu, p.EtcdCPU.Seconds())
		bytes = append(bytes, p.BytesOut)
		m.EventsPerAgent += p.AllEvents
	}
	if len(xs) == 0 {
		return m, fmt.Errorf("no steady-state measure of layout %d", layout)
	}
	m.EventsPerAgent /= float64(len(xs))
	m.CPU, m.Bytes = fit(xs, cpu), fit(xs, bytes)
	return m, nil
}

// Projection is the steady state of a cluster of Agents nodes under Rate
// pod changes per second, from a [Model].
type Projection struct {
	Agents   int
	Rate     float64
	Measured bool // a measured point (the figures are still the fit's)
	// EtcdCPUPerChange and EtcdCores: etcd's CPU per change and in
	// cores at Rate (all members together).
	EtcdCPUPerChange time.Duration
	EtcdCores        float64
	// BytesPerSecond is what etcd sends to all agents per second at Rate;
	// EventsPerAgentPerSecond the watch events one agent receives.
	BytesPerSecond          float64
	EventsPerAgentPerSecond float64
}

// Project returns the projections of m at the given numbers of agents and
// rate.
func (m Model) Project(agents []int, rate float64) []Projection {
	var out []Projection
	for _, n := range agents {
		cpu := time.Duration(max(m.CPU.At(n), 0) * float64(time.Second))
		_, measured := m.measured[n]
		out = append(out, Projection{Agents: n, Rate: rate, Measured: measured, EtcdCPUPerChange: cpu,
			EtcdCores: cpu.Seconds() * rate, BytesPerSecond: max(m.Bytes.At(n), 0) * rate,
			EventsPerAgentPerSecond: m.EventsPerAgent * rate})
	}
	return out
}

// ExtrapolationSizes are the cluster sizes of the extrapolation: the
// measured ones, Kubernetes' limit (5000) and past it.
var ExtrapolationSizes = []int{500, 1000, 2000, 5000, 10000, 20000}

// ExtrapolationTable writes, per key layout with a steady-state measure,
// the fitted lines and the projections at ExtrapolationSizes under rate
// pod changes per second.
func ExtrapolationTable(w io.Writer, results []Result, rate float64) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "layout\tagents\t\tetcd CPU/change ms\tetcd cores at %.0f/s\tMB/s sent by etcd\tevents/s per agent\t\n", rate)
	any := false
	for _, layout := range []int{1, 2} {
		m, err := NewModel(results, layout)
		if err != nil {
			continue
		}
		any = true
		for _, p := range m.Project(ExtrapolationSizes, rate) {
			kind := "projected"
			if p.Measured {
				kind = "measured"
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%.2f\t%.2f\t%.1f\t%.1f\t\n", layout, p.Agents, kind,
				float64(p.EtcdCPUPerChange)/float64(time.Millisecond), p.EtcdCores, p.BytesPerSecond/1e6, p.EventsPerAgentPerSecond)
		}
	}
	if !any {
		return errors.New("no steady-state measure to extrapolate from")
	}
	return tw.Flush()
}

// PlotExtrapolation writes a PNG of the projections: etcd's cores and
// the bytes it sends per second at rate changes per second over the
// number of agents, one line per key layout, the measured points marked.
func PlotExtrapolation(path string, results []Result, rate float64) error {
	cores := plot.New()
	cores.Title.Text = fmt.Sprintf("etcd CPU at %.0f pod changes/s (all members)", rate)
	cores.X.Label.Text = "agents (nodes)"
	cores.Y.Label.Text = "cores"
	cores.Add(plotter.NewGrid())
	cores.Legend.Top, cores.Legend.Left = true, true
	sent := plot.New()
	sent.Title.Text = fmt.Sprintf("sent by etcd to the agents at %.0f pod changes/s", rate)
	sent.X.Label.Text = "agents (nodes)"
	sent.Y.Label.Text = "MB/s"
	sent.Add(plotter.NewGrid())
	sent.Legend.Top, sent.Legend.Left = true, true
	names := map[int]string{1: "flat layout (before)", 2: "per-node layout (after)"}
	var cl, sl, cpts, spts []any
	for _, layout := range []int{1, 2} {
		m, err := NewModel(results, layout)
		if err != nil {
			continue
		}
		var line, bline, pts, bpts plotter.XYs
		for _, p := range m.Project(ExtrapolationSizes, rate) {
			line = append(line, plotter.XY{X: float64(p.Agents), Y: p.EtcdCores})
			bline = append(bline, plotter.XY{X: float64(p.Agents), Y: p.BytesPerSecond / 1e6})
		}
		for _, n := range slices.Sorted(slices.Values(m.Points)) {
			pc := m.measured[n]
			pts = append(pts, plotter.XY{X: float64(n), Y: pc.EtcdCPU.Seconds() * rate})
			bpts = append(bpts, plotter.XY{X: float64(n), Y: pc.BytesOut * rate / 1e6})
		}
		cl, sl = append(cl, names[layout]+", fit", line), append(sl, names[layout]+", fit", bline)
		cpts, spts = append(cpts, names[layout]+", measured", pts), append(spts, names[layout]+", measured", bpts)
	}
	if len(cl) == 0 {
		return errors.New("no steady-state measure to extrapolate from")
	}
	if err := plotutil.AddLines(cores, cl...); err != nil {
		return err
	}
	if err := plotutil.AddScatters(cores, cpts...); err != nil {
		return err
	}
	if err := plotutil.AddLines(sent, sl...); err != nil {
		return err
	}
	if err := plotutil.AddScatters(sent, spts...); err != nil {
		return err
	}
	return envelope.WritePNG(path, 6*vg.Inch, [][]*plot.Plot{{cores, sent}})
}

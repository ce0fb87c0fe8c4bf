package envelope

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Table writes the results as a table, one row per cluster size.
func Table(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "nodes\tpods\tservices\tendpoints\tsnapshot in\tresync done\tprogrammed\tVPP requests\tVPP keys\tpeak RSS\tlive heap\t")
	for _, m := range Measures {
		fmt.Fprintf(tw, "%s p50/p99\t", m)
	}
	fmt.Fprintln(tw)
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t", r.Nodes, r.Pods, r.Services, r.Endpoints,
			seconds(r.ResyncStart), seconds(r.ResyncDone), seconds(r.Programmed), r.VPPRequests, r.VPPKeys, mib(r.PeakRSS), mib(r.LiveHeap))
		for _, m := range Measures {
			l := r.Latency[m]
			fmt.Fprintf(tw, "%s / %s\t", millis(l.P50), millis(l.P99))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if slices.ContainsFunc(results, func(r Result) bool { return r.NetworkPolicies > 0 }) {
		fmt.Fprintln(w, "\nNetworkPolicy: the agent's policy processor after start-up:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\tnodes\tNetworkPolicies\tvalid\tpeers indexed\tlocal pods isolated\t")
		for _, r := range results {
			fmt.Fprintf(tw, "policy\t%d\t%d\t%d\t%d\t%d\t\n", r.Nodes, r.NetworkPolicies, r.Policies, r.PolicyPeers, r.PolicyIsolated)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	// The part of the latencies that is etcd's, where there is one.
	var ms []Measure
	for _, m := range Measures {
		if slices.ContainsFunc(results, func(r Result) bool { return r.Etcd[m].N > 0 }) {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nsplit: etcd (from the write to another client's watch receiving it) + agent (the rest), p50/p99:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\tnodes\t")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s: etcd\tagent\t", m)
	}
	fmt.Fprintln(tw)
	for _, r := range results {
		fmt.Fprintf(tw, "split\t%d\t", r.Nodes)
		for _, m := range ms {
			e, a := r.Etcd[m], r.Agent[m]
			fmt.Fprintf(tw, "%s / %s\t%s / %s\t", millis(e.P50), millis(e.P99), millis(a.P50), millis(a.P99))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s" }

func millis(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + " ms"
}

func mib(b uint64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 0, 64) + " MiB" }

// Plot writes a PNG of the results to path: start-up time and memory
// against cluster size, and the p50 and p99 of every incremental measure
// against cluster size.
func Plot(path string, results []Result) error {
	xy := func(f func(Result) float64) plotter.XYs {
		out := make(plotter.XYs, len(results))
		for i, r := range results {
			out[i] = plotter.XY{X: float64(r.Nodes), Y: f(r)}
		}
		return out
	}
	var ticks []plot.Tick
	for _, r := range results {
		ticks = append(ticks, plot.Tick{Value: float64(r.Nodes), Label: strconv.Itoa(r.Nodes)})
	}
	newPlot := func(title, y string) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "nodes (30 pods and 2 services per node)"
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.Y.Label.Text = y
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.Left = true
		return p
	}
	// roomForLegend raises the top of p's Y axis so that the legend (top
	// left) sits above the lines.
	roomForLegend := func(p *plot.Plot) { p.Y.Max *= 1.4 }
	startup := newPlot("Agent start-up", "seconds from process start")
	if err := plotutil.AddLinePoints(startup,
		"etcd snapshot delivered", xy(func(r Result) float64 { return r.ResyncStart.Seconds() }),
		"start-up resync done (desired state)", xy(func(r Result) float64 { return r.ResyncDone.Seconds() }),
		"every VPP key applied", xy(func(r Result) float64 { return r.Programmed.Seconds() }),
	); err != nil {
		return err
	}
	roomForLegend(startup)
	memory := newPlot("Agent memory", "MiB")
	if err := plotutil.AddLinePoints(memory,
		"peak RSS", xy(func(r Result) float64 { return float64(r.PeakRSS) / (1 << 20) }),
		"live heap after start-up", xy(func(r Result) float64 { return float64(r.LiveHeap) / (1 << 20) }),
	); err != nil {
		return err
	}
	roomForLegend(memory)
	latency := func(title string, pick func(Latency) time.Duration) (*plot.Plot, error) {
		p := newPlot(title, "milliseconds")
		var vs []any
		for _, m := range Measures {
			vs = append(vs, string(m), xy(func(r Result) float64 { return float64(pick(r.Latency[m])) / float64(time.Millisecond) }))
		}
		err := plotutil.AddLinePoints(p, vs...)
		roomForLegend(p)
		return p, err
	}
	p50, err := latency("Incremental latency, p50", func(l Latency) time.Duration { return l.P50 })
	if err != nil {
		return err
	}
	p99, err := latency("Incremental latency, p99", func(l Latency) time.Duration { return l.P99 })
	if err != nil {
		return err
	}

	return WritePNG(path, 11*vg.Inch, [][]*plot.Plot{{startup, memory}, {p50, p99}})
}

// WritePNG draws plots (rows of equally many columns) in a grid 16 inches
// wide and height high and writes it to path as a PNG.
func WritePNG(path string, height vg.Length, plots [][]*plot.Plot) error {
	img := vgimg.New(16*vg.Inch, height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Inch / 3, PadY: vg.Inch / 3,
		PadTop: vg.Inch / 6, PadBottom: vg.Inch / 6, PadLeft: vg.Inch / 6, PadRight: vg.Inch / 6}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j := range plots[i] {
			plots[i][j].Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(bw); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

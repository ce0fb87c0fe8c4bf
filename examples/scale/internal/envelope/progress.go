package envelope

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Progress shows how a run advances: every size goes through stages
// (write the cluster, start the agent, each measure), each with a number
// of units of work.
type Progress interface {
	// Stage begins a stage of total units for the cluster of n nodes.
	Stage(n int, name string, total int) Stage
}

// Stage is one stage in progress. Its methods are safe for concurrent use.
type Stage interface {
	// Add records n more units done.
	Add(n int)
	// Done ends the stage.
	Done()
}

type noProgress struct{}

func (noProgress) Stage(int, string, int) Stage { return noStage{} }

type noStage struct{}

func (noStage) Add(int) {}
func (noStage) Done()   {}

// Lines is a Progress that writes a line when a stage begins and one
// when it ends, for output that is not a terminal.
func Lines(w io.Writer) Progress { return &lines{w: w} }

type lines struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lines) Stage(n int, name string, total int) Stage {
	l.mu.Lock()
	fmt.Fprintf(l.w, "%5d nodes: %s ...\n", n, name)
	l.mu.Unlock()
	return &lineStage{l: l, n: n, name: name, total: total, start: time.Now()}
}

type lineStage struct {
	l      *lines
	n      int
	name   string
	total  int
	start  time.Time
	once   sync.Once
	done   int // guarded by l.mu, as is tenths
	tenths int // the last tenth of total reported
}

// Add counts progress and writes a line at every tenth of the total, so
// that a long stage shows its progress in a log too.
func (s *lineStage) Add(k int) {
	if s.total <= 0 {
		return
	}
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	s.done += k
	if t := min(s.done*10/s.total, 10); t > s.tenths && t < 10 {
		s.tenths = t
		fmt.Fprintf(s.l.w, "%5d nodes: %s %d%% (%d/%d) after %v\n", s.n, s.name, t*10, s.done, s.total, time.Since(s.start).Round(time.Millisecond))
	}
}

func (s *lineStage) Done() {
	s.once.Do(func() {
		s.l.mu.Lock()
		fmt.Fprintf(s.l.w, "%5d nodes: %s done in %v\n", s.n, s.name, time.Since(s.start).Round(time.Millisecond))
		s.l.mu.Unlock()
	})
}

// Bars is a Progress that draws a bar per stage on a terminal (w), with
// vbauerster/mpb. Call Wait when the run is over.
func Bars(w io.Writer) *BarProgress {
	return &BarProgress{p: mpb.New(mpb.WithOutput(w), mpb.WithWidth(40), mpb.WithRefreshRate(150*time.Millisecond))}
}

// BarProgress draws progress bars; see [Bars].
type BarProgress struct{ p *mpb.Progress }

// Stage implements Progress.
func (b *BarProgress) Stage(n int, name string, total int) Stage {
	bar := b.p.AddBar(int64(max(total, 1)),
		mpb.PrependDecorators(decor.Name(fmt.Sprintf("%5d nodes: %-28s", n, name))),
		mpb.AppendDecorators(decor.CountersNoUnit("%d/%d", decor.WCSyncWidth), decor.Name(" "), decor.Elapsed(decor.ET_STYLE_GO)),
	)
	return &barStage{bar: bar, total: int64(max(total, 1))}
}

// Wait waits for the bars to be drawn for the last time.
func (b *BarProgress) Wait() { b.p.Wait() }

type barStage struct {
	bar   *mpb.Bar
	total int64
	done  atomic.Bool
}

func (s *barStage) Add(n int) { s.bar.IncrBy(n) }

func (s *barStage) Done() {
	if s.done.CompareAndSwap(false, true) {
		s.bar.SetTotal(-1, true) // complete at the current count
	}
}

package demo

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// progress reports what Run is doing: a live bar per stage on a terminal,
// else a plain line when a stage completes (and every few seconds while a
// long one runs). Safe for concurrent use.
type progress struct {
	w     io.Writer
	start time.Time
	live  bool

	mu     sync.Mutex
	bars   *mpb.Progress // live mode: the bars shown now; nil when none
	stages []*stage
}

// stage is one step with a count of things done out of a total.
type stage struct {
	p     *progress
	name  string
	total int
	bar   *mpb.Bar // live mode
	// guarded by p.mu
	done      int
	finished  bool
	lastPrint time.Time
}

// plainEvery is how often plain mode reports a stage that is still
// running.
const plainEvery = 3 * time.Second

func newProgress(w io.Writer, live bool) *progress {
	return &progress{w: w, start: time.Now(), live: live}
}

func (p *progress) elapsed() string {
	return fmt.Sprintf("[%7.2fs]", time.Since(p.start).Seconds())
}

// stage starts a stage of total steps (at least 1).
func (p *progress) stage(name string, total int) *stage {
	s := &stage{p: p, name: name, total: max(total, 1), lastPrint: time.Now()}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live && p.bars == nil {
		p.bars = mpb.NewWithContext(context.Background(), mpb.WithOutput(p.w), mpb.WithWidth(32),
			mpb.WithRefreshRate(120*time.Millisecond))
	}
	if p.bars != nil {
		s.bar = p.bars.AddBar(int64(s.total),
			mpb.PrependDecorators(
				decor.Name(name, decor.WC{C: decor.DindentRight | decor.DextraSpace, W: 34}),
				decor.CountersNoUnit("%d/%d", decor.WC{W: 11}),
			),
			mpb.AppendDecorators(decor.OnComplete(decor.Elapsed(decor.ET_STYLE_GO, decor.WC{W: 5}), "done")),
		)
	}
	p.stages = append(p.stages, s)
	return s
}

// set reports n steps done, of total (which may have changed).
func (s *stage) set(n, total int) {
	total = max(total, 1)
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.finished {
		return
	}
	s.done = min(n, total)
	if s.bar != nil {
		if total != s.total {
			s.bar.SetTotal(int64(total), false)
		}
		s.bar.SetCurrent(int64(min(s.done, total-1))) // complete only in finish
	} else if time.Since(s.lastPrint) >= plainEvery {
		s.lastPrint = time.Now()
		fmt.Fprintf(s.p.w, "%s %s: %d/%d ...\n", s.p.elapsed(), s.name, s.done, total)
	}
	s.total = total
}

// finish completes the stage.
func (s *stage) finish() {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.finished {
		return
	}
	s.finished = true
	if s.bar != nil {
		s.bar.SetTotal(int64(s.total), true)
		return
	}
	fmt.Fprintf(s.p.w, "%s %s: %d/%d\n", s.p.elapsed(), s.name, s.total, s.total)
}

// abort ends the stage without completing it.
func (s *stage) abort() {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.finished {
		return
	}
	s.finished = true
	if s.bar != nil {
		s.bar.Abort(false)
		return
	}
	fmt.Fprintf(s.p.w, "%s %s: %d/%d, stopped\n", s.p.elapsed(), s.name, s.done, s.total)
}

// note reports one line: above the bars in live mode.
func (p *progress) note(format string, args ...any) {
	line := fmt.Sprintf("%s %s\n", p.elapsed(), fmt.Sprintf(format, args...))
	p.mu.Lock()
	bars := p.bars
	if bars == nil {
		defer p.mu.Unlock()
		_, _ = io.WriteString(p.w, line)
		return
	}
	p.mu.Unlock()
	_, _ = bars.Write([]byte(line))
}

// flush aborts the stages still running and, in live mode, waits until
// the bars are rendered for the last time and their goroutines have
// ended, so that the caller may write to the same terminal; the next
// stage starts new bars below.
func (p *progress) flush() {
	p.mu.Lock()
	stages := p.stages
	p.stages = nil
	p.mu.Unlock()
	for _, s := range stages {
		s.abort()
	}
	p.mu.Lock()
	bars := p.bars
	p.bars = nil
	p.mu.Unlock()
	if bars != nil {
		bars.Wait()
	}
}

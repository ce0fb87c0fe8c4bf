package clustersim

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vswitchkit/vswitchkit/examples/scale/internal/agentproc"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux this runs on).
const clockTicks = 100

// cpuTime returns the CPU time (user + system) process pid has used, 0 if
// it cannot be read.
func cpuTime(pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: fields count from the
	// last ')'.
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	k, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(u+k) * time.Second / clockTicks
}

// memory returns what /proc/<pid>/status says about the memory of pid.
func memory(pid int) agentproc.Memory {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return agentproc.Memory{}
	}
	return agentproc.ParseStatus(raw)
}

// loadAverage returns the 1-minute load average, 0 if unknown.
func loadAverage() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// Sample is one measurement of a process.
type Sample struct {
	At  time.Duration // since the sampler started
	CPU time.Duration // CPU time used so far
	RSS uint64        // resident set, bytes
}

// sampler samples the CPU time and resident set of processes.
type sampler struct {
	start time.Time
	stop  chan struct{}
	done  chan struct{}

	mu     sync.Mutex
	pids   map[string]int
	series map[string][]Sample
	peak   map[string]uint64 // the last VmHWM read
}

func newSampler(every time.Duration) *sampler {
	s := &sampler{start: time.Now(), stop: make(chan struct{}), done: make(chan struct{}),
		pids: map[string]int{}, series: map[string][]Sample{}, peak: map[string]uint64{}}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// track adds process pid under name.
func (s *sampler) track(name string, pid int) {
	s.mu.Lock()
	s.pids[name] = pid
	s.mu.Unlock()
}

// untrack stops sampling name (its process is gone).
func (s *sampler) untrack(name string) {
	s.mu.Lock()
	delete(s.pids, name)
	s.mu.Unlock()
}

func (s *sampler) sample() {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := time.Since(s.start)
	for name, pid := range s.pids {
		m := memory(pid)
		if m.RSS == 0 {
			continue
		}
		s.series[name] = append(s.series[name], Sample{At: at, CPU: cpuTime(pid), RSS: m.RSS})
		s.peak[name] = max(s.peak[name], m.PeakRSS)
	}
}

// cpu returns the CPU time name has used so far (sampled now).
func (s *sampler) cpu(name string) time.Duration {
	s.mu.Lock()
	pid, ok := s.pids[name]
	s.mu.Unlock()
	if !ok {
		return s.last(name).CPU
	}
	return cpuTime(pid)
}

func (s *sampler) last(name string) Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.series[name]
	if len(ss) == 0 {
		return Sample{}
	}
	return ss[len(ss)-1]
}

// peakRSS returns the peak resident set of name (VmHWM).
func (s *sampler) peakRSS(name string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak[name]
}

func (s *sampler) close() {
	close(s.stop)
	<-s.done
}

// seriesOf returns a copy of the samples of name.
func (s *sampler) seriesOf(name string) []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.series[name]...)
}

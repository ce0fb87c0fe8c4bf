package clustersim

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// churned is a result of n agents whose churn of 100 changes cost etcd
// 10 µs of CPU and sent 200 bytes per agent and change, one event each.
func churned(n, layout int) Result {
	c := &ChurnResult{Changes: map[string]int{churnAdd: 100}, Window: 10 * time.Second, IdleWindow: 10 * time.Second,
		EtcdCPU: time.Duration(n) * 100 * 10 * time.Microsecond,
		Traffic: Traffic{BytesIn: uint64(n) * 100 * 200, Events: map[string]uint64{"podpeer": uint64(n) * 100}},
		Idle:    Traffic{Events: map[string]uint64{}}}
	return Result{Agents: n, Layout: layout, Churn: c}
}

func TestExtrapolation(t *testing.T) {
	results := []Result{churned(500, 2), churned(1000, 2), churned(2000, 2), {Agents: 5000, Layout: 2}}
	m, err := NewModel(results, 2)
	require.NoError(t, err)
	assert.Equal(t, []int{500, 1000, 2000}, m.Points, "the run without churn is left out")
	assert.InDelta(t, 0, m.CPU.A, 1e-9)
	assert.InDelta(t, 10e-6, m.CPU.B, 1e-12)
	assert.InDelta(t, 1.0, m.EventsPerAgent, 1e-9)
	ps := m.Project([]int{1000, 5000}, 100)
	require.Len(t, ps, 2)
	assert.True(t, ps[0].Measured)
	assert.False(t, ps[1].Measured)
	assert.Equal(t, 50*time.Millisecond, ps[1].EtcdCPUPerChange.Round(time.Microsecond))
	assert.InDelta(t, 5.0, ps[1].EtcdCores, 1e-6, "50 ms per change at 100/s")
	assert.InDelta(t, 5000*200*100, ps[1].BytesPerSecond, 1)
	assert.InDelta(t, 100, ps[1].EventsPerAgentPerSecond, 1e-9)

	_, err = NewModel(results, 1)
	require.Error(t, err, "no run of layout 1")

	var out bytes.Buffer
	require.NoError(t, ExtrapolationTable(&out, append(results, churned(500, 1)), 100))
	assert.Equal(t, 2*len(ExtrapolationSizes)+1, strings.Count(out.String(), "\n"), out.String())
	assert.Contains(t, out.String(), "projected")

	path := filepath.Join(t.TempDir(), "x.png")
	require.NoError(t, PlotExtrapolation(path, results, 100))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	_, err = png.Decode(f)
	require.NoError(t, err)
}

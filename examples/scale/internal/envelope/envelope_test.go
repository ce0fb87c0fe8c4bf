package envelope

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

func TestSummarize(t *testing.T) {
	var s []time.Duration
	for i := 200; i >= 1; i-- {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	assert.Equal(t, Latency{N: 200, P50: 100 * time.Millisecond, P99: 198 * time.Millisecond, Max: 200 * time.Millisecond}, summarize(s))
	assert.Equal(t, Latency{N: 1, P50: time.Second, P99: time.Second, Max: time.Second}, summarize([]time.Duration{time.Second}))
	assert.Equal(t, Latency{}, summarize(nil))
}

func results() []Result {
	var out []Result
	for i, n := range []int{500, 1000} {
		r := Result{Nodes: n, Pods: 30 * n, Services: 2 * n, Endpoints: 20 * n,
			ResyncStart: time.Duration(i+1) * 50 * time.Millisecond, ResyncDone: time.Duration(i+1) * 100 * time.Millisecond,
			Programmed: time.Duration(i+1) * 200 * time.Millisecond, VPPRequests: uint64(7 * n), VPPKeys: 4 * n,
			PeakRSS: uint64(n) << 18, LiveHeap: uint64(n) << 16, Latency: map[Measure]Latency{}}
		for k, m := range Measures {
			r.Latency[m] = Latency{N: 200, P50: time.Duration(k+1) * 100 * time.Microsecond, P99: time.Duration(k+1) * time.Millisecond}
		}
		out = append(out, r)
	}
	return out
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, Table(&b, results()))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 3)
	assert.Contains(t, lines[0], "node leave p50/p99")
	assert.Equal(t, []string{"1000", "30000", "2000", "20000", "0.10", "s", "0.20", "s", "0.40", "s", "7000", "4000", "250", "MiB", "62", "MiB",
		"0.10", "ms", "/", "1.00", "ms", "0.20", "ms", "/", "2.00", "ms", "0.30", "ms", "/", "3.00", "ms",
		"0.40", "ms", "/", "4.00", "ms", "0.50", "ms", "/", "5.00", "ms"}, strings.Fields(lines[2]))
}

func TestTableSplit(t *testing.T) {
	rs := results()
	rs[1].Etcd = map[Measure]Latency{EndpointChange: {N: 200, P50: 300 * time.Microsecond, P99: time.Millisecond}}
	rs[1].Agent = map[Measure]Latency{EndpointChange: {N: 200, P50: 200 * time.Microsecond, P99: 500 * time.Microsecond}}
	var b bytes.Buffer
	require.NoError(t, Table(&b, rs))
	out := b.String()
	split := out[strings.Index(out, "split:"):]
	assert.Contains(t, split, "endpoint change: etcd")
	assert.NotContains(t, split, "pod add")
	assert.Regexp(t, `split +1000 +0\.30 ms / 1\.00 ms +0\.20 ms / 0\.50 ms`, split)
}

func TestPlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e.png")
	require.NoError(t, Plot(path, results()))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	assert.Equal(t, 1536, img.Bounds().Dx()) // 16 inches at 96 dpi
}

func TestLines(t *testing.T) {
	var b bytes.Buffer
	st := Lines(&b).Stage(500, "write", 10)
	st.Add(3)
	st.Add(1)
	st.Add(6)
	st.Done()
	st.Done()
	out := b.String()
	assert.Contains(t, out, "  500 nodes: write ...\n")
	assert.Contains(t, out, "  500 nodes: write 30% (3/10) after ")
	assert.Contains(t, out, "  500 nodes: write 40% (4/10) after ")
	assert.NotContains(t, out, "100%", "the end is the done line")
	assert.Equal(t, 1, strings.Count(out, "write done in"))
}

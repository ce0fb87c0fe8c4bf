package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/vswitchkit/vswitchkit/examples/scale/internal/agentproc"
	"github.com/vswitchkit/vswitchkit/examples/scale/internal/clustersim"
	"github.com/vswitchkit/vswitchkit/examples/scale/internal/envelope"
)

// TestMain runs the agent child when the test binary is started as one
// (the runner re-executes its own program).
func TestMain(m *testing.M) {
	if agentproc.IsChild() {
		os.Exit(agentproc.Main())
	}
	if clustersim.IsChild() {
		os.Exit(clustersim.ChildMain())
	}
	goleak.VerifyTestMain(m)
}

// TestScaleSmall runs the whole envelope at two small sizes: the table has
// a row per size with every column, and the plot is a PNG.
func TestScaleSmall(t *testing.T) {
	dir := t.TempDir()
	plot := filepath.Join(dir, "envelope.png")
	var stdout, stderr bytes.Buffer
	results := filepath.Join(dir, "envelope.json")
	code := run([]string{"-sizes", "20,50", "-events", "20", "-network-policies", "-plot", plot, "-json", results, "-agent-logs", filepath.Join(dir, "agent.log")}, &stdout, &stderr)
	if code != 0 {
		logs, _ := os.ReadFile(filepath.Join(dir, "agent.log"))
		t.Fatalf("exit %d\nstderr:\n%s\nagent logs:\n%s", code, stderr.String(), logs)
	}
	t.Log("\n" + stdout.String())

	var header []string
	rows := map[string][]string{}
	split := map[string][]string{}
	policies := map[string][]string{}
	for line := range strings.Lines(stdout.String()) {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "nodes" && header == nil:
			header = f
		case f[0] == "20" || f[0] == "50":
			rows[f[0]] = f
		case f[0] == "split" && len(f) > 1:
			split[f[1]] = f
		case f[0] == "policy" && len(f) > 1:
			policies[f[1]] = f
		}
	}
	require.NotEmpty(t, header, "table header")
	for _, m := range envelope.Measures {
		assert.Contains(t, strings.Join(header, " "), string(m)+" p50/p99")
	}
	// nodes pods services endpoints, snapshot, resync and programmed
	// ("0.12 s"), requests, keys, RSS and heap ("12 MiB"), then
	// "1.00 ms / 2.00 ms" per measure.
	want := 4 + 3*2 + 2 + 2*2 + 5*len(envelope.Measures)
	for _, n := range []string{"20", "50"} {
		require.Len(t, rows[n], want, "row of %s nodes: %v", n, rows[n])
		for _, f := range rows[n] {
			assert.NotEqual(t, "0.00", f, "a zero in the row of %s nodes: %v", n, rows[n])
		}
	}

	// The etcd and agent parts of the four measures that write to etcd.
	for _, n := range []string{"20", "50"} {
		require.Len(t, split[n], 2+4*2*5, "split of %s nodes: %v", n, split[n])
	}

	// The NetworkPolicies: two per namespace (one at these sizes, and the
	// measured node's), every pod a peer, the measured node's 110 pods
	// isolated.
	for n, pods := range map[string]string{"20": "680", "50": "1580"} {
		assert.Equal(t, []string{"policy", n, "4", "4", pods, "110"}, policies[n])
	}

	raw, err := os.ReadFile(results)
	require.NoError(t, err)
	var rs []envelope.Result
	require.NoError(t, json.Unmarshal(raw, &rs))
	require.Len(t, rs, 2)
	assert.Equal(t, 50, rs[1].Nodes)
	assert.Equal(t, 20, rs[1].Latency[envelope.PodAdd].N)

	f, err := os.Open(plot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err, "the plot is a PNG")
	assert.Greater(t, img.Bounds().Dx(), 1000)
	assert.Contains(t, stdout.String(), "plot: "+plot)
}

func TestBadFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, run([]string{"-sizes", "x"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "-sizes")
	stderr.Reset()
	assert.Equal(t, 1, run([]string{"-sizes", "1"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "want 2 to 10000 nodes")
}

// TestClusterSmall runs the cluster simulation with 20 agents in two
// processes against three etcd members, with a short churn: every agent
// is Ready with a unique ID (1..20), none gives up, the tables have their
// rows, the results their figures and the plot is a PNG.
func TestClusterSmall(t *testing.T) {
	dir := t.TempDir()
	plot := filepath.Join(dir, "cluster.png")
	results := filepath.Join(dir, "cluster.json")
	logs := filepath.Join(dir, "children.log")
	var stdout, stderr bytes.Buffer
	code := run([]string{"cluster", "-agents", "20", "-processes", "2", "-churn", "40", "-churn-for", "2s",
		"-plot", plot, "-json", results, "-logs", logs}, &stdout, &stderr)
	if code != 0 {
		raw, _ := os.ReadFile(logs)
		t.Fatalf("exit %d\nstderr:\n%s\nchildren:\n%s", code, stderr.String(), raw)
	}
	t.Log("\n" + stdout.String())
	var rows []string
	for line := range strings.Lines(stdout.String()) {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "20" {
			rows = append(rows, line)
		}
	}
	assert.Len(t, rows, 3, "a cold-start row, its phases and a steady-state row")

	raw, err := os.ReadFile(results)
	require.NoError(t, err)
	var rs []clustersim.Result
	require.NoError(t, json.Unmarshal(raw, &rs))
	require.Len(t, rs, 1)
	r := rs[0]
	assert.Equal(t, 20, r.Agents)
	assert.Zero(t, r.NotReady)
	assert.Len(t, r.Ready, 20)
	assert.Positive(t, r.AllReady)
	assert.True(t, r.IDsUnique, "IDs unique")
	assert.True(t, r.IDsDense, "IDs 1..20")
	assert.Empty(t, r.Failed, "no agent gave up")
	assert.Len(t, r.EtcdPeakRSS, 3)
	for i, rss := range r.EtcdPeakRSS {
		assert.Positive(t, rss, "etcd member %d RSS", i)
		assert.Positive(t, r.EtcdDBSize[i], "etcd member %d DB size", i)
	}
	assert.Positive(t, r.Storm.MsgsOut)
	assert.Positive(t, r.Storm.BytesIn)
	require.NotNil(t, r.Churn)
	assert.Zero(t, r.Churn.Errors, r.Churn.LastErr)
	pc := r.PerChange()
	assert.Positive(t, pc.Changes)
	assert.Positive(t, pc.PeerEvents, "every agent receives the peer records")
	assert.Positive(t, pc.EtcdCPU)

	f, err := os.Open(plot)
	require.NoError(t, err)
	defer f.Close()
	_, err = png.Decode(f)
	require.NoError(t, err, "the plot is a PNG")
}

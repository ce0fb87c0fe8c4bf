package watcher

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func genSnapshot(gen, n int) *mirrorSnapshot {
	s := &mirrorSnapshot{rev: int64(gen), kubePrefix: "/k/", extPrefix: "/e/", kube: map[string][]byte{}, ext: map[string][]byte{}}
	for i := range n {
		s.kube[fmt.Sprintf("k8s/pod/ns/p%d", i)] = []byte(fmt.Sprintf("g%d", gen))
	}
	s.ext["x"] = []byte(fmt.Sprintf("g%d", gen))
	return s
}

func TestMirrorRoundTripAndApply(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	m, err := openMirror(path)
	require.NoError(t, err)
	_, ok, err := m.load()
	require.NoError(t, err)
	require.False(t, ok, "a new mirror holds no snapshot")
	require.Error(t, m.apply(1, []mirrorOp{{key: "a", value: []byte("1")}}), "no snapshot to apply to")

	require.NoError(t, m.rewrite(genSnapshot(1, 10)))
	require.NoError(t, m.apply(7, []mirrorOp{
		{key: "k8s/pod/ns/p0"},                           // delete
		{key: "k8s/pod/ns/new", value: []byte("n")},      // add
		{ext: true, key: "y", value: []byte("external")}, // add external
	}))
	require.NoError(t, m.close())

	m, err = openMirror(path)
	require.NoError(t, err)
	defer m.close()
	got, ok, err := m.load()
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(7), got.rev)
	assert.Equal(t, "/k/", got.kubePrefix)
	assert.Equal(t, "/e/", got.extPrefix)
	assert.Len(t, got.kube, 10)
	assert.NotContains(t, got.kube, "k8s/pod/ns/p0")
	assert.Equal(t, []byte("n"), got.kube["k8s/pod/ns/new"])
	assert.Equal(t, map[string][]byte{"x": []byte("g1"), "y": []byte("external")}, got.ext)
}

// TestMirrorRewriteFailureKeepsOldSnapshot aborts a rewrite at several
// points, as a crash in the middle of the transaction would, and checks
// that the reopened mirror holds the previous snapshot, complete.
func TestMirrorRewriteFailureKeepsOldSnapshot(t *testing.T) {
	for _, failAt := range []int{1, 50, 100, 101} {
		t.Run(fmt.Sprintf("fail at put %d", failAt), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.db")
			m, err := openMirror(path)
			require.NoError(t, err)
			require.NoError(t, m.rewrite(genSnapshot(1, 80)))
			crash := errors.New("simulated crash")
			m.hookPut = func(n int) error {
				if n == failAt {
					return crash
				}
				return nil
			}
			require.ErrorIs(t, m.rewrite(genSnapshot(2, 100)), crash) // 100 kube + 1 ext puts
			require.NoError(t, m.close())

			m, err = openMirror(path)
			require.NoError(t, err)
			defer m.close()
			got, ok, err := m.load()
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, genSnapshot(1, 80), got)
		})
	}
}

// TestMirrorWriteFailureInWatcher makes the first mirror rewrite fail; the
// watcher keeps delivering and rewrites the whole mirror at the next write.
func TestMirrorWriteFailureInWatcher(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	putPod(t, ctx, cli, pod("default", "a", "10.0.0.1"))
	rec := &controllertest.EventRecorder{}
	cfg := baseConfig(srv)
	cfg.MirrorPath = filepath.Join(t.TempDir(), "m.db")
	w, err := NewWithClient(cli, rec, cfg)
	require.NoError(t, err)
	w.hookMirror = func(m *mirror) {
		failed := false
		m.hookPut = func(int) error {
			if !failed {
				failed = true
				return errors.New("disk full")
			}
			return nil
		}
	}
	r := start(t, w)
	_, err = rec.WaitFor(ctx, 1)
	require.NoError(t, err)
	putPod(t, ctx, cli, pod("default", "b", "10.0.0.2"))
	_, err = rec.WaitFor(ctx, 2)
	require.NoError(t, err)
	waitFor(t, ctx, "a successful mirror write", func() bool { return w.Stats().MirrorWrites >= 1 })
	assert.Equal(t, uint64(1), w.Stats().MirrorErrors)
	r.stop(t)

	m, err := openMirror(cfg.MirrorPath)
	require.NoError(t, err)
	defer m.close()
	got, ok, err := m.load()
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []string{"k8s/pod/default/a", "k8s/pod/default/b"}, sortedKeys(got.kube))
}

func TestStartFromMirrorThenEtcd(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	putPod(t, ctx, cli, pod("default", "a", "10.0.0.1"))
	putPod(t, ctx, cli, pod("default", "b", "10.0.0.2"))
	putExt(t, ctx, cli, "cfg", "v1")
	mirrorPath := filepath.Join(t.TempDir(), "m.db")

	// First run: etcd is up; the mirror gets the state.
	rec1 := &controllertest.EventRecorder{}
	cfg := baseConfig(srv)
	cfg.MirrorPath = mirrorPath
	cfg.MirrorFallbackDelay = 300 * time.Millisecond
	w1, err := New(rec1, cfg)
	require.NoError(t, err)
	r1 := start(t, w1)
	_, err = rec1.WaitFor(ctx, 1)
	require.NoError(t, err)
	putPod(t, ctx, cli, pod("default", "c", "10.0.0.3"))
	_, err = rec1.WaitFor(ctx, 2)
	require.NoError(t, err)
	r1.stop(t) // flushes the mirror
	mirrored := map[string]bool{"k8s/pod/default/a": true, "k8s/pod/default/b": true, "k8s/pod/default/c": true}

	// While no watcher runs: one more change, then etcd goes down.
	_, err = cli.Delete(ctx, testKubePrefix+kubemodel.PodKey("default", "a"))
	require.NoError(t, err)
	putPod(t, ctx, cli, pod("default", "d", "10.0.0.4"))
	srv.Stop()

	// Second run: etcd is down; the mirror is delivered with Local=true.
	rec2 := &controllertest.EventRecorder{}
	w2, err := New(rec2, cfg)
	require.NoError(t, err)
	start(t, w2)
	evs, err := rec2.WaitFor(ctx, 1)
	require.NoError(t, err)
	local := evs[0].(*controller.DBResync)
	require.True(t, local.Local)
	got := map[string]bool{}
	for k := range local.KubeState["pod"] {
		got[k] = true
	}
	assert.Equal(t, mirrored, got)
	assert.True(t, proto.Equal(wrapperspb.String("v1"), local.ExternalConfig["cfg"]))
	waitFor(t, ctx, "counters", func() bool { return w2.Stats().LocalResyncs == 1 })
	assert.Positive(t, w2.Stats().ConnectErrors)

	// etcd comes back: a remote DBResync replaces the local one.
	require.NoError(t, srv.Restart())
	evs, err = rec2.WaitFor(ctx, 2)
	require.NoError(t, err)
	remote := evs[1].(*controller.DBResync)
	require.False(t, remote.Local)
	assert.Equal(t, []string{"k8s/pod/default/b", "k8s/pod/default/c", "k8s/pod/default/d"}, sortedKeys(remote.KubeState["pod"]))
	waitFor(t, ctx, "counters", func() bool { return w2.Stats().RemoteResyncs == 1 })
}

func TestNoLocalStartWithoutMirroredSnapshot(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, path string)
	}{
		{"empty mirror", func(*testing.T, string) {}},
		{"other prefixes", func(t *testing.T, path string) {
			m, err := openMirror(path)
			require.NoError(t, err)
			require.NoError(t, m.rewrite(genSnapshot(1, 3))) // written for /k/ and /e/
			require.NoError(t, m.close())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.db")
			tc.setup(t, path)
			rec := &controllertest.EventRecorder{}
			cfg := baseConfig(nil)
			cfg.Etcd.Endpoints = []string{deadEndpoint(t)}
			cfg.Etcd.DialTimeout = 100 * time.Millisecond
			cfg.RequestTimeout = 100 * time.Millisecond
			cfg.MirrorPath = path
			cfg.MirrorFallbackDelay = 50 * time.Millisecond
			w, err := New(rec, cfg)
			require.NoError(t, err)
			start(t, w)
			waitFor(t, ctx, "several failed attempts after the fallback delay", func() bool { return w.Stats().ConnectErrors >= 4 })
			assert.Zero(t, rec.Len(), "nothing to start from")
			assert.Zero(t, w.Stats().LocalResyncs)
		})
	}
}

// deadEndpoint returns a loopback address where nothing listens.
func deadEndpoint(t *testing.T) string {
	l, err := netListen()
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// Crash test with a real process kill: a helper process rewrites the
// mirror in a loop with snapshots of the next generations and is killed
// with SIGKILL in the middle of a rewrite; the reopened mirror must hold
// one complete generation, the last committed one.

const (
	crashHelperEnv = "WATCHER_MIRROR_CRASH_HELPER"
	crashPauseEnv  = "WATCHER_MIRROR_CRASH_PAUSE"
	crashKeys      = 5000
)

func TestMirrorCrashHelper(t *testing.T) {
	path := os.Getenv(crashHelperEnv)
	if path == "" {
		t.Skip("helper process for TestMirrorSurvivesKillDuringRewrite")
	}
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(2)
	}
	m, err := openMirror(path)
	if err != nil {
		fail(err)
	}
	snap, _, err := m.load()
	if err != nil {
		fail(err)
	}
	gen := 1
	if snap != nil {
		gen = int(snap.rev) + 1
	}
	pause := os.Getenv(crashPauseEnv) != ""
	for first := gen; ; gen++ {
		fmt.Println("begin", gen)
		m.hookPut = func(n int) error {
			if n == crashKeys/2 && gen > first {
				fmt.Println("midway", gen)
				if pause {
					time.Sleep(time.Minute) // killed here
				}
			}
			return nil
		}
		if err := m.rewrite(genSnapshot(gen, crashKeys)); err != nil {
			fail(err)
		}
		fmt.Println("committed", gen)
	}
}

func TestMirrorSurvivesKillDuringRewrite(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "m.db")
	for round, tc := range []struct {
		pause bool          // the helper stops midway through a rewrite: the kill surely lands inside the transaction
		delay time.Duration // otherwise: kill this long after the helper reported midway (possibly during commit)
	}{
		{pause: true}, {delay: 0}, {delay: time.Millisecond}, {pause: true}, {delay: 5 * time.Millisecond},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMirrorCrashHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashHelperEnv+"="+path)
		if tc.pause {
			cmd.Env = append(cmd.Env, crashPauseEnv+"=1")
		}
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(out)
		lastCommitted := int64(-1)
		for sc.Scan() {
			line := sc.Text()
			if g, ok := strings.CutPrefix(line, "committed "); ok {
				lastCommitted, err = strconv.ParseInt(g, 10, 64)
				require.NoError(t, err)
			}
			if strings.HasPrefix(line, "midway") {
				break
			}
			require.False(t, strings.HasPrefix(line, "error"), "helper: %s", line)
		}
		require.NoError(t, sc.Err())
		require.Positive(t, lastCommitted, "round %d: helper output ended early", round)
		time.Sleep(tc.delay)
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()

		m, err := openMirror(path)
		require.NoError(t, err, "round %d", round)
		snap, ok, err := m.load()
		require.NoError(t, m.close())
		require.NoError(t, err, "round %d", round)
		require.True(t, ok, "round %d", round)
		if tc.pause {
			require.Equal(t, lastCommitted, snap.rev, "round %d: killed inside the next transaction", round)
		} else {
			require.GreaterOrEqual(t, snap.rev, lastCommitted, "round %d", round)
		}
		require.Equal(t, genSnapshot(int(snap.rev), crashKeys), snap, "round %d: generation %d incomplete or mixed", round, snap.rev)
		t.Logf("round %d (pause %v, delay %v): mirror holds generation %d complete", round, tc.pause, tc.delay, snap.rev)
	}
}

// TestSlowMirrorDoesNotDelayChanges blocks the mirror's disk writes: the
// changes keep arriving meanwhile (a write costs an fsync; a watcher that
// wrote the mirror between two deliveries made every change wait for the
// previous one's fsync), and once the disk answers the mirror holds them
// all.
func TestSlowMirrorDoesNotDelayChanges(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	putPod(t, ctx, cli, pod("default", "a", "10.0.0.1"))
	rec := &controllertest.EventRecorder{}
	cfg := baseConfig(srv)
	cfg.MirrorPath = filepath.Join(t.TempDir(), "m.db")
	w, err := NewWithClient(cli, rec, cfg)
	require.NoError(t, err)
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	var writes atomic.Int32
	w.hookMirror = func(m *mirror) {
		m.hookWrite = func() {
			if writes.Add(1) > 1 { // the start-up rewrite passes, then the disk hangs
				<-release
			}
		}
	}
	r := start(t, w)
	t.Cleanup(unblock) // before the watcher is stopped: cleanups run last in, first out
	_, err = rec.WaitFor(ctx, 1)
	require.NoError(t, err)
	waitFor(t, ctx, "the start-up rewrite", func() bool { return w.Stats().MirrorWrites == 1 })

	putPod(t, ctx, cli, pod("default", "b", "10.0.0.2"))
	_, err = rec.WaitFor(ctx, 2)
	require.NoError(t, err)
	waitFor(t, ctx, "a blocked mirror write", func() bool { return writes.Load() == 2 })
	for i := range 3 {
		putPod(t, ctx, cli, pod("default", fmt.Sprintf("c%d", i), "10.0.0.3"))
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = rec.WaitFor(wctx, 5)
	require.NoError(t, err, "changes delivered while the mirror write hangs")

	unblock()
	r.stop(t) // writes what is queued
	m, err := openMirror(cfg.MirrorPath)
	require.NoError(t, err)
	defer m.close()
	got, ok, err := m.load()
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []string{"k8s/pod/default/a", "k8s/pod/default/b", "k8s/pod/default/c0", "k8s/pod/default/c1", "k8s/pod/default/c2"}, sortedKeys(got.kube))
	assert.Zero(t, w.Stats().MirrorErrors)
}

// TestSlowSnapshotIsReadToTheEnd: a snapshot that etcd serves page after
// page, each in time but all together slower than MirrorFallbackDelay (a
// large cluster on a loaded etcd), is read to the end and delivered; the
// agent does not start from its stale mirror while etcd answers.
func TestSlowSnapshotIsReadToTheEnd(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := startEtcd(t)
	putPod(t, ctx, cli, pod("default", "a", "10.0.0.1"))
	mirrorPath := filepath.Join(t.TempDir(), "m.db")
	cfg := baseConfig(srv)
	cfg.MirrorPath = mirrorPath
	cfg.MirrorFallbackDelay = 300 * time.Millisecond
	cfg.SnapshotPageSize = 4
	rec1 := &controllertest.EventRecorder{}
	w1, err := New(rec1, cfg)
	require.NoError(t, err)
	r1 := start(t, w1)
	_, err = rec1.WaitFor(ctx, 1)
	require.NoError(t, err)
	r1.stop(t) // the mirror holds one pod

	for i := range 24 {
		putPod(t, ctx, cli, pod("default", fmt.Sprintf("p%02d", i), "10.1.1.2"))
	}
	rec2 := &controllertest.EventRecorder{}
	w2, err := New(rec2, cfg)
	require.NoError(t, err)
	pages := 0
	w2.hookPage = func(n int) error {
		pages++
		time.Sleep(100 * time.Millisecond) // 7+ pages: 0.7 s in all, each page 0.1 s
		return nil
	}
	start(t, w2)
	evs, err := rec2.WaitFor(ctx, 1)
	require.NoError(t, err)
	rs := evs[0].(*controller.DBResync)
	assert.False(t, rs.Local, "the snapshot from etcd, not the mirror")
	assert.Len(t, rs.KubeState["pod"], 25)
	assert.Greater(t, time.Duration(pages)*100*time.Millisecond, cfg.MirrorFallbackDelay, "slower than the fallback delay in all")
	assert.Zero(t, w2.Stats().LocalResyncs)
}

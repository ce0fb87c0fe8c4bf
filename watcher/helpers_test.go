package watcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testKubePrefix = "/test/kube/"
	testExtPrefix  = "/test/ext/node1/"
)

// testTimeout bounds waits in tests; generous because -race on a busy
// 2-core machine is slow. It is a safety net, never an assertion on speed.
const testTimeout = 2 * time.Minute

func startEtcd(t testing.TB) (*etcdtest.Server, *clientv3.Client) {
	t.Helper()
	srv, err := etcdtest.Start(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	cli, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return srv, cli
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// running is a watcher running in a goroutine.
type running struct {
	w      *Watcher
	cancel context.CancelFunc
	done   chan error
}

// start runs w until stop or the end of the test.
func start(t *testing.T, w *Watcher) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{w: w, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- w.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run and checks that it returns the cancellation.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(testTimeout):
		t.Fatal("Run did not return after cancel")
	}
}

func baseConfig(srv *etcdtest.Server) Config {
	cfg := Config{
		KubeStatePrefix:      testKubePrefix,
		ExternalConfigPrefix: testExtPrefix,
		RetryMinBackoff:      20 * time.Millisecond,
		RetryMaxBackoff:      500 * time.Millisecond,
	}
	if srv != nil {
		cfg.Etcd.Endpoints = []string{srv.Endpoint()}
	}
	return cfg
}

func pod(ns, name, ip string) *kubemodel.Pod {
	return &kubemodel.Pod{Namespace: ns, Name: name, IpAddress: ip}
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

func mustAny(t testing.TB, m proto.Message) []byte {
	t.Helper()
	a, err := anypb.New(m)
	require.NoError(t, err)
	return mustMarshal(t, a)
}

func put(t testing.TB, ctx context.Context, cli *clientv3.Client, key string, value []byte) {
	t.Helper()
	_, err := cli.Put(ctx, key, string(value))
	require.NoError(t, err)
}

func putPod(t testing.TB, ctx context.Context, cli *clientv3.Client, p *kubemodel.Pod) {
	t.Helper()
	put(t, ctx, cli, testKubePrefix+kubemodel.PodKey(p.Namespace, p.Name), mustMarshal(t, p))
}

func putExt(t testing.TB, ctx context.Context, cli *clientv3.Client, key, value string) {
	t.Helper()
	put(t, ctx, cli, testExtPrefix+key, mustAny(t, wrapperspb.String(value)))
}

// model assembles the state an application sees from the events, and checks
// that every change applies to the state it follows (no lost, stale or
// duplicate change).
type model struct {
	kube     map[string]map[string]proto.Message
	ext      map[string]proto.Message
	resyncs  int
	local    int
	changes  int
	problems []string
}

func (m *model) apply(ev controller.Event) {
	switch e := ev.(type) {
	case *controller.DBResync:
		m.resyncs++
		if e.Local {
			m.local++
		}
		m.kube = make(map[string]map[string]proto.Message)
		for res, kvs := range e.KubeState {
			m.kube[res] = make(map[string]proto.Message)
			for k, v := range kvs {
				m.kube[res][k] = v
			}
		}
		m.ext = make(map[string]proto.Message)
		for k, v := range e.ExternalConfig {
			m.ext[k] = v
		}
	case *controller.KubeStateChange:
		m.changes++
		if m.kube == nil {
			m.problems = append(m.problems, "change before the first DBResync")
			return
		}
		kvs := m.kube[e.Resource]
		if kvs == nil {
			m.problems = append(m.problems, "change of unknown resource "+e.Resource)
			return
		}
		cur := kvs[e.Key]
		if !equalMsg(cur, e.PrevValue) {
			m.problems = append(m.problems, fmt.Sprintf("%s: PrevValue %v, but the state holds %v", e.Key, e.PrevValue, cur))
		}
		if e.PrevValue == nil && e.NewValue == nil {
			m.problems = append(m.problems, e.Key+": change with neither previous nor new value")
		}
		if e.NewValue == nil {
			delete(kvs, e.Key)
		} else {
			kvs[e.Key] = e.NewValue
		}
	case *controller.ExternalConfigChange:
		m.changes++
		if e.Source != controller.RemoteDBSource {
			m.problems = append(m.problems, "external change from source "+e.Source)
		}
		for k, v := range e.UpdatedKVs {
			if v == nil {
				if _, ok := m.ext[k]; !ok {
					m.problems = append(m.problems, k+": external delete of a missing key")
				}
				delete(m.ext, k)
			} else {
				m.ext[k] = v
			}
		}
	default:
		m.problems = append(m.problems, "unexpected event "+ev.GetName())
	}
}

func equalMsg(a, b proto.Message) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return proto.Equal(a, b)
}

// flat returns "resource|key" -> marshalled value, and ext keys as
// "ext|key", for comparisons with readable diffs.
func (m *model) flat(t testing.TB) map[string]string {
	out := make(map[string]string)
	for res, kvs := range m.kube {
		for k, v := range kvs {
			out[res+"|"+k] = string(deterministic(t, v))
		}
	}
	for k, v := range m.ext {
		out["ext|"+k] = string(deterministic(t, v))
	}
	return out
}

func deterministic(t testing.TB, m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	require.NoError(t, err)
	return b
}

// etcdState reads what the watcher should deliver: every decodable value
// under the two prefixes, in the same flat form as model.flat.
func etcdState(t testing.TB, ctx context.Context, cli *clientv3.Client, reg *registry) map[string]string {
	t.Helper()
	out := make(map[string]string)
	for _, prefix := range []string{testKubePrefix, testExtPrefix} {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
		require.NoError(t, err)
		for _, kv := range resp.Kvs {
			kind, rel := reg.kindOf(string(kv.Key))
			res, msg, err := reg.decodeRel(kind, rel, kv.Value)
			if err != nil {
				continue
			}
			name := "ext"
			if res != nil {
				name = res.Name
			}
			out[name+"|"+rel] = string(deterministic(t, msg))
		}
	}
	return out
}

// consume applies every event recorded so far (from index *next on).
func consume(rec *controllertest.EventRecorder, m *model, next *int) {
	evs := rec.Events()
	for ; *next < len(evs); *next++ {
		m.apply(evs[*next])
	}
}

// waitState consumes events until the model equals want or the test
// times out, then checks that no inconsistency was seen.
func waitState(t *testing.T, ctx context.Context, rec *controllertest.EventRecorder, m *model, next *int, want func() map[string]string) {
	t.Helper()
	var got, w map[string]string
	for {
		consume(rec, m, next)
		got, w = m.flat(t), want()
		if mapsEqual(got, w) {
			break
		}
		select {
		case <-ctx.Done():
			require.Equal(t, w, got, "assembled state never reached etcd's state")
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	require.Empty(t, m.problems)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// logBuffer is a slog handler target safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// waitFor polls cond until it holds or the test times out.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

var errRefused = errors.New("refused by test")

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

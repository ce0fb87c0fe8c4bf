package watcher

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkDeliverChanges measures the watcher end to end: pods are written
// to an in-process etcd in transactions of 100 puts, and the benchmark
// waits until the watcher has pushed every KubeStateChange and, stopped,
// has written the mirror. Reports delivered events per second.
func BenchmarkDeliverChanges(b *testing.B) {
	for _, withMirror := range []bool{false, true} {
		b.Run(fmt.Sprintf("mirror=%v", withMirror), func(b *testing.B) {
			srv, cli := startEtcd(b)
			rec := &controllertest.EventRecorder{}
			cfg := baseConfig(srv)
			if withMirror {
				cfg.MirrorPath = filepath.Join(b.TempDir(), "m.db")
			}
			w, err := NewWithClient(cli, rec, cfg)
			require.NoError(b, err)
			ctx := b.Context()
			done := make(chan error, 1)
			rctx, cancel := context.WithCancel(ctx)
			go func() { done <- w.Run(rctx) }()
			defer cancel()
			_, err = rec.WaitFor(ctx, 1)
			require.NoError(b, err)

			const batch = 100
			values := make([][]byte, batch)
			for i := range values {
				values[i] = mustMarshal(b, pod("bench", fmt.Sprintf("p%d", i), fmt.Sprintf("10.0.0.%d", i)))
			}
			b.ResetTimer()
			start := time.Now()
			want := 1
			for n := 0; n < b.N; n += batch {
				ops := make([]clientv3.Op, 0, batch)
				for i := range min(batch, b.N-n) {
					// A new key each time, so every put is a change.
					ops = append(ops, clientv3.OpPut(testKubePrefix+kubemodel.PodKey("bench", fmt.Sprintf("p%d", n+i)), string(values[i])))
				}
				_, err := cli.Txn(ctx).Then(ops...).Commit()
				require.NoError(b, err)
				want += len(ops)
			}
			_, err = rec.WaitFor(ctx, want)
			require.NoError(b, err)
			cancel() // Run flushes the mirror before it returns
			<-done
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
		})
	}
}

// BenchmarkMirrorRewrite measures one atomic rewrite of a mirror holding
// 10000 pods.
func BenchmarkMirrorRewrite(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			m, err := openMirror(filepath.Join(b.TempDir(), "m.db"))
			require.NoError(b, err)
			defer m.close()
			snap := &mirrorSnapshot{rev: 1, kube: map[string][]byte{}, ext: map[string][]byte{}}
			for i := range n {
				p := pod("ns", fmt.Sprintf("p%d", i), "10.0.0.1")
				snap.kube[kubemodel.PodKey(p.Namespace, p.Name)] = mustMarshal(b, p)
			}
			b.ResetTimer()
			for b.Loop() {
				require.NoError(b, m.rewrite(snap))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/rewrite")
		})
	}
}

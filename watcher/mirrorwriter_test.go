package watcher

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/internal/retry"
)

// TestMirrorWriter: changes accumulate for the write delay and become one
// transaction; a failed transaction is retried with backoff without
// waiting for another change, with the changes queued meanwhile, and the
// failure is logged at Warn once, not per retry (CONTRIBUTING R10); close
// writes what is queued at once.
func TestMirrorWriter(t *testing.T) {
	const delay = 100 * time.Millisecond
	for _, tc := range []struct {
		name      string
		failures  int // transactions that fail before one succeeds
		wantWrite int
	}{
		{name: "a burst is one transaction", wantWrite: 1},
		{name: "failed writes are retried", failures: 3, wantWrite: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := openMirror(filepath.Join(t.TempDir(), "m.db"))
			require.NoError(t, err)
			defer m.close()
			failures := tc.failures
			var want *mirrorSnapshot
			m.hookPut = func(int) error {
				if failures > 0 {
					failures--
					return errors.New("disk full")
				}
				return nil
			}
			logs := &logBuffer{}
			synctest.Test(t, func(t *testing.T) {
				stats := &counters{}
				mw := newMirrorWriter(m, stats, logs.logger(), delay, retry.NewBackoff(time.Second, 10*time.Second))
				go mw.run()
				start := time.Now()
				want = genSnapshot(1, 5)
				mw.submit(nil, 1, genSnapshot(1, 5))
				for i, key := range []string{"k8s/pod/ns/new", "k8s/pod/ns/p0", "k8s/pod/ns/p1"} {
					var value []byte
					if i == 0 {
						value = []byte("n")
					}
					mw.submit([]mirrorOp{{key: key, value: value}}, int64(2+i), nil)
					if value == nil {
						delete(want.kube, key)
					} else {
						want.kube[key] = value
					}
				}
				want.rev = 4
				synctest.Wait()
				assert.Zero(t, stats.mirrorWrites.Load()+stats.mirrorErrors.Load(), "nothing written before the delay")

				// A change while the writer retries joins the retried work.
				time.Sleep(delay)
				synctest.Wait()
				mw.submit([]mirrorOp{{ext: true, key: "y", value: []byte("e")}}, 5, nil)
				want.ext["y"], want.rev = []byte("e"), 5
				for stats.mirrorWrites.Load() == 0 {
					require.Less(t, time.Since(start), time.Minute, "no successful write")
					time.Sleep(100 * time.Millisecond)
					synctest.Wait()
				}
				assert.Equal(t, uint64(tc.failures), stats.mirrorErrors.Load())
				if tc.failures > 0 {
					assert.GreaterOrEqual(t, time.Since(start), delay+time.Second, "retried after backoff")
				}

				// close writes the queue at once.
				mw.submit([]mirrorOp{{key: "k8s/pod/ns/late", value: []byte("l")}}, 6, nil)
				want.kube["k8s/pod/ns/late"], want.rev = []byte("l"), 6
				before := time.Now()
				mw.close()
				assert.Equal(t, before, time.Now(), "close does not wait for the delay")
				assert.Equal(t, uint64(tc.wantWrite+1), stats.mirrorWrites.Load())
			})
			got, ok, err := m.load()
			require.NoError(t, err)
			require.True(t, ok)
			got.kubePrefix, got.extPrefix = want.kubePrefix, want.extPrefix
			assert.Equal(t, want, got)
			wantLogged := 0
			if tc.failures > 0 {
				wantLogged = 1
			}
			assert.Equal(t, wantLogged, strings.Count(logs.String(), "level=WARN"), "the failure starts: once")
			assert.Equal(t, wantLogged, strings.Count(logs.String(), "local mirror written again"), "the failure ends: once")
		})
	}
}

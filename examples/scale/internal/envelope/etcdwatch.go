package envelope

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vswitchkit/vswitchkit/examples/scale/internal/synth"
)

// etcdWatch writes the changes of the measures and times the part of
// their latency that is etcd's: from the write to a watch of the runner
// (another etcd client, like the agent's watcher) receiving it.
type etcdWatch struct {
	cli    *clientv3.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	seen map[int64]time.Time // revision -> when the watch received it

	lastRev   int64 // of the last txn; owned by the measuring goroutine
	lastStart time.Time
}

// startEtcdWatch watches everything under prefix from the current
// revision on.
func startEtcdWatch(ctx context.Context, cli *clientv3.Client, prefix string) (*etcdWatch, error) {
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &etcdWatch{cli: cli, cancel: cancel, done: make(chan struct{}), seen: map[int64]time.Time{}}
	ch := cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	go func() {
		defer close(w.done)
		for resp := range ch {
			now := time.Now()
			w.mu.Lock()
			for _, ev := range resp.Events {
				if _, ok := w.seen[ev.Kv.ModRevision]; !ok {
					w.seen[ev.Kv.ModRevision] = now
				}
			}
			w.mu.Unlock()
		}
	}()
	return w, nil
}

// txn writes puts and deletes in one transaction.
func (w *etcdWatch) txn(ctx context.Context, puts []synth.KV, deletes []string) error {
	w.lastStart = time.Now()
	rev, err := synth.Txn(ctx, w.cli, puts, deletes)
	w.lastRev = rev
	return err
}

// last returns how long the watch took to receive the last transaction.
func (w *etcdWatch) last(ctx context.Context) (time.Duration, error) {
	deadline := time.Now().Add(probeTimeout)
	for {
		w.mu.Lock()
		at, ok := w.seen[w.lastRev]
		delete(w.seen, w.lastRev)
		w.mu.Unlock()
		if ok {
			return at.Sub(w.lastStart), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the runner's watch did not receive revision %d", w.lastRev)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Microsecond):
		}
	}
}

// close stops the watch.
func (w *etcdWatch) close() {
	w.cancel()
	<-w.done
}

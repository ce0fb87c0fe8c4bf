package nodesync_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/etcddb"
	"github.com/vswitchkit/vswitchkit/nodesync/internal/etcdtest"
	"github.com/vswitchkit/vswitchkit/nodesync/model"
)

// countingLoop is a cheap controller.EventLoop that only counts events.
type countingLoop struct {
	mu sync.Mutex
	n  int
}

func (l *countingLoop) PushEvent(controller.Event) error {
	l.mu.Lock()
	l.n++
	l.mu.Unlock()
	return nil
}

// connectDBs creates and connects n etcd clients.
func connectDBs(tb testing.TB, endpoint string, n int) ([]*etcddb.DB, func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	dbs := make([]*etcddb.DB, n)
	connected := make(chan struct{}, n)
	for i := range dbs {
		db, err := etcddb.New(etcddb.Config{Endpoints: []string{endpoint}})
		require.NoError(tb, err)
		dbs[i] = db
		wg.Go(func() { _ = db.Run(ctx) })
		db.OnConnect(func() error { connected <- struct{}{}; return nil })
	}
	for range n {
		select {
		case <-connected:
		case <-time.After(60 * time.Second):
			cancel()
			wg.Wait()
			tb.Fatal("etcd clients did not connect")
		}
	}
	return dbs, func() { cancel(); wg.Wait() }
}

// startNodes starts one NodeSync per DB, all at once, and returns them.
func startNodes(tb testing.TB, ctx context.Context, wg *sync.WaitGroup, dbs []*etcddb.DB, prefix string, name func(int) string, errs chan<- error) []*nodesync.NodeSync {
	tb.Helper()
	loop := &countingLoop{}
	nss := make([]*nodesync.NodeSync, len(dbs))
	for i, db := range dbs {
		ns, err := nodesync.New(name(i), db, loop, nodesync.Config{Prefix: prefix})
		require.NoError(tb, err)
		nss[i] = ns
	}
	for _, ns := range nss {
		wg.Go(func() {
			if err := ns.Run(ctx); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", ns.NodeName(), err)
			}
		})
	}
	return nss
}

func waitReady(tb testing.TB, nss []*nodesync.NodeSync, errs <-chan error, timeout time.Duration) {
	tb.Helper()
	deadline := time.After(timeout)
	for _, ns := range nss {
		select {
		case <-ns.Ready():
		case err := <-errs:
			tb.Fatalf("Run failed: %v", err)
		case <-deadline:
			tb.Fatalf("%s got no ID within %v", ns.NodeName(), timeout)
		}
	}
}

func TestConcurrentJoin(t *testing.T) {
	const n = 200
	endpoint := etcdtest.Start(t)
	dbs, closeDBs := connectDBs(t, endpoint, n)
	defer closeDBs()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, n)
	nss := startNodes(t, ctx, &wg, dbs, "", func(i int) string { return fmt.Sprintf("node-%03d", i) }, errs)
	defer func() { cancel(); wg.Wait() }()
	waitReady(t, nss, errs, 2*time.Minute)

	ids := make([]uint32, 0, n)
	for _, ns := range nss {
		ids = append(ids, ns.GetNodeID())
	}
	slices.Sort(ids)
	want := make([]uint32, n)
	for i := range want {
		want[i] = uint32(i + 1)
	}
	require.Equal(t, want, ids, "every node gets a unique ID, together exactly 1..%d", n)
}

func benchmarkConcurrentJoin(b *testing.B, n int) {
	endpoint := etcdtest.Start(b)
	dbs, closeDBs := connectDBs(b, endpoint, n)
	defer closeDBs()
	var total time.Duration
	for i := 0; b.Loop(); i++ {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		errs := make(chan error, n)
		start := time.Now()
		nss := startNodes(b, ctx, &wg, dbs, fmt.Sprintf("/bench/round%d/", i), func(j int) string { return fmt.Sprintf("node-%04d", j) }, errs)
		waitReady(b, nss, errs, 5*time.Minute)
		total += time.Since(start)
		b.StopTimer()
		cancel()
		wg.Wait()
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), fmt.Sprintf("s/%d-joins", n))
}

// BenchmarkConcurrentJoin1000 is the same with 1000 nodes, to show how the
// join time scales (every node reads all claims once: O(N) per node).
func BenchmarkConcurrentJoin1000(b *testing.B) { benchmarkConcurrentJoin(b, 1000) }

// BenchmarkConcurrentJoin500 measures how long 500 nodes, each with its own
// etcd client, take until every one has its ID, all starting at once.
// Target: <= 5 s on a 2-core machine. Every round uses a fresh key prefix,
// i.e. an empty cluster.
func BenchmarkConcurrentJoin500(b *testing.B) { benchmarkConcurrentJoin(b, 500) }

// TestConcurrentJoinFillsHoles: nodes joining at once into a cluster with
// gaps in its IDs take the gaps first, so that afterwards the IDs are
// exactly 1..N again.
func TestConcurrentJoinFillsHoles(t *testing.T) {
	const existing, joining = 10, 30
	endpoint := etcdtest.Start(t)
	dbs, closeDBs := connectDBs(t, endpoint, joining)
	defer closeDBs()
	for i := range existing { // IDs 2, 4, ..., 20 are taken
		id := uint32(2 * (i + 1))
		claim := mustMarshal(t, &model.NodeIDClaim{Id: id, Name: fmt.Sprintf("old-%d", i)})
		ok, err := dbs[0].PutIfNotExists(fmt.Sprintf("%sid/%d", nodesync.DefaultPrefix, id), claim)
		require.NoError(t, err)
		require.True(t, ok)
		_, err = dbs[0].NewBroker(nodesync.DefaultPrefix).Put(context.Background(), fmt.Sprintf("node/old-%d", i),
			&model.VswitchNode{Id: id, Name: fmt.Sprintf("old-%d", i)})
		require.NoError(t, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, joining)
	nss := startNodes(t, ctx, &wg, dbs, "", func(i int) string { return fmt.Sprintf("new-%02d", i) }, errs)
	defer func() { cancel(); wg.Wait() }()
	waitReady(t, nss, errs, time.Minute)

	ids := make([]uint32, 0, existing+joining)
	for i := range existing {
		ids = append(ids, uint32(2*(i+1)))
	}
	for _, ns := range nss {
		ids = append(ids, ns.GetNodeID())
	}
	slices.Sort(ids)
	want := make([]uint32, existing+joining)
	for i := range want {
		want[i] = uint32(i + 1)
	}
	require.Equal(t, want, ids)
}

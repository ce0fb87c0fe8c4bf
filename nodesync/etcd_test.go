package nodesync_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/etcddb"
	"github.com/vswitchkit/vswitchkit/nodesync/internal/etcdtest"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesyncmodel"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
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
		ns, err := nodesync.New(name(i), db, loop, nodesync.Config{Prefix: prefix, Logger: debugLogger()})
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

// requireDense fails unless ids are exactly 1..len(ids) in some order.
func requireDense(tb testing.TB, ids []uint32) {
	tb.Helper()
	got := slices.Sorted(slices.Values(ids))
	for i, id := range got {
		if id != uint32(i+1) {
			tb.Fatalf("IDs are not unique and dense: sorted position %d holds ID %d (want %d)", i, id, i+1)
		}
	}
}

// benchmarkConcurrentJoin measures how long n nodes, each with its own etcd
// client, all starting at once on an empty cluster (a fresh key prefix per
// round), take until every one has claimed its ID: the join alone (Run's
// allocation; not its later read of the node records, which every node
// needs once and which is O(N) by nature). etcd runs in a separate process
// (fsync off, like the other tests), so that its memory is measured apart
// from the 5000 clients': VmHWM and VmRSS at the end, VmRSS once the
// clients are connected (before the joins: the cost of the connections),
// its database size, and its CPU time per join (robust against other load
// on the machine, unlike the wall-clock time). Every round asserts that the IDs are exactly 1..n.
func benchmarkConcurrentJoin(b *testing.B, n int) {
	srv := etcdtest.StartProcess(b)
	dbs, closeDBs := connectDBs(b, srv.Endpoint, n)
	defer closeDBs()
	_, rssConnected, err := etcdtest.Memory(srv.Pid)
	require.NoError(b, err)
	loop := &countingLoop{}
	var total, etcdCPU time.Duration
	for i := 0; b.Loop(); i++ {
		prefix := fmt.Sprintf("/bench/round%d/", i)
		nss := make([]*nodesync.NodeSync, n)
		for j, db := range dbs {
			ns, err := nodesync.New(fmt.Sprintf("node-%04d", j), db, loop, nodesync.Config{Prefix: prefix})
			require.NoError(b, err)
			nss[j] = ns
		}
		ids := make([]uint32, n)
		errs := make([]error, n)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		var wg sync.WaitGroup
		cpu0, err := etcdtest.CPUTime(srv.Pid)
		require.NoError(b, err)
		start := time.Now()
		for j, ns := range nss {
			wg.Go(func() { ids[j], errs[j] = ns.JoinForTest(ctx) })
		}
		wg.Wait()
		total += time.Since(start)
		cpu1, err := etcdtest.CPUTime(srv.Pid)
		require.NoError(b, err)
		etcdCPU += cpu1 - cpu0
		cancel()
		require.NoError(b, errors.Join(errs...))
		requireDense(b, ids)
	}
	storm := total.Seconds() / float64(b.N)
	b.ReportMetric(storm, "s/storm")
	b.ReportMetric(storm/float64(n)*1e6, "µs/join")
	// The server's CPU per join: the cost etcd pays, independent of how
	// busy the machine is with other work.
	b.ReportMetric(etcdCPU.Seconds()/float64(b.N)/float64(n)*1e6, "etcd-cpu-µs/join")
	hwm, rss, err := etcdtest.Memory(srv.Pid)
	require.NoError(b, err)
	b.ReportMetric(float64(hwm)/(1<<20), "etcd-VmHWM-MiB")
	b.ReportMetric(float64(rss)/(1<<20), "etcd-VmRSS-MiB")
	b.ReportMetric(float64(rssConnected)/(1<<20), "etcd-VmRSS-connected-MiB")
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	require.NoError(b, err)
	defer cli.Close()
	st, err := cli.Status(context.Background(), strings.TrimPrefix(srv.Endpoint, "http://"))
	require.NoError(b, err)
	b.ReportMetric(float64(st.DbSize)/(1<<20), "etcd-db-MiB")
}

// BenchmarkConcurrentJoin500 measures 500 simultaneous joins (see
// benchmarkConcurrentJoin). Target: the time per join at 5000 nodes is
// within 2x of this.
func BenchmarkConcurrentJoin500(b *testing.B) { benchmarkConcurrentJoin(b, 500) }

// BenchmarkConcurrentJoin1000 measures 1000 simultaneous joins.
func BenchmarkConcurrentJoin1000(b *testing.B) { benchmarkConcurrentJoin(b, 1000) }

// BenchmarkConcurrentJoin5000 measures 5000 simultaneous joins, the
// Kubernetes node limit. Target: <= 10 s on a 2-core machine.
func BenchmarkConcurrentJoin5000(b *testing.B) { benchmarkConcurrentJoin(b, 5000) }

// benchmarkConcurrentStart measures what the join benchmarks leave out: n
// nodes all running Run at once until each is Ready, i.e. has its ID and
// the snapshot of all node records, while the earlier ones already watch.
// Reading every record once per node is O(N) per node by nature.
func benchmarkConcurrentStart(b *testing.B, n int) {
	srv := etcdtest.StartProcess(b)
	dbs, closeDBs := connectDBs(b, srv.Endpoint, n)
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
		ids := make([]uint32, n)
		for j, ns := range nss {
			ids[j] = ns.GetNodeID()
		}
		requireDense(b, ids)
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/storm")
	hwm, rss, err := etcdtest.Memory(srv.Pid)
	require.NoError(b, err)
	b.ReportMetric(float64(hwm)/(1<<20), "etcd-VmHWM-MiB")
	b.ReportMetric(float64(rss)/(1<<20), "etcd-VmRSS-MiB")
}

// BenchmarkConcurrentStart500 is benchmarkConcurrentStart with 500 nodes.
func BenchmarkConcurrentStart500(b *testing.B) { benchmarkConcurrentStart(b, 500) }

// BenchmarkConcurrentStart1000 is benchmarkConcurrentStart with 1000 nodes.
func BenchmarkConcurrentStart1000(b *testing.B) { benchmarkConcurrentStart(b, 1000) }

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
		claim := mustMarshal(t, &nodesyncmodel.NodeIDClaim{Id: id, Name: fmt.Sprintf("old-%d", i)})
		ok, err := dbs[0].PutIfNotExists(fmt.Sprintf("%sid/%d", nodesync.DefaultPrefix, id), claim)
		require.NoError(t, err)
		require.True(t, ok)
		_, err = dbs[0].NewBroker(nodesync.DefaultPrefix).Put(context.Background(), fmt.Sprintf("node/old-%d", i),
			&nodesyncmodel.VswitchNode{Id: id, Name: fmt.Sprintf("old-%d", i)})
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

// TestConcurrentJoinAcrossEtcdRestart stops the etcd server while 150 nodes
// are joining and starts it again: every join completes (requests that
// failed or whose outcome was lost are retried), and the IDs are still
// exactly 1..N.
func TestConcurrentJoinAcrossEtcdRestart(t *testing.T) {
	const n = 150
	srv := etcdtest.StartServer(t)
	endpoint := "http://" + srv.Endpoint()
	ctx, cancel := context.WithCancel(context.Background())
	var dbWG sync.WaitGroup
	defer func() { cancel(); dbWG.Wait() }()
	dbs := make([]*etcddb.DB, n)
	connected := make(chan struct{}, n)
	for i := range dbs {
		db, err := etcddb.New(etcddb.Config{Endpoints: []string{endpoint}, RequestTimeout: 2 * time.Second, RetryBackoff: 10 * time.Millisecond})
		require.NoError(t, err)
		dbs[i] = db
		dbWG.Go(func() { _ = db.Run(ctx) })
		db.OnConnect(func() error { connected <- struct{}{}; return nil })
	}
	for range n {
		<-connected
	}
	nss := make([]*nodesync.NodeSync, n)
	loop := &countingLoop{}
	for i, db := range dbs {
		ns, err := nodesync.New(fmt.Sprintf("node-%03d", i), db, loop, nodesync.Config{RequestTimeout: 2 * time.Second, RetryBackoff: 10 * time.Millisecond})
		require.NoError(t, err)
		nss[i] = ns
	}
	ids := make([]uint32, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	var joined sync.WaitGroup
	joined.Add(n / 3)
	var count atomic.Int64
	for i, ns := range nss {
		wg.Go(func() {
			ids[i], errs[i] = ns.JoinForTest(ctx)
			if count.Add(1) <= n/3 {
				joined.Done()
			}
		})
	}
	joined.Wait() // a third have joined, the rest are in flight
	srv.Stop()
	time.Sleep(300 * time.Millisecond) // the outage itself, not a synchronisation
	require.NoError(t, srv.Restart())
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	requireDense(t, ids)
}

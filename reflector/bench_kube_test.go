package reflector_test

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/vswitchkit/vswitchkit/embedetcd"
	"github.com/vswitchkit/vswitchkit/internal/kubetest"
	"github.com/vswitchkit/vswitchkit/reflector"
)

// kubeSize is the cluster of BenchmarkKubeInitialReflection: nodes, pods,
// services (-args -kubesize=5000,150000,10000 for the fake benchmark's
// size).
var kubeSize = flag.String("kubesize", "500,15000,1000", "nodes,pods,services of BenchmarkKubeInitialReflection")

// startBenchCluster starts a control plane of the benchmark's own (no
// controller manager: the slices are created as the fake benchmark's are)
// on an etcd with room for the cluster.
func startBenchCluster(b *testing.B) *kubetest.Cluster {
	b.Helper()
	kubetest.Need(b)
	dir := b.TempDir()
	srv, err := embedetcd.Start(context.Background(), embedetcd.Config{Dir: filepath.Join(dir, "etcd"), UnsafeNoFsync: true,
		QuotaBackendBytes: 8 << 30})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	c, err := kubetest.Start(context.Background(), kubetest.Config{Etcd: srv.Endpoints(), Dir: filepath.Join(dir, "kube")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Stop)
	return c
}

// populate creates objs in the API server, 32 requests at a time: pods
// with an image, created and then given their status through the status
// subresource; service cluster IPs moved past the range's first addresses
// (the network address and default/kubernetes).
func populate(b *testing.B, kube kubernetes.Interface, objs []k8sruntime.Object) {
	b.Helper()
	ctx := context.Background()
	// Namespaces and nodes first: the objects in them need them.
	var first, rest []k8sruntime.Object
	for _, o := range objs {
		switch o.(type) {
		case *corev1.Namespace, *corev1.Node:
			first = append(first, o)
		default:
			rest = append(rest, o)
		}
	}
	var failed atomic.Pointer[error]
	create := func(o k8sruntime.Object) error {
		switch o := o.(type) {
		case *corev1.Namespace:
			if _, err := kube.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{}); err != nil {
				return err
			}
			// What the service-account controller (not running here)
			// would make; pods are not admitted without it.
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: o.Name, Name: "default"}}
			_, err := kube.CoreV1().ServiceAccounts(o.Name).Create(ctx, sa, metav1.CreateOptions{})
			return err
		case *corev1.Node:
			_, err := kube.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
			return err
		case *corev1.Pod:
			p := o.DeepCopy()
			p.Spec.Containers[0].Image = "registry.k8s.io/pause:3.10"
			got, err := kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			got.Status = p.Status
			got.Status.Phase = corev1.PodRunning
			_, err = kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, got, metav1.UpdateOptions{})
			return err
		case *corev1.Service:
			s := o.DeepCopy()
			var a, c int
			fmt.Sscanf(s.Spec.ClusterIP, "10.96.%d.%d", &a, &c)
			i := a*256 + c + 16
			s.Spec.ClusterIP = fmt.Sprintf("10.96.%d.%d", i/256, i%256)
			s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
			_, err := kube.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
			return err
		case *discoveryv1.EndpointSlice:
			_, err := kube.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			return err
		}
		return fmt.Errorf("unexpected %T", o)
	}
	for _, batch := range [][]k8sruntime.Object{first, rest} {
		work := make(chan k8sruntime.Object)
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				for o := range work {
					if err := create(o); err != nil {
						failed.CompareAndSwap(nil, &err)
					}
				}
			})
		}
		for _, o := range batch {
			if failed.Load() != nil {
				break
			}
			work <- o
		}
		close(work)
		wg.Wait()
		if err := failed.Load(); err != nil {
			b.Fatal(*err)
		}
	}
}

// BenchmarkKubeInitialReflection is BenchmarkInitialReflection against a
// real kube-apiserver (internal/kubetest) instead of the fake clientset:
// the cluster (-args -kubesize; default 500 nodes, 15k pods, 1000
// services) is created through the API server first (reported:
// populate-s, and the API server's RSS after it, apiserver-MB, and its
// peak, apiserver-peak-MB), then the reflector lists it (informers-s,
// through the informers' watch-list) and writes it into an empty etcd
// (reconcile-s); then 300 pods change one at a time, from the API change
// to the etcd watch event (p50, p99). heap-added-MB is the test
// process's growth: the informer caches, the reflector and the
// reflector's etcd (the API server is another process).
//
//	go test -run '^$' -bench KubeInitialReflection -benchtime 1x -timeout 30m ./reflector/ -args -kubesize=5000,150000,10000
func BenchmarkKubeInitialReflection(b *testing.B) {
	var nodes, pods, services int
	if _, err := fmt.Sscanf(*kubeSize, "%d,%d,%d", &nodes, &pods, &services); err != nil {
		b.Fatalf("-kubesize %q: %v", *kubeSize, err)
	}
	objs := clusterObjects(nodes, pods, services)
	b.StopTimer()
	for range b.N {
		c := startBenchCluster(b)
		admin := c.Admin()
		start := time.Now()
		populate(b, admin, objs)
		b.ReportMetric(time.Since(start).Seconds(), "populate-s")
		rss, peak, err := c.APIServerRSS()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rss>>20), "apiserver-MB")

		srv, cli := startEtcd(b)
		cfg := c.AdminConfig()
		cfg.QPS = 0 // client-go's default rate limits, as a deployed reflector has
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}
		r, err := reflector.New(cli, reflector.KubernetesResources(kube), reflector.Config{WriteTimeout: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		// The API server's own objects besides the benchmark's: the
		// namespaces default, kube-system, kube-public, kube-node-lease and
		// the service default/kubernetes.
		total := len(objs) + 5
		b.StartTimer()
		start = time.Now()
		stop := run(b, r)
		var synced time.Duration
		for r.Stats().Reconciles == 0 {
			if synced == 0 && informerEvents(r) >= uint64(total) {
				synced = time.Since(start)
			}
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		b.ReportMetric(synced.Seconds(), "informers-s")
		s := r.Stats()
		if want := nodes + pods*2 + 2*services + 100 + 5; int(s.Puts) != want {
			logPuts(b, s, want)
		}
		b.ReportMetric(float64(s.Puts), "etcd-writes")
		b.ReportMetric(s.LastReconcile.Seconds(), "reconcile-s")
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-added-MB")
		p50, p99 := changeLatency(b, admin, cli, 300, nodes, pods, services)
		b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
		b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
		_, peak2, err := c.APIServerRSS()
		if err == nil {
			peak = max(peak, peak2)
		}
		b.ReportMetric(float64(peak>>20), "apiserver-peak-MB")
		stop()
		srv.Close()
	}
}

// BenchmarkKubeChangeLatency is BenchmarkChangeLatency against a real
// kube-apiserver: per change, from the status update of one pod's IP
// through the API server to the etcd watch event of its key, with 1000
// pods reflected.
//
//	go test -run '^$' -bench KubeChangeLatency -benchtime 2000x ./reflector/
func BenchmarkKubeChangeLatency(b *testing.B) {
	objs := clusterObjects(10, 1000, 10)
	c := startBenchCluster(b)
	admin := c.Admin()
	populate(b, admin, objs)
	_, cli := startEtcd(b)
	cfg := c.AdminConfig()
	cfg.QPS = 0
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	r, err := reflector.New(cli, reflector.KubernetesResources(kube), reflector.Config{})
	if err != nil {
		b.Fatal(err)
	}
	run(b, r)
	waitLeader(b, r)
	b.ResetTimer()
	p50, p99 := changeLatency(b, admin, cli, b.N, 10, 1000, 10)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
}

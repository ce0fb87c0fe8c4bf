package reflector_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/reflector"
)

// clusterObjects builds a cluster of the given size: nodes, pods spread
// over nodes and 100 namespaces, services with one endpoint slice each
// listing pods of the service.
func clusterObjects(nodes, pods, services int) []k8sruntime.Object {
	var objs []k8sruntime.Object
	for i := range 100 {
		objs = append(objs, namespace(fmt.Sprintf("ns%d", i)))
	}
	for i := range nodes {
		objs = append(objs, node(fmt.Sprintf("node%d", i), fmt.Sprintf("192.168.%d.%d", i/250, 1+i%250), fmt.Sprintf("10.%d.%d.0/24", i/256, i%256)))
	}
	podIP := func(i int) string { return fmt.Sprintf("10.%d.%d.%d", 100+i/65536, (i/256)%256, i%256) }
	for i := range pods {
		p := pod(fmt.Sprintf("ns%d", i%100), fmt.Sprintf("pod%d", i), podIP(i))
		p.Spec.NodeName = fmt.Sprintf("node%d", i%nodes)
		p.Labels["svc"] = fmt.Sprintf("svc%d", i%services)
		objs = append(objs, p)
	}
	perSvc := pods / services
	for i := range services {
		ns := fmt.Sprintf("ns%d", i%100)
		name := fmt.Sprintf("svc%d", i)
		objs = append(objs, service(ns, name, fmt.Sprintf("10.96.%d.%d", i/256, i%256), 80))
		ips := make([]string, 0, perSvc)
		for j := range perSvc {
			ips = append(ips, podIP(i*perSvc+j))
		}
		objs = append(objs, slice(ns, name+"-abcde", name, 8080, ips...))
	}
	return objs
}

// BenchmarkInitialReflection reflects a cluster of 5000 nodes, 150k pods
// and 10k services (each with an endpoint slice of 15 endpoints) into an
// empty etcd (the pods and their peer records): from Run to the end of
// the first reconcile (informers listing the fake API server, conversion,
// writes in 128-operation transactions to the in-process etcd). Then it
// changes 300 pods one at a time and measures the latency from the API
// change to the etcd watch event. Reported: informers-s (until the informers delivered every
// object: mostly the fake API server's list), reconcile-s (the first
// reconcile: conversion and writes), etcd-writes (keys put), txns,
// heap-MB (live heap after the reflection: the fake API server's objects,
// the informer caches, the reflector's state and the in-process etcd),
// heap-added-MB (its growth during the reflection: informer caches,
// reflector state, etcd's data), latency p50 and p99.
//
//	go test -run '^$' -bench '^BenchmarkInitialReflection$' -benchtime 1x ./reflector/
func BenchmarkInitialReflection(b *testing.B) {
	nodes, pods, services := 5000, 150_000, 10_000
	if testing.Short() {
		nodes, pods, services = 500, 15_000, 1000
	}
	objs := clusterObjects(nodes, pods, services)
	b.StopTimer()
	for range b.N {
		srv, cli := startEtcd(b)
		k := newKube(objs...)
		r := newReflector(b, cli, k, reflector.Config{WriteTimeout: time.Minute})
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		start := time.Now()
		stop := run(b, r)
		var synced time.Duration
		for r.Stats().Reconciles == 0 {
			if synced == 0 && informerEvents(r) >= uint64(len(objs)) {
				synced = time.Since(start)
			}
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		b.ReportMetric(synced.Seconds(), "informers-s")
		s := r.Stats()
		if want := nodes + 2*pods + 2*services + 100; int(s.Puts) != want { // pods and their peer records
			logPuts(b, s, want)
		}
		b.ReportMetric(float64(s.Puts), "etcd-writes")
		b.ReportMetric(float64(s.Txns), "txns")
		b.ReportMetric(s.LastReconcile.Seconds(), "reconcile-s")
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MB")
		b.ReportMetric(float64(ms.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-added-MB")
		p50, p99 := changeLatency(b, k, cli, 300, nodes, pods, services)
		b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
		b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
		stop()
		srv.Close()
	}
}

// logPuts logs the keys written by the first reconcile per resource when
// they are not the cluster's objects.
func logPuts(b *testing.B, s reflector.Stats, want int) {
	b.Helper()
	b.Logf("wrote %d keys, want %d", s.Puts, want)
	for name, rs := range s.Resources {
		b.Logf("%s: %d objects, %d puts, %d bad, %d events", name, rs.Objects, rs.Puts, rs.BadObjects, rs.Events)
	}
}

// informerEvents sums the informers' notifications, one per object of the
// API server: the pods' peer records share the pods' informer.
func informerEvents(r *reflector.Reflector) (sum uint64) {
	for name, rs := range r.Stats().Resources {
		if name != kubemodel.PodPeerResource {
			sum += rs.Events
		}
	}
	return sum
}

// BenchmarkChangeLatency measures, per change, the time from an update of
// one pod's IP through the fake API server to the etcd watch event of its
// key (informer notification, conversion, comparison, fenced transaction),
// with 1000 pods reflected.
func BenchmarkChangeLatency(b *testing.B) {
	objs := clusterObjects(10, 1000, 10)
	_, cli := startEtcd(b)
	k := newKube(objs...)
	r := newReflector(b, cli, k, reflector.Config{})
	run(b, r)
	waitLeader(b, r)
	b.ResetTimer()
	p50, p99 := changeLatency(b, k, cli, b.N, 10, 1000, 10)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
}

// changeLatency changes n pods of clusterObjects(nodes, pods, services)
// one at a time (new IPs, through the status subresource, as the kubelet
// does) and returns the median and 99th percentile of the time until etcd
// reports the write of the pod's key. The pods stay on their nodes: a
// real API server keeps the spec of a status update, the fake replaced
// it (a pod made without its node moved).
func changeLatency(b *testing.B, k kubernetes.Interface, cli *clientv3.Client, n, nodes, pods, services int) (p50, p99 time.Duration) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wch := cli.Watch(ctx, prefix+kubemodel.NodePodKeyPrefix, clientv3.WithPrefix())
	lat := make([]time.Duration, 0, n)
	for i := range n {
		idx := (i * 7919) % pods
		p := pod(fmt.Sprintf("ns%d", idx%100), fmt.Sprintf("pod%d", idx), fmt.Sprintf("10.200.%d.%d", (i/256)%256, i%256))
		p.Spec.NodeName = fmt.Sprintf("node%d", idx%nodes)
		p.Labels["svc"] = fmt.Sprintf("svc%d", idx%services)
		key := prefix + kubemodel.NodePodKey(p.Spec.NodeName, p.Namespace, p.Name)
		start := time.Now()
		if _, err := k.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	wait:
		for {
			select {
			case resp := <-wch:
				for _, ev := range resp.Events {
					if string(ev.Kv.Key) == key {
						break wait
					}
				}
			case <-time.After(testTimeout):
				b.Fatalf("no write of %s", key)
			}
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100]
}

package ipam_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

// cpuMeter reports the CPU time of the benchmark goroutine's thread per
// operation (metric cpu-ns/op), next to the wall-clock ns/op.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU(b *testing.B) *cpuMeter {
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	m := &cpuMeter{}
	m.start, m.ok = threadCPU()
	return m
}

func (m *cpuMeter) report(b *testing.B, unit string, scale float64) {
	end, ok := threadCPU()
	if !m.ok || !ok || b.N == 0 {
		return
	}
	b.ReportMetric(float64(end-m.start)/float64(b.N)/scale, unit)
}

// BenchmarkAllocateReleasePodIP allocates and releases one pod IP per
// iteration in a per-node /24 that holds 200 other pods, so the allocator
// keeps wrapping around and skipping used addresses.
func BenchmarkAllocateReleasePodIP(b *testing.B) {
	setup := func(b *testing.B, cfg ipam.Config) *ipam.IPAM {
		i := newReady(b, 5, cfg)
		for n := range 200 {
			if _, err := i.AllocatePodAddr(pod(fmt.Sprint("resident-", n))); err != nil {
				b.Fatal(err)
			}
		}
		return i
	}
	p := pod("churn")
	b.Run("API=net.IP", func(b *testing.B) {
		i := setup(b, ipam.Config{})
		b.ReportAllocs()
		cpu := startCPU(b)
		for b.Loop() {
			if _, err := i.AllocatePodIP(p, "", ""); err != nil {
				b.Fatal(err)
			}
			if err := i.ReleasePodIP(p); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b, "cpu-ns/op", 1)
	})
	b.Run("API=netip", func(b *testing.B) {
		i := setup(b, ipam.Config{})
		b.ReportAllocs()
		cpu := startCPU(b)
		for b.Loop() {
			if _, err := i.AllocatePodAddr(p); err != nil {
				b.Fatal(err)
			}
			if err := i.ReleasePodIP(p); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b, "cpu-ns/op", 1)
	})
	b.Run("API=netip/ipv6-64", func(b *testing.B) {
		i := setup(b, ipam.Config{PodSubnetCIDR: pfx("fd00::/48"), PodSubnetOneNodePrefixLen: 64})
		b.ReportAllocs()
		cpu := startCPU(b)
		for b.Loop() {
			if _, err := i.AllocatePodAddr(p); err != nil {
				b.Fatal(err)
			}
			if err := i.ReleasePodIP(p); err != nil {
				b.Fatal(err)
			}
		}
		cpu.report(b, "cpu-ns/op", 1)
	})
}

// BenchmarkResync65kPods resyncs a per-node /16 holding 65000 pods (plus
// 1000 pods of other nodes) into a freshly constructed IPAM, as after an
// agent restart ("restart"), or into the IPAM that already holds them
// ("runtime": recovered from the Kubernetes state, so their sandboxes are
// unknown; "runtime-holders": each pod's sandbox is known, as after the
// pods' AddPod events). Custom metrics: wall and CPU milliseconds per
// resync.
func BenchmarkResync65kPods(b *testing.B) {
	const pods = 65000
	cfg := ipam.Config{PodSubnetCIDR: pfx("10.128.0.0/9"), PodSubnetOneNodePrefixLen: 16}
	ks := controller.NewKubeStateData()
	kv := make(controller.KeyValuePairs, pods+1000)
	for n := range pods {
		name := fmt.Sprintf("pod-%d", n)
		ip := fmt.Sprintf("10.133.%d.%d", (n+2)>>8, (n+2)&255)
		kv[kubemodel.PodKey("ns", name)] = &kubemodel.Pod{Namespace: "ns", Name: name, IpAddress: ip}
	}
	for n := range 1000 {
		name := fmt.Sprintf("remote-%d", n)
		kv[kubemodel.PodKey("ns", name)] = &kubemodel.Pod{Namespace: "ns", Name: name, IpAddress: fmt.Sprintf("10.134.%d.%d", n>>8, n&255+2)}
	}
	ks[kubemodel.PodResource] = kv
	run := func(b *testing.B, fresh, holders bool) {
		nodes := ipamtest.NewNodeID(5)
		i, err := ipam.New(nodes, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if holders {
			if err := i.Resync(controller.NewDBResync(), ks, 1, controllertest.NewTxn()); err != nil {
				b.Fatal(err)
			}
			for n := range pods {
				ev := controller.NewAddPodEvent(kubemodel.PodID{Namespace: "ns", Name: fmt.Sprintf("pod-%d", n)}, fmt.Sprintf("%064x", n), "")
				if _, err := i.Update(ev, nil); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportAllocs()
		cpu := startCPU(b)
		for b.Loop() {
			if fresh {
				i, _ = ipam.New(nodes, cfg)
			}
			if err := i.Resync(controller.NewDBResync(), ks, 1, controllertest.NewTxn()); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		cpu.report(b, "cpu-ms/resync", 1e6)
		if got := len(i.Allocations()); got != pods {
			b.Fatalf("recovered %d pods, want %d", got, pods)
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/resync")
	}
	b.Run("restart", func(b *testing.B) { run(b, true, false) })
	b.Run("runtime", func(b *testing.B) { run(b, false, false) })
	b.Run("runtime-holders", func(b *testing.B) { run(b, false, true) })
}

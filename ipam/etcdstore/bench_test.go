package etcdstore_test

import (
	"fmt"
	"testing"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/etcdstore"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

// BenchmarkIPAMAllocateRelease allocates and releases one pod IP per
// iteration with IPAM over etcdstore (two fenced etcd transactions) against
// an in-process single-member etcd on loopback. watchertest runs etcd
// without fsync, so this is the client and server cost without the disk;
// a real etcd adds its WAL fsync (and the network) to every transaction.
func BenchmarkIPAMAllocateRelease(b *testing.B) {
	srv, err := startBenchEtcd(b)
	if err != nil {
		b.Fatal(err)
	}
	cli, err := srv.Client()
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	s, err := etcdstore.New(cli, "bench", etcdstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	stop := runBench(s)
	defer stop()
	<-s.Owned()
	i, err := ipam.New(ipamtest.NewNodeID(5), ipam.Config{Store: s})
	if err != nil {
		b.Fatal(err)
	}
	if err := i.Resync(controller.NewDBResync(), controller.NewKubeStateData(), 1, nil); err != nil {
		b.Fatal(err)
	}
	for n := range 200 {
		if _, err := i.AllocatePodAddr(kubemodel.PodID{Namespace: "default", Name: fmt.Sprint("resident-", n)}); err != nil {
			b.Fatal(err)
		}
	}
	p := kubemodel.PodID{Namespace: "default", Name: "churn"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := i.AllocatePodAddr(p); err != nil {
			b.Fatal(err)
		}
		if err := i.ReleasePodIP(p); err != nil {
			b.Fatal(err)
		}
	}
}

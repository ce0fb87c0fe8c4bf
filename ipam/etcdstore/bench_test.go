package etcdstore_test

import (
	"testing"

	"github.com/vswitchkit/vswitchkit/ipam/etcdstore"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

// BenchmarkIPAMAllocateRelease allocates and releases one pod IP per
// iteration with IPAM over etcdstore (two fenced etcd transactions) against
// an in-process single-member etcd on loopback. etcdtest runs etcd
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
	ipamtest.BenchmarkStore(b, s)
}

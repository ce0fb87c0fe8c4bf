package boltstore_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/boltstore"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
)

// BenchmarkIPAMAllocateRelease allocates and releases one pod IP per
// iteration with IPAM over boltstore: two bbolt transactions, each synced
// to disk (the test's temporary directory).
func BenchmarkIPAMAllocateRelease(b *testing.B) {
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "ipam.db"), boltstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
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

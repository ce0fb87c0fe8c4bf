package boltstore_test

import (
	"path/filepath"
	"testing"

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
	ipamtest.BenchmarkStore(b, s)
}

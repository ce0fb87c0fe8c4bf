package svccnat_test

import (
	"flag"
	"iter"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// seedFlag is -args -seed=N: the randomized tests run with seed N only
// instead of their fixed seeds (CONTRIBUTING R12).
var seedFlag = flag.Int64("seed", -1, "seed of the randomized tests (default: each test's fixed seeds)")

// testSeeds returns the seeds a randomized test runs: 0..n-1, or N alone
// with -args -seed=N. It logs them, and when the test fails the seed in
// use with the command that reproduces the failure.
func testSeeds(t testing.TB, n int) iter.Seq[uint64] {
	t.Helper()
	first, end := uint64(0), uint64(n)
	if *seedFlag >= 0 {
		first, end = uint64(*seedFlag), uint64(*seedFlag)+1
	}
	t.Logf("seeds %d..%d (run one with -args -seed=N)", first, end-1)
	var cur uint64
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("failed with seed %d: reproduce with -run '^%s$' -args -seed=%d", cur, t.Name(), cur)
		}
	})
	return func(yield func(uint64) bool) {
		for cur = first; cur < end; cur++ {
			if !yield(cur) {
				return
			}
		}
	}
}

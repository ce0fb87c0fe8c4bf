package bgp_test

import (
	"flag"
	"os"
	"strconv"
	"testing"
	"time"
)

var seedFlag = flag.String("seed", "", "seed for the randomized tests (or $SEED); default: the time")

// testSeed returns the seed of a randomized test, given with -args -seed=N
// (or $SEED), else the time, and logs it (CONTRIBUTING R12).
func testSeed(t testing.TB) uint64 {
	t.Helper()
	s := *seedFlag
	if s == "" {
		s = os.Getenv("SEED")
	}
	seed := uint64(time.Now().UnixNano())
	if s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("bad seed %q: %v", s, err)
		}
		seed = n
	}
	t.Logf("seed %d; rerun with: go test -run '^%s$' ./bgp -args -seed=%d", seed, t.Name(), seed)
	return seed
}

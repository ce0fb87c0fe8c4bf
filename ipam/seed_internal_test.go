package ipam

import (
	"flag"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var seedFlag = flag.String("seed", "", "seed for the randomized tests (or $SEED); default: each test's fixed seeds")

// testSeeds returns the seeds a randomized test runs with: the one given
// with -args -seed=N (or $SEED=N), else defaults (CONTRIBUTING R12).
func testSeeds(t testing.TB, defaults ...uint64) []uint64 {
	t.Helper()
	s := *seedFlag
	if s == "" {
		s = os.Getenv("SEED")
	}
	if s == "" {
		return defaults
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("bad seed %q: %v", s, err)
	}
	return []uint64{n}
}

// logSeed logs the seed of a randomized (sub)test and how to rerun it.
func logSeed(t testing.TB, seed uint64) {
	t.Helper()
	t.Logf("seed %d; rerun with: go test -run '%s' ./ipam -args -seed=%d", seed, runPattern(t.Name()), seed)
}

// runPattern returns the -run pattern that selects exactly the test name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

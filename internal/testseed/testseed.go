// Package testseed is how the module's randomized tests choose, log and
// replay their seeds (CONTRIBUTING R12): a test runs with its own seeds —
// fixed ones, a range, or the clock's — unless a seed is given with
// -args -seed=N (or $SEED=N), and it logs the seed it used with the
// command that replays it.
//
// It is for tests only: importing it registers the -seed flag on the
// command line's flag set, as the testing package registers its own.
package testseed

import (
	"flag"
	"iter"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var seedFlag = flag.String("seed", "", "seed of the randomized tests (or $SEED); default: each test's own seeds")

// Given returns the seed given with -args -seed=N or $SEED, and whether
// one was. A seed that does not parse fails the test.
func Given(t testing.TB) (uint64, bool) {
	t.Helper()
	s := *seedFlag
	if s == "" {
		s = os.Getenv("SEED")
	}
	if s == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("bad seed %q: %v", s, err)
	}
	return n, true
}

// Log logs the seed a (sub)test uses and how to run it again with it.
func Log(t testing.TB, seed uint64) {
	t.Helper()
	t.Logf("seed %d; replay with: go test -run '%s' -args -seed=%d", seed, RunPattern(t.Name()), seed)
}

// Fixed returns the given seed, else fixed, and logs it.
func Fixed(t testing.TB, fixed uint64) uint64 {
	t.Helper()
	seed, ok := Given(t)
	if !ok {
		seed = fixed
	}
	Log(t, seed)
	return seed
}

// Clock returns the given seed, else one from the clock (a new run each
// time), and logs it.
func Clock(t testing.TB) uint64 {
	t.Helper()
	seed, ok := Given(t)
	if !ok {
		seed = uint64(time.Now().UnixNano())
	}
	Log(t, seed)
	return seed
}

// Seeds returns the given seed alone, else defaults. The caller logs each
// seed it runs (with Log, in the subtest that uses it).
func Seeds(t testing.TB, defaults ...uint64) []uint64 {
	t.Helper()
	if seed, ok := Given(t); ok {
		return []uint64{seed}
	}
	return defaults
}

// Range yields the given seed alone, else 0..n-1. It logs the range, and
// when the test fails, the seed in use with the command that replays it.
func Range(t testing.TB, n int) iter.Seq[uint64] {
	t.Helper()
	first, end := uint64(0), uint64(n)
	if seed, ok := Given(t); ok {
		first, end = seed, seed+1
	}
	t.Logf("seeds %d..%d (run one with -args -seed=N)", first, end-1)
	var cur uint64
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("failed with seed %d; replay with: go test -run '%s' -args -seed=%d", cur, RunPattern(t.Name()), cur)
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

// RunPattern returns the -run pattern that selects exactly the test (or
// subtest) name.
func RunPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

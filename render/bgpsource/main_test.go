package bgpsource_test

import (
	"flag"
	"testing"

	"go.uber.org/goleak"

	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
)

func TestMain(m *testing.M) {
	gobgptest.Main()
	goleak.VerifyTestMain(m)
}

// seedFlag is -args -seed=N: the randomized tests use seed N instead of
// their fixed seeds (CONTRIBUTING R12).
var seedFlag = flag.Int64("seed", -1, "seed of the randomized tests (default: each test's fixed seeds)")

// testSeed returns the seed a randomized test uses, -args -seed=N or else
// fixed, and logs it.
func testSeed(t testing.TB, fixed uint64) uint64 {
	t.Helper()
	seed := fixed
	if *seedFlag >= 0 {
		seed = uint64(*seedFlag)
	}
	t.Logf("seed %d (reproduce with -run '^%s$' -args -seed=%d)", seed, t.Name(), seed)
	return seed
}

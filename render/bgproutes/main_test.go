package bgproutes_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
)

func TestMain(m *testing.M) {
	gobgptest.Main()
	// GoBGP's best-path watch drains on a goroutine of its own for a
	// moment after it is cancelled (see bgp/gobgp: Concurrency).
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/eapache/channels.(*InfiniteChannel).infiniteBuffer"))
}

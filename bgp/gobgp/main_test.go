package gobgp

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
)

func TestMain(m *testing.M) {
	gobgptest.Main()
	if os.Getenv(speakerEnv) != "" {
		os.Exit(runSpeakerProcess())
	}
	// GoBGP's best-path watch (the learned routes) drains its events on a
	// goroutine of GoBGP's that ends soon after the watch is cancelled,
	// and nothing can join it (see the package doc, Concurrency); on a
	// loaded machine it may still be draining when the tests end.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/eapache/channels.(*InfiniteChannel).infiniteBuffer"))
}

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
	goleak.VerifyTestMain(m)
}

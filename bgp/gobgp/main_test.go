package gobgp

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(peerEnv); spec != "" {
		os.Exit(runPeerProcess(spec))
	}
	if os.Getenv(speakerEnv) != "" {
		os.Exit(runSpeakerProcess())
	}
	goleak.VerifyTestMain(m)
}

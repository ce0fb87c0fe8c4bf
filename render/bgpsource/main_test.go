package bgpsource_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/vswitchkit/vswitchkit/bgp/gobgp/gobgptest"
)

func TestMain(m *testing.M) {
	gobgptest.Main()
	goleak.VerifyTestMain(m)
}

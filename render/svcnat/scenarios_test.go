package svcnat_test

import (
	"testing"

	"github.com/vswitchkit/vswitchkit/render/internal/svctest"
)

// TestScenarios runs the service scenarios that both service renderers
// share (render/internal/svctest) against the NAT44 renderer.
func TestScenarios(t *testing.T) { svctest.Run(t, svctest.NAT44) }

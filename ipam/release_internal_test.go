package ipam

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestReleaseCauseKeptBy pins who keeps an address against which release
// (the rules of IPAM.Update, # Sandboxes).
func TestReleaseCauseKeptBy(t *testing.T) {
	tests := []struct {
		name   string
		cause  releaseCause
		holder string
		kept   bool
	}{
		{"direct API, known holder", releaseCause{}, "c1", false},
		{"direct API, unknown holder", releaseCause{}, "", false},
		{"DEL of the holder", releaseCause{sandbox: "c1"}, "c1", false},
		{"DEL of a replaced sandbox", releaseCause{sandbox: "c0"}, "c1", true},
		{"DEL, unknown holder", releaseCause{sandbox: "c0"}, "", false},
		{"deleted from Kubernetes, known holder", releaseCause{kubeDeletion: true}, "c1", true},
		{"deleted from Kubernetes, unknown holder", releaseCause{kubeDeletion: true}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.kept, tc.cause.keptBy(tc.holder))
		})
	}
	assert.Equal(t, "sandbox c0", releaseCause{sandbox: "c0"}.String())
	assert.Equal(t, "deletion from Kubernetes", releaseCause{kubeDeletion: true}.String())
	assert.Equal(t, "any sandbox", releaseCause{}.String())
}

package cniserver

import (
	"testing"

	"github.com/vswitchkit/vswitchkit/cniserver/internal/wire"
)

// The server's default socket is the plugin's.
func TestDefaultSocketPathMatchesThePlugin(t *testing.T) {
	if DefaultSocketPath != wire.DefaultSocketPath {
		t.Fatalf("server default %q, plugin default %q", DefaultSocketPath, wire.DefaultSocketPath)
	}
}

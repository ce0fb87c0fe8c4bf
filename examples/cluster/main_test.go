package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBadFlags: bad command lines are refused before anything starts
// (the cluster itself is tested in internal/demo).
func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--bogus"}, "flag provided but not defined"},
		{"argument", []string{"now"}, "unexpected arguments"},
		{"no nodes", []string{"--nodes", "0"}, "--nodes must be at least 1"},
		{"negative pods", []string{"--pods", "-1"}, "--pods must be at least 1"},
		{"no services", []string{"--services", "0"}, "--services must be at least 1"},
		{"log level", []string{"--log-level", "loud"}, "--log-level"},
		{"kube", []string{"--kube", "kind"}, "--kube must be fake or real"},
		{"unknown renderer", []string{"--services", "ipvs"}, `"ipvs" is neither a number nor nat44 or cnat`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, 2, run(tc.args, &stdout, &stderr))
			assert.Contains(t, stderr.String(), tc.want)
			assert.Empty(t, stdout.String())
		})
	}
}

// TestDualStackNeedsCnat: dual-stack with NAT44 is the demo's error.
func TestDualStackNeedsCnat(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run([]string{"--ip-family", "dual"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), `ip-family "dual" needs services "cnat"`)
}

// TestDualStackNotWithRealKube: the real control plane serves IPv4
// services only; dual-stack with it is refused before anything starts.
func TestDualStackNotWithRealKube(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run([]string{"--kube", "real", "--services", "cnat", "--ip-family", "dual"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "not available with the real control plane")
}

// TestTooManyNodes: a value the demo cannot do is its error, exit 1.
func TestTooManyNodes(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run([]string{"--nodes", "1000"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "nodes: 1000 is not in 1..240")
}

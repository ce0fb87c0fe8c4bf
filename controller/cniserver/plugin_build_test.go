package cniserver_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// pluginDir holds the vswitchkit-cni binary built by TestMain; empty if the
// build failed (the tests that need it fail with buildErr).
var (
	pluginDir string
	buildErr  error
)

// buildPlugin builds examples/vswitchkit-cni into a temporary directory,
// runs the tests and removes the directory.
func buildPlugin(m *testing.M) int {
	dir, err := os.MkdirTemp("", "vskcni-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "vswitchkit-cni"), "github.com/vswitchkit/vswitchkit/examples/vswitchkit-cni")
	if out, err := cmd.CombinedOutput(); err != nil {
		buildErr = fmt.Errorf("build the plugin: %v\n%s", err, out)
	} else {
		pluginDir = dir
	}
	return m.Run()
}

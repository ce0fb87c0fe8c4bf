package cniserver_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// pluginDir holds the vswitchkit-cni binary and cnitool (pinned by go.mod)
// built by TestMain; empty if the build failed (the tests that need them
// fail with buildErr).
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
	for _, pkg := range []string{"github.com/vswitchkit/vswitchkit/examples/vswitchkit-cni", "github.com/containernetworking/cni/cnitool"} {
		cmd := exec.Command("go", "build", "-o", dir, pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build %s: %v\n%s", pkg, err, out)
		}
	}
	if exe, err := os.Executable(); err != nil {
		buildErr = err
	} else if err := os.Symlink(exe, filepath.Join(dir, fakeIPAMName)); err != nil {
		buildErr = err
	}
	if buildErr == nil {
		pluginDir = dir
	}
	return m.Run()
}

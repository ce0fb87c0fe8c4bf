package kubetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Version is the Kubernetes version of the binaries: k8s.io/kubernetes in
// tools/kube/go.mod (a test keeps the two equal).
const Version = "v1.37.2"

// BuildCommand builds the binaries into the cache, from the module's root.
const BuildCommand = "tools/kube/build"

// Environment variables.
const (
	// EnvCache overrides the cache's base folder (default
	// $XDG_CACHE_HOME/vswitchkit/kube, else ~/.cache/vswitchkit/kube); the
	// binaries are in <base>/<Version>/. tools/kube/build reads it too.
	EnvCache = "VSWITCHKIT_KUBE_CACHE"
	// EnvSwitch, set to "off", makes [Need] (and so [Shared.Get]) skip even
	// when the binaries are there; set to "on", it makes missing binaries
	// fail the test instead of skipping it ([Required]).
	EnvSwitch = "VSWITCHKIT_KUBE"
	// EnvCI is set to "true" by CI systems (and .ci/run): unless
	// VSWITCHKIT_KUBE=off, missing binaries then fail the tests.
	EnvCI = "CI"
)

// ErrNoBinaries is matched (errors.Is) by the error of [FindBinaries] when
// the binaries are not built.
var ErrNoBinaries = errors.New("kubetest: kube-apiserver and kube-controller-manager " + Version + " are not built")

// Binaries are the paths of the control plane's programs.
type Binaries struct {
	Dir               string
	APIServer         string
	ControllerManager string
}

// CacheDir returns the folder the binaries of [Version] are built into.
func CacheDir() (string, error) {
	base := os.Getenv(EnvCache)
	if base == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("kubetest: cache folder: %w", err)
		}
		base = filepath.Join(c, "vswitchkit", "kube")
	}
	return filepath.Join(base, Version), nil
}

// FindBinaries returns the cached binaries, or an error wrapping
// [ErrNoBinaries] that says how to build them.
func FindBinaries() (Binaries, error) {
	dir, err := CacheDir()
	if err != nil {
		return Binaries{}, err
	}
	b := Binaries{Dir: dir, APIServer: filepath.Join(dir, "kube-apiserver"), ControllerManager: filepath.Join(dir, "kube-controller-manager")}
	for _, p := range []string{b.APIServer, b.ControllerManager} {
		if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
			return Binaries{}, fmt.Errorf("%w in %s: run `nice -n 10 %s` in the module's root (once: ~35 CPU-minutes, ~4 GB of Go build cache)", ErrNoBinaries, dir, BuildCommand)
		}
	}
	return b, nil
}

// Disabled reports whether VSWITCHKIT_KUBE=off asks to skip the tests that
// need the binaries.
func Disabled() bool { return strings.EqualFold(os.Getenv(EnvSwitch), "off") }

// Required reports whether the tests that need the binaries must run:
// VSWITCHKIT_KUBE=on, or CI=true without VSWITCHKIT_KUBE=off. A CI lane
// that skipped them for want of binaries would pass without testing.
func Required() bool {
	if Disabled() {
		return false
	}
	return strings.EqualFold(os.Getenv(EnvSwitch), "on") || strings.EqualFold(os.Getenv(EnvCI), "true")
}

// Need returns the binaries for a test or benchmark that needs them. It
// skips it when VSWITCHKIT_KUBE=off, and when the binaries are not built
// (the message names the build command) unless they are [Required], in
// which case it fails it.
func Need(t testing.TB) Binaries {
	t.Helper()
	if Disabled() {
		t.Skipf("kubetest: %s=off: the tests that need a real kube-apiserver are skipped", EnvSwitch)
	}
	b, err := FindBinaries()
	if err != nil {
		if Required() {
			t.Fatalf("%v (required: %s=on or %s=true)", err, EnvSwitch, EnvCI)
		}
		t.Skip(err.Error())
	}
	return b
}

// ModuleRoot returns the root folder of this module's source tree, where
// tools/kube/build is (found from this file's compile-time path).
func ModuleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if ok {
		root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
		if _, err := os.Stat(filepath.Join(root, BuildCommand)); err == nil {
			return root, nil
		}
	}
	return "", fmt.Errorf("kubetest: the module's source tree (with %s) is not where this program was built from", BuildCommand)
}

// Build runs tools/kube/build (which does nothing when the binaries are
// there), with its output to out, and returns the binaries.
func Build(ctx context.Context, out io.Writer) (Binaries, error) {
	if b, err := FindBinaries(); err == nil {
		return b, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return Binaries{}, err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, BuildCommand))
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return Binaries{}, fmt.Errorf("kubetest: %s: %w", BuildCommand, err)
	}
	return FindBinaries()
}

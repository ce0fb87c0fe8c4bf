package cniserver_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == fakeIPAMName {
		fakeIPAMMain() // this binary plays an IPAM plugin; see ipam_plugin_test.go
		return
	}
	code := buildPlugin(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

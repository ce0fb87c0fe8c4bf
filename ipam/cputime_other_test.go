//go:build !linux

package ipam_test

import "time"

// threadCPU is not available on this OS.
func threadCPU() (time.Duration, bool) { return 0, false }

//go:build linux

package gobgp

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user+system) consumed by this process,
// all threads. Benchmarks report it per operation besides wall time: on a
// shared machine wall time includes time spent waiting for a core.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

//go:build linux

package ipam_test

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time (user+system) consumed by the calling OS
// thread. Benchmarks lock their goroutine to its thread and report CPU time
// per operation besides wall time: on a shared machine wall time includes
// time the thread spent waiting for a core.
func threadCPU() (time.Duration, bool) {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

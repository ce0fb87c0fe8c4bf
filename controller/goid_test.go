package controller

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/petermattis/goid"
	"github.com/stretchr/testify/require"
)

// goroutineIDFromStack returns the ID of the calling goroutine, parsed from
// the header of its stack trace ("goroutine 123 [running]:"): the runtime's
// own account, which goid.Get must match.
func goroutineIDFromStack() int64 {
	var buf [64]byte
	s := buf[:runtime.Stack(buf[:], false)]
	s, ok := bytes.CutPrefix(s, []byte("goroutine "))
	if !ok {
		return -1
	}
	s, _, _ = bytes.Cut(s, []byte(" "))
	id, err := strconv.ParseInt(string(s), 10, 64)
	if err != nil {
		return -1
	}
	return id
}

// TestGoroutineID checks goid.Get, which reads the goroutine ID from the
// runtime's g structure at a layout that depends on the Go version and
// architecture, against the ID the runtime prints, on many goroutines alive
// at once. CI runs it on amd64; run it on every architecture you ship.
func TestGoroutineID(t *testing.T) {
	require.Positive(t, goroutineIDFromStack())
	require.Equal(t, goroutineIDFromStack(), goid.Get(), "GOARCH=%s", runtime.GOARCH)
	const n = 64
	type pair struct{ got, want int64 }
	ids := make([]pair, n)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range n {
		wg.Go(func() {
			start.Wait() // all alive at once
			ids[i] = pair{goid.Get(), goroutineIDFromStack()}
		})
	}
	start.Done()
	wg.Wait()
	seen := map[int64]bool{goid.Get(): true}
	for _, p := range ids {
		require.Equal(t, p.want, p.got, "GOARCH=%s", runtime.GOARCH)
		require.False(t, seen[p.got], "goroutines alive at once have distinct IDs")
		seen[p.got] = true
	}
}

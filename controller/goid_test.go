package controller

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCurGDistinguishesGoroutines(t *testing.T) {
	self := curG()
	require.NotZero(t, self)
	require.Equal(t, self, curG(), "stable within a goroutine")
	require.NotZero(t, goroutineIDFromStack())

	const n = 8
	ids := make([]uintptr, n)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range n {
		wg.Go(func() {
			start.Wait() // all alive at once
			ids[i] = curG()
		})
	}
	start.Done()
	wg.Wait()
	seen := map[uintptr]bool{self: true}
	for _, id := range ids {
		require.False(t, seen[id], "goroutines alive at once have distinct identities")
		seen[id] = true
	}
}

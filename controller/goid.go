package controller

import "runtime"

// The loop tells follow-up events pushed by its own handlers from events
// pushed concurrently by other goroutines by comparing goroutine identities.
// curG returns an identity of the calling goroutine that is unique among
// running goroutines: on amd64 and arm64 the address of the runtime's g
// (goid_amd64.s, goid_arm64.s, a few instructions), elsewhere the goroutine
// ID parsed from the stack header (goid_other.go, about a microsecond). It is
// only consulted while a handler runs.

// goroutineIDFromStack returns the ID of the calling goroutine, parsed from
// the header of its stack trace ("goroutine 123 [running]:").
func goroutineIDFromStack() uintptr {
	var buf [32]byte
	n := runtime.Stack(buf[:], false)
	const prefix = len("goroutine ")
	var id uintptr
	for _, c := range buf[prefix:n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uintptr(c-'0')
	}
	return id
}

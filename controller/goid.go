package controller

import "runtime"

// goroutineID returns the ID of the calling goroutine, parsed from the
// header of its stack trace ("goroutine 123 [running]:"). The loop uses it
// to tell follow-up events pushed by its own handlers from events pushed
// concurrently by other goroutines; it is called only while a handler runs.
func goroutineID() uint64 {
	var buf [32]byte
	n := runtime.Stack(buf[:], false)
	const prefix = len("goroutine ")
	var id uint64
	for _, c := range buf[prefix:n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

//go:build amd64 || arm64

package controller

// getg returns the address of the calling goroutine's runtime g structure.
//
//go:noescape
func getg() uintptr

func curG() uintptr { return getg() }

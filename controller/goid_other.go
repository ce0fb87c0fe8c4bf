//go:build !amd64 && !arm64

package controller

func curG() uintptr { return goroutineIDFromStack() }

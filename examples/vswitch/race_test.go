//go:build race

package main

// raceEnabled makes TestMain build the daemon with the race detector too.
const raceEnabled = true

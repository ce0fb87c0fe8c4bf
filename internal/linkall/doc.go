// Package linkall holds the test that links every package of the module
// into one binary and runs it: two packages that cannot live in one program
// (for example because their generated protobuf files register the same
// file name, which panics before main) fail it. It has no API.
package linkall

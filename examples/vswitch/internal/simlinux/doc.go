// Package simlinux simulates the Linux side of pod interfaces for the
// vswitch daemon run against the VPP stand-in without root: the links are
// those of an in-memory cniservertest.FakeLinux, the network namespaces
// are paths on disk. A namespace exists while its path does (any file: a
// test or a demo creates a plain file where a runtime would bind-mount a
// namespace), so the CNI plugin's requests behave as on a real node: ADD
// fails for a missing namespace, DEL succeeds after it is gone.
//
// # Concurrency
//
// [Linux] is safe for concurrent use.
package simlinux

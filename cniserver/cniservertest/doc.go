// Package cniservertest provides in-memory implementations of the
// interfaces package cniserver consumes, for tests of code built on the
// server:
//
//   - [FakeLinux] implements cniserver.Linux: network namespaces are paths
//     registered with AddNetns; veth pairs, links, addresses, routes and
//     neighbor entries live in memory; [FakeLinux.AddLink] plays VPP
//     creating a tap in a pod's namespace.
//   - [MemStore] implements cniserver.Store.
//
// Both inject faults through per-method function fields ([LinuxFuncs],
// [StoreFuncs]).
//
// # Limitations
//
// FakeLinux knows no kernel rules beyond the [cniserver.Linux] contract:
// it does not check that addresses are unique, that a gateway is
// reachable, or that a MAC is unicast; a namespace has no loopback; moving
// a link resets its state as the kernel does, but carrier (link up only
// when the peer is up) is not modelled. The netlink implementation in
// package linuxpod and FakeLinux run the same contract test.
//
// # Concurrency
//
// FakeLinux and MemStore are safe for concurrent use.
package cniservertest

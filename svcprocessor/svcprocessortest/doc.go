// Package svcprocessortest provides in-memory fakes for testing code that
// uses the svcprocessor package:
//
//   - [Subnets], [NodeIPs] and [Pods]: settable implementations of the
//     processor's consumer-side interfaces (pod subnets, node IPs, pod
//     interfaces);
//   - [Recorder]: a renderer that records every notification it receives
//     and keeps the state those notifications add up to, so tests can
//     compare it with a resync snapshot. It can be told to fail.
//
// All fakes are safe for concurrent use; their zero values are ready to use.
//
// # Limitations
//
// The fakes hold single-family pod subnets, as the IPAM does. Recorder drops
// the fields of an event that are valid only during the call (Services, Txn,
// ResyncTxn) before keeping it.
package svcprocessortest

// Package etcdtest provides real, in-process parts for testing code that
// uses the etcd watcher:
//
//   - [Server], a single-member etcd on loopback (package embedetcd, which
//     applications use too), with free ports and a caller-chosen data
//     directory and fsync off, that can
//     be stopped and restarted on the same ports to simulate an outage, in
//     plain HTTP ([Start]) or with mutual TLS ([StartTLS]);
//   - [GenerateCerts], a throw-away certificate authority with a server
//     certificate for 127.0.0.1 and a client certificate;
//   - [Proxy], a loopback TCP proxy that can cut all connections, to
//     simulate a partition between a client and a server that keeps running;
//   - [Put] and [Delete], writes that retry while the server is down.
//
// All types are safe for concurrent use.
//
// # Limitations
//
// The server runs with fsync disabled. Ports are found by binding port 0
// and releasing it, so another process may in rare cases grab one before
// the server binds it; Start then fails with a clear error.
package etcdtest

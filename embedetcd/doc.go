// Package embedetcd runs an etcd server inside the process, on loopback by
// default: for demos (examples/cluster starts one), single-machine setups and
// tests of applications built on vswitchkit. It wraps
// go.etcd.io/etcd/server/v3/embed with the settings those uses need: free
// ports, an optional temporary data directory removed on Close, TLS with
// client certificates, a root user with a password, and Stop/Restart on the
// same ports and data to simulate an outage.
//
// Usage:
//
//	srv, err := embedetcd.Start(ctx, embedetcd.Config{})
//	if err != nil { ... }
//	defer srv.Close()
//	cli, err := srv.Client()           // a clientv3.Client with the server's TLS and credentials
//	endpoints := srv.Endpoints()       // e.g. ["http://127.0.0.1:40123"]
//
// A production etcd cluster is run by its own operators; an embedded server
// is a single member and as durable as its data directory (fsync is on unless
// Config.UnsafeNoFsync is set).
//
// # Concurrency
//
// [Server] is safe for concurrent use.
//
// # Lifecycle
//
// [Start] returns once the server serves clients (or ctx ends). [Server.Stop]
// stops it and keeps the data; [Server.Restart] starts it again on the same
// ports and data; [Server.Close] stops it for good and removes the data
// directory if Start created it. The etcd server's own goroutines end with
// Stop and Close.
package embedetcd

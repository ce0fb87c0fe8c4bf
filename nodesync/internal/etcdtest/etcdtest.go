// Package etcdtest starts an in-process etcd server on loopback for the
// tests of nodesync and its etcd adapter. The server itself is
// [watchertest.Server]; this package only adapts it to testing.TB.
package etcdtest

import (
	"testing"

	"github.com/vswitchkit/vswitchkit/controller/watcher/watchertest"
)

// Start runs a single-member etcd with its data in a temporary directory on
// free loopback ports and returns its client URL. The server is stopped in
// tb.Cleanup. Fsync is disabled: the data dir is thrown away anyway.
func Start(tb testing.TB) string {
	tb.Helper()
	var lastErr error
	for range 5 { // free ports can be taken between probing and binding
		srv, err := watchertest.Start(tb.TempDir())
		if err != nil {
			lastErr = err
			continue
		}
		tb.Cleanup(srv.Close)
		return "http://" + srv.Endpoint()
	}
	tb.Fatalf("etcdtest: start embedded etcd: %v", lastErr)
	return ""
}

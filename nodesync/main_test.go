package nodesync_test

import (
	"testing"

	"github.com/vswitchkit/vswitchkit/nodesync/internal/etcdtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	etcdtest.MaybeServe() // when started as the benchmarks' etcd server process
	goleak.VerifyTestMain(m)
}

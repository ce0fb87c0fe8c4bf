package cniserver_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/cniserver"
)

// BenchmarkPluginAddDel measures the latency of ADD and DEL as a runtime
// sees it: libcni executes the real plugin binary, which forwards to the
// agent (real loop, IPAM, vppdriver on the VPP stand-in, netlink in real
// namespaces). One iteration adds 200 pods one after the other, then
// deletes them; the metrics are the percentiles over all pods of all
// iterations. Run with -benchtime=1x (root only).
func BenchmarkPluginAddDel(b *testing.B) {
	const pods = 200
	nd := newNode(b, pods)
	for _, p := range nd.pods {
		nd.createNetns(p)
	}
	nd.startAgent(cniserver.Config{})
	rt := newRuntime(b, confList(nd.socket, "60s"))
	ctx := cniCtx(b)
	var adds, dels []time.Duration
	for b.Loop() {
		for _, p := range nd.pods {
			start := time.Now()
			_, err := rt.cni.AddNetworkList(ctx, rt.list, p.rt())
			adds = append(adds, time.Since(start))
			require.NoError(b, err)
		}
		for _, p := range nd.pods {
			start := time.Now()
			err := rt.cni.DelNetworkList(ctx, rt.list, p.rt())
			dels = append(dels, time.Since(start))
			require.NoError(b, err)
		}
	}
	report := func(name string, d []time.Duration) {
		slices.Sort(d)
		pct := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))]) / float64(time.Millisecond) }
		b.ReportMetric(pct(0.50), name+"-p50-ms")
		b.ReportMetric(pct(0.99), name+"-p99-ms")
	}
	report("add", adds)
	report("del", dels)
	b.ReportMetric(0, "ns/op")
}

package svcprocessor_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
)

// logBuffer collects text logs; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) warnings() []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, "level=WARN") {
			out = append(out, l)
		}
	}
	return out
}

// TestServiceWithOnlyAnInvalidPortIsReported (issue 27, item 4): a service
// whose only port is out of range keeps its view (cluster IPs, no ports),
// and the skipped port is logged at Warn once, counted in Stats and listed
// by Skipped until the service is fixed or deleted.
func TestServiceWithOnlyAnInvalidPortIsReported(t *testing.T) {
	logs := &logBuffer{}
	f := newFixture(t, svcprocessor.Config{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	bad := mkService("ns", "web", func(s *kubemodel.Service) { s.Ports[0].Port = 70000 })
	require.NoError(t, f.sp.Update(svcChange(nil, bad)))

	got := f.sp.Service(sid("ns", "web"))
	require.NotNil(t, got, "the service is kept, without the port")
	assert.Empty(t, got.Ports)
	want := svcprocessor.SkippedError{Service: sid("ns", "web"), Reason: svcprocessor.InvalidPort, Field: `ports["http"].port`, Value: "70000"}
	assert.Equal(t, []svcprocessor.SkippedError{want}, f.sp.Skipped())
	assert.EqualError(t, &want, `svcprocessor: service ns/web: ports["http"].port 70000: invalid port number`)
	st := f.sp.Stats()
	assert.Equal(t, 1, st.Skipped[svcprocessor.InvalidPort])
	assert.Equal(t, uint64(1), st.SkipReports)
	warns := logs.warnings()
	require.Len(t, warns, 1)
	for _, s := range []string{"component=svcprocessor", "service=ns/web", `field="ports[\"http\"].port"`, "value=70000", "reason=invalid_port"} {
		assert.Contains(t, warns[0], s)
	}

	// Recomputing the service (its endpoints change, a resync) does not
	// report it again.
	require.NoError(t, f.sp.Update(epsChange(nil, mkEndpoints("ns", "web", httpSubset(mkAddr("10.1.1.2", "p", ""))))))
	require.NoError(t, f.sp.Resync(kubeState([]*kubemodel.Service{bad}, nil, nil)))
	assert.Len(t, logs.warnings(), 1, "reported once")
	assert.Equal(t, uint64(1), f.sp.Stats().SkipReports)
	assert.Equal(t, []svcprocessor.SkippedError{want}, f.sp.Skipped())

	// Fixed: no longer skipped.
	good := mkService("ns", "web", nil)
	require.NoError(t, f.sp.Update(svcChange(bad, good)))
	assert.Empty(t, f.sp.Skipped())
	assert.Zero(t, f.sp.Stats().Skipped[svcprocessor.InvalidPort])

	// Broken again, then deleted.
	require.NoError(t, f.sp.Update(svcChange(good, bad)))
	assert.Len(t, logs.warnings(), 2, "a new problem is reported again")
	assert.Equal(t, uint64(2), f.sp.Stats().SkipReports)
	require.NoError(t, f.sp.Update(svcChange(bad, nil)))
	assert.Empty(t, f.sp.Skipped())
	assert.Zero(t, f.sp.Stats().Skipped[svcprocessor.InvalidPort])
}

// TestSkippedParts: every kind of malformed part inside an otherwise valid
// service is skipped, reported with its reason, field and value, and
// counted per reason; a resync that finds the same problems does not
// report them again.
func TestSkippedParts(t *testing.T) {
	tests := []struct {
		name string
		svc  func(s *kubemodel.Service)
		eps  *kubemodel.Endpoints
		want []svcprocessor.SkippedError
	}{
		{name: "cluster IP", svc: func(s *kubemodel.Service) { s.ClusterIps = []string{"10.96.0.300", "10.96.0.11"} },
			want: []svcprocessor.SkippedError{{Reason: svcprocessor.InvalidIP, Field: "clusterIPs", Value: "10.96.0.300"}}},
		{name: "external and load-balancer IPs", svc: func(s *kubemodel.Service) {
			s.ExternalIps = []string{"x"}
			s.LoadBalancerIp = "y"
			s.LbIngressIps = []string{"z"}
		}, want: []svcprocessor.SkippedError{
			{Reason: svcprocessor.InvalidIP, Field: "externalIPs", Value: "x"},
			{Reason: svcprocessor.InvalidIP, Field: "loadBalancer ingress", Value: "z"},
			{Reason: svcprocessor.InvalidIP, Field: "loadBalancerIP", Value: "y"},
		}},
		{name: "negative port", svc: func(s *kubemodel.Service) {
			s.Ports = append(s.Ports, &kubemodel.ServicePort{Name: "neg", Port: -1})
		}, want: []svcprocessor.SkippedError{{Reason: svcprocessor.InvalidPort, Field: `ports["neg"].port`, Value: "-1"}}},
		{name: "node port", svc: func(s *kubemodel.Service) { s.Ports[0].NodePort = 70000 },
			want: []svcprocessor.SkippedError{{Reason: svcprocessor.InvalidNodePort, Field: `ports["http"].nodePort`, Value: "70000"}}},
		{name: "endpoint IP", eps: mkEndpoints("ns", "s", httpSubset(mkAddr("10.1.1.2", "a", ""), mkAddr("bad", "b", ""))),
			want: []svcprocessor.SkippedError{{Reason: svcprocessor.InvalidEndpointIP, Field: "endpoints.addresses", Value: "bad"}}},
		{name: "endpoint port", eps: mkEndpoints("ns", "s", &kubemodel.EndpointSubset{
			Addresses: []*kubemodel.EndpointAddress{mkAddr("10.1.1.2", "a", "")},
			Ports:     []*kubemodel.EndpointPort{{Name: "http", Port: 0, Protocol: kubemodel.Protocol_TCP}},
		}), want: []svcprocessor.SkippedError{{Reason: svcprocessor.InvalidEndpointPort, Field: `endpoints.ports["http"]`, Value: "0"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logBuffer{}
			f := newFixture(t, svcprocessor.Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			svc := mkService("ns", "s", tc.svc)
			var epss []*kubemodel.Endpoints
			if tc.eps != nil {
				epss = append(epss, tc.eps)
			}
			state := kubeState([]*kubemodel.Service{svc}, epss, nil)
			require.NoError(t, f.sp.Resync(state))
			require.NotNil(t, f.sp.Service(sid("ns", "s")))
			for i := range tc.want {
				tc.want[i].Service = sid("ns", "s")
			}
			assert.Equal(t, tc.want, f.sp.Skipped())
			perReason := map[svcprocessor.SkipReason]int{}
			for _, w := range tc.want {
				perReason[w.Reason]++
			}
			st := f.sp.Stats()
			for _, r := range svcprocessor.SkipReasons() {
				assert.Equal(t, perReason[r], st.Skipped[r], "reason %v", r)
			}
			assert.Equal(t, uint64(len(tc.want)), st.SkipReports)
			assert.Len(t, logs.warnings(), len(tc.want))

			require.NoError(t, f.sp.Resync(state))
			assert.Len(t, logs.warnings(), len(tc.want), "the same problems are not reported again")
			assert.Equal(t, tc.want, f.sp.Skipped())
		})
	}
}

func TestSkipReasonNames(t *testing.T) {
	var names []string
	for _, r := range svcprocessor.SkipReasons() {
		names = append(names, r.String())
	}
	assert.Equal(t, []string{"invalid_ip", "invalid_port", "invalid_node_port", "invalid_endpoint_ip", "invalid_endpoint_port"}, names)
}

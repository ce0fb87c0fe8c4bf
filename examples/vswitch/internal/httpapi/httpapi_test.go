package httpapi_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/vswitchkit/vswitchkit/examples/vswitch/internal/httpapi"
	"github.com/vswitchkit/vswitchkit/render/svcnat"
	"github.com/vswitchkit/vswitchkit/vppdriver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestKeyKind(t *testing.T) {
	for key, want := range map[string]string{
		"vpp/interface/uplink":                     "interface",
		"vpp/route/0/10.1.1.2/32":                  "route",
		"vpp/vrf/ipv4/10":                          "vrf",
		"vpp/neighbor/pod-1/10.1.1.2":              "neighbor",
		"vpp/nat44/global":                         "nat44_global",
		"vpp/nat44/static/tcp/10.96.0.10/80":       "nat44_static",
		"vpp/nat44/lb/tcp/10.96.0.10/80":           "nat44_lb",
		"vpp/nat44/identity/udp/192.168.16.1/4789": "nat44_identity",
		"other/key":                                "other",
	} {
		assert.Equal(t, want, httpapi.KeyKind(key), key)
	}
}

func TestQuantiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want map[float64]float64
	}{
		{"none", nil, nil},
		{"one", []float64{3}, map[float64]float64{0.5: 3, 0.9: 3, 0.99: 3}},
		{"ten", []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, map[float64]float64{0.5: 5, 0.9: 9, 0.99: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, httpapi.QuantilesOf(tc.in))
		})
	}
}

// TestBeforeTheAgent: until the agent is attached the daemon is alive but
// not ready, the debug views say what it is doing, the metrics say it is
// not ready.
func TestBeforeTheAgent(t *testing.T) {
	s := httpapi.New(httpapi.Config{})
	s.SetPhase("connecting to etcd")
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/healthz", http.StatusOK, "ok (connecting to etcd)"},
		{"/readyz", http.StatusServiceUnavailable, "not ready: connecting to etcd"},
		{"/debug/vpp", http.StatusServiceUnavailable, "no agent yet: connecting to etcd"},
		{"/metrics", http.StatusOK, "vswitchkit_ready 0"},
		{"/", http.StatusOK, "/debug/events"},
		{"/debug/", http.StatusOK, `"path": "/debug/vpp"`},
		{"/nope", http.StatusNotFound, ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tc.path)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.code, resp.StatusCode)
			assert.Contains(t, string(b), tc.body)
		})
	}
}

// TestRun listens, serves and stops with its context.
func TestRun(t *testing.T) {
	s := httpapi.New(httpapi.Config{Listen: "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	require.Eventually(t, func() bool { return s.Addr() != nil }, 10*time.Second, time.Millisecond)
	resp, err := http.Get("http://" + s.Addr().String() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	cancel()
	require.NoError(t, <-done)

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	err = httpapi.New(httpapi.Config{Listen: taken.Addr().String()}).Run(context.Background())
	require.Error(t, err, "the address is taken")
	assert.Contains(t, err.Error(), "address already in use")
}

// TestJSONNames: field names become camelCase whose first word is lower
// case, an initialism included (issue 27, item 8: "IPv6Frontends" was
// "iPv6Frontends"); the stats the views show are named so.
func TestJSONNames(t *testing.T) {
	for name, want := range map[string]string{
		"Services": "services", "IPv6Frontends": "ipv6Frontends", "IPv4Addresses": "ipv4Addresses", "TwiceNATPool": "twiceNATPool",
		"NAT44Mappings": "nat44Mappings", "VPPConnected": "vppConnected", "ID": "id", "NodeID": "nodeID", "FailingByKind": "failingByKind",
		"already": "already",
	} {
		assert.Equal(t, want, httpapi.JSONName(name), name)
	}
	camel := regexp.MustCompile(`^[a-z][a-z0-9]*([A-Z][A-Za-z0-9]*)*$`)
	for _, v := range []any{svcnat.Stats{}, vppdriver.Stats{}} {
		for key := range httpapi.LowerCamel(v) {
			assert.Regexp(t, camel, key)
			assert.NotRegexp(t, `^[a-z][A-Z]`, key, "a one-letter first word is a split initialism")
		}
	}
	assert.Contains(t, httpapi.LowerCamel(svcnat.Stats{}), "ipv6Frontends")
}

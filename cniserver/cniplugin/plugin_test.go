package cniplugin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/vswitchkit/vswitchkit/cniserver/cniplugin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// agent serves handler on a unix socket until the test ends.
func agent(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "vskplug")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "cni.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	srv := &http.Server{Handler: handler}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return path
}

var conf = []byte(`{"cniVersion":"1.1.0","name":"net","type":"vswitchkit-cni"}`)

func args(c []byte) *skel.CmdArgs {
	return &skel.CmdArgs{ContainerID: "c1", Netns: "/run/netns/x", IfName: "eth0", StdinData: c}
}

func TestCallErrors(t *testing.T) {
	stale := func(t *testing.T) string {
		dir, err := os.MkdirTemp("", "vskplug")
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		path := filepath.Join(dir, "stale.sock")
		ln, err := net.Listen("unix", path)
		require.NoError(t, err)
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		require.NoError(t, ln.Close())
		return path
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	for _, tc := range []struct {
		name     string
		socket   func(t *testing.T) string
		conf     []byte
		timeout  time.Duration
		wantCode uint
		wantMsg  string
	}{
		{name: "no socket", socket: func(*testing.T) string { return "/run/vswitchkit-test-nothing/cni.sock" },
			wantCode: types.ErrTryAgainLater, wantMsg: "the socket does not exist"},
		{name: "nobody listening", socket: stale, wantCode: types.ErrTryAgainLater, wantMsg: "unreachable"},
		{name: "agent does not answer in time", timeout: 100 * time.Millisecond, socket: func(t *testing.T) string {
			return agent(t, func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-release:
				case <-r.Context().Done():
				}
			})
		}, wantCode: types.ErrTryAgainLater, wantMsg: "timed out waiting for the vswitchkit agent"},
		{name: "agent fails the HTTP request", socket: func(t *testing.T) string {
			return agent(t, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
		}, wantCode: types.ErrTryAgainLater, wantMsg: "500"},
		{name: "agent answers garbage", socket: func(t *testing.T) string {
			return agent(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{nope")) })
		}, wantCode: types.ErrDecodingFailure},
		{name: "agent drops the connection", socket: func(t *testing.T) string {
			return agent(t, func(w http.ResponseWriter, _ *http.Request) {
				c, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					_ = c.Close()
				}
			})
		}, wantCode: types.ErrTryAgainLater, wantMsg: "lost the connection"},
		{name: "agent's CNI error passes through", socket: func(t *testing.T) string {
			return agent(t, func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`{"error":{"code":3,"msg":"unknown container","details":"c1"}}`))
			})
		}, wantCode: types.ErrUnknownContainer, wantMsg: "unknown container; c1"},
		{name: "invalid configuration JSON", conf: []byte(`{"name":`), socket: func(*testing.T) string { return "/nonexistent.sock" },
			wantCode: types.ErrDecodingFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			c := tc.conf
			if c == nil {
				c = conf
			}
			_, err := cniplugin.Call(ctx, tc.socket(t), "ADD", args(c))
			var cerr *types.Error
			require.True(t, errors.As(err, &cerr), "%T %v", err, err)
			assert.Equal(t, tc.wantCode, cerr.Code, "%v", err)
			assert.ErrorContains(t, err, tc.wantMsg)
		})
	}
}

func TestCallSendsTheRequest(t *testing.T) {
	var got map[string]any
	socket := agent(t, func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "/v1/cni", r.URL.Path)
		assert.Equal(t, http.MethodPost, r.Method)
		if assert.NoError(t, jsonDecode(r, &got)) {
			_, _ = w.Write([]byte(`{"result":{"cniVersion":"1.1.0","ips":[{"address":"10.1.1.2/24"}]}}`))
		}
	})
	out, err := cniplugin.Call(context.Background(), socket, "ADD", &skel.CmdArgs{ContainerID: "c1", Netns: "/run/netns/x",
		IfName: "eth0", Args: "K8S_POD_NAME=p", Path: "/opt/cni/bin", StdinData: conf})
	require.NoError(t, err)
	assert.JSONEq(t, `{"cniVersion":"1.1.0","ips":[{"address":"10.1.1.2/24"}]}`, string(out))
	assert.Equal(t, "ADD", got["command"])
	assert.Equal(t, "c1", got["containerID"])
	assert.Equal(t, "/run/netns/x", got["netns"])
	assert.Equal(t, "eth0", got["ifName"])
	assert.Equal(t, "K8S_POD_NAME=p", got["args"])
	assert.Equal(t, "/opt/cni/bin", got["path"])
	assert.Equal(t, "net", got["config"].(map[string]any)["name"])
}

func jsonDecode(r *http.Request, v any) error { return json.NewDecoder(r.Body).Decode(v) }

// ExampleCall shows the error a runtime gets when the agent is not
// running: CNI error code 11, try again later.
func ExampleCall() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := cniplugin.Call(ctx, "/run/vswitchkit-example/missing.sock", "ADD", &skel.CmdArgs{
		ContainerID: "c1", Netns: "/run/netns/pod1", IfName: "eth0",
		StdinData: []byte(`{"cniVersion":"1.1.0","name":"vswitchkit","type":"vswitchkit-cni"}`),
	})
	var cerr *types.Error
	if errors.As(err, &cerr) {
		fmt.Println(cerr.Code, cerr.Msg)
	}
	// Output:
	// 11 the vswitchkit agent is unreachable; try again later
}

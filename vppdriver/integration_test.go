package vppdriver_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/adapter/socketclient"
	"go.fd.io/govpp/binapi/interface_types"
	"go.fd.io/govpp/binapi/memclnt"
	"go.fd.io/govpp/core"

	interfaces "go.fd.io/govpp/binapi/interface"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/model"
)

// TestIntegrationRealVPP runs the apply / change / resync scenario against
// a real VPP whose binary-API socket is named by VPP_API_SOCKET. It uses
// its own tag prefix and removes what it created.
func TestIntegrationRealVPP(t *testing.T) {
	sock := os.Getenv("VPP_API_SOCKET")
	if sock == "" {
		t.Skip("VPP_API_SOCKET is not set: start VPP (e.g. `vpp unix { cli-listen /run/vpp/cli.sock } socksvr { socket-name /run/vpp/api.sock }`) and set VPP_API_SOCKET=/run/vpp/api.sock to run this test against it")
	}
	cfg := testCfg()
	cfg.TagPrefix = "vsk-it:"
	d, err := vppdriver.New(func() adapter.VppAPI { return socketclient.NewVppClient(sock) }, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	require.Eventually(t, d.Connected, 15*time.Second, 10*time.Millisecond)
	require.NoError(t, d.Compatibility())

	state := kv(t,
		&model.VrfTable{Id: 4242, Label: "it"},
		loop("it-up", true, 0, "192.0.2.1/24"),
		loop("it-vrf", true, 4242, "198.51.100.1/24"),
		route(0, "203.0.113.0/24", via("it-up", "192.0.2.2"), via("it-up", "192.0.2.3")),
		route(4242, "203.0.113.128/25", via("it-vrf", "198.51.100.2")),
	)
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	assert.ElementsMatch(t, []string{"vsk-it:it-up", "vsk-it:it-vrf"}, ownedTags(t, sock, cfg.TagPrefix))

	// Change, then resync to a smaller state, then to nothing (cleanup).
	commit(t, d, controller.CommitUpdate, kv(t, loop("it-up", false, 0, "192.0.2.9/24"),
		route(0, "203.0.113.0/24", via("it-up", "192.0.2.3"))))
	waitConfigured(t, d, len(state))
	small := kv(t, loop("it-up", true, 0, "192.0.2.1/24"))
	commit(t, d, controller.CommitResync, small)
	waitConfigured(t, d, 1)
	assert.Equal(t, []string{"vsk-it:it-up"}, ownedTags(t, sock, cfg.TagPrefix))
	commit(t, d, controller.CommitResync, controller.KeyValuePairs{})
	assert.Empty(t, ownedTags(t, sock, cfg.TagPrefix))
}

// ownedTags lists the tags with the prefix, read over a separate connection.
func ownedTags(t *testing.T, sock, prefix string) []string {
	t.Helper()
	conn, err := core.Connect(socketclient.NewVppClient(sock))
	require.NoError(t, err)
	defer conn.Disconnect()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := conn.NewStream(ctx, core.WithReplySize(1024))
	require.NoError(t, err)
	defer func() { _ = st.Close() }()
	require.NoError(t, st.SendMsg(&interfaces.SwInterfaceDump{SwIfIndex: interface_types.InterfaceIndex(^uint32(0))}))
	require.NoError(t, st.SendMsg(&memclnt.ControlPing{}))
	var tags []string
	for {
		m, err := st.RecvMsg()
		require.NoError(t, err)
		if _, ok := m.(*memclnt.ControlPingReply); ok {
			return tags
		}
		if d, ok := m.(*interfaces.SwInterfaceDetails); ok && strings.HasPrefix(d.Tag, prefix) {
			tags = append(tags, d.Tag)
		}
	}
}

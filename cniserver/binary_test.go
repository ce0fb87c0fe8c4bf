package cniserver_test

import (
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
)

// TestPluginBinaryOnFakeLinux runs the real plugin binary through libcni
// against a server on the in-memory Linux: it needs no privileges, so the
// plugin's handling of the specification is tested everywhere (the tests
// with real namespaces need root).
func TestPluginBinaryOnFakeLinux(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	u := newUnit(t, unitOptions{cfg: cniserver.Config{InterfaceType: podiface.AfPacket}})
	require.NoError(t, u.linux.AddNetns("/run/netns/web"))
	rt := newRuntime(t, confList(u.socket, "10s"))
	p := &pod{name: "web", container: "c-web", netns: "/run/netns/web"}
	ctx := cniCtx(t)

	info, err := rt.cni.GetVersionInfo(ctx, "vswitchkit-cni")
	require.NoError(t, err)
	assert.Equal(t, []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}, info.SupportedVersions())
	require.NoError(t, rt.cni.GetStatusNetworkList(ctx, rt.list))

	res, err := rt.cni.AddNetworkList(ctx, rt.list, p.rt())
	require.NoError(t, err)
	r, err := types100.GetResult(res)
	require.NoError(t, err)
	assert.Equal(t, "10.1.1.2/24", r.IPs[0].Address.String())
	assert.Equal(t, []string{"10.96.0.10"}, r.DNS.Nameservers)
	require.NoError(t, rt.cni.CheckNetworkList(ctx, rt.list, p.rt()))
	require.NoError(t, rt.cni.DelNetworkList(ctx, rt.list, p.rt()))
	assert.Empty(t, u.linux.Links(""))

	// Bad input.
	noNetns := p.rt()
	noNetns.NetNS = ""
	_, err = rt.cni.AddNetworkList(ctx, rt.list, noNetns)
	assert.Equal(t, types.ErrInvalidEnvironmentVariables, cniCode(err), "%v", err)
	bad := newRuntime(t, `{"cniVersion":"1.1.0","name":"n","plugins":[{"type":"vswitchkit-cni","agentTimeout":"-1s"}]}`)
	_, err = bad.cni.AddNetworkList(ctx, bad.list, p.rt())
	assert.Equal(t, types.ErrInvalidNetworkConfig, cniCode(err), "%v", err)
	_, err = invoke.ExecPluginWithResult(ctx, filepath.Join(pluginDir, "vswitchkit-cni"), []byte(`{"name":`),
		&invoke.Args{Command: "ADD", ContainerID: "c1", NetNS: "/run/netns/web", IfName: "eth0", Path: pluginDir}, nil)
	assert.Equal(t, types.ErrDecodingFailure, cniCode(err), "%v", err)

	// The agent goes away.
	u.stop()
	_, err = rt.cni.AddNetworkList(ctx, rt.list, p.rt())
	assert.Equal(t, types.ErrTryAgainLater, cniCode(err), "%v", err)
	err = rt.cni.GetStatusNetworkList(ctx, rt.list)
	assert.Equal(t, uint(50), cniCode(err), "%v", err)
	assert.Equal(t, types.ErrTryAgainLater, cniCode(rt.cni.DelNetworkList(ctx, rt.list, p.rt())))
}

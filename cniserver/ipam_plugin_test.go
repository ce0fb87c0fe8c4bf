package cniserver_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
)

// fakeIPAMName is the name under which the test binary plays a delegated
// IPAM plugin: ADD returns the configured ipam.address, every command is
// appended to the file named by $VSK_FAKE_IPAM_LOG.
const fakeIPAMName = "vsk-fake-ipam"

func fakeIPAMMain() {
	logCmd := func(cmd string, args *skel.CmdArgs) error {
		f, err := os.OpenFile(os.Getenv("VSK_FAKE_IPAM_LOG"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = fmt.Fprintf(f, "%s %s\n", cmd, args.ContainerID)
		return err
	}
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add: func(args *skel.CmdArgs) error {
			var conf struct {
				CNIVersion string `json:"cniVersion"`
				IPAM       struct {
					Address string `json:"address"`
				} `json:"ipam"`
			}
			if err := json.Unmarshal(args.StdinData, &conf); err != nil {
				return err
			}
			ip, ipNet, err := net.ParseCIDR(conf.IPAM.Address)
			if err != nil {
				return types.NewError(types.ErrInvalidNetworkConfig, "bad ipam.address", err.Error())
			}
			ipNet.IP = ip
			if err := logCmd("ADD", args); err != nil {
				return err
			}
			return types.PrintResult(&types100.Result{CNIVersion: types100.ImplementedSpecVersion,
				IPs: []*types100.IPConfig{{Address: *ipNet}}}, conf.CNIVersion)
		},
		Del:    func(args *skel.CmdArgs) error { return logCmd("DEL", args) },
		Check:  func(args *skel.CmdArgs) error { return logCmd("CHECK", args) },
		GC:     func(args *skel.CmdArgs) error { return logCmd("GC", args) },
		Status: func(args *skel.CmdArgs) error { return logCmd("STATUS", args) },
	}, version.All, "fake IPAM plugin of the cniserver tests")
}

func fakeIPAMLog(t testing.TB, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Fields(strings.ReplaceAll(string(data), "\n", " | "))
}

// TestPluginDelegatesIPAM: with an "ipam" section the plugin runs that
// IPAM plugin, the agent's AddPod carries its result, and DEL, CHECK, GC,
// STATUS and a failed ADD are delegated to it too.
func TestPluginDelegatesIPAM(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	logFile := t.TempDir() + "/ipam.log"
	t.Setenv("VSK_FAKE_IPAM_LOG", logFile)
	// A race-enabled test binary sleeps 1s at exit unless told otherwise.
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	u := newUnit(t, unitOptions{cfg: cniserver.Config{InterfaceType: podiface.AfPacket}})
	var ipamType, ipamData string
	u.pods.result = func(ev *controller.AddPod) {
		ipamType, ipamData = ev.IPAMType, ev.IPAMData
		if ev.Pod.Name == "refused" {
			ev.Interfaces = nil // the server then undoes the ADD
		}
	}
	require.NoError(t, u.linux.AddNetns("/run/netns/web"))
	require.NoError(t, u.linux.AddNetns("/run/netns/refused"))
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"vsk","plugins":[{"type":"vswitchkit-cni","agentSocket":%q,
		"ipam":{"type":%q,"address":"10.1.1.77/24"}}]}`, u.socket, fakeIPAMName)
	rt := newRuntime(t, conf)
	ctx := cniCtx(t)
	p := &pod{name: "web", container: "c-web", netns: "/run/netns/web"}

	_, err := rt.cni.AddNetworkList(ctx, rt.list, p.rt())
	require.NoError(t, err)
	assert.Equal(t, fakeIPAMName, ipamType)
	assert.Contains(t, ipamData, `"address":"10.1.1.77/24"`, "the IPAM plugin's result, for the agent's IPAM handler")
	require.NoError(t, rt.cni.CheckNetworkList(ctx, rt.list, p.rt()))
	require.NoError(t, rt.cni.DelNetworkList(ctx, rt.list, p.rt()))
	require.NoError(t, rt.cni.GetStatusNetworkList(ctx, rt.list))
	require.NoError(t, rt.cni.GCNetworkList(ctx, rt.list, nil))

	refused := &pod{name: "refused", container: "c-refused", netns: "/run/netns/refused"}
	_, err = rt.cni.AddNetworkList(ctx, rt.list, refused.rt())
	assert.Equal(t, cniserver.CodeAddFailed, cniCode(err), "%v", err)

	assert.Equal(t, []string{
		"ADD", "c-web", "|", "CHECK", "c-web", "|", "DEL", "c-web", "|", "STATUS", "|", "GC", "|",
		"ADD", "c-refused", "|", "DEL", "c-refused", "|",
	}, fakeIPAMLog(t, logFile))
	assert.Empty(t, u.linux.Links(""))
}

package cniserver_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/cniserver/linuxpod"
)

// These tests run the real plugin binary through libcni, as container
// runtimes do, against real network namespaces, with the agent of
// agent_test.go (real loop, IPAM, vppdriver on the VPP stand-in).

// addPod runs ADD for p and returns the result.
func addPod(t *testing.T, rt *runtime, p *pod) *types100.Result {
	t.Helper()
	res, err := rt.cni.AddNetworkList(cniCtx(t), rt.list, p.rt())
	require.NoError(t, err, "ADD %s", p.name)
	r, err := types100.GetResult(res)
	require.NoError(t, err)
	return r
}

// requireConnected checks the pod's namespace, VPP and IPAM after ADD.
func requireConnected(t *testing.T, nd *node, a *agent, p *pod, res *types100.Result) string {
	t.Helper()
	require.Len(t, res.IPs, 1)
	addr := res.IPs[0].Address.IP.String()
	require.Equal(t, "10.1.5.1", res.IPs[0].Gateway.String())
	require.Equal(t, "24", fmt.Sprint(maskLen(res.IPs[0].Address.Mask)))
	require.Equal(t, []string{"10.96.0.10"}, res.DNS.Nameservers)

	v := viewNetns(t, p.netnsName)
	assert.Equal(t, []string{"eth0"}, v.links)
	assert.True(t, v.up)
	assert.Equal(t, []string{addr + "/24"}, v.addrs)
	assert.Equal(t, []string{"default via 10.1.5.1"}, v.routes)
	assert.Equal(t, map[string]string{"10.1.5.1": vppMAC(p.container)}, v.neighs, "the gateway's MAC, without ARP")
	assert.Equal(t, res.Interfaces[1].Mac, v.mac)
	assert.True(t, hostLinkExists(p.hostIf), "veth host end %s", p.hostIf)

	require.Eventually(t, func() bool {
		iface, route := vppSide(nd.vpp, p, addr)
		return iface != nil && iface.AdminUp && route
	}, 10*time.Second, 5*time.Millisecond, "VPP side of %s", p.name)
	got, ok := a.ipam.PodAddr(p.id())
	require.True(t, ok)
	assert.Equal(t, addr, got.String())
	return addr
}

// requireGone checks that nothing of the pod is left: in its namespace, in
// the host namespace, in VPP, in IPAM and in the server's store.
func requireGone(t *testing.T, nd *node, a *agent, p *pod) {
	t.Helper()
	v := viewNetns(t, p.netnsName)
	assert.Empty(t, v.links, "links in %s", p.netnsName)
	assert.False(t, hostLinkExists(p.hostIf), "veth host end %s", p.hostIf)
	require.Eventually(t, func() bool {
		iface, _ := vppSide(nd.vpp, p, "")
		return iface == nil
	}, 10*time.Second, 5*time.Millisecond, "VPP side of %s", p.name)
	_, ok := a.ipam.PodAddr(p.id())
	assert.False(t, ok, "IPAM still has %s", p.name)
	atts, err := a.srv.Attachments(context.Background())
	require.NoError(t, err)
	for _, at := range atts {
		assert.NotEqual(t, p.container, at.ID.ContainerID, "attachment left: %+v", at)
	}
}

func maskLen(m []byte) int {
	n := 0
	for _, b := range m {
		for ; b != 0; b <<= 1 {
			n++
		}
	}
	return n
}

func TestPluginAddCheckDel(t *testing.T) {
	nd := newNode(t, 1, "web")
	p := nd.pods[0]
	nd.createNetns(p)
	a := nd.startAgent(cniserver.Config{})
	rt := newRuntime(t, confList(nd.socket, "30s"))
	ctx := cniCtx(t)

	require.NoError(t, rt.cni.GetStatusNetworkList(ctx, rt.list), "STATUS")
	res := addPod(t, rt, p)
	assert.Equal(t, p.hostIf, res.Interfaces[0].Name)
	assert.Equal(t, p.netns, res.Interfaces[1].Sandbox)
	addr := requireConnected(t, nd, a, p, res)
	assert.Equal(t, "10.1.5.2", addr, "the first pod address of node 5")

	require.NoError(t, rt.cni.CheckNetworkList(ctx, rt.list, p.rt()), "CHECK")

	require.NoError(t, rt.cni.DelNetworkList(ctx, rt.list, p.rt()), "DEL")
	requireGone(t, nd, a, p)
	require.NoError(t, rt.cni.DelNetworkList(ctx, rt.list, p.rt()), "DEL again")
}

func TestPluginCheckFindsBrokenPod(t *testing.T) {
	nd := newNode(t, 1, "web")
	p := nd.pods[0]
	nd.createNetns(p)
	nd.startAgent(cniserver.Config{})
	rt := newRuntime(t, confList(nd.socket, "30s"))
	addPod(t, rt, p)
	out, err := execIP("-n", p.netnsName, "neigh", "del", "10.1.5.1", "dev", "eth0")
	require.NoError(t, err, "%s", out)
	err = rt.cni.CheckNetworkList(cniCtx(t), rt.list, p.rt())
	assert.Equal(t, cniserver.CodeCheckFailed, cniCode(err), "%v", err)
	assert.ErrorContains(t, err, "lacks neighbor 10.1.5.1")
}

func TestPluginAgentRestart(t *testing.T) {
	nd := newNode(t, 2, "first", "second")
	p1, p2 := nd.pods[0], nd.pods[1]
	nd.createNetns(p1)
	nd.createNetns(p2)
	rt := newRuntime(t, confList(nd.socket, "30s"))

	a1 := nd.startAgent(cniserver.Config{})
	addr1 := requireConnected(t, nd, a1, p1, addPod(t, rt, p1))
	before, _ := vppSide(nd.vpp, p1, addr1)
	a1.stop()

	// The agent is down: the pod keeps its network, and the plugin tells
	// the runtime to try again later.
	v := viewNetns(t, p1.netnsName)
	assert.Equal(t, []string{addr1 + "/24"}, v.addrs)
	_, err := rt.cni.AddNetworkList(cniCtx(t), rt.list, p2.rt())
	assert.Equal(t, types.ErrTryAgainLater, cniCode(err), "%v", err)
	assert.ErrorContains(t, err, "unreachable")
	assert.Equal(t, types.ErrTryAgainLater, cniCode(rt.cni.DelNetworkList(cniCtx(t), rt.list, p1.rt())))
	assert.Equal(t, uint(50), cniCode(rt.cni.GetStatusNetworkList(cniCtx(t), rt.list)))

	// A new agent over the same state: the first pod still works (VPP kept
	// its interface: same index), a second ADD gets another address, CHECK
	// and DEL work for the pod added by the previous agent.
	a2 := nd.startAgent(cniserver.Config{})
	waitConfigured(t, a2.driver, 2) // the new driver resynced the pod's interface and route
	after, route := vppSide(nd.vpp, p1, addr1)
	require.NotNil(t, after)
	assert.True(t, route)
	assert.Equal(t, before.SwIfIndex, after.SwIfIndex, "the restart did not re-create the pod's VPP interface")
	addr2 := requireConnected(t, nd, a2, p2, addPod(t, rt, p2))
	assert.NotEqual(t, addr1, addr2)
	require.NoError(t, rt.cni.CheckNetworkList(cniCtx(t), rt.list, p1.rt()))
	require.NoError(t, rt.cni.DelNetworkList(cniCtx(t), rt.list, p1.rt()))
	requireGone(t, nd, a2, p1)
	require.NoError(t, rt.cni.DelNetworkList(cniCtx(t), rt.list, p2.rt()))
	requireGone(t, nd, a2, p2)
	assert.Zero(t, afPacketCount(nd.vpp))
}

func TestPluginAgentStopsDuringAdd(t *testing.T) {
	// The agent stops while an ADD waits in its loop: the loop fails the
	// AddPod, the runtime gets "try again later" and nothing is left; the
	// runtime's retry with the next agent works.
	nd := newNode(t, 1, "slow")
	p := nd.pods[0]
	nd.createNetns(p)
	rt := newRuntime(t, confList(nd.socket, "30s"))
	a1 := nd.startAgent(cniserver.Config{})
	g := newGate()
	require.NoError(t, a1.loop.PushEvent(g))
	<-g.started // the loop is busy
	errc := make(chan error, 1)
	go func() {
		_, err := rt.cni.AddNetworkList(context.Background(), rt.list, p.rt())
		errc <- err
	}()
	require.Eventually(t, func() bool { return hostLinkExists(p.hostIf) }, 10*time.Second, time.Millisecond,
		"the ADD created its veth and waits for AddPod")
	// Stop the agent while the loop is busy: once the gate is released the
	// loop processes Shutdown (cancellation comes before queued events)
	// and fails the AddPod.
	a1.cancel()
	close(g.release)
	a1.stop()
	err := <-errc
	assert.Equal(t, types.ErrTryAgainLater, cniCode(err), "%v", err)
	assert.False(t, hostLinkExists(p.hostIf))

	a2 := nd.startAgent(cniserver.Config{})
	requireConnected(t, nd, a2, p, addPod(t, rt, p))
	require.NoError(t, rt.cni.DelNetworkList(cniCtx(t), rt.list, p.rt()))
	requireGone(t, nd, a2, p)
}

func TestPluginAfterCrashDuringAdd(t *testing.T) {
	// An agent crashed in the middle of two ADDs: it had recorded them
	// and created their veths. After the restart the runtime's DEL of one
	// removes everything, its repeated ADD of the other completes it.
	nd := newNode(t, 2, "del-me", "add-me")
	store, err := cniserver.OpenBoltStore(filepath.Join(nd.stateDir, "cni.db"))
	require.NoError(t, err)
	for _, p := range nd.pods {
		nd.createNetns(p)
		at := cniserver.Attachment{ID: cniserver.AttachmentID{ContainerID: p.container, IfName: "eth0"},
			Network: cniNetwork, Pod: p.id(), Netns: p.netns, Type: "af_packet", HostIfName: p.hostIf}
		require.NoError(t, store.PutAttachment(context.Background(), at))
		_, err := linuxpod.New().EnsureVeth(context.Background(), cniserver.Veth{HostName: p.hostIf,
			PeerName: "vsp" + p.hostIf[3:], Netns: p.netns, IfName: "eth0"})
		require.NoError(t, err)
	}
	require.NoError(t, store.Close())

	a := nd.startAgent(cniserver.Config{})
	rt := newRuntime(t, confList(nd.socket, "30s"))
	require.NoError(t, rt.cni.DelNetworkList(cniCtx(t), rt.list, nd.pods[0].rt()))
	requireGone(t, nd, a, nd.pods[0])
	requireConnected(t, nd, a, nd.pods[1], addPod(t, rt, nd.pods[1]))
	require.NoError(t, rt.cni.DelNetworkList(cniCtx(t), rt.list, nd.pods[1].rt()))
	requireGone(t, nd, a, nd.pods[1])
}

func TestPlugin50ConcurrentAdds(t *testing.T) {
	const n = 50
	nd := newNode(t, n)
	a := nd.startAgent(cniserver.Config{})
	rt := newRuntime(t, confList(nd.socket, "60s"))
	for _, p := range nd.pods {
		nd.createNetns(p)
	}
	var wg sync.WaitGroup
	results := make([]*types100.Result, n)
	errs := make([]error, n)
	for i, p := range nd.pods {
		wg.Go(func() {
			res, err := rt.cni.AddNetworkList(cniCtx(t), rt.list, p.rt())
			if err == nil {
				results[i], err = types100.GetResult(res)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	seen := map[string]string{}
	for i, p := range nd.pods {
		addr := requireConnected(t, nd, a, p, results[i])
		require.Empty(t, seen[addr], "%s and %s both got %s", seen[addr], p.name, addr)
		seen[addr] = p.name
	}
	assert.Equal(t, n, afPacketCount(nd.vpp))
	assert.Len(t, a.ipam.Allocations(), n)

	for i, p := range nd.pods {
		wg.Go(func() { errs[i] = rt.cni.DelNetworkList(cniCtx(t), rt.list, p.rt()) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	for _, p := range nd.pods {
		requireGone(t, nd, a, p)
	}
	assert.Zero(t, afPacketCount(nd.vpp))
	assert.Empty(t, a.ipam.Allocations())
	assert.Empty(t, nd.ipamRecs.Records())
}

func TestPluginGC(t *testing.T) {
	nd := newNode(t, 3, "gone-1", "kept", "gone-2")
	a := nd.startAgent(cniserver.Config{})
	rt := newRuntime(t, confList(nd.socket, "30s"))
	for _, p := range nd.pods {
		nd.createNetns(p)
		requireConnected(t, nd, a, p, addPod(t, rt, p))
	}
	// The runtime lost its own records (another cache directory), so
	// libcni deletes nothing itself: the plugin's GC must.
	other := newRuntime(t, confList(nd.socket, "30s"))
	kept := nd.pods[1]
	err := other.cni.GCNetworkList(cniCtx(t), other.list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{
		{ContainerID: kept.container, IfName: "eth0"},
	}})
	require.NoError(t, err)
	requireGone(t, nd, a, nd.pods[0])
	requireGone(t, nd, a, nd.pods[2])
	assert.Equal(t, []string{"eth0"}, viewNetns(t, kept.netnsName).links)
	require.NoError(t, rt.cni.CheckNetworkList(cniCtx(t), rt.list, kept.rt()))
	require.NoError(t, rt.cni.DelNetworkList(cniCtx(t), rt.list, kept.rt()))
	requireGone(t, nd, a, kept)
}

func TestPluginBadInput(t *testing.T) {
	nd := newNode(t, 7, "bad-conf", "no-netns", "missing-ns", "agent-down", "fail-later", "malformed", "badmac-1")
	a := nd.startAgent(cniserver.Config{})
	for _, p := range nd.pods {
		nd.createNetns(p)
	}
	downSocket := filepath.Join(nd.stateDir, "nobody.sock")
	for _, tc := range []struct {
		pod        *pod
		conf       string
		edit       func(rc *libcni.RuntimeConf)
		wantCode   uint
		wantMsg    string
		wantEvents []string // the pod's events in the loop's history
	}{
		{pod: nd.pods[0], conf: `{"cniVersion":"1.1.0","name":"vswitchkit","plugins":[{"type":"vswitchkit-cni","agentSocket":"` + nd.socket + `","agentTimeout":"banana"}]}`,
			wantCode: types.ErrInvalidNetworkConfig, wantMsg: "agentTimeout"},
		{pod: nd.pods[0], conf: `{"cniVersion":"1.1.0","name":"vswitchkit","plugins":[{"type":"vswitchkit-cni","agentSocket":"cni.sock"}]}`,
			wantCode: types.ErrInvalidNetworkConfig, wantMsg: "agentSocket"},
		{pod: nd.pods[1], edit: func(rc *libcni.RuntimeConf) { rc.NetNS = "" },
			wantCode: types.ErrInvalidEnvironmentVariables, wantMsg: "CNI_NETNS"},
		{pod: nd.pods[2], edit: func(rc *libcni.RuntimeConf) { rc.NetNS = "/run/netns/vskit-does-not-exist" },
			wantCode: types.ErrUnknownContainer, wantMsg: "network namespace does not exist"},
		{pod: nd.pods[3], conf: confList(downSocket, "5s"),
			wantCode: types.ErrTryAgainLater, wantMsg: "unreachable"},
		// The loop reverts the handlers (IPAM releases) and commits nothing.
		{pod: nd.pods[4], wantCode: cniserver.CodeAddFailed, wantMsg: "a later handler refuses the pod",
			wantEvents: []string{"Add Pod: not committed"}},
		// The kernel refuses the MAC after the commit: DeletePod undoes the
		// VPP side and the IPAM allocation.
		{pod: nd.pods[6], wantCode: cniserver.CodeAddFailed, wantMsg: "set MAC 01:00:5e:00:00:01",
			wantEvents: []string{"Add Pod: committed", "Delete Pod: committed"}},
	} {
		t.Run(tc.pod.name, func(t *testing.T) {
			conf := tc.conf
			if conf == "" {
				conf = confList(nd.socket, "30s")
			}
			rt := newRuntime(t, conf)
			rc := tc.pod.rt()
			if tc.edit != nil {
				tc.edit(rc)
			}
			_, err := rt.cni.AddNetworkList(cniCtx(t), rt.list, rc)
			require.Error(t, err)
			assert.Equal(t, tc.wantCode, cniCode(err), "%v", err)
			assert.ErrorContains(t, err, tc.wantMsg)
			requireGone(t, nd, a, tc.pod)
			assert.Equal(t, tc.wantEvents, podEvents(a, tc.pod))
		})
	}
	t.Run("malformed JSON", func(t *testing.T) {
		p := nd.pods[5]
		_, err := invoke.ExecPluginWithResult(cniCtx(t), filepath.Join(pluginDir, "vswitchkit-cni"),
			[]byte(`{"cniVersion":"1.1.0","name":"vswitchkit","type":`), &invoke.Args{
				Command: "ADD", ContainerID: p.container, NetNS: p.netns, IfName: "eth0", Path: pluginDir,
				PluginArgs: p.rt().Args,
			}, nil)
		assert.Equal(t, types.ErrDecodingFailure, cniCode(err), "%v", err)
		requireGone(t, nd, a, p)
	})
	t.Run("STATUS of an agent that is down", func(t *testing.T) {
		rt := newRuntime(t, confList(downSocket, "5s"))
		err := rt.cni.GetStatusNetworkList(cniCtx(t), rt.list)
		assert.Equal(t, uint(50), cniCode(err), "%v", err)
	})
	t.Run("VERSION", func(t *testing.T) {
		rt := newRuntime(t, confList(nd.socket, "5s"))
		info, err := rt.cni.GetVersionInfo(cniCtx(t), "vswitchkit-cni")
		require.NoError(t, err)
		assert.True(t, slices.Contains(info.SupportedVersions(), "1.1.0"))
	})
	assert.Zero(t, afPacketCount(nd.vpp))
	assert.Empty(t, a.ipam.Allocations())
}

func execIP(args ...string) ([]byte, error) {
	return exec.Command("ip", args...).CombinedOutput()
}

func TestPluginExternalIPAM(t *testing.T) {
	// An IPAM plugin in the network configuration chose the address: the
	// agent's IPAM records it (AddPod.IPAMType/IPAMData) and the pod gets
	// it.
	nd := newNode(t, 1, "ext")
	p := nd.pods[0]
	nd.createNetns(p)
	a := nd.startAgent(cniserver.Config{})
	logFile := t.TempDir() + "/ipam.log"
	t.Setenv("VSK_FAKE_IPAM_LOG", logFile)
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	rt := newRuntime(t, fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"plugins":[{"type":"vswitchkit-cni","agentSocket":%q,
		"dns":{"nameservers":["10.96.0.10"]},"ipam":{"type":%q,"address":"10.1.5.77/24"}}]}`, cniNetwork, nd.socket, fakeIPAMName))
	addr := requireConnected(t, nd, a, p, addPod(t, rt, p))
	assert.Equal(t, "10.1.5.77", addr)
	require.NoError(t, rt.cni.DelNetworkList(cniCtx(t), rt.list, p.rt()))
	requireGone(t, nd, a, p)
	assert.Equal(t, []string{"ADD", p.container, "|", "DEL", p.container, "|"}, fakeIPAMLog(t, logFile))
}

// podEvents lists the pod's events in the loop's history: name and whether
// a transaction was committed.
func podEvents(a *agent, p *pod) []string {
	var out []string
	for _, r := range a.loop.History().Last(1000) {
		if strings.Contains(r.Description, p.container) {
			state := "not committed"
			if r.Committed {
				state = "committed"
			}
			out = append(out, r.Name+": "+state)
		}
	}
	return out
}

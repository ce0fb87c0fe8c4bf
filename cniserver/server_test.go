package cniserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/cniserver/cniservertest"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
	"github.com/vswitchkit/vswitchkit/internal/lifecycle"
)

func TestAddAfPacketConfiguresPodAndReturnsResult(t *testing.T) {
	u := newUnit(t, unitOptions{cfg: cniserver.Config{InterfaceType: podiface.AfPacket,
		MTU: 1450}})
	res, netns := u.add("web")
	host := cniserver.HostIfName("c-web", "eth0")

	// The result: host end, pod end in the sandbox, the address with its
	// gateway, the default route.
	require.Len(t, res.Interfaces, 2)
	assert.Equal(t, host, res.Interfaces[0].Name)
	assert.Empty(t, res.Interfaces[0].Sandbox)
	assert.Equal(t, "eth0", res.Interfaces[1].Name)
	assert.Equal(t, netns, res.Interfaces[1].Sandbox)
	assert.Equal(t, 1450, res.Interfaces[1].Mtu)
	require.Len(t, res.IPs, 1)
	assert.Equal(t, "10.1.1.2/24", res.IPs[0].Address.String())
	assert.Equal(t, "10.1.1.1", res.IPs[0].Gateway.String())
	assert.Equal(t, 1, *res.IPs[0].Interface)
	require.Len(t, res.Routes, 1)
	assert.Equal(t, "0.0.0.0/0", res.Routes[0].Dst.String())
	assert.Equal(t, "10.1.1.1", res.Routes[0].GW.String())

	// The namespace: eth0 up, with the address, the route and the
	// gateway's neighbor entry; the MAC is the result's.
	links := u.linux.Links(netns)
	require.Len(t, links, 1)
	eth0 := links[0]
	assert.Equal(t, "eth0", eth0.Name)
	assert.True(t, eth0.Up)
	assert.Equal(t, 1450, eth0.MTU)
	assert.Equal(t, res.Interfaces[1].Mac, eth0.MAC.String())
	assert.Equal(t, []netip.Prefix{mustPrefix("10.1.1.2/24")}, eth0.Addresses)
	assert.Equal(t, []cniserver.Route{{Dst: mustPrefix("0.0.0.0/0"), Gateway: mustAddr("10.1.1.1")}}, eth0.Routes)
	require.Len(t, eth0.Neighbors, 1)
	assert.Equal(t, "10.1.1.1 lladdr "+gatewayMAC, eth0.Neighbors[0].String())

	// The host end is up and VPP was told its name.
	hostLinks := u.linux.Links("")
	require.Len(t, hostLinks, 1)
	assert.Equal(t, host, hostLinks[0].Name)
	assert.True(t, hostLinks[0].Up)
	assert.Equal(t, res.Interfaces[0].Mac, hostLinks[0].MAC.String())
	assert.Equal(t, podiface.AfPacket, u.pods.hosts[host])

	// The record is Ready.
	rec := u.store.Records()[cniserver.AttachmentID{ContainerID: "c-web", IfName: "eth0"}]
	assert.True(t, rec.Ready)
	assert.Equal(t, kubemodel.PodID{Namespace: "default", Name: "web"}, rec.Pod)
	assert.Equal(t, testNetwork, rec.Network)
}

func TestAddAgainReturnsTheSameResult(t *testing.T) {
	u := newUnit(t, unitOptions{})
	first, netns := u.add("web")
	out, err := u.do(call{cmd: "ADD", container: "c-web", netns: netns, args: podArgs("web")})
	require.NoError(t, err)
	again := parseResult(t, out)
	assert.Equal(t, first, again)
	adds, _ := u.pods.counts()
	assert.Equal(t, 1, adds, "a repeated ADD must not push AddPod again")
}

func TestAddResultInOlderVersions(t *testing.T) {
	for _, v := range []string{"0.3.1", "0.4.0", "1.0.0"} {
		t.Run(v, func(t *testing.T) {
			u := newUnit(t, unitOptions{})
			_ = u.linux.AddNetns("/run/netns/a")
			out, err := u.do(call{cmd: "ADD", container: "c-a", netns: "/run/netns/a", args: podArgs("a"), conf: netConf(v, "")})
			require.NoError(t, err)
			var got struct {
				CNIVersion string `json:"cniVersion"`
			}
			require.NoError(t, json.Unmarshal(out, &got))
			assert.Equal(t, v, got.CNIVersion)
			assert.Contains(t, string(out), "10.1.1.2/24")
		})
	}
}

func TestAddDNSAndPrevResult(t *testing.T) {
	u := newUnit(t, unitOptions{})
	_ = u.linux.AddNetns("/run/netns/a")
	prev := `{"cniVersion":"1.1.0","interfaces":[{"name":"other0"}],"ips":[{"address":"192.168.9.9/24","interface":0}]}`
	conf := netConf("1.1.0", `"dns":{"nameservers":["10.96.0.10"],"search":["svc.cluster.local"]},"prevResult":`+prev)
	out, err := u.do(call{cmd: "ADD", container: "c-a", netns: "/run/netns/a", args: podArgs("a"), conf: conf})
	require.NoError(t, err)
	res := parseResult(t, out)
	assert.Equal(t, []string{"10.96.0.10"}, res.DNS.Nameservers)
	assert.Equal(t, []string{"svc.cluster.local"}, res.DNS.Search)
	require.Len(t, res.Interfaces, 3, "the prevResult's interface, the host end, eth0")
	assert.Equal(t, "other0", res.Interfaces[0].Name)
	require.Len(t, res.IPs, 2)
	assert.Equal(t, 2, *res.IPs[1].Interface)
}

func TestInterfaceTypes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       podiface.Type
		resolver  podiface.Type
		choose    podiface.Type // the handler's choice for a default request
		wantType  podiface.Type
		wantHosts int // links in the host namespace
		wantPod   []string
		wantSock  bool
	}{
		{name: "config af_packet", cfg: podiface.AfPacket, wantType: podiface.AfPacket, wantHosts: 1, wantPod: []string{"eth0"}},
		{name: "config tap", cfg: podiface.Tap, wantType: podiface.Tap, wantPod: []string{"eth0"}},
		{name: "config memif", cfg: podiface.Memif, wantType: podiface.Memif, wantPod: []string{}, wantSock: true},
		{name: "resolver wins", cfg: podiface.AfPacket, resolver: podiface.Tap, wantType: podiface.Tap, wantPod: []string{"eth0"}},
		{name: "resolver default falls back to config", cfg: podiface.Tap, resolver: podiface.Default, wantType: podiface.Tap, wantPod: []string{"eth0"}},
		{name: "default, handler chooses af_packet", choose: podiface.AfPacket, wantType: podiface.AfPacket, wantHosts: 1, wantPod: []string{"eth0"}},
		{name: "default, handler chooses tap", choose: podiface.Tap, wantType: podiface.Tap, wantPod: []string{"eth0"}},
		{name: "default, handler chooses memif", choose: podiface.Memif, wantType: podiface.Memif, wantPod: []string{}, wantSock: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cniserver.Config{InterfaceType: tc.cfg}
			if tc.resolver != "" || tc.name == "resolver default falls back to config" {
				cfg.InterfaceTypeFor = func(_ context.Context, pod kubemodel.PodID) (podiface.Type, error) {
					assert.Equal(t, "web", pod.Name)
					return tc.resolver, nil
				}
			}
			u := newUnit(t, unitOptions{cfg: cfg})
			if tc.choose != "" {
				u.pods.choose = func(*controller.AddPod) podiface.Type { return tc.choose }
			}
			res, netns := u.add("web")
			var names []string
			for _, l := range u.linux.Links(netns) {
				names = append(names, l.Name)
				assert.True(t, l.Up)
				assert.Equal(t, []netip.Prefix{mustPrefix("10.1.1.2/24")}, l.Addresses)
			}
			if names == nil {
				names = []string{}
			}
			assert.Equal(t, tc.wantPod, names)
			assert.Len(t, u.linux.Links(""), tc.wantHosts)
			last := res.Interfaces[len(res.Interfaces)-1]
			assert.Equal(t, "eth0", last.Name)
			assert.Equal(t, tc.wantSock, last.SocketPath != "", "socketPath %q", last.SocketPath)
			rec := u.store.Records()[cniserver.AttachmentID{ContainerID: "c-web", IfName: "eth0"}]
			assert.Equal(t, tc.wantType, rec.Type)
			assert.Equal(t, tc.wantHosts == 1, rec.HostIfName != "")

			// DEL removes everything, whatever the type.
			_, err := u.do(call{cmd: "DEL", container: "c-web", netns: netns, args: podArgs("web")})
			require.NoError(t, err)
			assert.Empty(t, u.linux.Links(netns))
			assert.Empty(t, u.linux.Links(""))
			assert.Empty(t, u.store.Records())
		})
	}
}

func TestCheck(t *testing.T) {
	u := newUnit(t, unitOptions{})
	_, netns := u.add("web")
	out, err := u.do(call{cmd: "ADD", container: "c-web", netns: netns, args: podArgs("web")})
	require.NoError(t, err)
	conf := withPrev(t, "1.1.0", out)
	check := func() error {
		_, err := u.do(call{cmd: "CHECK", container: "c-web", netns: netns, args: podArgs("web"), conf: conf})
		return err
	}
	require.NoError(t, check())

	// Another address or route added by someone else is fine.
	cfg := cniserver.LinkConfig{Name: "eth0", Addresses: []netip.Prefix{mustPrefix("10.1.1.2/24"), mustPrefix("192.168.5.5/24")},
		Routes: []cniserver.Route{{Dst: mustPrefix("10.2.0.0/16"), Gateway: mustAddr("10.1.1.1")}}}
	_, err = u.linux.ConfigureLink(context.Background(), netns, cfg)
	require.NoError(t, err)
	require.NoError(t, check())

	// The pod's address gone: CHECK fails with the plugin's code.
	cfg.Addresses = []netip.Prefix{mustPrefix("192.168.5.5/24")}
	_, err = u.linux.ConfigureLink(context.Background(), netns, cfg)
	require.NoError(t, err)
	err = check()
	assert.Equal(t, cniserver.CodeCheckFailed, cniCode(err), "%v", err)
	assert.ErrorContains(t, err, "lacks address 10.1.1.2/24")

	// The interface gone.
	require.NoError(t, u.linux.DeleteLink(context.Background(), netns, "eth0"))
	err = check()
	assert.Equal(t, cniserver.CodeCheckFailed, cniCode(err), "%v", err)
	assert.ErrorContains(t, err, "veth host end")

	// An unknown attachment: code 3.
	_, err = u.do(call{cmd: "CHECK", container: "c-other", netns: netns, args: podArgs("other"), conf: conf})
	assert.Equal(t, types.ErrUnknownContainer, cniCode(err), "%v", err)
}

func TestCheckPrevResultMismatch(t *testing.T) {
	u := newUnit(t, unitOptions{})
	_, netns := u.add("web")
	prev := `{"cniVersion":"1.1.0","interfaces":[{"name":"eth0","sandbox":"` + netns + `"}],"ips":[{"address":"10.1.1.99/24","interface":0}]}`
	_, err := u.do(call{cmd: "CHECK", container: "c-web", netns: netns, args: podArgs("web"), conf: withPrev(t, "1.1.0", []byte(prev))})
	assert.Equal(t, cniserver.CodeCheckFailed, cniCode(err), "%v", err)
	assert.ErrorContains(t, err, "10.1.1.99/24")
}

func TestDelIsIdempotent(t *testing.T) {
	u := newUnit(t, unitOptions{})
	_, netns := u.add("web")
	for i := range 3 {
		_, err := u.do(call{cmd: "DEL", container: "c-web", netns: netns, args: podArgs("web")})
		require.NoError(t, err, "DEL %d", i)
	}
	_, dels := u.pods.counts()
	assert.Equal(t, []string{"c-web"}, dels, "DeletePod once; the later DELs know nothing")
	assert.Empty(t, u.linux.Links(""))
	assert.Empty(t, u.linux.Links(netns))

	// DEL without CNI_NETNS, and of a container never seen: success.
	_, err := u.do(call{cmd: "DEL", container: "never", args: podArgs("x")})
	require.NoError(t, err)
}

func TestDelWithoutRecordDeletesTheVethByName(t *testing.T) {
	// The store lost the record (an in-memory store across a restart):
	// the veth is still found by its name.
	u := newUnit(t, unitOptions{cfg: cniserver.Config{InterfaceType: podiface.AfPacket}})
	_, netns := u.add("web")
	require.NoError(t, u.store.DeleteAttachment(context.Background(), cniserver.AttachmentID{ContainerID: "c-web", IfName: "eth0"}))
	u.stop()
	u2 := newUnit(t, unitOptions{linux: u.linux})
	_, err := u2.do(call{cmd: "DEL", container: "c-web", netns: netns, args: podArgs("web")})
	require.NoError(t, err)
	assert.Empty(t, u.linux.Links(""))
	assert.Empty(t, u.linux.Links(netns))
}

func TestAddFailures(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setup    func(u *unit)
		netns    string
		args     string
		conf     []byte
		wantCode uint
		wantMsg  string
		wantDel  bool // DeletePod pushed (the handlers had connected the pod)
	}{
		{name: "namespace does not exist", netns: "/run/netns/missing", wantCode: types.ErrUnknownContainer, wantMsg: "network namespace does not exist"},
		{name: "interface name taken", setup: func(u *unit) {
			require.NoError(t, u.linux.AddLink("/run/netns/p", "eth0", "dummy"))
		}, wantCode: cniserver.CodeAddFailed, wantMsg: "link already exists"},
		{name: "handler fails", setup: func(u *unit) {
			u.pods.fail = func(*controller.AddPod) error { return errors.New("no VPP today") }
		}, wantCode: cniserver.CodeAddFailed, wantMsg: "no VPP today"},
		{name: "no interfaces returned", setup: func(u *unit) {
			u.pods.result = func(ev *controller.AddPod) { ev.Interfaces = nil }
		}, wantCode: cniserver.CodeAddFailed, wantMsg: "no handler connected the pod", wantDel: true},
		{name: "bad address in the result", setup: func(u *unit) {
			u.pods.result = func(ev *controller.AddPod) { ev.Interfaces[0].IPAddresses = []string{"10.1.1.7"} }
		}, wantCode: cniserver.CodeAddFailed, wantMsg: "not in CIDR notation", wantDel: true},
		{name: "bad gateway MAC", setup: func(u *unit) {
			u.pods.result = func(ev *controller.AddPod) { ev.Interfaces[0].GatewayMAC = "zz" }
		}, wantCode: cniserver.CodeAddFailed, wantMsg: "gateway MAC", wantDel: true},
		{name: "namespace configuration fails", setup: func(u *unit) {
			u.linux.SetFuncs(cniservertest.LinuxFuncs{ConfigureLink: func(context.Context, string, cniserver.LinkConfig) error {
				return cniservertest.ErrInjected
			}})
		}, wantCode: cniserver.CodeAddFailed, wantMsg: "injected", wantDel: true},
		{name: "veth creation fails", setup: func(u *unit) {
			u.linux.SetFuncs(cniservertest.LinuxFuncs{EnsureVeth: func(context.Context, cniserver.Veth) error { return cniservertest.ErrInjected }})
		}, wantCode: cniserver.CodeAddFailed, wantMsg: "injected"},
		{name: "store fails", setup: func(u *unit) {
			u.store.SetFuncs(cniservertest.StoreFuncs{PutAttachment: func(cniserver.Attachment) error { return cniservertest.ErrInjected }})
		}, wantCode: cniserver.CodeAddFailed, wantMsg: "injected"},
		{name: "store fails on the Ready record", setup: func(u *unit) {
			u.store.SetFuncs(cniservertest.StoreFuncs{PutAttachment: func(a cniserver.Attachment) error {
				if a.Ready {
					return cniservertest.ErrInjected
				}
				return nil
			}})
		}, wantCode: cniserver.CodeAddFailed, wantMsg: "injected", wantDel: true},
		{name: "pod not named", args: "IgnoreUnknown=1", wantCode: types.ErrInvalidEnvironmentVariables, wantMsg: "K8S_POD_NAME"},
		{name: "unknown CNI_ARGS", args: "FOO=bar", wantCode: types.ErrInvalidEnvironmentVariables, wantMsg: "CNI_ARGS"},
		{name: "malformed configuration", conf: []byte(`{"cniVersion":"1.1.0","name":`), wantCode: types.ErrDecodingFailure},
		{name: "bad field", conf: netConf("1.1.0", `"dns":{"nameservers":"10.0.0.1"}`), wantCode: types.ErrInvalidNetworkConfig},
		{name: "bad agentTimeout", conf: netConf("1.1.0", `"agentTimeout":"soon"`), wantCode: types.ErrInvalidNetworkConfig, wantMsg: "agentTimeout"},
		{name: "relative agentSocket", conf: netConf("1.1.0", `"agentSocket":"cni.sock"`), wantCode: types.ErrInvalidNetworkConfig, wantMsg: "agentSocket"},
		{name: "no network name", conf: []byte(`{"cniVersion":"1.1.0","type":"vswitchkit-cni"}`), wantCode: types.ErrInvalidNetworkConfig, wantMsg: "network name"},
		{name: "unsupported version", conf: netConf("9.9.9", ""), wantCode: types.ErrIncompatibleCNIVersion},
		{name: "ipam without result", conf: netConf("1.1.0", `"ipam":{"type":"host-local"}`), wantCode: types.ErrInvalidNetworkConfig, wantMsg: "IPAM result"},
		{name: "resolver fails", setup: nil, wantCode: types.ErrTryAgainLater, wantMsg: "interface type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cniserver.Config{InterfaceType: podiface.AfPacket}
			if tc.name == "resolver fails" {
				cfg.InterfaceTypeFor = func(context.Context, kubemodel.PodID) (podiface.Type, error) {
					return "", errors.New("pod not in the Kubernetes state yet")
				}
			}
			u := newUnit(t, unitOptions{cfg: cfg})
			require.NoError(t, u.linux.AddNetns("/run/netns/p"))
			if tc.setup != nil {
				tc.setup(u)
			}
			before := u.linux.Links("/run/netns/p")
			netns := tc.netns
			if netns == "" {
				netns = "/run/netns/p"
			}
			args := tc.args
			if args == "" {
				args = podArgs("web")
			}
			_, err := u.do(call{cmd: "ADD", container: "c-web", netns: netns, args: args, conf: tc.conf})
			require.Error(t, err)
			assert.Equal(t, tc.wantCode, cniCode(err), "%v", err)
			if tc.wantMsg != "" {
				assert.ErrorContains(t, err, tc.wantMsg)
			}
			// Nothing left behind: no veth, nothing new in the namespace,
			// no record, no connected pod.
			u.linux.SetFuncs(cniservertest.LinuxFuncs{})
			u.store.SetFuncs(cniservertest.StoreFuncs{})
			assert.Empty(t, u.linux.Links(""), "host namespace")
			assert.Equal(t, before, u.linux.Links("/run/netns/p"), "pod namespace")
			assert.Empty(t, u.store.Records())
			assert.Zero(t, u.pods.connected())
			_, dels := u.pods.counts()
			if tc.wantDel {
				assert.Equal(t, []string{"c-web"}, dels)
			} else {
				assert.Empty(t, dels)
			}
		})
	}
}

func TestMissingNetnsForAdd(t *testing.T) {
	u := newUnit(t, unitOptions{})
	_, err := u.do(call{cmd: "ADD", container: "c-web", args: podArgs("web")})
	assert.Equal(t, types.ErrInvalidEnvironmentVariables, cniCode(err), "%v", err)
	assert.ErrorContains(t, err, "CNI_NETNS")
}

func TestGC(t *testing.T) {
	u := newUnit(t, unitOptions{})
	_, nsA := u.add("a")
	_, nsB := u.add("b")
	_, nsC := u.add("c")
	// An attachment of another network is not this GC's.
	_ = u.linux.AddNetns("/run/netns/other")
	_, err := u.do(call{cmd: "ADD", container: "c-other", netns: "/run/netns/other", args: podArgs("other"),
		conf: []byte(`{"cniVersion":"1.1.0","name":"another","type":"vswitchkit-cni"}`)})
	require.NoError(t, err)

	gc := netConf("1.1.0", `"cni.dev/valid-attachments":[{"containerID":"c-b","ifname":"eth0"}]`)
	_, err = u.do(call{cmd: "GC", conf: gc})
	require.NoError(t, err)
	recs := u.store.Records()
	assert.Len(t, recs, 2)
	assert.Contains(t, recs, cniserver.AttachmentID{ContainerID: "c-b", IfName: "eth0"})
	assert.Contains(t, recs, cniserver.AttachmentID{ContainerID: "c-other", IfName: "eth0"})
	assert.Empty(t, u.linux.Links(nsA))
	assert.Empty(t, u.linux.Links(nsC))
	assert.Len(t, u.linux.Links(nsB), 1)
	_, dels := u.pods.counts()
	assert.ElementsMatch(t, []string{"c-a", "c-c"}, dels)

	// A failing DeletePod: GC goes on and reports it.
	u.pods.fail = nil
	_, nsD := u.add("d")
	_, nsE := u.add("e")
	failing := cniserver.AttachmentID{ContainerID: "c-d", IfName: "eth0"}
	u.linux.SetFuncs(cniservertest.LinuxFuncs{DeleteLink: func(_ context.Context, _, name string) error {
		if name == cniserver.HostIfName("c-d", "eth0") {
			return cniservertest.ErrInjected
		}
		return nil
	}})
	_, err = u.do(call{cmd: "GC", conf: netConf("1.1.0", `"cni.dev/valid-attachments":[]`)})
	assert.Equal(t, types.ErrTryAgainLater, cniCode(err), "%v", err)
	assert.ErrorContains(t, err, "c-d/eth0")
	recs = u.store.Records()
	assert.Contains(t, recs, failing, "kept for the next DEL or GC")
	assert.NotContains(t, recs, cniserver.AttachmentID{ContainerID: "c-e", IfName: "eth0"})
	assert.Empty(t, u.linux.Links(nsE))
	assert.NotEmpty(t, u.linux.Links(nsD))
}

func TestStatus(t *testing.T) {
	var mu sync.Mutex
	var readyErr error
	u := newUnit(t, unitOptions{cfg: cniserver.Config{Ready: func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return readyErr
	}}})
	status := func() error {
		_, err := u.do(call{cmd: "STATUS"})
		return err
	}
	require.NoError(t, status())
	mu.Lock()
	readyErr = controller.ErrStartupResyncMissing
	mu.Unlock()
	err := status()
	assert.Equal(t, uint(50), cniCode(err), "%v", err)
	assert.ErrorContains(t, err, "no start-up DBResync")
	mu.Lock()
	readyErr = errors.Join(cniserver.ErrLimitedConnectivity, errors.New("VPP is gone"))
	mu.Unlock()
	assert.Equal(t, uint(51), cniCode(status()))
}

func TestAgentDown(t *testing.T) {
	u := newUnit(t, unitOptions{})
	u.stop()
	_, err := os.Stat(u.socket)
	assert.ErrorIs(t, err, os.ErrNotExist, "Run removes the socket")
	_, err = u.do(call{cmd: "ADD", container: "c-web", netns: "/run/netns/x", args: podArgs("web")})
	assert.Equal(t, types.ErrTryAgainLater, cniCode(err), "%v", err)
	assert.ErrorContains(t, err, "unreachable")
}

func TestAbandonedAddIsUndone(t *testing.T) {
	// The plugin gives up while AddPod waits in the loop: the server
	// undoes the attachment once the loop answered, and a DEL waits for
	// that.
	u := newUnit(t, unitOptions{cfg: cniserver.Config{InterfaceType: podiface.AfPacket}})
	gate := make(chan struct{})
	u.pods.gate = gate
	require.NoError(t, u.linux.AddNetns("/run/netns/slow"))
	_, err := u.do(call{cmd: "ADD", container: "c-slow", netns: "/run/netns/slow", args: podArgs("slow"), timeout: 200 * time.Millisecond})
	assert.Equal(t, types.ErrTryAgainLater, cniCode(err), "%v", err)
	assert.ErrorContains(t, err, "timed out")

	delDone := make(chan error, 1)
	go func() {
		_, err := u.do(call{cmd: "DEL", container: "c-slow", netns: "/run/netns/slow", args: podArgs("slow")})
		delDone <- err
	}()
	select {
	case err := <-delDone:
		t.Fatalf("DEL returned before the abandoned ADD was undone: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	require.NoError(t, <-delDone)
	assert.Empty(t, u.linux.Links(""))
	assert.Empty(t, u.linux.Links("/run/netns/slow"))
	assert.Empty(t, u.store.Records())
	assert.Zero(t, u.pods.connected())
}

func TestRestartKeepsAttachments(t *testing.T) {
	store := cniservertest.NewMemStore()
	u := newUnit(t, unitOptions{store: store, cfg: cniserver.Config{InterfaceType: podiface.AfPacket}})
	first, netns := u.add("web")
	u.stop()

	u2 := newUnit(t, unitOptions{store: store, linux: u.linux, cfg: cniserver.Config{InterfaceType: podiface.AfPacket}})
	atts, err := u2.srv.Attachments(context.Background())
	require.NoError(t, err)
	require.Len(t, atts, 1)
	assert.True(t, atts[0].Ready)
	assert.Equal(t, cniserver.HostIfName("c-web", "eth0"), atts[0].HostIfName)

	// ADD again answers from the record, CHECK works, DEL cleans up.
	out, err := u2.do(call{cmd: "ADD", container: "c-web", netns: netns, args: podArgs("web")})
	require.NoError(t, err)
	assert.Equal(t, first, parseResult(t, out))
	_, err = u2.do(call{cmd: "CHECK", container: "c-web", netns: netns, args: podArgs("web"), conf: withPrev(t, "1.1.0", out)})
	require.NoError(t, err)
	_, err = u2.do(call{cmd: "DEL", container: "c-web", netns: netns, args: podArgs("web")})
	require.NoError(t, err)
	assert.Empty(t, u.linux.Links(""))
	assert.Empty(t, store.Records())
}

func TestInterruptedAddIsCompletedByTheNextAdd(t *testing.T) {
	// An agent that died after creating the veth left a record that is not
	// Ready; the runtime's next ADD completes the attachment.
	store := cniservertest.NewMemStore()
	linux := cniservertest.NewFakeLinux()
	require.NoError(t, linux.AddNetns("/run/netns/p"))
	a := cniserver.Attachment{ID: cniserver.AttachmentID{ContainerID: "c-web", IfName: "eth0"}, Network: testNetwork,
		Pod: kubemodel.PodID{Namespace: "default", Name: "web"}, Netns: "/run/netns/p",
		Type: podiface.AfPacket, HostIfName: cniserver.HostIfName("c-web", "eth0")}
	require.NoError(t, store.PutAttachment(context.Background(), a))
	_, err := linux.EnsureVeth(context.Background(), cniserver.Veth{HostName: a.HostIfName, PeerName: "vsp-peer", Netns: "/run/netns/p", IfName: "eth0"})
	require.NoError(t, err)

	u := newUnit(t, unitOptions{store: store, linux: linux})
	res, _ := u.add("web")
	assert.Equal(t, "10.1.1.2/24", res.IPs[0].Address.String())
	assert.True(t, store.Records()[a.ID].Ready)
	assert.Len(t, linux.Links(""), 1)
}

func TestConcurrentRequests(t *testing.T) {
	u := newUnit(t, unitOptions{cfg: cniserver.Config{InterfaceType: podiface.AfPacket}})
	const n = 40
	var wg sync.WaitGroup
	ips := make([]string, n)
	for i := range n {
		name := "p" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		netns := "/run/netns/" + name
		require.NoError(t, u.linux.AddNetns(netns))
		wg.Go(func() {
			out, err := u.do(call{cmd: "ADD", container: "c-" + name, netns: netns, args: podArgs(name)})
			if !assert.NoError(t, err) {
				return
			}
			ips[i] = parseResult(t, out).IPs[0].Address.String()
			// A concurrent repeat of the same ADD and a CHECK.
			_, err = u.do(call{cmd: "ADD", container: "c-" + name, netns: netns, args: podArgs(name)})
			assert.NoError(t, err)
			_, err = u.do(call{cmd: "CHECK", container: "c-" + name, netns: netns, args: podArgs(name), conf: withPrev(t, "1.1.0", out)})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, ip := range ips {
		assert.False(t, seen[ip], "duplicate %s", ip)
		seen[ip] = true
	}
	assert.Len(t, u.linux.Links(""), n)
	for i := range n {
		name := "p" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		wg.Go(func() {
			_, err := u.do(call{cmd: "DEL", container: "c-" + name, netns: "/run/netns/" + name, args: podArgs(name)})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.Empty(t, u.linux.Links(""))
	assert.Empty(t, u.store.Records())
}

func TestNewAndRun(t *testing.T) {
	loop, err := controller.New(nil, controller.SouthboundFunc(func(context.Context, *controller.Commit) (uint64, error) { return 0, nil }), controller.Config{})
	require.NoError(t, err)
	linux, store := cniservertest.NewFakeLinux(), cniservertest.NewMemStore()

	_, err = cniserver.New(nil, nil, nil, cniserver.Config{})
	require.Error(t, err)
	for _, s := range []string{"nil EventLoop", "nil Linux", "nil Store"} {
		assert.ErrorContains(t, err, s)
	}
	_, err = cniserver.New(loop, linux, store, cniserver.Config{SocketPath: "rel.sock", InterfaceType: "vhost", MTU: -1,
		RequestTimeout: -1, CleanupTimeout: -1})
	require.ErrorIs(t, err, cniserver.ErrInvalidConfig)
	for _, s := range []string{"SocketPath", "InterfaceType", "MTU", "RequestTimeout", "CleanupTimeout"} {
		assert.ErrorContains(t, err, s)
	}
	srv, err := cniserver.New(loop, linux, store, cniserver.Config{})
	require.NoError(t, err)
	assert.Equal(t, cniserver.DefaultSocketPath, srv.SocketPath())

	// A path that is not a socket is not replaced; a stale socket is.
	dir := shortTempDir(t)
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	srv, err = cniserver.New(loop, linux, store, cniserver.Config{SocketPath: file})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	assert.ErrorContains(t, srv.Run(ctx), "not a socket")
	err = srv.Run(ctx)
	assert.ErrorIs(t, err, cniserver.ErrAlreadyRunning)
	assert.ErrorIs(t, err, lifecycle.ErrAlreadyRunning, "one ErrAlreadyRunning for every package")
	assert.EqualError(t, err, "cniserver: Run called more than once")

	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	require.NoError(t, err)
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	srv, err = cniserver.New(loop, linux, store, cniserver.Config{SocketPath: stale})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	require.Eventually(t, func() bool {
		c, err := net.Dial("unix", stale)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, 10*time.Second, time.Millisecond)
	// A second server on the same socket refuses.
	srv2, err := cniserver.New(loop, linux, store, cniserver.Config{SocketPath: stale})
	require.NoError(t, err)
	assert.ErrorContains(t, srv2.Run(ctx), "another server")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled, "stopped as asked")

	// A store that cannot be read fails Run.
	bad := cniservertest.NewMemStore()
	bad.SetFuncs(cniservertest.StoreFuncs{ListAttachments: func() error { return cniservertest.ErrInjected }})
	srv, err = cniserver.New(loop, linux, bad, cniserver.Config{SocketPath: filepath.Join(dir, "x.sock")})
	require.NoError(t, err)
	assert.ErrorIs(t, srv.Run(context.Background()), cniservertest.ErrInjected)
}

func TestHostIfName(t *testing.T) {
	seen := map[string]bool{}
	for _, id := range []string{"a", "b", strings.Repeat("f", 64), "0123456789abcdef"} {
		for _, ifn := range []string{"eth0", "net1"} {
			n := cniserver.HostIfName(id, ifn)
			assert.Len(t, n, 15)
			assert.True(t, strings.HasPrefix(n, cniserver.HostIfPrefix))
			assert.Equal(t, n, cniserver.HostIfName(id, ifn), "deterministic")
			assert.False(t, seen[n])
			seen[n] = true
		}
	}
}

func TestStatusBeforeStartupResync(t *testing.T) {
	// STATUS as the package documentation suggests to wire it: not ready
	// (50) until the loop processed its start-up resync.
	loop, err := controller.New(nil, controller.SouthboundFunc(func(context.Context, *controller.Commit) (uint64, error) { return 0, nil }), controller.Config{})
	require.NoError(t, err)
	socket := filepath.Join(shortTempDir(t), "cni.sock")
	srv, err := cniserver.New(loop, cniservertest.NewFakeLinux(), cniservertest.NewMemStore(), cniserver.Config{
		SocketPath: socket,
		Ready: func(context.Context) error {
			select {
			case <-loop.Ready(): // the start-up resync was processed
				return nil
			default:
				return errors.New("no start-up resync yet")
			}
		},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = loop.Run(ctx) })
	wg.Go(func() { assert.ErrorIs(t, srv.Run(ctx), context.Canceled) })
	defer func() { cancel(); wg.Wait() }()
	waitDial(t, socket)
	u := &unit{t: t, socket: socket}
	_, err = u.do(call{cmd: "STATUS"})
	assert.Equal(t, uint(50), cniCode(err), "%v", err)
	assert.ErrorContains(t, err, "no start-up resync yet")
	require.NoError(t, loop.PushEvent(controller.NewDBResync()))
	require.Eventually(t, func() bool {
		_, err := u.do(call{cmd: "STATUS"})
		return err == nil
	}, 10*time.Second, time.Millisecond)
}

// TestPodAttachments: the completed attachments are the pod handlers'
// durable record (podconn.Config.Attachments); an ADD that did not
// complete is left out.
func TestPodAttachments(t *testing.T) {
	ctx := context.Background()
	store := cniservertest.NewMemStore()
	unfinished := cniserver.Attachment{ID: cniserver.AttachmentID{ContainerID: "c-half", IfName: "eth0"},
		Pod: kubemodel.PodID{Namespace: "default", Name: "half"}, Netns: "/run/netns/half", Type: podiface.AfPacket}
	require.NoError(t, store.PutAttachment(ctx, unfinished)) // an ADD interrupted by a restart
	u := newUnit(t, unitOptions{store: store, cfg: cniserver.Config{InterfaceType: podiface.AfPacket}})
	_, netns := u.add("web")
	all, err := u.srv.Attachments(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	got, err := u.srv.PodAttachments()
	require.NoError(t, err)
	assert.Equal(t, []podiface.Attachment{{
		Pod: kubemodel.PodID{Namespace: "default", Name: "web"}, ContainerID: "c-web", NetworkNamespace: netns,
		IfName: "eth0", InterfaceType: podiface.AfPacket, HostIfName: cniserver.HostIfName("c-web", "eth0"),
	}}, got)
}

// TestStats: every request is counted under its command, failures too;
// a request the server cannot parse counts as a bad request.
func TestStats(t *testing.T) {
	u := newUnit(t, unitOptions{})
	require.Empty(t, u.srv.Stats().Commands)
	_, netns := u.add("web")
	_, err := u.do(call{cmd: "ADD", container: "c-gone", netns: "/run/netns/gone", args: podArgs("gone")})
	require.Error(t, err, "no such namespace")
	_, err = u.do(call{cmd: "DEL", container: "c-web", netns: netns, args: podArgs("web")})
	require.NoError(t, err)
	_, err = u.do(call{cmd: "ADD", container: "", netns: netns, args: podArgs("web")})
	require.Error(t, err, "no container ID")

	st := u.srv.Stats()
	require.Len(t, st.Commands, 2)
	add, del := st.Commands["ADD"], st.Commands["DEL"]
	assert.Equal(t, uint64(2), add.Requests)
	assert.Equal(t, uint64(1), add.Failed)
	assert.Positive(t, add.Duration)
	assert.Equal(t, uint64(1), del.Requests)
	assert.Zero(t, del.Failed)
	assert.Equal(t, uint64(1), st.BadRequests)

	st.Commands["ADD"] = cniserver.CommandStats{}
	assert.Equal(t, uint64(2), u.srv.Stats().Commands["ADD"].Requests, "a copy")
}

package cniserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/cniserver/cniplugin"
	"github.com/vswitchkit/vswitchkit/cniserver/cniservertest"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
)

// fakePods is a pod handler for the unit tests: it plays the VPP pod
// handler on the fake Linux. It hands out 10.1.1.x/24 addresses (x from 2,
// by AddPod), gateway 10.1.1.1 with gatewayMAC, creates the tap of tap
// pods in the namespace (as VPP would) and deletes it on DeletePod.
type fakePods struct {
	linux *cniservertest.FakeLinux

	mu sync.Mutex
	// choose picks the interface type for a podiface.Default request.
	choose func(ev *controller.AddPod) podiface.Type // guarded by mu
	// fail, when set, fails AddPod for the pods it returns an error for.
	fail func(ev *controller.AddPod) error // guarded by mu
	// result, when set, edits the results before they are returned.
	result func(ev *controller.AddPod) // guarded by mu
	// gate, when set, is waited for by AddPod of pods named "slow".
	gate   chan struct{}                 // guarded by mu
	next   int                           // guarded by mu
	pods   map[string]*controller.AddPod // guarded by mu; by container ID
	adds   int                           // guarded by mu
	dels   []string                      // guarded by mu; container IDs of DeletePod
	byType map[podiface.Type]int         // guarded by mu
	hosts  map[string]podiface.Type      // guarded by mu; HostIfName of AddPods
}

const gatewayMAC = "02:fe:00:00:00:01"

func newFakePods(linux *cniservertest.FakeLinux) *fakePods {
	return &fakePods{linux: linux, pods: map[string]*controller.AddPod{},
		byType: map[podiface.Type]int{}, hosts: map[string]podiface.Type{}}
}

func (p *fakePods) String() string { return "fake-pods" }

func (p *fakePods) HandlesEvent(ev controller.Event) bool {
	switch ev.(type) {
	case *controller.AddPod, *controller.DeletePod:
		return true
	}
	return false
}

func (p *fakePods) Resync(controller.Event, controller.KubeStateData, int, controller.ResyncOperations) error {
	return nil
}

func (p *fakePods) Update(event controller.Event, txn controller.UpdateOperations) (string, error) {
	switch ev := event.(type) {
	case *controller.AddPod:
		p.mu.Lock()
		gate, fail, choose, edit := p.gate, p.fail, p.choose, p.result
		p.mu.Unlock()
		if gate != nil && ev.Pod.Name == "slow" {
			<-gate
		}
		if fail != nil {
			if err := fail(ev); err != nil {
				return "", err
			}
		}
		typ := ev.InterfaceType
		if typ == podiface.Default {
			typ = podiface.AfPacket
			if choose != nil {
				typ = choose(ev)
			}
		}
		p.mu.Lock()
		p.next++
		ip := fmt.Sprintf("10.1.1.%d/24", p.next+1)
		p.adds++
		p.byType[typ]++
		p.hosts[ev.HostIfName] = ev.InterfaceType
		p.pods[ev.ContainerID] = ev
		p.mu.Unlock()
		pi := podiface.Interface{HostName: ev.IfName, Type: typ, IPAddresses: []string{ip}, GatewayMAC: gatewayMAC}
		switch typ {
		case podiface.Tap:
			if err := p.linux.AddLink(ev.NetworkNamespace, ev.IfName, "tap"); err != nil && !errors.Is(err, cniserver.ErrLinkExists) {
				return "", err
			}
			pi.MAC = "02:ab:00:00:00:01"
		case podiface.Memif:
			pi.Socket = "/run/vpp/memif-" + ev.ContainerID + ".sock"
			pi.GatewayMAC = ""
		}
		ev.Interfaces = []podiface.Interface{pi}
		ev.Routes = []podiface.Route{{Network: "0.0.0.0/0", Gateway: "10.1.1.1"}}
		if edit != nil {
			edit(ev)
		}
		txn.Put("pod/"+ev.ContainerID, nil)
		return "connected " + ev.Pod.String(), nil
	case *controller.DeletePod:
		p.mu.Lock()
		p.dels = append(p.dels, ev.ContainerID)
		add := p.pods[ev.ContainerID]
		delete(p.pods, ev.ContainerID)
		p.mu.Unlock()
		if add != nil && len(add.Interfaces) > 0 && add.Interfaces[0].Type == podiface.Tap {
			_ = p.linux.DeleteLink(context.Background(), add.NetworkNamespace, add.IfName)
		}
		return "", nil
	}
	return "", nil
}

func (p *fakePods) Revert(event controller.Event) error {
	if ev, ok := event.(*controller.AddPod); ok {
		p.mu.Lock()
		delete(p.pods, ev.ContainerID)
		p.mu.Unlock()
	}
	return nil
}

func (p *fakePods) counts() (adds int, dels []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.adds, append([]string(nil), p.dels...)
}

func (p *fakePods) connected() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pods)
}

// unit is an agent on the fake Linux: a real controller.Loop with the fake
// pod handler (and a handler that can fail after it), a server on a socket
// in a temporary directory, and a MemStore.
type unit struct {
	t      testing.TB
	linux  *cniservertest.FakeLinux
	store  *cniservertest.MemStore
	pods   *fakePods
	loop   *controller.Loop
	srv    *cniserver.Server
	socket string
	stop   func()
}

type unitOptions struct {
	cfg   cniserver.Config
	store *cniservertest.MemStore
	linux *cniservertest.FakeLinux
	// after, if set, is registered after the pod handler.
	after controller.EventHandler
}

func shortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "vskcni")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func newUnit(t testing.TB, o unitOptions) *unit {
	t.Helper()
	u := &unit{t: t, linux: o.linux, store: o.store}
	if u.linux == nil {
		u.linux = cniservertest.NewFakeLinux()
	}
	if u.store == nil {
		u.store = cniservertest.NewMemStore()
	}
	u.pods = newFakePods(u.linux)
	loop, err := controller.New(nil, controller.SouthboundFunc(func(context.Context, *controller.Commit) (uint64, error) {
		return 0, nil
	}), controller.Config{HealingDelay: time.Hour})
	require.NoError(t, err)
	handlers := []controller.EventHandler{u.pods}
	if o.after != nil {
		handlers = append(handlers, o.after)
	}
	require.NoError(t, loop.Register(handlers...))
	u.loop = loop
	cfg := o.cfg
	if cfg.SocketPath == "" {
		cfg.SocketPath = filepath.Join(shortTempDir(t), "cni.sock")
	}
	u.socket = cfg.SocketPath
	u.srv, err = cniserver.New(loop, u.linux, u.store, cfg)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = loop.Run(ctx)
	}()
	require.NoError(t, loop.PushEvent(controller.NewDBResync()))
	go func() {
		defer wg.Done()
		if err := u.srv.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("server Run: %v, want context.Canceled", err)
		}
	}()
	waitSocket(t, u.socket)
	var once sync.Once
	u.stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(u.stop)
	return u
}

// waitSocket waits until something listens on the socket.
func waitSocket(t testing.TB, path string) {
	t.Helper()
	require.Eventually(t, func() bool {
		fi, err := os.Stat(path)
		return err == nil && fi.Mode().Type() == os.ModeSocket
	}, 10*time.Second, time.Millisecond, "socket %s", path)
}

const testNetwork = "vsk-test"

func netConf(version string, extra string) []byte {
	if extra != "" {
		extra = "," + extra
	}
	return []byte(fmt.Sprintf(`{"cniVersion":%q,"name":%q,"type":"vswitchkit-cni"%s}`, version, testNetwork, extra))
}

type call struct {
	cmd, container, netns, ifName, args string
	conf                                []byte
	timeout                             time.Duration
}

func podArgs(name string) string {
	return "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + name
}

// do sends one request through cniplugin.Call, as the plugin binary would.
func (u *unit) do(c call) ([]byte, error) {
	if c.ifName == "" {
		c.ifName = "eth0"
	}
	if c.conf == nil {
		c.conf = netConf("1.1.0", "")
	}
	if c.timeout == 0 {
		c.timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	return cniplugin.Call(ctx, u.socket, c.cmd, &skel.CmdArgs{
		ContainerID: c.container, Netns: c.netns, IfName: c.ifName, Args: c.args, StdinData: c.conf,
	})
}

// add adds pod name (container "c-"+name) in a new fake namespace.
func (u *unit) add(name string) (*types100.Result, string) {
	u.t.Helper()
	netns := "/run/netns/" + name
	_ = u.linux.AddNetns(netns) // it may exist from an earlier step of the test
	out, err := u.do(call{cmd: "ADD", container: "c-" + name, netns: netns, args: podArgs(name)})
	require.NoError(u.t, err)
	return parseResult(u.t, out), netns
}

func parseResult(t testing.TB, out []byte) *types100.Result {
	t.Helper()
	var res types100.Result
	require.NoError(t, json.Unmarshal(out, &res), "%s", out)
	return &res
}

// cniCode returns the CNI error code of err, or 0 if it is not a CNI error.
func cniCode(err error) uint {
	var cerr *types.Error
	if errors.As(err, &cerr) {
		return cerr.Code
	}
	return 0
}

// withPrev returns a configuration with prevResult for CHECK and DEL.
func withPrev(t testing.TB, version string, prev []byte) []byte {
	t.Helper()
	return netConf(version, `"prevResult":`+string(prev))
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

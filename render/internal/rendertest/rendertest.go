// Package rendertest runs the part of a vswitch agent that the reference
// handlers need, for the tests of nodeconn, podconn and aclpolicy: a
// controller loop committing to a vppdriver.Driver (on the VPP stand-in or
// a real VPP), nodesync on an in-memory cluster-wide DB, IPAM with an
// in-memory store, the node and pod connectivity handlers, and a pod
// server stand-in that records attachments as the CNI pod server does;
// optionally the services (svcprocessor with render/svcnat or
// render/svccnat) and the NetworkPolicy processor with render/aclpolicy,
// wired as the agent wires them, and a second IPAM for dual-stack.
package rendertest

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"golang.org/x/sync/errgroup"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/controller/podiface"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/ipam/ipamtest"
	"github.com/vswitchkit/vswitchkit/nodesync"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	"github.com/vswitchkit/vswitchkit/policy"
	"github.com/vswitchkit/vswitchkit/render/aclpolicy"
	"github.com/vswitchkit/vswitchkit/render/nodeaddr"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
	"github.com/vswitchkit/vswitchkit/render/podconn"
	"github.com/vswitchkit/vswitchkit/render/svccnat"
	"github.com/vswitchkit/vswitchkit/render/svcnat"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
)

// Node is what survives an agent restart on a node: the records of the
// pod server and the IPAM store. The zero value is a fresh node.
type Node struct {
	mu      sync.Mutex
	atts    map[kubemodel.PodID]podiface.Attachment
	listErr error
	Store   ipamtest.MemStore
	Store2  ipamtest.MemStore // the second family's IPAM (Options.DualStack)
}

// SetListError makes PodAttachments fail with err (nil: succeed).
func (n *Node) SetListError(err error) {
	n.mu.Lock()
	n.listErr = err
	n.mu.Unlock()
}

// PodAttachments lists the recorded attachments (podconn.Attachments).
func (n *Node) PodAttachments() ([]podiface.Attachment, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listErr != nil {
		return nil, n.listErr
	}
	out := make([]podiface.Attachment, 0, len(n.atts))
	for _, a := range n.atts {
		out = append(out, a)
	}
	return out, nil
}

func (n *Node) record(a podiface.Attachment, add bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.atts == nil {
		n.atts = map[kubemodel.PodID]podiface.Attachment{}
	}
	if add {
		n.atts[a.Pod] = a
	} else {
		delete(n.atts, a.Pod)
	}
}

// Options configure an [Agent].
type Options struct {
	Name       string                // node name
	DB         *nodesynctest.MemDB   // the cluster-wide DB
	NewAdapter func() adapter.VppAPI // VPP
	Node       *Node                 // durable state of the node; nil: a fresh one
	IPAM       ipam.Config           // Store is set to Node.Store
	// DualStack, when set, is the address plan of the second IP family:
	// a second IPAM (its Store is Node.Store2), given to nodeconn and
	// podconn (and the service renderer) as the agent does.
	DualStack     *ipam.Config
	NodeConn      nodeconn.Config
	PodConn       podconn.Config // Attachments is set to Node unless NoAttachments
	NoAttachments bool
	// Services adds the service processor with the NAT44 renderer
	// (render/svcnat) as the agent does: NodePorts on this node's
	// addresses, the uplink and the host interconnect (when NodeConn
	// configures them) given to the renderer.
	Services bool
	// ServiceRenderer chooses the renderer with Services: "nat44" (the
	// default, render/svcnat) or "cnat" (render/svccnat, with cnat's
	// feature on the tunnels instead of NAT44's, as the agent does).
	ServiceRenderer string
	// Policy adds the NetworkPolicy processor and its ACL renderer
	// (render/aclpolicy) as the agent does: the node's own addresses, the
	// host's end of the host interconnect and the NAT loopback always
	// allowed in, the service CIDR checked after translation, nodeconn's
	// exit interfaces.
	Policy    bool
	After     []controller.EventHandler // registered after the handlers
	KubeState controller.KubeStateData  // for the start-up DBResync
	Driver    vppdriver.Config
	// DriverDefaults keeps the driver's default timers (health probe 1s,
	// reconnect 500ms); otherwise the agent uses short ones.
	DriverDefaults bool
	// Record, if set, gets every commit too (controller.MultiSouthbound).
	Record *controllertest.Southbound
}

// Agent is a running agent. It is owned by the test that started it.
type Agent struct {
	Loop   *controller.Loop
	Driver *vppdriver.Driver
	Nodes  *nodesync.NodeSync
	IPAM   *ipam.IPAM
	// IPAM2 is the second family's IPAM (Options.DualStack), else nil.
	IPAM2 *ipam.IPAM
	Conn  *nodeconn.Handler
	Pods  *podconn.Handler
	Node  *Node
	// With Options.Services or Options.Policy: this node's addresses.
	NodeIPs *nodeaddr.NodeIPSet
	// With Options.Services.
	Services *svcprocessor.ServiceProcessor
	NAT      *svcnat.Renderer
	// With Options.ServiceRenderer "cnat" instead of NAT.
	CNAT *svccnat.Renderer
	// With Options.Policy.
	Policy *policy.Processor
	ACLs   *aclpolicy.Renderer

	stop func()
}

// Start starts an agent and waits until its start-up resync is done and
// committed. It stops in t.Cleanup (or earlier with Stop).
func Start(t testing.TB, o Options) *Agent {
	t.Helper()
	if o.Node == nil {
		o.Node = &Node{}
	}
	drvCfg := o.Driver
	if drvCfg.RetryInitial == 0 && !o.DriverDefaults {
		drvCfg.RetryInitial, drvCfg.RetryMax = 20*time.Millisecond, 200*time.Millisecond
	}
	if drvCfg.ReconnectInterval == 0 && !o.DriverDefaults {
		drvCfg.ReconnectInterval, drvCfg.HealthInterval = 50*time.Millisecond, 100*time.Millisecond
	}
	d, err := vppdriver.New(o.NewAdapter, drvCfg)
	require.NoError(t, err)
	var sb controller.Southbound = d
	if o.Record != nil {
		sb = controller.MultiSouthbound(d, o.Record)
	}
	loop, err := controller.New(nil, sb, controller.Config{HealingDelay: 50 * time.Millisecond, MaxHealingAttempts: -1})
	require.NoError(t, err)
	ns, err := nodesync.New(o.Name, o.DB, loop, nodesync.Config{RetryBackoff: 10 * time.Millisecond})
	require.NoError(t, err)
	ic := o.IPAM
	ic.Store = &o.Node.Store
	pods, err := ipam.New(ns, ic)
	require.NoError(t, err)
	a := &Agent{Driver: d, Nodes: ns, IPAM: pods, Node: o.Node}
	handlers := []controller.EventHandler{ns, pods}
	ncfg, pc := o.NodeConn, o.PodConn
	if o.DualStack != nil {
		ic2 := *o.DualStack
		ic2.Store = &o.Node.Store2
		a.IPAM2, err = ipam.New(ns, ic2)
		require.NoError(t, err)
		handlers = append(handlers, a.IPAM2)
		ncfg.DualStack, pc.DualStack = a.IPAM2, a.IPAM2
	}
	if o.Services && o.ServiceRenderer == "cnat" {
		ncfg.NAT44, ncfg.Cnat = false, true
	}
	conn, err := nodeconn.New(ns, ns, pods, ncfg)
	require.NoError(t, err)
	if !o.NoAttachments {
		pc.Attachments = o.Node
	}
	podh, err := podconn.New(pods, pc)
	require.NoError(t, err)
	a.Conn, a.Pods = conn, podh
	handlers = append(handlers, conn)
	if o.Services || o.Policy {
		// After nodeconn, which publishes this node's VPP addresses.
		a.NodeIPs = nodeaddr.NewNodeIPSet(ns, nodeaddr.NodeIPSetConfig{OnlyNode: o.Name})
		handlers = append(handlers, a.NodeIPs)
	}
	handlers = append(handlers, podh)
	if o.Services {
		handlers = append(handlers, a.addServices(t, o)...)
	}
	if o.Policy {
		handlers = append(handlers, a.addPolicy(t, o)...)
	}
	require.NoError(t, loop.Register(append(handlers, o.After...)...))

	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.Run(gctx) })
	g.Go(func() error { return ns.Run(gctx) })
	g.Go(func() error { return loop.Run(gctx) })
	a.Loop = loop
	var once sync.Once
	a.stop = func() {
		once.Do(func() {
			cancel()
			if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("agent %s: %v", o.Name, err)
			}
		})
	}
	t.Cleanup(a.stop)
	ev := controller.NewDBResync()
	if o.KubeState != nil {
		ev.KubeState = o.KubeState
	}
	require.NoError(t, loop.PushEvent(ev))
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	// The start-up resync's own error (say a node ID not allocated yet) is
	// healed; the tests wait for what they need.
	if err := loop.WaitStartupResync(wctx); errors.Is(err, context.DeadlineExceeded) || errors.Is(err, controller.ErrNotRunning) || errors.Is(err, controller.ErrStopped) {
		require.NoError(t, err, "the start-up resync of %s", o.Name)
	}
	a.Sync(t)
	return a
}

// addServices makes the service processor and the service renderer as the
// agent does and returns their handlers.
func (a *Agent) addServices(t testing.TB, o Options) []controller.EventHandler {
	t.Helper()
	var err error
	a.Services, err = svcprocessor.New(svcprocessor.SubnetsFromIPNet(a.IPAM), a.NodeIPs, a.Pods,
		svcprocessor.Config{NodeName: o.Name})
	require.NoError(t, err)
	var uplink string
	var interconnects []string
	if o.NodeConn.Uplink.AfPacketHostIf != "" || o.NodeConn.Uplink.VPPName != "" {
		uplink = cmp.Or(o.NodeConn.Uplink.Name, nodeconn.DefaultUplinkName)
	}
	if o.NodeConn.HostInterconnect.AfPacketHostIf != "" || o.NodeConn.HostInterconnect.TapHostIfName != "" {
		interconnects = []string{cmp.Or(o.NodeConn.HostInterconnect.Name, nodeconn.DefaultHostInterconnectName)}
	}
	if o.ServiceRenderer == "cnat" {
		ipams := []*ipam.IPAM{a.IPAM}
		ranges := []svccnat.ClusterRanges{a.IPAM}
		if a.IPAM2 != nil {
			ipams, ranges = append(ipams, a.IPAM2), append(ranges, a.IPAM2)
		}
		snat := svccnat.SNATAddrsFunc(func() []netip.Addr {
			var out []netip.Addr
			if uplink != "" {
				for _, i := range ipams {
					if p, err := i.NodeAddr(i.NodeID()); err == nil {
						out = append(out, p.Addr())
					}
				}
			}
			for _, i := range ipams {
				out = append(out, i.NatLoopbackAddr())
			}
			return out
		})
		a.CNAT, err = svccnat.New(a.NodeIPs, snat, svccnat.Config{NodeName: o.Name, Uplink: uplink, InterconnectInterfaces: interconnects,
			ExcludedPrefixes: svccnat.ExcludedPrefixes(ranges...)})
		require.NoError(t, err)
		require.NoError(t, a.Services.RegisterRenderer(a.CNAT))
		return []controller.EventHandler{a.Services.Handler(), a.CNAT}
	}
	a.NAT, err = svcnat.New(a.NodeIPs, a.IPAM, svcnat.Config{Uplink: uplink, InterconnectInterfaces: interconnects})
	require.NoError(t, err)
	require.NoError(t, a.Services.RegisterRenderer(a.NAT))
	return []controller.EventHandler{a.Services.Handler()}
}

// addPolicy makes the NetworkPolicy processor and its ACL renderer as the
// agent does and returns their handlers.
func (a *Agent) addPolicy(t testing.TB, o Options) []controller.EventHandler {
	t.Helper()
	var err error
	a.Policy, err = policy.New(policy.Config{
		NodeName: o.Name,
		PodAddrs: func() func(kubemodel.PodID) []netip.Addr {
			var lookups []func(kubemodel.PodID) (netip.Addr, bool)
			for _, i := range a.ipams() {
				lookups = append(lookups, i.PodAddr)
			}
			return policy.PodAddrsFrom(lookups...)
		}(),
	})
	require.NoError(t, err)
	// NAT44 translates a service address after the pod's input ACL: the
	// service CIDRs are checked after translation. cnat translates before
	// it: no prefix is deferred.
	var services []netip.Prefix
	if o.ServiceRenderer != "cnat" {
		for _, i := range a.ipams() {
			if p := i.ServiceNetworkPrefix(); p.IsValid() {
				services = append(services, p)
			}
		}
	}
	a.ACLs, err = aclpolicy.New(a.Pods, aclpolicy.Config{
		HostPrefixes: aclpolicy.HostPrefixesOf(func() []netip.Addr {
			ips := slices.Clone(a.NodeIPs.NodeIPs())
			for _, i := range a.ipams() {
				ips = append(ips, i.HostInterconnectAddrInLinux(), i.NatLoopbackAddr())
			}
			return ips
		}),
		ServicePrefixes: services,
		ExitInterfaces:  a.Conn.ExitInterfaces,
	})
	require.NoError(t, err)
	require.NoError(t, a.Policy.RegisterRenderer(a.ACLs))
	return []controller.EventHandler{a.Policy.Handler(), a.ACLs}
}

// ipams returns the IPAM and the second family's, if any.
func (a *Agent) ipams() []*ipam.IPAM {
	if a.IPAM2 != nil {
		return []*ipam.IPAM{a.IPAM, a.IPAM2}
	}
	return []*ipam.IPAM{a.IPAM}
}

// Stop stops the agent (VPP keeps its configuration).
func (a *Agent) Stop() { a.stop() }

// Sync waits until every event pushed before it has been processed
// (controller.Loop.Sync).
func (a *Agent) Sync(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, a.Loop.Sync(ctx))
}

// Resync pushes a DBResync of kube (the Kubernetes state) and waits until
// it has been processed.
func (a *Agent) Resync(t testing.TB, kube controller.KubeStateData) {
	t.Helper()
	ev := controller.NewDBResync()
	if kube != nil {
		ev.KubeState = kube
	}
	require.NoError(t, a.Loop.PushEvent(ev))
	a.Sync(t)
}

// LogBuffer collects text logs (Debug and up) for tests that check what
// was logged. It is safe for concurrent use.
type LogBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was logged.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger returns a logger that writes to b.
func (b *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// WaitConfigured waits until the driver has configured every key.
func (a *Agent) WaitConfigured(t testing.TB) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assertT) {
		for k, s := range a.Driver.Statuses() {
			if s.State != vppdriver.StateConfigured {
				c.Errorf("%s: %v", k, s)
			}
		}
	}, 20*time.Second, 5*time.Millisecond)
}

type assertT = assert.CollectT

// AddPod connects a pod as the pod server does: it pushes AddPod and waits;
// on success the attachment is recorded (for podconn's resyncs).
func (a *Agent) AddPod(t testing.TB, ev *controller.AddPod) error {
	t.Helper()
	require.NoError(t, a.Loop.PushEvent(ev))
	err := ev.Wait()
	if err == nil {
		att := ev.Attachment()
		for _, i := range ev.Interfaces {
			if i.HostName == att.IfName || (att.IfName == "" && i.HostName == "eth0") {
				att.InterfaceType = i.Type // the type the pod was connected with
			}
		}
		a.Node.record(att, true)
	}
	return err
}

// DeletePod disconnects a pod as the pod server does.
func (a *Agent) DeletePod(t testing.TB, pod kubemodel.PodID, containerID string) {
	t.Helper()
	ev := controller.NewDeletePodEvent(pod, containerID)
	require.NoError(t, a.Loop.PushEvent(ev))
	require.NoError(t, ev.Wait())
	a.Node.record(podiface.Attachment{Pod: pod}, false)
}

// Allocated returns the pods IPAM has addresses for, sorted.
func (a *Agent) Allocated() []kubemodel.PodID {
	var out []kubemodel.PodID
	for _, al := range a.IPAM.Allocations() {
		out = append(out, al.Pod)
	}
	slices.SortFunc(out, func(x, y kubemodel.PodID) int {
		if x.String() < y.String() {
			return -1
		}
		if x.String() > y.String() {
			return 1
		}
		return 0
	})
	return out
}

// ConfigurePod configures the pod's side in ns from the results of its
// AddPod, as the CNI pod server does: the MAC it was given, its addresses,
// a link route to each gateway outside them, the routes, and a permanent
// neighbor entry for each gateway with the gateway MAC.
func ConfigurePod(t testing.TB, ns *vppdrivertest.Netns, ev *controller.AddPod) {
	t.Helper()
	for _, pi := range ev.Interfaces {
		if pi.Type == podiface.Memif {
			continue
		}
		if pi.MAC != "" {
			ns.IP("link", "set", pi.HostName, "address", pi.MAC)
		}
		for _, a := range pi.IPAddresses {
			args := []string{"addr", "add", a, "dev", pi.HostName}
			if strings.Contains(a, ":") {
				args = append(args, "nodad")
			}
			ns.IP(args...)
		}
		ns.IP("link", "set", pi.HostName, "up")
		for _, r := range ev.Routes {
			if r.Gateway == "" {
				ns.IP("route", "replace", r.Network, "dev", pi.HostName)
				continue
			}
			ns.IP("route", "replace", r.Gateway, "dev", pi.HostName, "scope", "link")
			ns.IP("route", "replace", r.Network, "via", r.Gateway, "dev", pi.HostName)
			if pi.GatewayMAC != "" {
				ns.IP("neigh", "replace", r.Gateway, "lladdr", pi.GatewayMAC, "dev", pi.HostName, "nud", "permanent")
			}
		}
	}
}

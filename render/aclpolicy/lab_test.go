package aclpolicy_test

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/adapter"
	"go.fd.io/govpp/adapter/socketclient"
	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	"github.com/vswitchkit/vswitchkit/policy/policytest"
	"github.com/vswitchkit/vswitchkit/render/aclpolicy"
	"github.com/vswitchkit/vswitchkit/render/internal/rendertest"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
)

// This file is the lab of packets_test.go: a real VPP, the partial agent
// (rendertest with services and NetworkPolicy) and the nine pods of the
// policytest model as network namespaces.

const (
	nodeName = "node-1"
	// probeTimeout bounds a probe's first attempt: a denied probe costs
	// that much (the ACL plugin drops, nothing answers).
	probeTimeout = time.Second
	// retryTimeout bounds the second and third attempts of a probe that
	// the evaluator allows but that got no answer the first time.
	retryTimeout = 3 * time.Second
	// extIP is the "external" namespace behind the uplink.
	extIP = "192.168.16.100"
)

// labPod is one pod: a namespace with eth0 on a veth pair whose host end
// VPP attaches to with af_packet.
type labPod struct {
	id     kubemodel.PodID
	ns     *vppdrivertest.Netns
	hostIf string // the veth's end in the test's namespace
	ip     netip.Addr
	iface  string // the logical name of its VPP interface
	// added is the time the pod's AddPod took (pushed until its
	// transaction was committed to VPP).
	added time.Duration
}

// lab is the real VPP, the agent on it, the pods, the external and host
// namespaces, and the Kubernetes state the agent has been told.
type lab struct {
	vpp      *vppdrivertest.RealVPP
	agent    *rendertest.Agent
	commits  *controllertest.Southbound
	requests *vppdrivertest.RequestRecorder
	srv      *servers
	tag      string

	pods      map[kubemodel.PodID]*labPod
	ext, host *vppdrivertest.Netns
	uplinkIf  string // the uplink's veth end in the test's namespace
	nodeIP    netip.Addr
	podNet    netip.Prefix // the pod subnet of all nodes

	mu   sync.Mutex
	kube controller.KubeStateData
}

// startLab starts a real VPP and the agent, connects the model's nine
// pods (each serving TCP and UDP on 80 and 81), an external namespace
// behind the uplink (serving on 9000) and a host namespace on the host
// interconnect, and waits until every pod reaches every other one.
func startLab(t *testing.T) *lab {
	t.Helper()
	vpp := vppdrivertest.StartRealVPP(t)
	vppdrivertest.NeedNetns(t)
	l := &lab{vpp: vpp, tag: strconv.Itoa(os.Getpid() % 10000), srv: &servers{}, commits: &controllertest.Southbound{},
		requests: &vppdrivertest.RequestRecorder{}, pods: map[kubemodel.PodID]*labPod{}, kube: controller.NewKubeStateData()}
	t.Cleanup(l.srv.stop)

	// The uplink to an external namespace, the host interconnect to a
	// host namespace.
	l.ext = vppdrivertest.NewNetns(t, "vsk-npx-"+l.tag)
	l.uplinkIf = "vsknpu-" + l.tag
	vppdrivertest.Veth(t, l.uplinkIf, l.ext, "eth0")
	l.host = vppdrivertest.NewNetns(t, "vsk-nph-"+l.tag)
	hostIf := "vsknph-" + l.tag
	vppdrivertest.Veth(t, hostIf, l.host, "eth0")

	sock := vpp.APISocket()
	l.agent = rendertest.Start(t, rendertest.Options{
		Name: nodeName, DB: nodesynctest.NewMemDB(),
		NewAdapter: func() adapter.VppAPI { return l.requests.Wrap(socketclient.NewVppClient(sock)) },
		NodeConn: nodeconn.Config{Uplink: nodeconn.Uplink{AfPacketHostIf: l.uplinkIf},
			HostInterconnect: nodeconn.HostInterconnect{AfPacketHostIf: hostIf}, NAT44: true},
		Services: true, Policy: true, Record: l.commits, DriverDefaults: true,
	})
	a := l.agent
	l.podNet = a.IPAM.PodSubnetAllNodesPrefix()
	up, err := a.IPAM.NodeAddr(a.IPAM.NodeID())
	require.NoError(t, err)
	l.nodeIP = up.Addr()
	l.ext.IP("addr", "add", extIP+"/"+strconv.Itoa(up.Bits()), "dev", "eth0")
	l.ext.IP("link", "set", "eth0", "up")
	l.ext.IP("route", "add", l.podNet.String(), "via", l.nodeIP.String())
	hic := a.IPAM.HostInterconnectSubnetThisNodePrefix()
	l.host.IP("addr", "add", netip.PrefixFrom(a.IPAM.HostInterconnectAddrInLinux(), hic.Bits()).String(), "dev", "eth0")
	l.host.IP("link", "set", "eth0", "up")
	for _, dst := range []netip.Prefix{l.podNet, a.IPAM.ServiceNetworkPrefix()} {
		l.host.IP("route", "add", dst.String(), "via", a.IPAM.HostInterconnectAddrInVPP().String())
	}
	l.srv.serve(t, l.ext, "ext", 9000)

	for i, id := range policytest.Model(policytest.ModelOptions{}).PodIDs() {
		l.addPod(t, id, i)
	}
	a.WaitConfigured(t)
	// The plain data path, before any policy: every pod reaches every
	// other (the first packets may need VPP's ARP on the uplink, not on
	// pods: podconn gives VPP their MACs).
	ids := l.podIDs()
	require.Eventually(t, func() bool {
		_, err := probeTCP(l.pods[ids[0]].ns, netip.AddrPortFrom(l.pods[ids[1]].ip, 80), probeTimeout)
		return err == nil
	}, 20*time.Second, 10*time.Millisecond, "x/a reaches x/b")
	require.Eventually(t, func() bool { // VPP resolves the external address
		_, err := probeTCP(l.pods[ids[0]].ns, netip.AddrPortFrom(netip.MustParseAddr(extIP), 9000), probeTimeout)
		return err == nil
	}, 20*time.Second, 10*time.Millisecond, "x/a reaches the external namespace")
	return l
}

// addPod connects pod id as the pod server does (veth first, AddPod, then
// the pod's side from the results) and starts its servers.
func (l *lab) addPod(t *testing.T, id kubemodel.PodID, i int) *labPod {
	t.Helper()
	p := &labPod{id: id, ns: vppdrivertest.NewNetns(t, fmt.Sprintf("vsk-np%d-%s", i, l.tag)), hostIf: fmt.Sprintf("vsknp%d-%s", i, l.tag)}
	vppdrivertest.Veth(t, p.hostIf, p.ns, "eth0")
	for _, port := range []int{80, 81} { // listening before the address is there
		l.srv.serve(t, p.ns, id.String(), port)
	}
	ev := controller.NewAddPodEvent(id, "c-"+id.Namespace+"-"+id.Name, p.ns.Path())
	ev.HostIfName = p.hostIf
	start := time.Now()
	require.NoError(t, l.agent.AddPod(t, ev))
	p.added = time.Since(start)
	rendertest.ConfigurePod(t, p.ns, ev)
	var ok bool
	p.ip, ok = l.agent.IPAM.PodAddr(id)
	require.True(t, ok)
	p.iface, ok = l.agent.Pods.PodInterface(id)
	require.True(t, ok)
	l.pods[id] = p
	return p
}

// podIDs returns the model's pods, sorted.
func (l *lab) podIDs() []kubemodel.PodID {
	var ids []kubemodel.PodID
	for id := range l.pods {
		if policytestPod(id) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b kubemodel.PodID) int { return strings.Compare(a.String(), b.String()) })
	return ids
}

func policytestPod(id kubemodel.PodID) bool {
	return slices.Contains([]string{"x", "y", "z"}, id.Namespace) && slices.Contains([]string{"a", "b", "c"}, id.Name)
}

// vppIf returns VPP's name of the af_packet interface on host end hostIf.
func vppIf(hostIf string) string { return "host-" + hostIf }

// base returns the model as this lab has it, without policies: every pod
// on this node with its real address.
func (l *lab) base(t *testing.T) *policytest.Cluster {
	t.Helper()
	c := policytest.Model(policytest.ModelOptions{})
	l.remap(t, c)
	return c
}

// remap puts the model cluster c onto the lab: one node (this one) with
// the node's address, every pod on it with the address IPAM gave it, and
// the policies' ipBlocks rewritten (see remapPolicy).
func (l *lab) remap(t *testing.T, c *policytest.Cluster) {
	t.Helper()
	c.Nodes = []policytest.Node{{Name: nodeName, Addrs: []netip.Addr{l.nodeIP}}}
	for i, p := range c.Pods {
		lp := l.pods[p.ID()]
		require.NotNil(t, lp, "pod %s is not in the lab", p.ID())
		p = proto.CloneOf(p)
		p.IpAddress, p.IpAddresses = lp.ip.String(), []string{lp.ip.String()}
		p.NodeName, p.HostIpAddress = nodeName, l.nodeIP.String()
		c.Pods[i] = p
	}
	for i, np := range c.Policies {
		c.Policies[i] = l.remapPolicy(t, np)
	}
}

// remapStep returns the step with its policy remapped.
func (l *lab) remapStep(t *testing.T, s policytest.Step) policytest.Step {
	t.Helper()
	switch s := s.(type) {
	case policytest.PutPolicy:
		return policytest.PutPolicy{Policy: l.remapPolicy(t, s.Policy)}
	case policytest.DeletePod:
		t.Fatalf("step %s: the lab does not delete pods", s)
	}
	return s
}

// remapPolicy returns np with every IPv4 ipBlock CIDR (and except) meaning
// for the lab's addresses what it meant for the model's: a model pod's
// /32 becomes the lab pod's, the model's pod range the lab's; any other
// CIDR is kept when it holds the same pods in both (0.0.0.0/4 holds them
// all) and fails the test otherwise. IPv6 blocks (the model is IPv4 here)
// and CIDRs that do not parse (invalid policies) are kept.
func (l *lab) remapPolicy(t *testing.T, np *kubemodel.NetworkPolicy) *kubemodel.NetworkPolicy {
	t.Helper()
	np = proto.CloneOf(np)
	modelRange := netip.MustParsePrefix("10.244.0.0/16")
	cidr := func(s string) string {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().Is6() {
			return s
		}
		if p.Bits() == 32 {
			for id, lp := range l.pods {
				if policytestPod(id) && policytest.ModelPodAddr(id, false) == p.Addr() {
					return netip.PrefixFrom(lp.ip, 32).String()
				}
			}
		}
		if p.Masked() == modelRange {
			return l.podNet.String()
		}
		for id, lp := range l.pods {
			if policytestPod(id) && p.Contains(policytest.ModelPodAddr(id, false)) != p.Contains(lp.ip) {
				t.Fatalf("policy %s: ipBlock %s cannot be put onto the lab's addresses (pod %s)", np.ID(), s, id)
			}
		}
		return s
	}
	block := func(peers []*kubemodel.NetworkPolicyPeer) {
		for _, p := range peers {
			if b := p.GetIpBlock(); b != nil {
				b.Cidr = cidr(b.Cidr)
				for i, e := range b.Except {
					b.Except[i] = cidr(e)
				}
			}
		}
	}
	for _, r := range np.GetIngress() {
		block(r.From)
	}
	for _, r := range np.GetEgress() {
		block(r.To)
	}
	return np
}

// apply tells the agent the namespaces, pods, pod peers and policies of
// cur (one KubeStateChange per changed object, as the watcher delivers
// them), and waits until the loop has processed them and VPP has the
// result. It returns the time from the first push until then.
func (l *lab) apply(t *testing.T, cur controller.KubeStateData) time.Duration {
	t.Helper()
	l.mu.Lock()
	chs := aclpolicy.Changes(l.kube, cur)
	for _, res := range []string{kubemodel.NamespaceResource, kubemodel.PodPeerResource, kubemodel.PodResource, kubemodel.NetworkPolicyResource} {
		l.kube[res] = cur[res]
	}
	l.mu.Unlock()
	start := time.Now()
	for _, ch := range chs {
		require.NoError(t, l.agent.Loop.PushEvent(ch))
	}
	l.settle(t)
	return time.Since(start)
}

// put tells the agent one object (nil: deleted) and waits as apply does.
func (l *lab) put(t *testing.T, resource, key string, v proto.Message) time.Duration {
	t.Helper()
	l.mu.Lock()
	prev := l.kube[resource][key]
	if l.kube[resource] == nil {
		l.kube[resource] = controller.KeyValuePairs{}
	}
	ev := &controller.KubeStateChange{Resource: resource, Key: key, PrevValue: prev, NewValue: v}
	if v == nil {
		delete(l.kube[resource], key)
		ev.NewValue = nil
	} else {
		l.kube[resource][key] = v
	}
	l.mu.Unlock()
	start := time.Now()
	require.NoError(t, l.agent.Loop.PushEvent(ev))
	l.settle(t)
	return time.Since(start)
}

// settle waits until every event pushed so far is processed and every key
// is configured in VPP, and fails the test if one of them failed.
func (l *lab) settle(t *testing.T) {
	t.Helper()
	l.agent.Sync(t)
	l.agent.WaitConfigured(t)
	require.Zero(t, l.agent.Loop.Stats().Failed, "no event failed")
}

// verdict tells whether a probe from from to to got its answer; an answer
// other than the expected one (another pod, another client address) or a
// refused connection is an error.
func (l *lab) verdict(from *labPod, to netip.AddrPort, proto kubemodel.Protocol, who string, timeout time.Duration) (bool, error) {
	var line string
	var err error
	switch proto {
	case kubemodel.Protocol_TCP:
		line, err = probeTCP(from.ns, to, timeout)
	case kubemodel.Protocol_UDP:
		line, err = probeUDP(from.ns, to, timeout)
	default:
		return false, fmt.Errorf("protocol %s: no probe", proto)
	}
	if errors.Is(err, errNoAnswer) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if want := who + " " + from.ip.String(); line != want {
		return false, fmt.Errorf("%s %s -> %s: answer %q, want %q", proto, from.id, to, line, want)
	}
	return true, nil
}

// matrix probes every pair of distinct pods with every probe of want,
// all at once, and returns the reachability. A pod's connection to its own
// address never reaches VPP (its kernel answers it): those cells are
// want's. A probe that want allows and that got no answer is tried twice
// more, with a longer timeout (a lost packet is not a verdict); it is
// logged when a retry gets through.
func (l *lab) matrix(t *testing.T, want *policytest.Matrix) *policytest.Matrix {
	t.Helper()
	type cell struct {
		from, to kubemodel.PodID
		pr       policytest.Probe
	}
	var mu sync.Mutex
	got := map[cell]bool{}
	var errs []error
	run := func(cells []cell, timeout time.Duration) {
		var wg sync.WaitGroup
		for _, c := range cells {
			wg.Go(func() {
				ok, err := l.verdict(l.pods[c.from], netip.AddrPortFrom(l.pods[c.to].ip, uint16(c.pr.Port)), c.pr.Protocol, c.to.String(), timeout)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				}
				got[c] = ok
			})
		}
		wg.Wait()
	}
	var all []cell
	for _, pr := range want.Probes() {
		for _, from := range want.Pods() {
			for _, to := range want.Pods() {
				if from != to {
					all = append(all, cell{from, to, pr})
				}
			}
		}
	}
	run(all, probeTimeout)
	for attempt := range 2 {
		var again []cell
		for _, c := range all {
			if w, _ := want.Allowed(c.from, c.to, c.pr); w && !got[c] {
				again = append(again, c)
			}
		}
		if len(again) == 0 {
			break
		}
		run(again, retryTimeout)
		for _, c := range again {
			if got[c] {
				t.Logf("retry %d: %s %s -> %s got through", attempt+1, c.pr, c.from, c.to)
			}
		}
	}
	require.NoError(t, errors.Join(errs...))
	return policytest.NewMatrix(want.Pods(), want.Probes(), func(from, to kubemodel.PodID, pr policytest.Probe) bool {
		if from == to {
			ok, _ := want.Allowed(from, to, pr)
			return ok
		}
		return got[cell{from, to, pr}]
	})
}

// addr returns pod id's address and port.
func (l *lab) addr(id kubemodel.PodID, port int) netip.AddrPort {
	return netip.AddrPortFrom(l.pods[id].ip, uint16(port))
}

// cli runs a VPP CLI command and returns its output.
func (l *lab) cli(args ...string) string { return l.vpp.CLI(args...) }

// vppState logs what VPP has of ACLs and sessions (for a failing test).
func (l *lab) vppState(t *testing.T) {
	t.Helper()
	for _, cmd := range [][]string{{"show", "acl-plugin", "acl"}, {"show", "acl-plugin", "interface"}, {"show", "acl-plugin", "sessions"}} {
		t.Logf("VPP %s:\n%s", strings.Join(cmd, " "), l.cli(cmd...))
	}
}

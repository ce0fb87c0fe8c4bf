package aclpolicy_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/policy/policytest"
	"github.com/vswitchkit/vswitchkit/render/aclpolicy"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// The scenarios of TestPacketsRealVPP beyond the truth tables. Each one
// starts from the model without policies (and without services) and
// leaves the lab that way.

var (
	xa, xb, xd     = pod("x", "a"), pod("x", "b"), pod("x", "d")
	ya, yb, yc     = pod("y", "a"), pod("y", "b"), pod("y", "c")
	za, zb         = pod("z", "a"), pod("z", "b")
	tcp, udp       = kubemodel.Protocol_TCP, kubemodel.Protocol_UDP
	ingress        = kubemodel.PolicyType_INGRESS
	egress         = kubemodel.PolicyType_EGRESS
	webVIP, extVIP = netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("10.96.0.20")
)

func pod(ns, name string) kubemodel.PodID { return kubemodel.PodID{Namespace: ns, Name: name} }

// sel is a selector with matchLabels k1=v1, k2=v2, ….
func sel(kv ...string) *kubemodel.LabelSelector {
	s := &kubemodel.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

// netpol is policy ns/name for the pods of selector pods, of the given
// types, without rules (it denies the directions of its types).
func netpol(ns, name string, pods *kubemodel.LabelSelector, types ...kubemodel.PolicyType) *kubemodel.NetworkPolicy {
	return &kubemodel.NetworkPolicy{Namespace: ns, Name: name, PodSelector: pods, PolicyTypes: types}
}

func withIngress(np *kubemodel.NetworkPolicy, rules ...*kubemodel.NetworkPolicyIngressRule) *kubemodel.NetworkPolicy {
	np.Ingress = append(np.Ingress, rules...)
	return np
}

func withEgress(np *kubemodel.NetworkPolicy, rules ...*kubemodel.NetworkPolicyEgressRule) *kubemodel.NetworkPolicy {
	np.Egress = append(np.Egress, rules...)
	return np
}

func from(ports []*kubemodel.NetworkPolicyPort, peers ...*kubemodel.NetworkPolicyPeer) *kubemodel.NetworkPolicyIngressRule {
	return &kubemodel.NetworkPolicyIngressRule{From: peers, Ports: ports}
}

func to(ports []*kubemodel.NetworkPolicyPort, peers ...*kubemodel.NetworkPolicyPeer) *kubemodel.NetworkPolicyEgressRule {
	return &kubemodel.NetworkPolicyEgressRule{To: peers, Ports: ports}
}

// podsIn is a peer: the pods of pods in the namespaces of nss (nil: the
// policy's namespace).
func podsIn(pods, nss *kubemodel.LabelSelector) *kubemodel.NetworkPolicyPeer {
	return &kubemodel.NetworkPolicyPeer{PodSelector: pods, NamespaceSelector: nss}
}

func ipBlock(cidr string) *kubemodel.NetworkPolicyPeer {
	return &kubemodel.NetworkPolicyPeer{IpBlock: &kubemodel.IPBlock{Cidr: cidr}}
}

// svcPort is one port of a service, on the same port of its backends,
// with a node port or none.
type svcPort struct {
	proto    kubemodel.Protocol
	port     int32
	nodePort int32
}

// service is a service of the lab: a cluster IP in front of backends
// (pods of the lab, or other addresses).
type service struct {
	ns, name string
	vip      netip.Addr
	backends []netip.Addr
	ports    []svcPort
	local    bool // externalTrafficPolicy Local
}

// setService puts the service and its endpoints.
func (l *lab) setService(t *testing.T, s service) {
	t.Helper()
	svc := &kubemodel.Service{Namespace: s.ns, Name: s.name, ClusterIps: []string{s.vip.String()}}
	if s.local {
		svc.ExternalTrafficPolicy = kubemodel.Service_LOCAL
	}
	sub := &kubemodel.EndpointSubset{}
	for _, p := range s.ports {
		pn := fmt.Sprintf("%s-%d", strings.ToLower(p.proto.String()), p.port)
		svc.Ports = append(svc.Ports, &kubemodel.ServicePort{Name: pn, Protocol: p.proto, Port: p.port, TargetPortNumber: p.port, NodePort: p.nodePort})
		if p.nodePort != 0 {
			svc.Type = kubemodel.Service_NODE_PORT
		}
		sub.Ports = append(sub.Ports, &kubemodel.EndpointPort{Name: pn, Protocol: p.proto, Port: p.port})
	}
	for _, b := range s.backends {
		ea := &kubemodel.EndpointAddress{Ip: b.String()}
		for id, lp := range l.pods {
			if lp.ip == b {
				ea.NodeName, ea.TargetRef = nodeName, &kubemodel.ObjectReference{Kind: "Pod", Namespace: id.Namespace, Name: id.Name}
			}
		}
		sub.Addresses = append(sub.Addresses, ea)
	}
	l.put(t, kubemodel.ServiceResource, kubemodel.ServiceKey(s.ns, s.name), svc)
	l.put(t, kubemodel.EndpointsResource, kubemodel.EndpointsKey(s.ns, s.name), &kubemodel.Endpoints{Namespace: s.ns, Name: s.name,
		Subsets: []*kubemodel.EndpointSubset{sub}})
}

// deleteService deletes a service and its endpoints.
func (l *lab) deleteService(t *testing.T, ns, name string) {
	t.Helper()
	l.put(t, kubemodel.EndpointsResource, kubemodel.EndpointsKey(ns, name), nil)
	l.put(t, kubemodel.ServiceResource, kubemodel.ServiceKey(ns, name), nil)
}

// withPolicies applies the model without policies plus nps and returns
// the cluster (for the evaluator).
func (l *lab) withPolicies(t *testing.T, nps ...*kubemodel.NetworkPolicy) *policytest.Cluster {
	t.Helper()
	c := l.base(t)
	for _, np := range nps {
		c.PutPolicy(np)
	}
	l.apply(t, aclpolicy.KubeState(c))
	return c
}

// allowed is the evaluator's verdict on a new connection between two pods
// of the lab.
func (l *lab) allowed(c *policytest.Cluster, from, to kubemodel.PodID, proto kubemodel.Protocol, port int) bool {
	return c.Allowed(policytest.PodEndpoint(from, l.pods[from].ip), policytest.PodEndpoint(to, l.pods[to].ip), proto, port)
}

// reach probes from pod from to dst (answering as who) and fails the
// test on errors other than no answer.
func (l *lab) reach(t *testing.T, from kubemodel.PodID, dst netip.AddrPort, proto kubemodel.Protocol, who string) bool {
	t.Helper()
	ok, err := l.verdict(l.pods[from], dst, proto, who, probeTimeout)
	require.NoError(t, err)
	return ok
}

// probe is a connection a test tries: from a pod to an address, with
// the answer naming who (and the client's own address).
type probe struct {
	from  kubemodel.PodID
	dst   netip.AddrPort
	proto kubemodel.Protocol
	who   string
}

func (p probe) String() string { return fmt.Sprintf("%s %s -> %s (%s)", p.proto, p.from, p.dst, p.who) }

// reachAll tries the probes at once and returns which ones got through.
func (l *lab) reachAll(t *testing.T, probes []probe) []bool {
	t.Helper()
	got := make([]bool, len(probes))
	errs := make([]error, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Go(func() { got[i], errs[i] = l.verdict(l.pods[p.from], p.dst, p.proto, p.who, probeTimeout) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	return got
}

// swIfIndex returns VPP's index of the interface named name.
func (l *lab) swIfIndex(t *testing.T, name string) int {
	t.Helper()
	for _, line := range strings.Split(l.cli("show", "interface", name), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == name {
			i, err := strconv.Atoi(f[1])
			require.NoError(t, err)
			return i
		}
	}
	t.Fatalf("VPP has no interface %s", name)
	return 0
}

// aclSessions returns the number of sessions of VPP's ACL plugin on the
// interface of index sw (from show acl-plugin sessions).
func (l *lab) aclSessions(t *testing.T, sw int) int {
	t.Helper()
	re := regexp.MustCompile(`sw_if_index ` + strconv.Itoa(sw) + `: add \d+ - del \d+ = (\d+)`)
	n := 0
	for _, m := range re.FindAllStringSubmatch(l.cli("show", "acl-plugin", "sessions"), -1) {
		k, _ := strconv.Atoi(m[1])
		n += k
	}
	return n
}

// testStatefulReplies: connections allowed one way get every reply
// although the reverse direction is denied. x/a is ingress-isolated
// (nothing may connect to it): its own connections get their answers
// through its output ACL, which denies everything new — by the session its
// input ACL created (permit+reflect). z/b is egress-isolated: the
// connections to it get its answers through its input ACL, which denies
// everything new — by the session its output ACL created. This is the
// first assumption of the renderer: a permit+reflect session of an
// interface's input ACL lets the replies through its output ACL, and the
// other way round — for as long as the interface keeps its ACL list, which
// the renderer never changes while the pod has ACLs (see
// testUnrelatedChange).
func testStatefulReplies(t *testing.T, l *lab) {
	c := l.withPolicies(t, netpol("x", "deny-ingress", sel(), ingress), netpol("z", "deny-egress-b", sel("pod", "b"), egress))
	var probes []probe
	var want []bool
	for _, proto := range []kubemodel.Protocol{tcp, udp} {
		for _, tc := range []struct {
			from, to kubemodel.PodID
			want     bool
		}{{ya, xa, false}, {xa, ya, true}, {zb, ya, false}, {ya, zb, true}} {
			require.Equal(t, tc.want, l.allowed(c, tc.from, tc.to, proto, 80), "the evaluator")
			probes = append(probes, probe{tc.from, l.addr(tc.to, 80), proto, tc.to.String()})
			want = append(want, tc.want)
		}
	}
	got := l.reachAll(t, probes)
	for i, p := range probes {
		assert.Equal(t, want[i], got[i], "%s", p)
	}
	// The node itself (here: the host's end of the host interconnect)
	// reaches the isolated pods (kubelet probes).
	line, err := probeTCP(l.host, l.addr(xa, 80), probeTimeout)
	require.NoError(t, err, "the host -> x/a")
	assert.Equal(t, "x/a "+l.agent.IPAM.HostInterconnectAddrInLinux().String(), line)
	// Long conversations: every packet of both directions passes.
	for _, tc := range []struct {
		from, to kubemodel.PodID
		isolated kubemodel.PodID // whose interface holds the session
	}{{xa, ya, xa}, {ya, zb, zb}} {
		conn, greeting, err := dialTCP(l.pods[tc.from].ns, l.addr(tc.to, 80), probeTimeout)
		require.NoError(t, err, "%s -> %s", tc.from, tc.to)
		assert.Equal(t, tc.to.String()+" "+l.pods[tc.from].ip.String(), greeting)
		r := bufio.NewReader(conn)
		for i := range 20 {
			require.NoError(t, echo(conn, r, fmt.Sprintf("line %d", i), 2*time.Second), "%s -> %s: line %d", tc.from, tc.to, i)
		}
		sw := l.swIfIndex(t, vppIf(l.pods[tc.isolated].hostIf))
		assert.Positive(t, l.aclSessions(t, sw), "sessions on %s's interface", tc.isolated)
		_ = conn.Close()
	}
}

// testServiceBackend: a ClusterIP whose backend (x/a) is ingress-isolated.
// The policy is checked after the service translation, where VPP sees the
// backend: a permitted client (y/b, the pods of z) gets through the
// service, a denied one (y/c) does not. An egress-isolated client is
// checked after translation too: z/a may reach x/a, so also through the
// service; z/b may reach only x/b, so not through the service to x/a.
// Both TCP and UDP. The backend sees the client's own address. A pod that
// reaches itself through a service arrives from the NAT loopback, which
// the renderer always allows (the evaluator, which knows no services,
// would deny x/a -> x/a: loopback is the implementation's to define).
func testServiceBackend(t *testing.T, l *lab) {
	c := l.withPolicies(t,
		withIngress(netpol("x", "a-from-y-b-and-z", sel("pod", "a"), ingress),
			from(nil, podsIn(sel("pod", "b"), sel("ns", "y"))), from(nil, podsIn(nil, sel("ns", "z")))),
		withEgress(netpol("z", "a-to-x-a", sel("pod", "a"), egress), to(nil, podsIn(sel("pod", "a"), sel("ns", "x")))),
		withEgress(netpol("z", "b-to-x-b", sel("pod", "b"), egress), to(nil, podsIn(sel("pod", "b"), sel("ns", "x")))),
	)
	l.setService(t, service{ns: "x", name: "web", vip: webVIP, backends: []netip.Addr{l.pods[xa].ip},
		ports: []svcPort{{proto: tcp, port: 80}, {proto: udp, port: 80}}})
	defer l.deleteService(t, "x", "web")
	vip := netip.AddrPortFrom(webVIP, 80)
	var probes []probe
	var want []bool
	for _, proto := range []kubemodel.Protocol{tcp, udp} {
		for _, tc := range []struct {
			from kubemodel.PodID
			want bool
		}{{yb, true}, {yc, false}, {za, true}, {zb, false}} {
			require.Equal(t, tc.want, l.allowed(c, tc.from, xa, proto, 80), "the evaluator, %s -> x/a", tc.from)
			probes = append(probes, probe{tc.from, vip, proto, "x/a"}, probe{tc.from, l.addr(xa, 80), proto, "x/a"})
			want = append(want, tc.want, tc.want)
		}
		probes = append(probes, probe{zb, l.addr(xb, 80), proto, "x/b"}) // its egress rule
		want = append(want, true)
	}
	got := l.reachAll(t, probes)
	for i, p := range probes {
		assert.Equal(t, want[i], got[i], "%s", p)
	}
	line, err := probeTCP(l.pods[xa].ns, vip, probeTimeout)
	require.NoError(t, err, "x/a -> the service -> x/a")
	assert.Equal(t, "x/a "+l.agent.IPAM.NatLoopbackAddr().String(), line)
}

// testExternalBackend: a ClusterIP whose backend is outside the cluster
// (the namespace behind the uplink). The connection leaves through the
// uplink after translation: the uplink's output ACL (EgressACL) checks the
// client's egress there. VPP runs the uplink's NAT output feature before
// that ACL; it does not change the source of a service connection (the
// out2in session translated only its destination), so the ACL sees the
// pod, and the backend sees the pod too. A direct connection to the
// external address is source-NATed to the node's address before that ACL
// (the pod's input ACL has checked it already).
func testExternalBackend(t *testing.T, l *lab) {
	c := l.withPolicies(t,
		withEgress(netpol("z", "a-to-ext", sel("pod", "a"), egress), to(nil, ipBlock(extIP+"/32"))),
		withEgress(netpol("z", "b-to-x-b", sel("pod", "b"), egress), to(nil, podsIn(sel("pod", "b"), sel("ns", "x")))),
	)
	ext := netip.MustParseAddr(extIP)
	l.setService(t, service{ns: "z", name: "ext", vip: extVIP, backends: []netip.Addr{ext}, ports: []svcPort{{proto: tcp, port: 9000}}})
	defer l.deleteService(t, "z", "ext")
	for _, tc := range []struct {
		from kubemodel.PodID
		want bool
	}{{ya, true}, {za, true}, {zb, false}} {
		require.Equal(t, tc.want, c.Allowed(policytest.PodEndpoint(tc.from, l.pods[tc.from].ip), policytest.ExternalEndpoint(ext), tcp, 9000),
			"the evaluator, %s -> external", tc.from)
		line, err := probeTCP(l.pods[tc.from].ns, netip.AddrPortFrom(extVIP, 9000), probeTimeout)
		if tc.want {
			require.NoError(t, err, "%s -> the service -> external", tc.from)
			assert.Equal(t, "ext "+l.pods[tc.from].ip.String(), line, "through the service, the pod's address")
		} else {
			require.ErrorIs(t, err, errNoAnswer, "%s -> the service -> external", tc.from)
		}
		line, err = probeTCP(l.pods[tc.from].ns, netip.AddrPortFrom(ext, 9000), probeTimeout)
		if tc.want {
			require.NoError(t, err, "%s -> external", tc.from)
			assert.Equal(t, "ext "+l.nodeIP.String(), line, "directly, the node's address")
		} else {
			require.ErrorIs(t, err, errNoAnswer, "%s -> external", tc.from)
		}
	}
}

// testNodePort: a NodePort in front of an ingress-isolated pod (x/a, open
// to namespace y only), reached from outside the cluster (the external
// namespace, through the uplink). With the Cluster external traffic
// policy NAT44 twice-NATs the connection to the NAT loopback address, so
// the backend sees it coming from the node, and the renderer allows
// traffic from the node (as Kubernetes allows traffic from a pod's node,
// and as kube-proxy's source NAT makes NodePort traffic node traffic): it
// gets through although the evaluator denies an external client. With the
// Local policy NAT44 keeps the client's address, and the backend's ingress
// rules decide: denied, then allowed once a rule allows the client's
// address.
func testNodePort(t *testing.T, l *lab) {
	ext := netip.MustParseAddr(extIP)
	deny := withIngress(netpol("x", "a-from-y", sel("pod", "a"), ingress), from(nil, podsIn(nil, sel("ns", "y"))))
	c := l.withPolicies(t, deny)
	require.False(t, c.Allowed(policytest.ExternalEndpoint(ext), policytest.PodEndpoint(xa, l.pods[xa].ip), tcp, 80), "the evaluator")
	web := service{ns: "x", name: "web", vip: webVIP, backends: []netip.Addr{l.pods[xa].ip}, ports: []svcPort{{proto: tcp, port: 80, nodePort: 30080}}}
	l.setService(t, web)
	defer l.deleteService(t, "x", "web")
	nodePort := netip.AddrPortFrom(l.nodeIP, 30080)

	line, err := probeTCP(l.ext, nodePort, probeTimeout)
	require.NoError(t, err, "Cluster policy: external -> node port -> x/a")
	assert.Equal(t, "x/a "+l.agent.IPAM.NatLoopbackAddr().String(), line, "from the NAT loopback")

	web.local = true
	l.setService(t, web)
	_, err = probeTCP(l.ext, nodePort, probeTimeout)
	assert.ErrorIs(t, err, errNoAnswer, "Local policy: the client's own address, which x/a does not allow")
	c = l.withPolicies(t, withIngress(deny, from(nil, ipBlock(extIP+"/32"))))
	require.True(t, c.Allowed(policytest.ExternalEndpoint(ext), policytest.PodEndpoint(xa, l.pods[xa].ip), tcp, 80), "the evaluator")
	line, err = probeTCP(l.ext, nodePort, probeTimeout)
	require.NoError(t, err, "Local policy: external -> node port -> x/a, allowed by an ipBlock")
	assert.Equal(t, "x/a "+extIP, line)
}

// traceStep is one node a traced packet went through and what VPP printed
// there.
type traceStep struct{ node, text string }

var traceNode = regexp.MustCompile(`^\s*\d\d:\d\d:\d\d:\d+: (\S+)`)

// tracePackets parses the output of "show trace" into packets.
func tracePackets(out string) [][]traceStep {
	var pkts [][]traceStep
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.HasPrefix(strings.TrimSpace(line), "Packet ") {
			pkts = append(pkts, nil)
			continue
		}
		if len(pkts) == 0 {
			continue
		}
		cur := &pkts[len(pkts)-1]
		if m := traceNode.FindStringSubmatch(line); m != nil {
			*cur = append(*cur, traceStep{node: m[1]})
		} else if len(*cur) > 0 {
			(*cur)[len(*cur)-1].text += line + "\n"
		}
	}
	return pkts
}

// tracedSYN returns the path of the first traced TCP SYN from src to dst.
func tracedSYN(pkts [][]traceStep, src, dst netip.Addr) []traceStep {
	for _, p := range pkts {
		for _, s := range p {
			if s.node == "ip4-input" && strings.Contains(s.text, "TCP: "+src.String()+" -> "+dst.String()+"\n") &&
				strings.Contains(s.text, " SYN,") {
				return p
			}
		}
	}
	return nil
}

// stepOf returns the index of the first step at node (prefix match) and
// the step; -1 if the packet did not go through it.
func stepOf(path []traceStep, node string) (int, traceStep) {
	for i, s := range path {
		if strings.HasPrefix(s.node, node) {
			return i, s
		}
	}
	return -1, traceStep{}
}

// arcFeatures returns the features of arc in the output of "show interface
// features".
func arcFeatures(out, arc string) []string {
	var feats []string
	in := false
	for _, line := range strings.Split(out, "\n") {
		s := strings.TrimSpace(line)
		switch {
		case s == arc+":":
			in = true
		case in && s == "":
			return feats
		case in:
			feats = append(feats, s)
		}
	}
	return feats
}

// testFeatureOrder verifies on the real VPP where each check sits relative
// to NAT44, statically (the feature arcs of the interfaces) and with a
// packet trace:
//
//   - on a pod's interface, the input ACL runs before NAT44 on the
//     ip4-unicast arc (nat-pre-out2in on a client, which is a NAT44
//     outside interface; nat44-ed-classify on a backend, inside and
//     outside): it sees a service connection with the service address;
//     the backend's output ACL sees it translated, with the backend's
//     address (ip4-output, after the lookup);
//   - on the uplink, the NAT output feature (nat-pre-in2out-output) runs
//     before the output ACL: the ACL sees a service connection to an
//     external backend with the pod's source (NAT44 does not translate it
//     there) and a direct connection to an external address with the
//     node's.
func testFeatureOrder(t *testing.T, l *lab) {
	l.withPolicies(t,
		withIngress(netpol("x", "a-from-z", sel("pod", "a"), ingress), from(nil, podsIn(nil, sel("ns", "z")))),
		withEgress(netpol("z", "b-to-x-a-and-ext", sel("pod", "b"), egress),
			to(nil, podsIn(sel("pod", "a"), sel("ns", "x"))), to(nil, ipBlock(extIP+"/32"))),
	)
	ext := netip.MustParseAddr(extIP)
	l.setService(t, service{ns: "x", name: "web", vip: webVIP, backends: []netip.Addr{l.pods[xa].ip}, ports: []svcPort{{proto: tcp, port: 80}}})
	defer l.deleteService(t, "x", "web")
	l.setService(t, service{ns: "z", name: "ext", vip: extVIP, backends: []netip.Addr{ext}, ports: []svcPort{{proto: tcp, port: 9000}}})
	defer l.deleteService(t, "z", "ext")

	client := arcFeatures(l.cli("show", "interface", "features", vppIf(l.pods[zb].hostIf)), "ip4-unicast")
	backend := arcFeatures(l.cli("show", "interface", "features", vppIf(l.pods[xa].hostIf)), "ip4-unicast")
	uplink := arcFeatures(l.cli("show", "interface", "features", vppIf(l.uplinkIf)), "ip4-output")
	t.Logf("ip4-unicast of a client pod %v, of a backend pod %v; ip4-output of the uplink %v", client, backend, uplink)
	before := func(feats []string, first, second string) {
		t.Helper()
		i, j := slices.Index(feats, first), slices.Index(feats, second)
		assert.True(t, i >= 0 && j > i, "%s before %s in %v", first, second, feats)
	}
	before(client, "acl-plugin-in-ip4-fa", "nat-pre-out2in")
	before(backend, "acl-plugin-in-ip4-fa", "nat44-ed-classify")
	before(uplink, "nat-pre-in2out-output", "acl-plugin-out-ip4-fa")

	l.cli("clear", "trace")
	l.cli("trace", "add", "af-packet-input", "200")
	vip := netip.AddrPortFrom(webVIP, 80)
	assert.True(t, l.reach(t, zb, vip, tcp, "x/a"), "z/b -> the service -> x/a")
	line, err := probeTCP(l.pods[zb].ns, netip.AddrPortFrom(extVIP, 9000), probeTimeout)
	require.NoError(t, err, "z/b -> the service -> external")
	assert.Equal(t, "ext "+l.pods[zb].ip.String(), line)
	line, err = probeTCP(l.pods[zb].ns, netip.AddrPortFrom(ext, 9000), probeTimeout)
	require.NoError(t, err, "z/b -> external")
	assert.Equal(t, "ext "+l.nodeIP.String(), line)
	trace := l.cli("show", "trace")
	l.cli("clear", "trace")
	pkts := tracePackets(trace)
	zbIP, xaIP := l.pods[zb].ip.String(), l.pods[xa].ip.String()

	check := func(what string, path []traceStep, order []string, aclOut string) {
		t.Helper()
		if !assert.NotNil(t, path, "%s: no traced SYN", what) {
			t.Logf("trace:\n%s", trace)
			return
		}
		var nodes []string
		for _, s := range path {
			nodes = append(nodes, s.node)
		}
		t.Logf("%s: %s", what, strings.Join(nodes, " "))
		last := -1
		for _, n := range order {
			i, _ := stepOf(path[last+1:], n)
			if !assert.GreaterOrEqual(t, i, 0, "%s: %s after %v", what, n, order) {
				return
			}
			last += i + 1
		}
		_, out := stepOf(path, "acl-plugin-out-ip4-fa")
		assert.Contains(t, out.text, "l3 ip4 "+aclOut+" ", "%s: what the output ACL sees", what)
	}
	svc := tracedSYN(pkts, l.pods[zb].ip, webVIP)
	check("z/b -> the service -> x/a", svc, []string{"acl-plugin-in-ip4-fa", "nat44-ed-out2in", "ip4-lookup", "acl-plugin-out-ip4-fa"},
		zbIP+" -> "+xaIP)
	_, in := stepOf(svc, "acl-plugin-in-ip4-fa")
	assert.Contains(t, in.text, "l3 ip4 "+zbIP+" -> "+webVIP.String()+" ", "the input ACL sees the service address")
	check("z/b -> the service -> external", tracedSYN(pkts, l.pods[zb].ip, extVIP),
		[]string{"acl-plugin-in-ip4-fa", "nat44-ed-out2in", "ip4-lookup", "nat44-ed-in2out-output", "acl-plugin-out-ip4-fa"},
		zbIP+" -> "+extIP)
	check("z/b -> external", tracedSYN(pkts, l.pods[zb].ip, ext),
		[]string{"acl-plugin-in-ip4-fa", "ip4-lookup", "nat44-ed-in2out-output", "acl-plugin-out-ip4-fa"},
		l.nodeIP.String()+" -> "+extIP)
}

// heldConn is a TCP connection whose two ends the test holds, so that
// either side can speak.
type heldConn struct {
	client, server net.Conn
	cr, sr         *bufio.Reader
}

// hold opens a TCP connection from namespace from to a listener of its
// own at dst in namespace to. Both ends acknowledge at once (no delayed
// acknowledgment in flight when the test changes a policy).
func (l *lab) hold(t *testing.T, from, to *vppdrivertest.Netns, dst netip.AddrPort) *heldConn {
	t.Helper()
	var ln net.Listener
	require.NoError(t, to.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", dst.Port()))
		return err
	}))
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	h := &heldConn{}
	require.NoError(t, from.Do(func() error {
		d := net.Dialer{Timeout: probeTimeout, LocalAddr: &net.TCPAddr{Port: nextSrcPort()}}
		var err error
		h.client, err = d.Dial("tcp4", dst.String())
		return err
	}))
	t.Cleanup(func() { _ = h.client.Close() })
	h.server = <-accepted
	require.NotNil(t, h.server)
	t.Cleanup(func() { _ = h.server.Close() })
	quickAck(t, h.client)
	quickAck(t, h.server)
	h.cr, h.sr = bufio.NewReader(h.client), bufio.NewReader(h.server)
	return h
}

// says sends line from one end (the client, or the server) and reads it at
// the other within two seconds: errNoAnswer if it does not arrive.
func (h *heldConn) says(client bool, line string) error {
	w, r, rc := h.server, h.cr, h.client
	if client {
		w, r, rc = h.client, h.sr, h.server
	}
	if _, err := w.Write([]byte(line + "\n")); err != nil {
		return err
	}
	return h.receive(r, rc, line, 2*time.Second)
}

// receive reads line from r (of conn) within timeout.
func (h *heldConn) receive(r *bufio.Reader, conn net.Conn, line string, timeout time.Duration) error {
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	defer func() { _ = conn.SetReadDeadline(time.Time{}) }()
	got, err := r.ReadString('\n')
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return errNoAnswer
		}
		return err
	}
	if strings.TrimSpace(got) != line {
		return fmt.Errorf("sent %q, got %q", line, got)
	}
	return nil
}

// sessions returns the number of entries of VPP's ACL plugin sessions for
// the connection (either direction, any interface).
func (l *lab) sessions(t *testing.T, h *heldConn) int {
	t.Helper()
	a, err := netip.ParseAddrPort(h.client.LocalAddr().String())
	require.NoError(t, err)
	b, err := netip.ParseAddrPort(h.client.RemoteAddr().String())
	require.NoError(t, err)
	tuple := func(x, y netip.AddrPort) string {
		return fmt.Sprintf(`l3 %s -> %s l4 .* port %d -> %d \|`, regexp.QuoteMeta(x.Addr().String()), regexp.QuoteMeta(y.Addr().String()), x.Port(), y.Port())
	}
	re := regexp.MustCompile(tuple(a, b) + "|" + tuple(b, a))
	return len(re.FindAllString(l.cli("show", "acl-plugin", "sessions", "verbose", "1"), -1))
}

// testOpenConnection: a policy that denies an open TCP connection (y/a to
// x/a) arrives. New connections are refused at once. The open one
// depends on whether x/a had ACLs before (VPP 26.06 deletes an
// interface's sessions when its ACL list changes, and keeps them when an
// ACL is replaced in place, which is how the renderer changes a pod's
// rules):
//
//   - x/a had ACLs (isolated, with a rule allowing everything): their
//     permit+reflect rule made a session for the connection, the new rules
//     replace x/a's ACLs in place, the session stays (VPP does not
//     reclassify sessions by default): the connection goes on, as
//     established connections do with conntrack-based implementations;
//   - x/a had no ACL (no policy selected it, none restricted it): there is
//     no session, and the connection's next packet is judged as a new one.
//     From the client, which the policy denies: dropped, and so are its
//     retransmissions (the connection stalls while only the client
//     speaks). From x/a itself: its input ACL (x/a is not egress-isolated:
//     permit+reflect everything) lets it out and makes a session, whatever
//     its TCP flags; from then on the connection goes on, the client's
//     retransmission included.
func testOpenConnection(t *testing.T, l *lab) {
	deny := netpol("x", "a-ingress", sel("pod", "a"), ingress)
	open := func(t *testing.T, before ...*kubemodel.NetworkPolicy) *heldConn {
		t.Helper()
		l.withPolicies(t, before...)
		h := l.hold(t, l.pods[ya].ns, l.pods[xa].ns, l.addr(xa, 82))
		require.NoError(t, h.says(true, "client before"))
		require.NoError(t, h.says(false, "server before"))
		return h
	}
	policy := func(t *testing.T) {
		t.Helper()
		start := time.Now()
		l.withPolicies(t, deny)
		t.Logf("the deny policy in VPP %v after the event", time.Since(start).Round(time.Millisecond))
		assert.False(t, l.reach(t, ya, l.addr(xa, 80), tcp, "x/a"), "a new connection is refused")
	}

	t.Run("x/a had a session", func(t *testing.T) {
		h := open(t, withIngress(netpol("x", "a-ingress", sel("pod", "a"), ingress), from(nil)))
		require.Positive(t, l.sessions(t, h), "x/a's output ACL made a session")
		policy(t)
		assert.Positive(t, l.sessions(t, h), "the session stays")
		for i := range 3 {
			require.NoError(t, h.says(true, fmt.Sprintf("client after %d", i)), "the connection goes on")
			require.NoError(t, h.says(false, fmt.Sprintf("server after %d", i)), "the connection goes on")
		}
		assert.Contains(t, l.cli("show", "acl-plugin", "sessions"), "Reclassify sessions: 0")
	})

	t.Run("x/a had no ACL", func(t *testing.T) {
		h := open(t)
		require.Zero(t, l.sessions(t, h), "no ACL, no session")
		policy(t)
		assert.ErrorIs(t, h.says(true, "client after"), errNoAnswer, "the client's data is dropped")
		assert.Zero(t, l.sessions(t, h), "still no session")
		require.NoError(t, h.says(false, "server after"), "x/a's data passes (its input ACL reflects it)")
		assert.Positive(t, l.sessions(t, h), "a session for the connection")
		require.NoError(t, h.receive(h.sr, h.server, "client after", 10*time.Second), "the client's retransmission, by the session")
		require.NoError(t, h.says(true, "client again"), "the connection goes on")
	})
	l.withPolicies(t)
}

// testUnrelatedChange: a change that does not concern a connection keeps
// its sessions. x/a is ingress-isolated (open to namespace y) and opens a
// connection to z/a, which may not connect to x/a: z/a's packets get
// through by x/a's session. (z/c is egress-isolated, so that the exit
// interfaces have ACLs.) Then y/c becomes egress-isolated: nothing about
// x/a or z/a changes, but every pod's output ACL gains a deny of y/c (its
// egress is checked after translation) and the uplink's output ACL
// (EgressACL) its rules. The renderer replaces those ACLs in place and
// changes no interface's ACL list: VPP keeps the sessions, z/a's next
// packet to x/a — a reply of an allowed connection — gets through, and so
// does the connection from outside through the uplink. (Were the lists
// switched, VPP would delete every pod's sessions, and z/a's answer would
// be dropped until x/a sent again: a client waiting for its server would
// hang.)
func testUnrelatedChange(t *testing.T, l *lab) {
	isolated := withIngress(netpol("x", "a-from-y", sel("pod", "a"), ingress), from(nil, podsIn(nil, sel("ns", "y"))))
	zc := netpol("z", "c-no-egress", sel("pod", "c"), egress)
	c := l.withPolicies(t, isolated, zc)
	require.True(t, l.allowed(c, xa, za, tcp, 82))
	require.False(t, l.allowed(c, za, xa, tcp, 82))
	h := l.hold(t, l.pods[xa].ns, l.pods[za].ns, l.addr(za, 82))
	require.NoError(t, h.says(true, "client before"))
	require.NoError(t, h.says(false, "server before"))
	require.Positive(t, l.sessions(t, h))
	// A connection from outside to y/b: its session on the uplink (the
	// uplink's input ACL reflects).
	ext := l.hold(t, l.ext, l.pods[yb].ns, l.addr(yb, 82))
	require.NoError(t, ext.says(true, "client before"))
	require.NoError(t, ext.says(false, "server before"))
	upSw := l.swIfIndex(t, vppIf(l.uplinkIf))
	require.Positive(t, l.aclSessions(t, upSw), "a session on the uplink")

	l.requests.Take()
	c = l.withPolicies(t, isolated, zc, netpol("y", "c-no-egress", sel("pod", "c"), egress))
	writes := vppdrivertest.Writes(l.requests.Take())
	t.Logf("y/c egress-isolated: VPP writes %v", writes)
	assert.NotContains(t, writes, "acl_interface_set_acl_list", "no list changes")
	require.True(t, l.allowed(c, xa, za, tcp, 82), "the connection is still allowed")
	assert.Positive(t, l.sessions(t, h), "x/a's session stays")
	assert.Positive(t, l.aclSessions(t, upSw), "the uplink's session stays")
	require.NoError(t, h.says(false, "server after"), "z/a's answer gets through")
	require.NoError(t, h.says(true, "client after"))
	require.NoError(t, ext.says(false, "server after"), "y/b's answer leaves through the uplink")
	require.NoError(t, ext.says(true, "client after"))
	l.withPolicies(t)
}

// quickAck makes a TCP connection's side acknowledge data at once (no
// delayed acknowledgment).
func quickAck(t *testing.T, c net.Conn) {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	var serr error
	require.NoError(t, raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
	}))
	require.NoError(t, serr)
}

// udpProbe is one probe of a prober: when it was sent and whether its
// answer came.
type udpProbe struct {
	sent     time.Time
	answered bool
}

// prober sends UDP probes from one pod to another every interval until
// stopped, and reports them sorted by sending time.
func (l *lab) prober(from, to kubemodel.PodID, interval time.Duration) (stop func() []udpProbe) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var probes []udpProbe
	done := make(chan struct{})
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			wg.Go(func() {
				sent, line, err := probeUDPAt(l.pods[from].ns, l.addr(to, 80), 500*time.Millisecond)
				mu.Lock()
				probes = append(probes, udpProbe{sent: sent, answered: err == nil && strings.HasPrefix(line, to.String()+" ")})
				mu.Unlock()
			})
		}
	})
	return func() []udpProbe {
		close(done)
		wg.Wait()
		sort.Slice(probes, func(i, j int) bool { return probes[i].sent.Before(probes[j].sent) })
		return probes
	}
}

// switchTime returns the sending time of the first probe from which on
// every probe's answer was (answered) or was not (!answered) there.
func switchTime(probes []udpProbe, answered bool) (time.Time, bool) {
	i := len(probes)
	for i > 0 && probes[i-1].answered == answered {
		i--
	}
	if i == len(probes) {
		return time.Time{}, false
	}
	return probes[i].sent, true
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// testTimeToEnforce measures, five times, the time from a policy's event
// (pushed into the loop) until VPP has its ACLs (the driver's requests
// answered) and until probes are denied: a UDP prober from y/a to x/a
// sends every 2 ms; the switch is the first probe from which on none is
// answered. The deletion of the policy is measured the same way (until
// probes are answered again).
func testTimeToEnforce(t *testing.T, l *lab) {
	l.withPolicies(t)
	key := kubemodel.NetworkPolicyKey("x", "deny-a")
	var inVPP, denied, delInVPP, allowedAgain []time.Duration
	for range 5 {
		for _, put := range []bool{true, false} {
			stop := l.prober(ya, xa, 2*time.Millisecond)
			time.Sleep(100 * time.Millisecond)
			start := time.Now()
			var took time.Duration
			if put {
				took = l.put(t, kubemodel.NetworkPolicyResource, key, netpol("x", "deny-a", sel("pod", "a"), ingress))
			} else {
				took = l.put(t, kubemodel.NetworkPolicyResource, key, nil)
			}
			time.Sleep(300 * time.Millisecond)
			probes := stop()
			at, ok := switchTime(probes, !put)
			require.True(t, ok, "put %v: the probes switched", put)
			require.True(t, slices.ContainsFunc(probes, func(p udpProbe) bool { return p.sent.Before(start) && p.answered == put }),
				"put %v: probes before the change as before it", put)
			for _, p := range probes {
				if p.sent.After(start.Add(took)) {
					assert.Equal(t, !put, p.answered, "put %v: a probe after VPP has the change", put)
				}
			}
			if put {
				inVPP, denied = append(inVPP, took), append(denied, at.Sub(start))
			} else {
				delInVPP, allowedAgain = append(delInVPP, took), append(allowedAgain, at.Sub(start))
			}
		}
	}
	r := func(ds []time.Duration) string {
		return fmt.Sprintf("median %v, max %v", median(ds).Round(100*time.Microsecond), slices.Max(ds).Round(100*time.Microsecond))
	}
	t.Logf("a deny policy put: in VPP after %s; probes denied from %s", r(inVPP), r(denied))
	t.Logf("the policy deleted: in VPP after %s; probes answered again from %s", r(delInVPP), r(allowedAgain))
	t.Logf("processor's last computation %v, renderer's last render %v", l.agent.Policy.Stats().LastRender, l.agent.ACLs.Stats().LastRender)
}

// testNewPod: a pod that a policy selects before it exists has its policy
// with its first packet. The pod's Kubernetes record (labels, no address
// yet) and the policy are there before the CNI's AddPod; the AddPod's
// transaction, committed to VPP before the pod's side is configured,
// holds the pod's interface and its ACL list together. Right after the
// AddPod, the first connections are decided by the policy.
func testNewPod(t *testing.T, l *lab) {
	c := l.withPolicies(t, withIngress(netpol("x", "d-from-y", sel("pod", "d"), ingress),
		from([]*kubemodel.NetworkPolicyPort{{Protocol: tcp, Port: 80}}, podsIn(nil, sel("ns", "y")))))
	rec := &kubemodel.Pod{Namespace: "x", Name: "d", NodeName: nodeName, Labels: map[string]string{"pod": "d"}}
	l.put(t, kubemodel.PodResource, kubemodel.PodKey("x", "d"), rec)
	commits := len(l.commits.Commits())
	l.requests.Take()
	p := l.addPod(t, xd, len(l.pods))
	defer func() {
		l.agent.DeletePod(t, xd, "c-x-d")
		delete(l.pods, xd)
		l.put(t, kubemodel.PodResource, kubemodel.PodKey("x", "d"), nil)
	}()
	// The first connections.
	probes := []probe{{ya, l.addr(xd, 80), tcp, "x/d"}, {za, l.addr(xd, 80), tcp, "x/d"}, {ya, l.addr(xd, 81), tcp, "x/d"}}
	got := l.reachAll(t, probes)
	c.PutPod(podWithAddr(rec, p.ip))
	for i, pr := range probes {
		want := l.allowed(c, pr.from, xd, pr.proto, int(pr.dst.Port()))
		assert.Equal(t, want, got[i], "%s: the first connection", pr)
	}
	assert.Equal(t, []bool{true, false, false}, got)

	// One transaction: the interface and its ACLs.
	var addPod []string
	for _, cr := range l.commits.Commits()[commits:] {
		if _, ok := cr.Values[vppmodel.InterfaceKey(p.iface)]; ok {
			for k := range cr.Values {
				addPod = append(addPod, k)
			}
			assert.Equal(t, "Add Pod", cr.EventName)
			break
		}
	}
	slices.Sort(addPod)
	t.Logf("AddPod in %v; its transaction: %v", p.added.Round(time.Millisecond), addPod)
	require.Contains(t, addPod, vppmodel.ACLInterfaceKey(p.iface), "the ACL list in the AddPod's transaction")
	st := l.commits.State()
	list := st[vppmodel.ACLInterfaceKey(p.iface)].(*vppmodel.ACLInterface)
	for _, name := range append(slices.Clone(list.GetInput()), list.GetOutput()...) {
		assert.Contains(t, st, vppmodel.ACLKey(name))
	}
	// The requests VPP got for it, in order.
	writes := vppdrivertest.Writes(l.requests.Take())
	t.Logf("VPP writes of the AddPod: %v", writes)
	iface, acls := slices.Index(writes, "af_packet_create_v3"), slices.Index(writes, "acl_interface_set_acl_list")
	assert.True(t, iface >= 0 && acls > iface, "the ACL list set after the interface is made, in the same commit")
}

// podWithAddr returns the Kubernetes record of a pod once it has its
// address.
func podWithAddr(rec *kubemodel.Pod, ip netip.Addr) *kubemodel.Pod {
	p := &kubemodel.Pod{Namespace: rec.GetNamespace(), Name: rec.GetName(), NodeName: rec.GetNodeName(), Labels: rec.GetLabels(),
		IpAddress: ip.String(), IpAddresses: []string{ip.String()}}
	return p
}

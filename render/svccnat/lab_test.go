package svccnat_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
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
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/ipam"
	"github.com/vswitchkit/vswitchkit/nodesync/nodesynctest"
	"github.com/vswitchkit/vswitchkit/render/internal/rendertest"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// This file is the lab of the real-VPP tests: real VPPs (VPP_SH, root),
// the partial agent of each (rendertest: nodesync, IPAM of one or both
// families, nodeconn, podconn, the service processor with this renderer)
// and pods as network namespaces on af_packet interfaces, each serving
// TCP on 8080 and UDP on 5353 (both families), answering with its name and
// the client address it sees.

// ipv6Plan is the IPv6 address plan of the lab: node n has pod subnet
// fd00:1::n00/120 (IPAM's per-node default: pods of different nodes differ
// in their low 32 bits, see the package documentation), VPP-host subnet
// fd00:30::n00/120 (VPP ::n01, the host ::n02), node IP fd00:16::n and
// VXLAN IP fd00:31::n; services fd00:96::/108.
var ipv6Plan = ipam.Config{
	PodSubnetCIDR:        netip.MustParsePrefix("fd00:1::/104"),
	VPPHostSubnetCIDR:    netip.MustParsePrefix("fd00:30::/112"),
	NodeInterconnectCIDR: netip.MustParsePrefix("fd00:16::/64"),
	VXLANCIDR:            netip.MustParsePrefix("fd00:31::/64"),
	ServiceCIDR:          netip.MustParsePrefix("fd00:96::/108"),
}

// defaultIPv4 is IPAM's default (IPv4) address plan.
var defaultIPv4 = ipam.Config{}

const (
	tcpPort = 8080 // every pod's TCP server
	udpPort = 5353 // every pod's UDP server
)

// labNode is a node of the lab: a real VPP and the agent on it.
type labNode struct {
	name       string
	vpp        *vppdrivertest.RealVPP
	newAdapter func() adapter.VppAPI
	requests   *vppdrivertest.RequestRecorder
	agent      *rendertest.Agent
	opts       rendertest.Options
	// ext is the namespace behind the uplink (node 1 of a one-node lab),
	// host the one on the host interconnect; nil when the node has none.
	ext, host *vppdrivertest.Netns
}

// labPod is a pod: a namespace with eth0 on a veth whose host end VPP
// attaches to.
type labPod struct {
	id     kubemodel.PodID
	node   *labNode
	ns     *vppdrivertest.Netns
	hostIf string
	ips    []netip.Addr // sorted: IPv4 first
}

// ip returns the pod's address of one family.
func (p *labPod) ip(v6 bool) netip.Addr {
	for _, a := range p.ips {
		if a.Is6() == v6 {
			return a
		}
	}
	panic(fmt.Sprintf("pod %s has no address of that family", p.id))
}

type lab struct {
	t     *testing.T
	tag   string
	db    *nodesynctest.MemDB
	nodes []*labNode
	pods  map[string]*labPod
	srv   servers
	mu    sync.Mutex
	kube  controller.KubeStateData
}

// labOptions are the address plans of a lab.
type labOptions struct {
	ipam      ipam.Config  // the first family's
	dualStack *ipam.Config // the second family's, if any
	// external gives node 1 (of a one-node lab) an uplink to an
	// "external" namespace (and VPP default routes through it). Without
	// it the nodes' uplinks are joined by a veth pair.
	external bool
	// host gives node 1 a host interconnect to a "host" namespace.
	host  bool
	nodes int
}

func newLab(t *testing.T, o labOptions) *lab {
	t.Helper()
	vppdrivertest.NeedNetns(t)
	l := &lab{t: t, tag: strconv.Itoa(os.Getpid() % 10000), db: nodesynctest.NewMemDB(), pods: map[string]*labPod{},
		kube: controller.NewKubeStateData()}
	t.Cleanup(l.srv.stop)
	for i := 1; i <= o.nodes; i++ {
		vpp := vppdrivertest.StartRealVPP(t)
		sock := vpp.APISocket()
		n := &labNode{name: fmt.Sprintf("node-%d", i), vpp: vpp, requests: &vppdrivertest.RequestRecorder{}}
		n.newAdapter = func() adapter.VppAPI { return n.requests.Wrap(socketclient.NewVppClient(sock)) }
		n.opts = rendertest.Options{Name: n.name, DB: l.db, NewAdapter: n.newAdapter, Node: &rendertest.Node{},
			IPAM: o.ipam, DualStack: o.dualStack, Services: true, ServiceRenderer: "cnat"}
		l.nodes = append(l.nodes, n)
	}
	if o.host {
		n := l.nodes[0]
		n.host = vppdrivertest.NewNetns(t, "vsk-cnh-"+l.tag)
		hostIf := "vskch-" + l.tag
		vppdrivertest.Veth(t, hostIf, n.host, "eth0")
		n.opts.NodeConn.HostInterconnect = nodeconn.HostInterconnect{AfPacketHostIf: hostIf}
	}
	if o.external {
		n := l.nodes[0]
		n.ext = vppdrivertest.NewNetns(t, "vsk-cnx-"+l.tag)
		up := "vskcx-" + l.tag
		vppdrivertest.Veth(t, up, n.ext, "eth0")
		n.opts.NodeConn.Uplink = nodeconn.Uplink{AfPacketHostIf: up}
	} else {
		up1, up2 := "vskcu1-"+l.tag, "vskcu2-"+l.tag
		vppdrivertest.IP(t, "link", "add", up1, "type", "veth", "peer", "name", up2)
		t.Cleanup(func() { _ = exec.Command("ip", "link", "del", up1).Run() })
		vppdrivertest.IP(t, "link", "set", up1, "up")
		vppdrivertest.IP(t, "link", "set", up2, "up")
		l.nodes[0].opts.NodeConn.Uplink.AfPacketHostIf = up1
		l.nodes[1].opts.NodeConn.Uplink.AfPacketHostIf = up2
	}
	for _, n := range l.nodes {
		n.agent = rendertest.Start(t, n.opts)
	}
	if o.external {
		l.setUpExternal(l.nodes[0])
	}
	if o.host {
		l.setUpHost(l.nodes[0])
	}
	return l
}

// setUpExternal configures the external namespace of n: it holds the
// uplink's neighbours 192.168.16.100 and fd00:16::100 and "internet"
// addresses 203.0.113.1 and 2001:db8::1 (VPP's default routes go there,
// set as external configuration).
func (l *lab) setUpExternal(n *labNode) {
	t := l.t
	a := n.agent
	ext := n.ext
	ext.IP("link", "set", "eth0", "up")
	defaults := controller.NewExternalConfigChange("lab", true)
	for _, i := range n.ipams() {
		up, err := i.NodeAddr(i.NodeID())
		require.NoError(t, err)
		gw, world, def := "192.168.16.100", "203.0.113.1/32", "0.0.0.0/0"
		if up.Addr().Is6() {
			gw, world, def = "fd00:16::100", "2001:db8::1/128", "::/0"
		}
		args := []string{"addr", "add", gw + "/" + strconv.Itoa(up.Bits()), "dev", "eth0"}
		if up.Addr().Is6() {
			args = append(args, "nodad")
		}
		ext.IP(args...)
		ext.IP("addr", "add", world, "dev", "lo")
		dst := netip.MustParsePrefix(def)
		defaults.UpdatedKVs[vppmodel.RouteKey(0, dst)] = &vppmodel.Route{DstNetwork: def,
			Paths: []*vppmodel.Path{{OutgoingInterface: nodeconn.DefaultUplinkName, NextHop: gw}}}
	}
	require.NoError(t, a.Loop.PushEvent(defaults))
	require.NoError(t, defaults.Wait())
	l.srv.serve(t, ext, "ext")
	a.WaitConfigured(t)
}

// setUpHost configures the host namespace of n: the host's end of the
// interconnect of each family, with routes to the cluster's ranges and
// the node addresses through VPP.
func (l *lab) setUpHost(n *labNode) {
	t := l.t
	for _, i := range n.ipams() {
		up, err := i.NodeAddr(i.NodeID())
		require.NoError(t, err)
		hic := i.HostInterconnectSubnetThisNodePrefix()
		args := []string{"addr", "add", netip.PrefixFrom(i.HostInterconnectAddrInLinux(), hic.Bits()).String(), "dev", "eth0"}
		if hic.Addr().Is6() {
			args = append(args, "nodad")
		}
		n.host.IP(args...)
		n.host.IP("link", "set", "eth0", "up")
		via := i.HostInterconnectAddrInVPP().String()
		for _, p := range []netip.Prefix{i.PodSubnetAllNodesPrefix(), i.ServiceNetworkPrefix(), up.Masked()} {
			n.host.IP("route", "add", p.String(), "via", via)
		}
	}
	l.srv.serve(t, n.host, "host")
	n.agent.WaitConfigured(t)
}

func (n *labNode) ipams() []*ipam.IPAM {
	if n.agent.IPAM2 != nil {
		return []*ipam.IPAM{n.agent.IPAM, n.agent.IPAM2}
	}
	return []*ipam.IPAM{n.agent.IPAM}
}

// hostAddr returns the host's end of the interconnect of one family.
func (n *labNode) hostAddr(v6 bool) netip.Addr {
	for _, i := range n.ipams() {
		if ip := i.HostInterconnectAddrInLinux(); ip.Is6() == v6 {
			return ip
		}
	}
	panic("no host interconnect address of that family")
}

// nodeIP returns the node's address of one family.
func (n *labNode) nodeIP(v6 bool) netip.Addr {
	for _, i := range n.ipams() {
		if p, err := i.NodeAddr(i.NodeID()); err == nil && p.Addr().Is6() == v6 {
			return p.Addr()
		}
	}
	panic("no node address of that family")
}

// addPod connects pod name on node n as the pod server does (veth first,
// AddPod, then the pod's side from the results), starts its servers and
// tells every agent the pod's Kubernetes state (with ports, e.g.
// hostPorts).
func (l *lab) addPod(n *labNode, name string, ports ...*kubemodel.ContainerPort) *labPod {
	t := l.t
	t.Helper()
	i := len(l.pods)
	id := kubemodel.PodID{Namespace: "default", Name: name}
	p := &labPod{id: id, node: n, ns: vppdrivertest.NewNetns(t, fmt.Sprintf("vsk-cn%d-%s", i, l.tag)), hostIf: fmt.Sprintf("vskcp%d-%s", i, l.tag)}
	vppdrivertest.Veth(t, p.hostIf, p.ns, "eth0")
	l.srv.serve(t, p.ns, name)
	ev := controller.NewAddPodEvent(id, "c-"+name, p.ns.Path())
	ev.HostIfName = p.hostIf
	require.NoError(t, n.agent.AddPod(t, ev))
	rendertest.ConfigurePod(t, p.ns, ev)
	for _, ipm := range n.ipams() {
		ip, ok := ipm.PodAddr(id)
		require.True(t, ok)
		p.ips = append(p.ips, ip)
	}
	slices.SortFunc(p.ips, netip.Addr.Compare)
	pod := &kubemodel.Pod{Name: name, Namespace: "default", NodeName: n.name, IpAddress: p.ips[0].String(),
		Containers: []*kubemodel.Container{{Name: "c", Ports: ports}}}
	for _, a := range p.ips {
		pod.IpAddresses = append(pod.IpAddresses, a.String())
	}
	l.pods[name] = p
	l.kubeChange(kubemodel.PodResource, kubemodel.PodKey(id.Namespace, id.Name), pod)
	return p
}

// kubeChange applies a change of the Kubernetes state (v nil: deleted) to
// every node and waits until each has processed it and configured VPP.
func (l *lab) kubeChange(resource, key string, v proto.Message) {
	l.t.Helper()
	l.mu.Lock()
	if l.kube[resource] == nil {
		l.kube[resource] = controller.KeyValuePairs{}
	}
	prev := l.kube[resource][key]
	if v == nil {
		delete(l.kube[resource], key)
	} else {
		l.kube[resource][key] = v
	}
	l.mu.Unlock()
	for _, n := range l.nodes {
		ev := &controller.KubeStateChange{Resource: resource, Key: key, PrevValue: prev, NewValue: v}
		if v == nil {
			ev.NewValue = nil
		}
		require.NoError(l.t, n.agent.Loop.PushEvent(ev))
		n.agent.Sync(l.t)
		n.agent.WaitConfigured(l.t)
	}
}

func (l *lab) setService(s *kubemodel.Service) {
	l.t.Helper()
	l.kubeChange(kubemodel.ServiceResource, kubemodel.ServiceKey(s.Namespace, s.Name), s)
}

// setEndpoints sets the endpoints of service name: the pods given serve
// the service's ports (TCP port "http" on tcpPort, UDP port "dns" on
// udpPort), every address of their families.
func (l *lab) setEndpoints(name string, pods ...*labPod) {
	l.t.Helper()
	sub := &kubemodel.EndpointSubset{Ports: []*kubemodel.EndpointPort{
		{Name: "http", Port: tcpPort, Protocol: kubemodel.Protocol_TCP},
		{Name: "dns", Port: udpPort, Protocol: kubemodel.Protocol_UDP}}}
	for _, p := range pods {
		for _, a := range p.ips {
			sub.Addresses = append(sub.Addresses, &kubemodel.EndpointAddress{Ip: a.String(), NodeName: p.node.name,
				TargetRef: &kubemodel.ObjectReference{Kind: "Pod", Namespace: "default", Name: p.id.Name}})
		}
	}
	l.kubeChange(kubemodel.EndpointsResource, kubemodel.EndpointsKey("default", name),
		&kubemodel.Endpoints{Name: name, Namespace: "default", Subsets: []*kubemodel.EndpointSubset{sub}})
}

// labService is a service of the lab: TCP port "http" 80 and UDP port
// "dns" 53 on the cluster IPs, node ports when nodePort is set.
func labService(name string, nodePort int32, clusterIPs ...string) *kubemodel.Service {
	s := &kubemodel.Service{Name: name, Namespace: "default", ClusterIps: clusterIPs, Ports: []*kubemodel.ServicePort{
		{Name: "http", Protocol: kubemodel.Protocol_TCP, Port: 80, TargetPortNumber: tcpPort},
		{Name: "dns", Protocol: kubemodel.Protocol_UDP, Port: 53, TargetPortNumber: udpPort}}}
	if nodePort != 0 {
		s.Type = kubemodel.Service_NODE_PORT
		s.Ports[0].NodePort = nodePort
		s.Ports[1].NodePort = nodePort
	}
	return s
}

// dial connects from ns to dst over TCP and returns the answer line ("who
// client"). The first packet towards a neighbour VPP has not resolved yet
// may be dropped: TCP sends its SYN again after a second.
func dial(ns *vppdrivertest.Netns, dst netip.AddrPort, timeout time.Duration) (string, error) {
	var conn net.Conn
	err := ns.Do(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", dst.String())
		return err
	})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

// answers dials n times and returns the answers; a failed dial fails t.
func answers(t testing.TB, ns *vppdrivertest.Netns, dst netip.AddrPort, n int) []string {
	t.Helper()
	var out []string
	for range n {
		line, err := dial(ns, dst, 3*time.Second)
		require.NoError(t, err, "connect from %s to %s", ns.Name(), dst)
		out = append(out, line)
	}
	return out
}

// udpFlows sends one request from each source port first..first+n-1 of ns
// to dst and returns who answered each ("" for no answer).
func udpFlows(ns *vppdrivertest.Netns, dst netip.AddrPort, first, n int) ([]string, error) {
	out := make([]string, n)
	network := "udp4"
	if dst.Addr().Is6() {
		network = "udp6"
	}
	for i := range n {
		var c *net.UDPConn
		err := ns.Do(func() error {
			var err error
			c, err = net.ListenUDP(network, &net.UDPAddr{Port: first + i})
			return err
		})
		if err != nil {
			return nil, err
		}
		for try := 0; try < 3 && out[i] == ""; try++ {
			if _, err := c.WriteToUDPAddrPort([]byte("who"), dst); err != nil {
				c.Close()
				return nil, err
			}
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			buf := make([]byte, 100)
			if k, _, err := c.ReadFromUDPAddrPort(buf); err == nil {
				out[i], _, _ = strings.Cut(string(buf[:k]), " ")
			}
		}
		c.Close()
	}
	return out, nil
}

// servers are the lab's TCP and UDP servers.
type servers struct {
	mu      sync.Mutex
	closers []func()
	wg      sync.WaitGroup
}

// serve starts, in ns, a TCP server on tcpPort and a UDP server on
// udpPort (both families) that answer "<who> <client address>".
func (s *servers) serve(t *testing.T, ns *vppdrivertest.Netns, who string) {
	t.Helper()
	var ln net.Listener
	var pc net.PacketConn
	require.NoError(t, ns.Do(func() error {
		var err error
		if ln, err = net.Listen("tcp", ":"+strconv.Itoa(tcpPort)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", ":"+strconv.Itoa(udpPort))
		return err
	}))
	s.mu.Lock()
	s.closers = append(s.closers, func() { _ = ln.Close() }, func() { _ = pc.Close() })
	s.mu.Unlock()
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			_, _ = fmt.Fprintf(c, "%s %s\n", who, ap.Addr().Unmap())
			_ = c.Close()
		}
	}()
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 100)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			ap, _ := netip.ParseAddrPort(from.String())
			_, _ = pc.WriteTo([]byte(who+" "+ap.Addr().Unmap().String()), from)
		}
	}()
}

func (s *servers) stop() {
	s.mu.Lock()
	closers := s.closers
	s.closers = nil
	s.mu.Unlock()
	for _, c := range closers {
		c()
	}
	s.wg.Wait()
}

// vppState logs what VPP holds of cnat and its interfaces (for a failed
// test).
func (n *labNode) vppState(t *testing.T) {
	for _, cmd := range [][]string{{"show", "interface", "address"}, {"show", "cnat", "translation"}, {"show", "cnat", "snat-policy"},
		{"show", "cnat", "session", "verbose", "1"}, {"show", "ip6", "fib"}, {"show", "ip", "neighbors"}, {"show", "errors"}} {
		t.Logf("%s VPP %v:\n%s", n.name, cmd, n.vpp.CLI(cmd...))
	}
}

func unique(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/containernetworking/cni/pkg/skel"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.fd.io/govpp/adapter"

	"github.com/vswitchkit/vswitchkit/agent"
	"github.com/vswitchkit/vswitchkit/cniserver"
	"github.com/vswitchkit/vswitchkit/cniserver/cniplugin"
	"github.com/vswitchkit/vswitchkit/cniserver/cniservertest"
	"github.com/vswitchkit/vswitchkit/render/nodeconn"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// Host interfaces of every simulated node: the uplink and the host end of
// the VPP-host interconnect.
const (
	uplinkIf       = "eth1"
	interconnectIf = "vpp1"
)

// simNode is one simulated node: the full agent on its own VPP stand-in
// and simulated Linux, with its BGP speaker on its own loopback address.
type simNode struct {
	name       string
	index      int        // 1-based
	internalIP netip.Addr // the Kubernetes node's InternalIP
	bgpAddr    netip.Addr // the speaker's address (and router ID)
	bgpPort    uint16     // the speaker's port (its BGP override's local port)
	socket     string     // the pod server's unix socket
	vpp        *vppsim.VPP
	linux      *cniservertest.FakeLinux
	agent      *agent.Agent
	stop       func() error // stops the agent; set by the cluster
	left       bool         // the node left the cluster
}

// nodeAddr returns 127.0.0.<10+i> for node i: the loopback address of its
// BGP speaker.
func nodeAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + i)}) }

// newSimNode prepares node i (1-based): its state directory under dir, a
// free port on its loopback address, its VPP stand-in and the agent
// (opened, not running).
func newSimNode(i int, dir string, cli *clientv3.Client, deps agent.Deps, opts Options) (*simNode, error) {
	n := &simNode{
		name:       fmt.Sprintf("node-%d", i),
		index:      i,
		internalIP: netip.AddrFrom4([4]byte{10, 0, 0, byte(10 + i)}),
		bgpAddr:    nodeAddr(i),
		linux:      cniservertest.NewFakeLinux(),
	}
	port, err := freePort(n.bgpAddr)
	if err != nil {
		return nil, fmt.Errorf("%s: a port for the BGP speaker on %s: %w", n.name, n.bgpAddr, err)
	}
	n.bgpPort = port
	n.vpp = vppsim.New(vppsim.Config{
		HostInterfaces: []string{uplinkIf, interconnectIf},
		// The veth ends of pods, made by the simulated Linux.
		HostInterfaceExists: func(host string) bool {
			return slices.ContainsFunc(n.linux.Links(""), func(l cniserver.LinkState) bool { return l.Name == host })
		},
	})
	stateDir := filepath.Join(dir, n.name)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	n.socket = filepath.Join(stateDir, "cni.sock")
	deps.Etcd = cli
	deps.VPP = func() adapter.VppAPI { return n.vpp.NewAdapter() }
	deps.Linux = n.linux
	// The agent adds node=<name> to its components' logs, and each
	// component its own component=<name>.
	n.agent, err = agent.Open(agent.Config{
		NodeName:         n.name,
		StateDir:         stateDir,
		CNISocket:        n.socket,
		Uplink:           nodeconn.Uplink{AfPacketHostIf: uplinkIf},
		HostInterconnect: nodeconn.HostInterconnect{AfPacketHostIf: interconnectIf},
		Services:         opts.ServiceRenderer,
		IPFamily:         opts.IPFamily,
		BGP:              agent.BGPConfig{ListenAddresses: []netip.Addr{n.bgpAddr}},
	}, deps)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.name, err)
	}
	return n, nil
}

// freePort returns a TCP port that is free on addr now.
func freePort(addr netip.Addr) (uint16, error) {
	l, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port), nil
}

// netConf is the network configuration the container runtime gives the
// plugin: the plugin's entry of the conflist (examples/vswitchkit-cni)
// with the list's cniVersion and name.
func (n *simNode) netConf() []byte {
	conf, _ := json.Marshal(map[string]any{
		"cniVersion":   "1.1.0",
		"name":         "vswitchkit",
		"type":         "vswitchkit-cni",
		"agentSocket":  n.socket,
		"agentTimeout": "60s",
		"dns":          map[string]any{"nameservers": []string{"10.96.0.10"}},
	})
	return conf
}

// cniArgs are the parameters the runtime passes for p.
func (n *simNode) cniArgs(p *pod) *skel.CmdArgs {
	return &skel.CmdArgs{
		ContainerID: p.containerID,
		Netns:       p.netns(),
		IfName:      "eth0",
		Args: fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_INFRA_CONTAINER_ID=%s;K8S_POD_UID=%s",
			namespace, p.name, p.containerID, p.uid),
		Path:      "/opt/cni/bin",
		StdinData: n.netConf(),
	}
}

// addPod sets up p's sandbox network as the runtime does: a network
// namespace, then the plugin's ADD through the agent's pod server. It
// returns the pod's addresses from the CNI result: IPv4, and IPv6 in a
// dual-stack cluster (else invalid).
func (n *simNode) addPod(ctx context.Context, p *pod) (ip4, ip6 netip.Addr, err error) {
	if err := n.linux.AddNetns(p.netns()); err != nil {
		return ip4, ip6, err
	}
	out, err := cniplugin.Call(ctx, n.socket, "ADD", n.cniArgs(p))
	if err != nil {
		return ip4, ip6, fmt.Errorf("CNI ADD of %s on %s: %w", p.name, n.name, err)
	}
	var res struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return ip4, ip6, fmt.Errorf("CNI ADD of %s on %s: result %s: %w", p.name, n.name, out, err)
	}
	for _, ip := range res.IPs {
		if pfx, err := netip.ParsePrefix(ip.Address); err == nil && pfx.Addr().Is4() && !ip4.IsValid() {
			ip4 = pfx.Addr()
		} else if err == nil && pfx.Addr().Is6() && !ip6.IsValid() {
			ip6 = pfx.Addr()
		}
	}
	if !ip4.IsValid() {
		return ip4, ip6, fmt.Errorf("CNI ADD of %s on %s: no IPv4 address in the result %s", p.name, n.name, out)
	}
	return ip4, ip6, nil
}

// deletePod tears p's sandbox network down as the runtime does: the
// plugin's DEL through the pod server, then the namespace goes.
func (n *simNode) deletePod(ctx context.Context, p *pod) error {
	if _, err := cniplugin.Call(ctx, n.socket, "DEL", n.cniArgs(p)); err != nil {
		return fmt.Errorf("CNI DEL of %s on %s: %w", p.name, n.name, err)
	}
	n.linux.DeleteNetns(p.netns())
	return nil
}

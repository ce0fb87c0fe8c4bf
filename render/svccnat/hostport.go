package svccnat

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// hostPod is the part of a pod that its hostPorts need. Immutable once
// built.
type hostPod struct {
	id    kubemodel.PodID
	addrs []netip.Addr // the pod's addresses, sorted and unique
	ports []hostPort   // sorted
}

// hostPort is one container port with a hostPort.
type hostPort struct {
	proto    kubemodel.Protocol
	hostIP   string // as given; "" for every address
	hostPort uint16
	port     uint16 // the container's
}

func (p hostPort) compare(o hostPort) int {
	if c := strings.Compare(p.hostIP, o.hostIP); c != 0 {
		return c
	}
	if p.proto != o.proto {
		return int(p.proto) - int(o.proto)
	}
	if p.hostPort != o.hostPort {
		return int(p.hostPort) - int(o.hostPort)
	}
	return int(p.port) - int(o.port)
}

// hostPodOf returns the hostPorts of pod, nil if it has none to expose on
// this node (no hostPort, no address, the host's network, another node).
func hostPodOf(pod *kubemodel.Pod, node string) *hostPod {
	if pod == nil || pod.GetHostNetwork() || (node != "" && pod.GetNodeName() != node) {
		return nil
	}
	hp := &hostPod{id: pod.ID()}
	for _, c := range pod.GetContainers() {
		for _, p := range c.GetPorts() {
			if p.GetHostPort() <= 0 || p.GetHostPort() > 65535 || p.GetContainerPort() <= 0 || p.GetContainerPort() > 65535 {
				continue
			}
			hp.ports = append(hp.ports, hostPort{proto: p.GetProtocol(), hostIP: strings.TrimSpace(p.GetHostIp()),
				hostPort: uint16(p.GetHostPort()), port: uint16(p.GetContainerPort())})
		}
	}
	if len(hp.ports) == 0 {
		return nil
	}
	for _, s := range append([]string{pod.GetIpAddress()}, pod.GetIpAddresses()...) {
		if a, err := netip.ParseAddr(s); err == nil && !a.IsUnspecified() {
			hp.addrs = append(hp.addrs, a.Unmap())
		}
	}
	if len(hp.addrs) == 0 {
		return nil
	}
	slices.SortFunc(hp.addrs, netip.Addr.Compare)
	hp.addrs = slices.Compact(hp.addrs)
	slices.SortFunc(hp.ports, hostPort.compare)
	hp.ports = slices.Compact(hp.ports)
	return hp
}

func (p *hostPod) equal(o *hostPod) bool {
	if p == nil || o == nil {
		return p == o
	}
	return p.id == o.id && slices.Equal(p.addrs, o.addrs) && slices.Equal(p.ports, o.ports)
}

// pod computes the translations of a pod's hostPorts: for each hostPort
// and each address of the pod, the translation of that port on the
// hostIP (when it is this node's address of the pod address's family) or
// on every address of this node of that family, to the pod address and
// container port. Translations equal to those of prev keep prev's model
// values.
func (b *builder) pod(p *hostPod, prev *rendered) *rendered {
	o := podOwner(p.id)
	out := &rendered{owner: o, pod: p, nodeBound: true}
	var noAddr [2]bool
	for _, hp := range p.ports {
		proto, ok := cnatProtocol(hp.proto)
		if !ok {
			out.unsupported++
			out.problems = append(out.problems, o.problem(UnsupportedProtocol,
				fmt.Sprintf("%s/%d", strings.ToLower(hp.proto.String()), hp.hostPort)))
			continue
		}
		var hostIP netip.Addr
		if hp.hostIP != "" {
			a, err := netip.ParseAddr(hp.hostIP)
			if err != nil {
				out.problems = append(out.problems, o.problem(HostIPNotLocal, hp.hostIP))
				continue
			}
			if a = a.Unmap(); !a.IsUnspecified() {
				if !b.isNodeIP(a) {
					out.problems = append(out.problems, o.problem(HostIPNotLocal, hp.hostIP))
					continue
				}
				hostIP = a
			}
		}
		for _, pa := range p.addrs {
			path := []netip.AddrPort{netip.AddrPortFrom(pa, hp.port)}
			switch {
			case hostIP.IsValid():
				if hostIP.Is4() == pa.Is4() {
					out.add(prev, spec{fe: frontend{proto, netip.AddrPortFrom(hostIP, hp.hostPort)}, real: true, paths: path})
				}
			case !b.has[fam(pa)]:
				noAddr[fam(pa)] = true
			default:
				for _, ip := range b.nodeIPs {
					if ip.Is4() == pa.Is4() {
						out.add(prev, spec{fe: frontend{proto, netip.AddrPortFrom(ip, hp.hostPort)}, real: true, paths: path})
					}
				}
			}
		}
	}
	for f, missing := range noAddr {
		if missing {
			out.problems = append(out.problems, o.problem(NoNodeAddress, familyName(f == 1)))
		}
	}
	out.finish()
	return out
}

package svcprocessor

import (
	"net"
	"net/netip"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// PodSubnets tells the processor which pod subnets exist. The IPAM package
// is the usual provider; wrap its *net.IPNet getters with [SubnetsFromIPNet].
//
// # Contract
//
// Both methods are called on the goroutine that calls the processor (the
// event loop), once at the start of every Update, Resync, ProcessNewPod and
// ProcessDeletingPod, never concurrently by the processor itself. They must
// not block and must not call back into the processor. An invalid (zero)
// prefix means "not known": no backend is then classified by that subnet.
type PodSubnets interface {
	// PodSubnetThisNode returns the pod subnet of this node. Backends with an
	// IP inside it are local.
	PodSubnetThisNode() netip.Prefix
	// PodSubnetAllNodes returns the pod subnet of the whole cluster. Backends
	// with an IP of the same family outside it are host-network backends.
	PodSubnetAllNodes() netip.Prefix
}

// NodeIPs lists the IP addresses of every node of the cluster: the addresses
// on which NodePort services are exposed. The node sync component is the
// usual provider (through a small adapter in the application).
//
// # Contract
//
// NodeIPs is called on the processor's calling goroutine, on every Resync
// and on every event that may change node IPs (see [Config.IsNodeEvent]).
// The processor copies, sorts and de-duplicates the result and does not keep
// the returned slice. It must not block and must not call back into the
// processor.
type NodeIPs interface {
	NodeIPs() []netip.Addr
}

// PodInterfaces tells which VPP interface connects a local pod.
//
// # Contract
//
// PodInterface is called on the processor's calling goroutine, from
// ProcessNewPod (AddPod) and from Resync for every pod of the Kubernetes
// state and every pod connected before. It returns ok=false for pods that are
// not connected on this node. It must not block and must not call back into
// the processor.
type PodInterfaces interface {
	PodInterface(pod kubemodel.PodID) (ifName string, ok bool)
}

// NodeIPsFunc adapts a function into [NodeIPs].
type NodeIPsFunc func() []netip.Addr

// NodeIPs calls f.
func (f NodeIPsFunc) NodeIPs() []netip.Addr { return f() }

// PodInterfacesFunc adapts a function into [PodInterfaces].
type PodInterfacesFunc func(pod kubemodel.PodID) (string, bool)

// PodInterface calls f.
func (f PodInterfacesFunc) PodInterface(pod kubemodel.PodID) (string, bool) { return f(pod) }

var (
	_ NodeIPs       = NodeIPsFunc(nil)
	_ PodInterfaces = PodInterfacesFunc(nil)
)

// IPNetPodSubnets is the IPAM-shaped source of pod subnets, with the
// documented *net.IPNet signatures of the IPAM API.
type IPNetPodSubnets interface {
	PodSubnetThisNode() *net.IPNet
	PodSubnetAllNodes() *net.IPNet
}

// SubnetsFromIPNet adapts src (typically the IPAM) into [PodSubnets]. It
// queries src on every call, so subnet changes (for example after a pod CIDR
// change) are seen at the next event. Nil or malformed networks become
// invalid prefixes.
func SubnetsFromIPNet(src IPNetPodSubnets) PodSubnets { return ipNetSubnets{src} }

type ipNetSubnets struct{ src IPNetPodSubnets }

func (s ipNetSubnets) PodSubnetThisNode() netip.Prefix {
	return prefixFromIPNet(s.src.PodSubnetThisNode())
}
func (s ipNetSubnets) PodSubnetAllNodes() netip.Prefix {
	return prefixFromIPNet(s.src.PodSubnetAllNodes())
}

func prefixFromIPNet(n *net.IPNet) netip.Prefix {
	if n == nil {
		return netip.Prefix{}
	}
	addr, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}
	}
	ones, bits := n.Mask.Size()
	if bits == 0 {
		return netip.Prefix{}
	}
	addr = addr.Unmap()
	if bits == 128 && addr.Is4() {
		ones -= 96
	}
	if ones < 0 || ones > addr.BitLen() {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(addr, ones).Masked()
}

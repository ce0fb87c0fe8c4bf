package ipam

import (
	"net"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// API defines the methods IPAM provides to other components. [IPAM]
// implements it; consumers declare the subset they need.
//
// Addresses use net.IP / *net.IPNet so that code written against the
// original interface ports over; [IPAM] offers the netip form of every
// getter beside it (NodeAddr, VxlanAddr, PodSubnetThisNodePrefix,
// PodGatewayAddr, NatLoopbackAddr, ..., AllocatePodAddr, PodAddr), and the
// net forms are computed from them. Every returned
// net.IP and *net.IPNet is a new value owned by the caller.
type API interface {
	// NodeIPAddress computes IP address of the node based on the provided node ID.
	NodeIPAddress(nodeID uint32) (net.IP, *net.IPNet, error)
	// VxlanIPAddress computes IP address of the VXLAN interface based on the
	// provided node ID.
	VxlanIPAddress(nodeID uint32) (net.IP, *net.IPNet, error)
	// HostInterconnectIPInVPP provides the address for the VPP end of the
	// VPP-to-host interconnect.
	HostInterconnectIPInVPP() net.IP
	// HostInterconnectIPInLinux provides the address of the host (Linux)
	// end of the VPP-to-host interconnect.
	HostInterconnectIPInLinux() net.IP
	// HostInterconnectSubnetThisNode returns the network used to connect
	// VPP to its host Linux stack on this node.
	HostInterconnectSubnetThisNode() *net.IPNet
	// HostInterconnectSubnetAllNodes returns the base subnet used to connect
	// VPP to its host Linux stack on all nodes.
	HostInterconnectSubnetAllNodes() *net.IPNet
	// HostInterconnectSubnetOtherNode returns the VPP-host network of
	// another node identified by nodeID.
	HostInterconnectSubnetOtherNode(nodeID uint32) (*net.IPNet, error)
	// PodSubnetAllNodes returns the pod subnet that is the base subnet for
	// all pods of all nodes.
	PodSubnetAllNodes() *net.IPNet
	// PodSubnetThisNode returns the pod network of the current node.
	PodSubnetThisNode() *net.IPNet
	// PodSubnetOtherNode returns the pod network of another node identified
	// by nodeID.
	PodSubnetOtherNode(nodeID uint32) (*net.IPNet, error)
	// ServiceNetwork returns the range allocated for services.
	ServiceNetwork() *net.IPNet
	// PodGatewayIP returns the gateway IP address of the pod subnet of this
	// node.
	PodGatewayIP() net.IP
	// NatLoopbackIP returns the IP address of a virtual loopback, used to
	// route traffic between clients and services via VPP even if the source
	// and destination are the same IP addresses and would otherwise be
	// routed locally.
	NatLoopbackIP() net.IP
	// AllocatePodIP tries to allocate an IP address for the given pod.
	AllocatePodIP(podID kubemodel.PodID, ipamType string, ipamData string) (net.IP, error)
	// GetPodIP returns the allocated pod IP, together with the mask.
	// Returns nil if the pod does not have an allocated IP address.
	GetPodIP(podID kubemodel.PodID) *net.IPNet
	// ReleasePodIP releases the pod IP address making it available for new
	// pods.
	ReleasePodIP(podID kubemodel.PodID) error
}

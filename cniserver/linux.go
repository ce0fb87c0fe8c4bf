package cniserver

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// Linux does the Linux side of a pod attachment: the veth pair of an
// af_packet interface and the configuration of the pod's interface inside
// the pod's network namespace. Package linuxpod implements it with netlink;
// cniservertest.FakeLinux is an in-memory implementation for tests.
//
// # Contract
//
// A namespace is named by its path (CNI_NETNS, e.g. /var/run/netns/x or
// /proc/<pid>/ns/net); the empty string is the host namespace, the one the
// server runs in. The server calls the methods from its request goroutines:
// calls for different attachments may run concurrently, calls for one
// attachment never do. Every method is idempotent: the server repeats a
// step after a failure or an agent restart, so a step that finds its work
// done succeeds. Implementations must honour ctx before they start work
// (netlink calls themselves cannot be interrupted). Arguments are owned by
// the caller and must not be kept.
//
// Errors: a namespace path that does not exist (or is not a network
// namespace) gives an error wrapping [ErrNetnsNotFound]; a link that does
// not exist, where one is needed, wraps [ErrLinkNotFound]; a name that is
// taken by a link that is not the one asked for wraps [ErrLinkExists].
// Other errors are failures of the kernel or of the caller's values; the
// server undoes the attachment and reports them.
type Linux interface {
	// EnsureVeth makes sure the veth pair v exists: it creates the pair
	// (host end v.HostName, pod end v.PeerName, both in the host
	// namespace) unless the host end exists; if v.Netns is set it then
	// moves the pod end into that namespace, renamed to v.IfName (a pod end
	// already there is kept). The host end is brought up. It returns the
	// MAC address of the host end. A link named v.IfName in v.Netns that is
	// not the peer of the host end gives ErrLinkExists; a host end whose
	// peer is neither in the host namespace nor in v.Netns (a leftover of
	// another namespace) is re-created.
	EnsureVeth(ctx context.Context, v Veth) (hostMAC net.HardwareAddr, err error)

	// ConfigureLink sets the link cfg.Name in namespace netns to cfg: its
	// MAC address and MTU (when set), exactly the addresses cfg.Addresses
	// (others are removed; IPv6 link-local addresses are kept), the routes
	// and permanent neighbor entries of cfg (added or replaced; others are
	// kept), and brings it up. A route whose gateway is not inside one of
	// the link's address prefixes gets a link-scope route to the gateway
	// first. It returns the link's MAC address.
	ConfigureLink(ctx context.Context, netns string, cfg LinkConfig) (mac net.HardwareAddr, err error)

	// DeleteLink deletes the link name in namespace netns (deleting one end
	// of a veth pair deletes both). A missing link or namespace is not an
	// error.
	DeleteLink(ctx context.Context, netns, name string) error

	// InspectLink returns the state of the link name in namespace netns.
	InspectLink(ctx context.Context, netns, name string) (LinkState, error)
}

// Veth describes the veth pair of one af_packet attachment. It is a plain
// value, not safe for concurrent modification.
type Veth struct {
	// HostName is the host end, in the host namespace, that VPP attaches
	// to with af_packet (at most 15 bytes).
	HostName string
	// PeerName is the name of the pod end while it is in the host
	// namespace.
	PeerName string
	// Netns, when set, is the pod's namespace: the pod end is moved there
	// and renamed IfName. Empty leaves the pod end in the host namespace.
	Netns string
	// IfName is the name of the pod end inside Netns (CNI_IFNAME).
	IfName string
	// MTU of both ends; 0 keeps the kernel's default.
	MTU int
}

// LinkConfig is the configuration of one link inside a pod's namespace. It
// is a plain value, not safe for concurrent modification.
type LinkConfig struct {
	// Name is the link's name.
	Name string
	// MAC, if set, is given to the link.
	MAC net.HardwareAddr
	// MTU, if positive, is given to the link.
	MTU int
	// Addresses are the link's addresses with their prefix length.
	Addresses []netip.Prefix
	// Routes are added through the link (or replaced).
	Routes []Route
	// Neighbors are added to the link as permanent entries (or replaced).
	Neighbors []Neighbor
}

// Route is a route through a pod's link. It is an immutable value.
type Route struct {
	// Dst is the destination; 0.0.0.0/0 or ::/0 for the default route.
	Dst netip.Prefix
	// Gateway is the next hop; the zero Addr for a directly connected
	// (link-scope) route.
	Gateway netip.Addr
}

// String returns "dst via gateway" or "dst dev-scope".
func (r Route) String() string {
	if !r.Gateway.IsValid() {
		return r.Dst.String() + " scope link"
	}
	return r.Dst.String() + " via " + r.Gateway.String()
}

// Neighbor is a permanent neighbor (ARP or NDP) entry. It is a plain value;
// MAC must not be modified once shared.
type Neighbor struct {
	IP  netip.Addr
	MAC net.HardwareAddr
}

// String returns "ip lladdr mac".
func (n Neighbor) String() string { return n.IP.String() + " lladdr " + n.MAC.String() }

// LinkState is what InspectLink found. It is a plain value; the slices are
// owned by the receiver.
type LinkState struct {
	Name string
	MAC  net.HardwareAddr
	MTU  int
	// Up is the administrative state.
	Up bool
	// Addresses, sorted, without IPv6 link-local addresses.
	Addresses []netip.Prefix
	// Routes through the link in the main table, sorted, without the routes
	// the kernel derives from addresses (connected, local, multicast).
	Routes []Route
	// Neighbors are the permanent neighbor entries of the link, sorted.
	Neighbors []Neighbor
}

// Sort sorts the slices of s in the order InspectLink returns them.
func (s *LinkState) Sort() {
	slices.SortFunc(s.Addresses, comparePrefix)
	slices.SortFunc(s.Routes, func(a, b Route) int {
		return cmp.Or(comparePrefix(a.Dst, b.Dst), a.Gateway.Compare(b.Gateway))
	})
	slices.SortFunc(s.Neighbors, func(a, b Neighbor) int { return a.IP.Compare(b.IP) })
}

// String describes the link in one line, like `ip addr` would.
func (s LinkState) String() string {
	var b strings.Builder
	state := "down"
	if s.Up {
		state = "up"
	}
	fmt.Fprintf(&b, "%s %s mac %s mtu %d addrs %v", s.Name, state, s.MAC, s.MTU, s.Addresses)
	for _, r := range s.Routes {
		b.WriteString(", route " + r.String())
	}
	for _, n := range s.Neighbors {
		b.WriteString(", neigh " + n.String())
	}
	return b.String()
}

func comparePrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

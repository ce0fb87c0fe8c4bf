package nodesync

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// IPVersion selects IPv4 or IPv6. The zero value is not a valid version.
// It is an immutable value, safe for concurrent use.
type IPVersion int

const (
	// IPv4 selects IPv4 addresses.
	IPv4 IPVersion = 4
	// IPv6 selects IPv6 addresses.
	IPv6 IPVersion = 6
)

// String returns "IPv4", "IPv6" or "IPVersion(n)".
func (v IPVersion) String() string {
	switch v {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return fmt.Sprintf("IPVersion(%d)", int(v))
}

// Matches reports whether addr is of version v. IPv4-mapped IPv6 addresses
// count as IPv6.
func (v IPVersion) Matches(addr netip.Addr) bool {
	switch v {
	case IPv4:
		return addr.Is4()
	case IPv6:
		return addr.Is6()
	}
	return false
}

// IPWithNetwork is an IP address together with the network it belongs to,
// e.g. 192.168.16.1 in 192.168.16.0/24. It is a comparable value; the zero
// value is invalid (see [IPWithNetwork.Validate]). It is an immutable value,
// safe for concurrent use.
type IPWithNetwork struct {
	Address netip.Addr
	Network netip.Prefix
}

// Validate reports an error unless Address is valid, Network is valid,
// masked (no host bits) and of the same family, and contains Address.
func (a IPWithNetwork) Validate() error {
	switch {
	case !a.Address.IsValid():
		return fmt.Errorf("invalid address in %s", a)
	case !a.Network.IsValid():
		return fmt.Errorf("invalid network in %s", a)
	case a.Network.Masked() != a.Network:
		return fmt.Errorf("network %s has host bits set", a.Network)
	case !a.Network.Contains(a.Address):
		return fmt.Errorf("address %s is not in network %s", a.Address, a.Network)
	}
	return nil
}

// String returns "address (network)", e.g. "192.168.16.1 (192.168.16.0/24)".
func (a IPWithNetwork) String() string {
	return fmt.Sprintf("%s (%s)", a.Address, a.Network)
}

func compareIPWithNetwork(a, b IPWithNetwork) int {
	if c := a.Address.Compare(b.Address); c != 0 {
		return c
	}
	if c := a.Network.Addr().Compare(b.Network.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Network.Bits(), b.Network.Bits())
}

// IPsWithNetworks is a list of addresses with their networks. A nil or empty
// list means no addresses. Its methods never modify it; it is safe for
// concurrent use as long as nobody modifies it.
type IPsWithNetworks []IPWithNetwork

// Canonical returns a sorted copy of s without duplicates (ordered by
// address, then network). Two lists describe the same set exactly when their
// canonical forms are equal.
func (s IPsWithNetworks) Canonical() IPsWithNetworks {
	if len(s) == 0 {
		return nil
	}
	out := slices.Clone(s)
	slices.SortFunc(out, compareIPWithNetwork)
	return slices.Compact(out)
}

// Equal reports whether s and o hold the same elements in the same order.
// Compare canonical forms to compare them as sets.
func (s IPsWithNetworks) Equal(o IPsWithNetworks) bool { return slices.Equal(s, o) }

// Filter returns the elements of s of version v, in order (nil if none).
func (s IPsWithNetworks) Filter(v IPVersion) IPsWithNetworks {
	var out IPsWithNetworks
	for _, a := range s {
		if v.Matches(a.Address) {
			out = append(out, a)
		}
	}
	return out
}

// String lists the elements, comma-separated.
func (s IPsWithNetworks) String() string {
	parts := make([]string, len(s))
	for i, a := range s {
		parts[i] = a.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Node represents a single node in the cluster, merged from two sources: the
// vswitch record that the node's agent publishes through nodesync (ID and
// VPP-side addresses) and the Kubernetes node object (management addresses
// and pod CIDRs).
//
// ID is 0 when only Kubernetes knows the node (no vswitch agent has claimed
// an ID for it yet). Values handed out by this package are copies owned by
// the receiver. A Node is safe for concurrent use as long as nobody modifies
// it; its methods never do. The zero value is a node without name or ID.
type Node struct {
	// ID is the cluster-wide node ID (1, 2, …), 0 if not claimed.
	ID uint32
	// Name is the Kubernetes node name.
	Name string
	// VppIPAddresses are the VPP-side addresses published by the node's agent.
	VppIPAddresses IPsWithNetworks
	// MgmtIPAddresses are the node's management addresses from the Kubernetes
	// node object: its InternalIP addresses, then its ExternalIP addresses.
	MgmtIPAddresses []net.IP
	// PodCIDRs are the node's spec.podCIDRs from the Kubernetes node object.
	PodCIDRs []netip.Prefix
}

// Clone returns a deep copy of n (nil for nil).
func (n *Node) Clone() *Node {
	if n == nil {
		return nil
	}
	c := *n
	c.VppIPAddresses = slices.Clone(n.VppIPAddresses)
	c.PodCIDRs = slices.Clone(n.PodCIDRs)
	if n.MgmtIPAddresses != nil {
		c.MgmtIPAddresses = make([]net.IP, len(n.MgmtIPAddresses))
		for i, ip := range n.MgmtIPAddresses {
			c.MgmtIPAddresses[i] = slices.Clone(ip)
		}
	}
	return &c
}

// MgmtAddrs returns MgmtIPAddresses in the [netip.Addr] form (IPv4
// addresses unmapped), in the same order, skipping entries that are not
// valid addresses; nil when there are none. It never modifies n.
func (n *Node) MgmtAddrs() []netip.Addr {
	if n == nil {
		return nil
	}
	var out []netip.Addr
	for _, ip := range n.MgmtIPAddresses {
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// Equal reports whether n and o describe the same node state. Two nil nodes
// are equal; nil and empty slices are equal.
func (n *Node) Equal(o *Node) bool {
	if n == nil || o == nil {
		return n == o
	}
	return n.ID == o.ID && n.Name == o.Name &&
		slices.Equal(n.VppIPAddresses, o.VppIPAddresses) &&
		mgmtEqual(n.MgmtIPAddresses, o.MgmtIPAddresses) &&
		slices.Equal(n.PodCIDRs, o.PodCIDRs)
}

// String describes the node on one line.
func (n *Node) String() string {
	if n == nil {
		return "<nil>"
	}
	mgmt := make([]string, len(n.MgmtIPAddresses))
	for i, ip := range n.MgmtIPAddresses {
		mgmt[i] = ip.String()
	}
	cidrs := make([]string, len(n.PodCIDRs))
	for i, p := range n.PodCIDRs {
		cidrs[i] = p.String()
	}
	return fmt.Sprintf("node %s (ID %d, VPP IPs %s, management IPs [%s], pod CIDRs [%s])",
		n.Name, n.ID, n.VppIPAddresses, strings.Join(mgmt, ", "), strings.Join(cidrs, ", "))
}

func mgmtEqual(a, b []net.IP) bool {
	return slices.EqualFunc(a, b, func(x, y net.IP) bool { return x.Equal(y) })
}

// Nodes maps node names to node information. Maps returned by this package
// are copies owned by the receiver. Nodes is safe for concurrent use as long
// as nobody modifies it.
type Nodes map[string]*Node

// Clone returns a deep copy of ns.
func (ns Nodes) Clone() Nodes {
	if ns == nil {
		return nil
	}
	out := make(Nodes, len(ns))
	for k, v := range ns {
		out[k] = v.Clone()
	}
	return out
}

// Names returns the node names, sorted.
func (ns Nodes) Names() []string {
	names := make([]string, 0, len(ns))
	for k := range ns {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

package svccnat

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// NodeIPs lists this node's addresses, both families: the addresses on
// which node ports and hostPorts are exposed here. nodeaddr.NodeIPSet with
// OnlyNode set to this node's name provides them (from nodesync).
//
// # Contract
//
// NodeIPs is called on the goroutine that calls [Renderer.Render] (the
// event loop): on every resync and on every NodeIPsChanged notification.
// The renderer does not keep the returned slice. It must not block and
// must not call back into the renderer or the service processor. Register
// the handler that keeps the source up to date (a NodeIPSet) before the
// service processor's handler, so that it has seen a node change before
// the renderer asks.
type NodeIPs interface {
	NodeIPs() []netip.Addr
}

// SNATAddrs lists the addresses of this node's VPP that translated
// traffic may take as its source, in order of preference: the uplink's
// addresses (pod traffic leaving the cluster must come back to them), then
// addresses that only the cluster routes to this node (the NAT loopback of
// each family's VPP-host subnet). The renderer takes the first of each
// family for cnat's source NAT ([vppmodel.CnatSnat]); a family without one
// gets no source NAT (see [Stats].SNAT).
//
// # Contract
//
// SNATAddrs is called on the goroutine that calls [Renderer.Render], on
// every resync and every NodeIPsChanged notification. It must not block.
type SNATAddrs interface {
	SNATAddrs() []netip.Addr
}

// NodeIPsFunc adapts a function into [NodeIPs].
type NodeIPsFunc func() []netip.Addr

// NodeIPs calls f.
func (f NodeIPsFunc) NodeIPs() []netip.Addr { return f() }

// SNATAddrsFunc adapts a function into [SNATAddrs].
type SNATAddrsFunc func() []netip.Addr

// SNATAddrs calls f.
func (f SNATAddrsFunc) SNATAddrs() []netip.Addr { return f() }

var (
	_ NodeIPs   = NodeIPsFunc(nil)
	_ SNATAddrs = SNATAddrsFunc(nil)
)

// AnchorInterface is the logical name of the loopback the renderer keeps
// in the SNAT policy's INCLUDE_V4 table: VPP 26.06 takes a SNAT entry whose
// INCLUDE_V4 table has been emptied (the last pod of the node gone) for
// uninitialized, and the next pod interface added then drops every
// excluded prefix (seen on VPP 26.06; see vppdriver/vppmodel.CnatInterface).
// The loopback has no address and stays down: no packet comes in on it.
const AnchorInterface = "cnat-anchor"

// LBAnnotation is the service annotation that chooses how a service's
// connections are spread over its backends: [LBECMP] (the default) or
// [LBMaglev].
const LBAnnotation = "vswitchkit.io/lb"

// Values of [LBAnnotation].
const (
	// LBECMP: a hash of the connection's 5-tuple picks the backend (cnat's
	// default lb type). A change of the backends can move any flow's next
	// connection to another backend.
	LBECMP = "ecmp"
	// LBMaglev: Maglev consistent hashing (cnat's maglev lb type). When a
	// backend goes, only the flows it had move; a backend added takes
	// about its share from every other one. See the package documentation.
	LBMaglev = "maglev"
)

// Config holds the optional settings of a [Renderer]. The zero value is
// valid: services are rendered on the pod interfaces the service
// processor reports, without an uplink or host interconnect feature and
// with no destination exempt from source NAT.
type Config struct {
	// Logger receives warnings (problems of services and pods, a family
	// without a source-NAT address) and debug messages. Default: discard.
	Logger *slog.Logger

	// NodeName is this node's name: the pods whose hostPorts the renderer
	// exposes are the pods of this node (kubemodel.Pod.NodeName). Default
	// "": every pod the renderer's handler is given (an agent's watcher
	// gives it this node's pods only).
	NodeName string

	// Uplink is the logical name (a vppdriver/vppmodel Interface, usually
	// the node connectivity handler's) of this node's uplink. It gets
	// cnat's feature: clients outside the cluster reach node ports,
	// external and load-balancer IPs and hostPorts through it, and the
	// replies of pod traffic that was source-NATed come back through it.
	// Default "": none.
	Uplink string

	// InterconnectInterfaces are the VPP side of the VPP-host interconnect
	// (and any other link to the host's network stack). They get cnat's
	// feature (the host is a client of cluster IPs and node ports) and
	// join the SNAT policy's HOST table: traffic to the host is never
	// source-NATed. The tunnels to other nodes need the feature too: their
	// owner (render/nodeconn with Config.Cnat) gives it to them. Default:
	// none.
	InterconnectInterfaces []string

	// ExcludedPrefixes are the destinations that pod traffic keeps its
	// source address to: the cluster's pod, service, VPP-host and VXLAN
	// ranges, of both families ([ExcludedPrefixes] gives them; not the
	// nodes' addresses, see there). Traffic to anything else is
	// source-NATed to this node's address of its family. At most
	// vppmodel.MaxCnatExcludedPrefixes; host bits are cleared. Default:
	// none (every pod connection to another node would be source-NATed:
	// set it).
	ExcludedPrefixes []netip.Prefix

	// DisableSNAT turns off the source NAT of pod traffic leaving the
	// cluster (the pods are not in the SNAT policy's INCLUDE tables). The
	// source NAT that services need stays: a pod reaching a service
	// backed by itself, and external clients of a node port whose backend
	// is on another node. Default false: pods reach the outside world
	// with the node's address.
	DisableSNAT bool
}

func (c Config) validate() error {
	var errs []error
	check := func(field, name string) {
		if name == "" || len(name) > vppmodel.MaxInterfaceNameLen {
			errs = append(errs, fmt.Errorf("svccnat: Config.%s %q is not an interface name (1-%d bytes)", field, name, vppmodel.MaxInterfaceNameLen))
		}
		if name == AnchorInterface {
			errs = append(errs, fmt.Errorf("svccnat: Config.%s %q is the renderer's own loopback", field, name))
		}
	}
	if c.Uplink != "" {
		check("Uplink", c.Uplink)
	}
	for i, name := range c.InterconnectInterfaces {
		check(fmt.Sprintf("InterconnectInterfaces[%d]", i), name)
		if name == c.Uplink {
			errs = append(errs, fmt.Errorf("svccnat: Config.InterconnectInterfaces[%d] %q is the uplink", i, name))
		}
		if slices.Index(c.InterconnectInterfaces, name) != i {
			errs = append(errs, fmt.Errorf("svccnat: Config.InterconnectInterfaces[%d] %q is listed twice", i, name))
		}
	}
	if len(c.ExcludedPrefixes) > vppmodel.MaxCnatExcludedPrefixes {
		errs = append(errs, fmt.Errorf("svccnat: Config.ExcludedPrefixes: %d prefixes, at most %d", len(c.ExcludedPrefixes), vppmodel.MaxCnatExcludedPrefixes))
	}
	for i, p := range c.ExcludedPrefixes {
		if !p.IsValid() || p.Addr().Zone() != "" || p.Addr().Is4In6() {
			errs = append(errs, fmt.Errorf("svccnat: Config.ExcludedPrefixes[%d] %v is not an IPv4 or IPv6 prefix", i, p))
		}
	}
	return errors.Join(errs...)
}

// excluded returns the prefixes of cfg masked, sorted and unique.
func (c Config) excluded() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(c.ExcludedPrefixes))
	for _, p := range c.ExcludedPrefixes {
		out = append(out, p.Masked())
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(out)
}

// ClusterRanges is the part of an IPAM that [ExcludedPrefixes] reads;
// *ipam.IPAM satisfies it.
type ClusterRanges interface {
	PodSubnetAllNodesPrefix() netip.Prefix
	HostInterconnectSubnetAllNodesPrefix() netip.Prefix
	ServiceNetworkPrefix() netip.Prefix
	VxlanAddr(nodeID uint32) (netip.Prefix, error)
}

// ExcludedPrefixes returns the cluster's ranges of the address plans of
// ipams (one per IP family), for [Config].ExcludedPrefixes: the pod, the
// VPP-host, the service and the VXLAN ranges. The node interconnect range
// is not among them: a pod's connection to another node's address (its
// node ports and hostPorts) is source-NATed to this node's address, so
// that the reply comes back through the uplink (see the package
// documentation, "Limits of VPP 26.06").
func ExcludedPrefixes(ipams ...ClusterRanges) []netip.Prefix {
	var out []netip.Prefix
	add := func(p netip.Prefix) {
		if p.IsValid() && !slices.Contains(out, p.Masked()) {
			out = append(out, p.Masked())
		}
	}
	for _, i := range ipams {
		add(i.PodSubnetAllNodesPrefix())
		add(i.HostInterconnectSubnetAllNodesPrefix())
		add(i.ServiceNetworkPrefix())
		if p, err := i.VxlanAddr(1); err == nil {
			add(p)
		}
	}
	return out
}

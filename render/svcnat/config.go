package svcnat

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// NodeIPs lists this node's addresses: the addresses on which NodePort
// services are exposed here. nodeaddr.NodeIPSet with OnlyNode set to this
// node's name provides them (from nodesync).
//
// # Contract
//
// NodeIPs is called on the goroutine that calls [Renderer.Render] (the
// event loop): on every resync and on every NodeIPsChanged notification.
// The renderer does not keep the returned slice. It must not block and
// must not call back into the renderer or the service processor. Register
// the handler that keeps the source up to date (a NodeIPSet) before the
// service processor's handler, so that it has seen a node change before
// the renderer asks. Addresses other than IPv4 are ignored (NAT44).
type NodeIPs interface {
	NodeIPs() []netip.Addr
}

// NATLoopback gives the NAT loopback address of this node: the source
// address of a pod's connection to a service that picked that very pod
// as the backend (self-twice-NAT), and of external traffic forwarded to
// backends with the Cluster traffic policy (twice-NAT). *ipam.IPAM
// provides it (an address of this node's VPP-host subnet, which the other
// nodes route to this node).
//
// # Contract
//
// NatLoopbackAddr is called on the goroutine that calls [Renderer.Render]
// on every resync. It returns the invalid Addr while the address is unknown
// (IPAM before its first resync); the renderer then configures no
// twice-NAT pool and logs a warning. It must not block.
type NATLoopback interface {
	NatLoopbackAddr() netip.Addr
}

// NodeIPsFunc adapts a function into [NodeIPs].
type NodeIPsFunc func() []netip.Addr

// NodeIPs calls f.
func (f NodeIPsFunc) NodeIPs() []netip.Addr { return f() }

// NATLoopbackFunc adapts a function into [NATLoopback].
type NATLoopbackFunc func() netip.Addr

// NatLoopbackAddr calls f.
func (f NATLoopbackFunc) NatLoopbackAddr() netip.Addr { return f() }

var (
	_ NodeIPs     = NodeIPsFunc(nil)
	_ NATLoopback = NATLoopbackFunc(nil)
)

// Config holds the optional settings of a [Renderer]. The zero value is
// valid: services and pod interfaces are rendered, but without an uplink
// there is neither NodePort access from outside nor source NAT.
type Config struct {
	// Logger receives warnings (unsupported protocols, conflicting
	// services, a missing NAT loopback) and debug messages. Default:
	// discard.
	Logger *slog.Logger

	// Uplink is the logical name (a vppdriver/vppmodel Interface, usually
	// the node connectivity handler's) of this node's uplink. It gets the
	// NAT44 output feature: external clients reach NodePorts, external and
	// load-balancer IPs through it, and pod traffic leaving the node
	// through it is source-NATed to the uplink's address (see
	// DisableSNAT). An uplink listed in the service processor's frontend
	// interfaces is rendered here, not as a frontend. Default "": no
	// uplink feature and no source NAT.
	Uplink string

	// DisableSNAT turns off the source NAT of traffic leaving through the
	// uplink (the pool that holds the uplink's address); the output
	// feature stays for external service traffic. Default false: pods
	// reach the outside world with the node's address.
	DisableSNAT bool

	// InterconnectInterfaces are interfaces through which this node
	// reaches backends that are not its pods and through which clients
	// come: the VPP side of the VPP-host interconnect (host-network
	// backends and the host as a client) and the links to other nodes
	// (the replies of remote backends come back through them and must be
	// translated back). They get the NAT44 inside and outside features.
	// Interfaces created and removed with the cluster (one VXLAN tunnel
	// per node) are better marked by their owner with the same
	// [vppmodel.Nat44Interface] value. Default: none.
	InterconnectInterfaces []string

	// LocalBackendWeight is the share of the traffic of a mapping that a
	// backend on this node gets relative to a backend on another node
	// (weight 1), 1-50. Default 1: all backends alike. VPP's backend
	// probabilities are twice the weights: VPP draws the backend from a
	// linear congruential generator whose low bit alternates, and a
	// connection that takes two draws (twice-NAT, hairpinning) would
	// otherwise always land on the same one of two backends with
	// probability 1 each (seen on VPP 26.06).
	LocalBackendWeight uint32

	// MaxSessions is the number of NAT44 sessions per VPP thread. Default
	// 0: VPP's default (64512). Changing it re-enables the NAT44 plugin,
	// which re-applies all NAT44 configuration.
	MaxSessions uint32
}

func (c Config) validate() error {
	var errs []error
	if c.LocalBackendWeight > maxWeight {
		errs = append(errs, fmt.Errorf("svcnat: Config.LocalBackendWeight %d is not in 1-%d", c.LocalBackendWeight, maxWeight))
	}
	check := func(field, name string) {
		if name == "" || len(name) > vppmodel.MaxInterfaceNameLen {
			errs = append(errs, fmt.Errorf("svcnat: Config.%s %q is not an interface name (1-%d bytes)", field, name, vppmodel.MaxInterfaceNameLen))
		}
	}
	if c.Uplink != "" {
		check("Uplink", c.Uplink)
	}
	for i, name := range c.InterconnectInterfaces {
		check(fmt.Sprintf("InterconnectInterfaces[%d]", i), name)
		if name == c.Uplink {
			errs = append(errs, fmt.Errorf("svcnat: Config.InterconnectInterfaces[%d] %q is the uplink", i, name))
		}
		if slices.Index(c.InterconnectInterfaces, name) != i {
			errs = append(errs, fmt.Errorf("svcnat: Config.InterconnectInterfaces[%d] %q is listed twice", i, name))
		}
	}
	return errors.Join(errs...)
}

// maxWeight keeps 2*weight within VPP's probability range (1-100).
const maxWeight = 50

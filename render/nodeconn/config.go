package nodeconn

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// Default names and values of [Config].
const (
	DefaultUplinkName           = "uplink"
	DefaultHostInterconnectName = "vpp-host"
	DefaultVxlanLoopbackName    = "vxlan"
	DefaultVNI                  = 10
	DefaultIPv6VNI              = 11
)

// Config configures a [Handler]. The zero value is valid: the handler then
// configures no uplink and no VPP-host interconnect (only the VXLAN mesh,
// with the node IP from IPAM) and no NAT44 identity mapping. It is a plain
// value, copied by [New].
type Config struct {
	// Uplink is this node's interface towards the other nodes.
	Uplink Uplink

	// HostInterconnect is VPP's side of the link between VPP and the
	// host's Linux network stack.
	HostInterconnect HostInterconnect

	// VxlanLoopbackName is the logical name of the loopback that holds
	// this node's VXLAN IP (from IPAM); the tunnels borrow its address
	// (unnumbered). Default: DefaultVxlanLoopbackName.
	VxlanLoopbackName string

	// VNI is the VXLAN network identifier of the tunnels that carry IPv4.
	// Default: DefaultVNI.
	VNI uint32
	// IPv6VNI is the VNI of the tunnels that carry IPv6 (a routed tunnel
	// carries one family; both run between the same endpoints). Default:
	// DefaultIPv6VNI.
	IPv6VNI uint32

	// NAT44 adds an identity mapping for UDP port 4789 on the node IP and
	// makes every IPv4 tunnel a NAT44 inside and outside interface: set it
	// when the uplink is a NAT44 outside interface (the service renderer
	// makes it one), which otherwise drops the VXLAN packets, and so that
	// replies of service backends on other nodes are translated back. The
	// NAT44 plugin itself (Nat44Global) is the service renderer's.
	NAT44 bool

	// Cnat gives the tunnels to other nodes cnat's feature and puts them
	// in its SNAT policy's POD table (vppmodel.CnatInterface; the table
	// needs the SNAT entry, which the service renderer makes): set it when
	// services are rendered onto cnat (render/svccnat), whose translations
	// and source NAT run in feature arcs that a flow must pass where it
	// enters and leaves VPP — the replies of backends on other nodes come
	// in through the tunnels — and whose source NAT must not act on
	// traffic that leaves through a tunnel (VPP 26.06 would apply it again
	// to the VXLAN packet). The uplink and the host interconnect get the
	// feature from the service renderer. Default false.
	Cnat bool

	// DualStack is the IPAM of the second IP family in a dual-stack
	// cluster: the uplink, the host interconnect and the VXLAN loopback get
	// this node's addresses of that family too, both node IPs are
	// published, and the routes to the other nodes' subnets of that family
	// go through the tunnels that carry it (over the first family's
	// underlay). Default nil: one family, the IPAM's.
	DualStack IPAM

	// PodCIDRsFromKubernetes routes to other nodes' pod subnets taken from
	// their Kubernetes node objects (spec.podCIDRs, IPv4 and IPv6 for
	// dual-stack) instead of IPAM's per-node slice: set it with external
	// IPAM. Default: IPAM's PodSubnetOtherNode.
	PodCIDRsFromKubernetes bool

	// Logger receives debug logs. Default: discard.
	Logger *slog.Logger
}

// Uplink configures this node's uplink. At most one of AfPacketHostIf and
// VPPName may be set; with neither, the handler configures no uplink
// interface (the node IP is then expected on an interface configured
// elsewhere) but still builds the mesh from the node IP.
type Uplink struct {
	// Name is the logical name of the uplink interface. Default:
	// DefaultUplinkName.
	Name string
	// AfPacketHostIf is the Linux interface (e.g. "eth1") that VPP
	// attaches to with af_packet.
	AfPacketHostIf string
	// VPPName is the VPP name of an interface VPP already has (a DPDK NIC,
	// e.g. "GigabitEthernet0/8/0"): it is adopted, configured and never
	// deleted.
	VPPName string
	// Address is this node's node-interconnect address with prefix
	// length, e.g. 192.168.16.5/24. Default: IPAM's NodeAddr of
	// this node's ID.
	Address netip.Prefix
	// MACAddress is the MAC of the af_packet interface ("aa:bb:cc:dd:ee:ff"),
	// e.g. the Linux interface's own. Default: 06:00 followed by the node
	// ID (four bytes): the same after every VPP restart (VPP would choose
	// a random one, leaving the neighbors' ARP entries stale). Not used
	// with VPPName (a NIC keeps its MAC).
	MACAddress string
}

// HostInterconnect configures VPP's side of the VPP-host link; its address
// is IPAM's HostInterconnectAddrInVPP in HostInterconnectSubnetThisNodePrefix. At
// most one of AfPacketHostIf and TapHostIfName may be set; with neither,
// the handler configures none.
type HostInterconnect struct {
	// Name is the logical name of the interface. Default:
	// DefaultHostInterconnectName.
	Name string
	// AfPacketHostIf is the host end of a veth pair (created by the
	// application) that VPP attaches to with af_packet; the other end
	// holds HostInterconnectIPInLinux.
	AfPacketHostIf string
	// TapHostIfName makes VPP create a tap v2 interface whose Linux side
	// gets this name (needs /dev/vhost-net).
	TapHostIfName string
	// MACAddress is the MAC of VPP's side. Default: 06:01 followed by the
	// node ID (four bytes), the same after every VPP restart.
	MACAddress string
}

func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Uplink.Name == "" {
		c.Uplink.Name = DefaultUplinkName
	}
	if c.HostInterconnect.Name == "" {
		c.HostInterconnect.Name = DefaultHostInterconnectName
	}
	if c.VxlanLoopbackName == "" {
		c.VxlanLoopbackName = DefaultVxlanLoopbackName
	}
	if c.VNI == 0 {
		c.VNI = DefaultVNI
	}
	if c.IPv6VNI == 0 {
		c.IPv6VNI = DefaultIPv6VNI
	}
	if c.Uplink.AfPacketHostIf != "" && c.Uplink.VPPName != "" {
		errs = append(errs, errors.New("Uplink: set AfPacketHostIf or VPPName, not both"))
	}
	if c.HostInterconnect.AfPacketHostIf != "" && c.HostInterconnect.TapHostIfName != "" {
		errs = append(errs, errors.New("HostInterconnect: set AfPacketHostIf or TapHostIfName, not both"))
	}
	if a := c.Uplink.Address; a != (netip.Prefix{}) && (!a.IsValid() || a.Addr().Zone() != "" || a.Addr().Is4In6()) {
		errs = append(errs, fmt.Errorf("Uplink.Address %s is not an address with prefix length", a))
	}
	if c.VNI >= 1<<24 || c.IPv6VNI >= 1<<24 || c.VNI == c.IPv6VNI {
		errs = append(errs, fmt.Errorf("VNI %d and IPv6VNI %d must differ and be below 2^24", c.VNI, c.IPv6VNI))
	}
	names := map[string]string{}
	for _, f := range []struct{ field, name string }{{"Uplink.Name", c.Uplink.Name},
		{"HostInterconnect.Name", c.HostInterconnect.Name}, {"VxlanLoopbackName", c.VxlanLoopbackName}} {
		if err := vppmodel.Validate(&vppmodel.Interface{Name: f.name, Type: vppmodel.Interface_LOOPBACK}); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.field, err))
		}
		if other, dup := names[f.name]; dup {
			errs = append(errs, fmt.Errorf("%s and %s are both %q", other, f.field, f.name))
		}
		names[f.name] = f.field
	}
	for _, f := range []struct{ field, mac string }{{"Uplink.MACAddress", c.Uplink.MACAddress},
		{"HostInterconnect.MACAddress", c.HostInterconnect.MACAddress}} {
		if f.mac != "" {
			if _, err := vppmodel.ParseMAC(f.mac); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", f.field, err))
			}
		}
	}
	// The interfaces the handler will build must be valid models.
	for _, f := range []struct {
		field string
		m     *vppmodel.Interface
	}{
		{"Uplink.AfPacketHostIf", &vppmodel.Interface{Name: "x", Type: vppmodel.Interface_AF_PACKET,
			AfPacket: &vppmodel.AfPacketLink{HostIfName: c.Uplink.AfPacketHostIf}}},
		{"Uplink.VPPName", &vppmodel.Interface{Name: "x", Type: vppmodel.Interface_EXISTING,
			Existing: &vppmodel.ExistingLink{VppName: c.Uplink.VPPName}}},
		{"HostInterconnect.AfPacketHostIf", &vppmodel.Interface{Name: "x", Type: vppmodel.Interface_AF_PACKET,
			AfPacket: &vppmodel.AfPacketLink{HostIfName: c.HostInterconnect.AfPacketHostIf}}},
		{"HostInterconnect.TapHostIfName", &vppmodel.Interface{Name: "x", Type: vppmodel.Interface_TAP,
			Tap: &vppmodel.TapLink{HostIfName: c.HostInterconnect.TapHostIfName}}},
	} {
		field, m := f.field, f.m
		if m.GetAfPacket().GetHostIfName() == "" && m.GetExisting().GetVppName() == "" && m.GetTap().GetHostIfName() == "" {
			continue // not set
		}
		if err := vppmodel.Validate(m); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("nodeconn: invalid config: %w", err)
	}
	return c, nil
}

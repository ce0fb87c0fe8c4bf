package agent

import (
	"fmt"
	"net/netip"

	"github.com/vswitchkit/vswitchkit/ipam"
)

// IP families of the cluster (Config.IPFamily).
const (
	IPv4      = "ipv4" // IPv4 only (the default)
	IPv6      = "ipv6" // IPv6 only: Config.IPAM is an IPv6 plan
	DualStack = "dual" // both: Config.IPAM the IPv4 plan, Config.IPAM6 the IPv6 one
)

// IPAM6EtcdPrefix is the etcd prefix of the IPv6 IPAM's records in a
// dual-stack cluster with the etcd IPAM store (the IPv4 IPAM's are under
// etcdstore.DefaultPrefix).
const IPAM6EtcdPrefix = "/vswitchkit/ipam6/"

// DefaultIPv6Plan returns the IPv6 address plan the agent uses where an
// IPv6 plan (Config.IPAM with IPFamily "ipv6", Config.IPAM6 with "dual")
// sets none of its ranges: pods fd00:1::/104 with a /120 per node, the
// VPP-host links fd00:30::/112 (a /120 per node), the node interconnect
// fd00:16::/64, VXLAN fd00:31::/64, services fd00:96::/108. Per-node pod
// subnets of at most 32 bits beside the cluster's prefix keep services'
// hairpin working with render/svccnat (cnat's hairpin rule compares the
// low 32 bits of IPv6 addresses: see its documentation).
func DefaultIPv6Plan() ipam.Config {
	return ipam.Config{
		PodSubnetCIDR:        netip.MustParsePrefix("fd00:1::/104"),
		VPPHostSubnetCIDR:    netip.MustParsePrefix("fd00:30::/112"),
		NodeInterconnectCIDR: netip.MustParsePrefix("fd00:16::/64"),
		VXLANCIDR:            netip.MustParsePrefix("fd00:31::/64"),
		ServiceCIDR:          netip.MustParsePrefix("fd00:96::/108"),
	}
}

// planRanges are the ranges of an address plan that say its family.
func planRanges(c ipam.Config) []netip.Prefix {
	return []netip.Prefix{c.PodSubnetCIDR, c.SingleCIDR, c.VPPHostSubnetCIDR, c.NodeInterconnectCIDR, c.VXLANCIDR, c.ServiceCIDR}
}

// withIPv6Defaults returns c with DefaultIPv6Plan's ranges if c sets none.
func withIPv6Defaults(c ipam.Config) ipam.Config {
	for _, p := range planRanges(c) {
		if p.IsValid() {
			return c
		}
	}
	d := DefaultIPv6Plan()
	c.PodSubnetCIDR, c.VPPHostSubnetCIDR, c.NodeInterconnectCIDR, c.VXLANCIDR, c.ServiceCIDR =
		d.PodSubnetCIDR, d.VPPHostSubnetCIDR, d.NodeInterconnectCIDR, d.VXLANCIDR, d.ServiceCIDR
	return c
}

// checkPlanFamily reports the ranges of plan (the configuration's field
// name) that are not of the family it must be of.
func checkPlanFamily(field string, c ipam.Config, v6 bool) []error {
	family := map[bool]string{false: "IPv4", true: "IPv6"}[v6]
	var errs []error
	names := []string{"podSubnetCIDR", "singleCIDR", "vppHostSubnetCIDR", "nodeInterconnectCIDR", "vxlanCIDR", "serviceCIDR"}
	for i, p := range planRanges(c) {
		if p.IsValid() && p.Addr().Is6() != v6 {
			errs = append(errs, fmt.Errorf("%s.%s: %v is not %s", field, names[i], p, family))
		}
	}
	if c.DefaultGateway.IsValid() && c.DefaultGateway.Is6() != v6 {
		errs = append(errs, fmt.Errorf("%s.defaultGateway: %v is not %s", field, c.DefaultGateway, family))
	}
	return errs
}

// checkHairpin reports an IPv6 plan whose per-node pod subnets are wider
// than 32 bits of host part with the cnat renderer: cnat's hairpin rule
// compares the low 32 bits of IPv6 addresses (see render/svccnat, "Limits
// of VPP 26.06"), so pods of two nodes would be taken for one.
func checkHairpin(field string, c ipam.Config) error {
	if c.PodSubnetOneNodePrefixLen != 0 && c.PodSubnetOneNodePrefixLen < 96 {
		return fmt.Errorf("%s.podSubnetOneNodePrefixLen: %d is below 96: with services %q, per-node IPv6 pod subnets must differ in their low 32 bits (cnat's hairpin rule compares those only)",
			field, c.PodSubnetOneNodePrefixLen, ServicesCnat)
	}
	return nil
}

package ipam

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Sentinel errors. Callers branch on them with errors.Is; the returned
// errors wrap them with details.
var (
	// ErrInvalidConfig is wrapped by every [ConfigError] that New returns.
	ErrInvalidConfig = errors.New("ipam: invalid config")

	// ErrInvalidNodeID is returned when a node ID is 0 or does not fit one
	// of the ranges (beyond a range's capacity, or it would give the
	// broadcast address or an address outside the subnet).
	ErrInvalidNodeID = errors.New("ipam: invalid node ID")

	// ErrNotReady is returned by methods that need this node's ID (or, with
	// external IPAM, this node's pod CIDR) before a Resync has provided it.
	ErrNotReady = errors.New("ipam: this node's ID or pod CIDR is not known yet")

	// ErrPoolExhausted is returned by AllocatePodIP when every address of
	// this node's pod subnet is in use.
	ErrPoolExhausted = errors.New("ipam: pod IP pool exhausted")

	// ErrNoNodeInterconnect is returned by NodeIPAddress when the node
	// interconnect addresses come from DHCP, so IPAM computes none.
	ErrNoNodeInterconnect = errors.New("ipam: node interconnect uses DHCP, no address is computed")

	// ErrExternalIPAM is returned by PodSubnetOtherNode in external IPAM
	// mode: other nodes' pod CIDRs are assigned by Kubernetes, not derived
	// from node IDs.
	ErrExternalIPAM = errors.New("ipam: not available in external IPAM mode")

	// ErrInvalidIPAMData is returned by AllocatePodIP when ipamType is set
	// and ipamData does not carry a usable address.
	ErrInvalidIPAMData = errors.New("ipam: invalid IPAM data")

	// ErrInvalidPodID is returned for a pod ID with an empty name.
	ErrInvalidPodID = errors.New("ipam: invalid pod ID")
)

// ConfigError describes one invalid Config field. New returns all of them
// joined with errors.Join; use errors.As to inspect one, or errors.Is with
// [ErrInvalidConfig]. A ConfigError is immutable once returned.
type ConfigError struct {
	Field  string // Config field name, e.g. "PodSubnetCIDR"
	Value  string // the offending value as configured (may be empty)
	Reason string
}

func (e *ConfigError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("ipam: config %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("ipam: config %s %s: %s", e.Field, e.Value, e.Reason)
}

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// ConflictError is returned by AllocatePodIP when an externally assigned
// address (ipamType set) is already allocated to another pod. It is
// immutable once returned.
type ConflictError struct {
	Addr  netip.Addr
	Owner kubemodel.PodID
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("ipam: address %s is already allocated to pod %s", e.Addr, e.Owner)
}

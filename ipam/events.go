package ipam

import (
	"net/netip"

	"github.com/vswitchkit/vswitchkit/controller"
)

// PodCIDRChange is pushed (in external IPAM mode) when the pod CIDR that
// Kubernetes assigned to this node really changes. Its Method is
// UpstreamResync, so every handler rebuilds its state for the new subnet.
// It is not blocking. A PodCIDRChange is immutable once pushed; it is not
// meant to be modified concurrently.
type PodCIDRChange struct {
	// PrevPodCIDR is the previous pod CIDR of this node (invalid if none).
	PrevPodCIDR netip.Prefix
	// LocalPodCIDR is the new pod CIDR of this node.
	LocalPodCIDR netip.Prefix
}

var _ controller.Event = (*PodCIDRChange)(nil)

// GetName returns the name of the PodCIDRChange event.
func (ev *PodCIDRChange) GetName() string { return "Pod CIDR Change" }

// String describes the PodCIDRChange event.
func (ev *PodCIDRChange) String() string {
	prev := "none"
	if ev.PrevPodCIDR.IsValid() {
		prev = ev.PrevPodCIDR.String()
	}
	return "Pod CIDR Change: " + prev + " -> " + ev.LocalPodCIDR.String()
}

// Method is UpstreamResync.
func (ev *PodCIDRChange) Method() controller.EventMethodType { return controller.UpstreamResync }

// IsBlocking returns false.
func (ev *PodCIDRChange) IsBlocking() bool { return false }

// Done is a no-op.
func (ev *PodCIDRChange) Done(error) {}

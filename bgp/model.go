package bgp

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
)

// PolicyFromModel converts the stored protobuf model of a peering policy.
// Unparsable addresses and out-of-range numbers are errors naming the field
// (as *[FieldError], matching [ErrInvalidPolicy]); everything else is left
// to [PeeringPolicy.Validate]. Zero numbers stay zero, so that
// [PeeringPolicy.WithDefaults] fills them in.
func PolicyFromModel(m *bgpmodel.PeeringPolicy) (*PeeringPolicy, error) {
	if m == nil {
		return nil, &FieldError{Field: "policy", Reason: "is nil"}
	}
	var errs []error
	p := &PeeringPolicy{Name: m.GetName(), NodeSelector: selectorFromModel(m.GetNodeSelector())}
	for i, vr := range m.GetVirtualRouters() {
		out := VirtualRouter{
			LocalASN:            vr.GetLocalAsn(),
			ExportPodCIDR:       vr.GetExportPodCidr(),
			ServiceSelector:     selectorFromModel(vr.GetServiceSelector()),
			LoadBalancerClasses: slices.Clone(vr.GetLoadBalancerClasses()),
		}
		for _, t := range vr.GetServiceAdvertisements() {
			out.ServiceAdvertisements = append(out.ServiceAdvertisements, ServiceAddressType(t))
		}
		for j, n := range vr.GetNeighbors() {
			f := fmt.Sprintf("virtualRouters[%d].neighbors[%d]", i, j)
			nb := Neighbor{
				PeerASN:          n.GetPeerAsn(),
				Passive:          n.GetPassive(),
				ConnectRetryTime: seconds(n.GetConnectRetryTimeSeconds()),
				HoldTime:         seconds(n.GetHoldTimeSeconds()),
				KeepaliveTime:    seconds(n.GetKeepaliveTimeSeconds()),
				GracefulRestart: GracefulRestart{
					Enabled:     n.GetGracefulRestart().GetEnabled(),
					RestartTime: seconds(n.GetGracefulRestart().GetRestartTimeSeconds()),
				},
				Password: n.GetPassword(),
			}
			if a, err := netip.ParseAddr(n.GetPeerAddress()); err == nil {
				nb.PeerAddress = a
			} else {
				errs = append(errs, &FieldError{Field: f + ".peerAddress", Value: n.GetPeerAddress(), Reason: "not an IP address"})
			}
			if n.GetLocalAddress() != "" {
				if a, err := netip.ParseAddr(n.GetLocalAddress()); err == nil {
					nb.LocalAddress = a
				} else {
					errs = append(errs, &FieldError{Field: f + ".localAddress", Value: n.GetLocalAddress(), Reason: "not an IP address"})
				}
			}
			if n.GetPeerPort() > 65535 {
				errs = append(errs, &FieldError{Field: f + ".peerPort", Value: n.GetPeerPort(), Reason: "must be 1..65535"})
			} else {
				nb.PeerPort = uint16(n.GetPeerPort())
			}
			if n.GetEbgpMultihopTtl() > 255 {
				errs = append(errs, &FieldError{Field: f + ".eBGPMultihopTTL", Value: n.GetEbgpMultihopTtl(), Reason: "must be 1..255"})
			} else {
				nb.EBGPMultihopTTL = uint8(n.GetEbgpMultihopTtl())
			}
			for _, fam := range n.GetFamilies() {
				nb.Families = append(nb.Families, Family(fam))
			}
			out.Neighbors = append(out.Neighbors, nb)
		}
		p.VirtualRouters = append(p.VirtualRouters, out)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("policy %q: %w", m.GetName(), err)
	}
	return p, nil
}

func seconds(s uint32) time.Duration { return time.Duration(s) * time.Second }

func selectorFromModel(m *bgpmodel.LabelSelector) *LabelSelector {
	if m == nil {
		return nil
	}
	s := &LabelSelector{MatchLabels: m.GetMatchLabels()}
	for _, e := range m.GetMatchExpressions() {
		s.MatchExpressions = append(s.MatchExpressions, LabelSelectorRequirement{
			Key: e.GetKey(), Operator: SelectorOperator(e.GetOperator()), Values: e.GetValues(),
		})
	}
	return s.Clone()
}

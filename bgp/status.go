package bgp

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
)

// NodeStatus is the BGP status of one node: what configuration applies,
// every instance and peer with its session and routes, and the problems
// found (after Cilium's CiliumBGPNodeConfig status, plus conditions). It
// is a plain value, made by [Controller.NodeStatus].
type NodeStatus struct {
	// Node is the node's name.
	Node string
	// Source is the configuration applied, "<Kind>/<name>"; empty if none.
	Source string
	// Instances are the BGP instances of the applied configuration, sorted
	// by name; their peers sorted by name.
	Instances []InstanceStatus
	// Conditions are node-level problems, sorted.
	Conditions []Condition
}

// InstanceStatus is the status of one BGP instance of a node.
type InstanceStatus struct {
	Name     string
	LocalASN uint32
	// RouterID is the identifier in use; invalid if none could be found.
	RouterID netip.Addr
	// LocalPort is the listening port; 0 if the instance does not listen.
	LocalPort uint16
	Peers     []PeerStatus
}

// controllerSnapshot is what NodeStatus needs of the last reconcile.
type controllerSnapshot struct {
	spec       *NodeSpec
	state      *ControlPlaneState
	excluded   []ExcludedPeer
	conditions []Condition
	status     ControllerStatus
}

// NodeStatus returns the node's BGP status: the configuration applied last
// (its instances and peers, including the peers left out with their
// conditions), the sessions as the manager reports them when it is a
// [PeerLister] (state, uptime, negotiated timers, routes per family), and
// the node-level conditions: conflicting configurations, invalid objects,
// and the error of the last reconcile. It does not wait for a reconcile in
// progress: the status is that of the last completed one. ctx bounds the
// manager's query.
func (c *Controller) NodeStatus(ctx context.Context) (*NodeStatus, error) {
	c.snapMu.Lock()
	snap := c.snap
	c.snapMu.Unlock()
	st := &NodeStatus{Conditions: slices.Clone(snap.conditions)}
	if snap.state != nil {
		st.Node = snap.state.Node.GetName()
	} else if n := c.nodes.Node(); n != nil {
		st.Node = n.GetName()
	}
	if snap.status.LastError != nil {
		st.Conditions = append(st.Conditions, Condition{Type: ConditionReconcileError, Message: snap.status.LastError.Error()})
	}
	defer func() { slices.SortFunc(st.Conditions, compareConditions) }()
	if snap.spec == nil {
		return st, nil
	}
	st.Source = snap.spec.Source
	type peerKey struct {
		asn  uint32
		addr netip.Addr
	}
	live := map[peerKey]PeerStatus{}
	if pl, ok := c.mgr.(PeerLister); ok {
		peers, err := pl.Peers(ctx)
		if err != nil {
			return nil, fmt.Errorf("bgp: node status: %w", err)
		}
		for _, p := range peers {
			live[peerKey{p.LocalASN, p.PeerAddress.Unmap()}] = p
		}
	}
	for _, in := range snap.spec.Instances {
		is := InstanceStatus{Name: in.Name, LocalASN: in.LocalASN, RouterID: in.RouterID, LocalPort: in.LocalPort}
		if !is.RouterID.IsValid() {
			is.RouterID, _ = snap.state.RouterID(in.LocalASN)
		}
		for _, p := range in.Peers {
			ps, ok := live[peerKey{in.LocalASN, p.PeerAddress.Unmap()}]
			if !ok {
				ps = PeerStatus{LocalASN: in.LocalASN, PeerAddress: p.PeerAddress, PeerASN: p.PeerASN, State: SessionUnknown}
			}
			ps.Name = p.Name
			for _, f := range slices.Sorted(maps.Keys(ps.Disabled)) {
				ps.Conditions = append(ps.Conditions, Condition{Type: ConditionFamilyDisabled, Message: fmt.Sprintf("%s: %s", f, ps.Disabled[f])})
			}
			is.Peers = append(is.Peers, ps)
		}
		for _, ex := range snap.excluded {
			if ex.Instance != in.Name {
				continue
			}
			is.Peers = append(is.Peers, PeerStatus{LocalASN: in.LocalASN, PeerAddress: ex.Peer.PeerAddress, PeerASN: ex.Peer.PeerASN,
				Name: ex.Peer.Name, State: SessionNotConfigured, Conditions: slices.Clone(ex.Conditions)})
		}
		slices.SortFunc(is.Peers, func(a, b PeerStatus) int { return cmp.Compare(a.Name, b.Name) })
		st.Instances = append(st.Instances, is)
	}
	slices.SortFunc(st.Instances, func(a, b InstanceStatus) int { return cmp.Compare(a.Name, b.Name) })
	return st, nil
}

// Peer returns the status of the peer named name of the instance named
// instance, and whether there is one.
func (s *NodeStatus) Peer(instance, name string) (PeerStatus, bool) {
	if s == nil {
		return PeerStatus{}, false
	}
	for _, in := range s.Instances {
		if in.Name != instance {
			continue
		}
		for _, p := range in.Peers {
			if p.Name == name {
				return p, true
			}
		}
	}
	return PeerStatus{}, false
}

// HasCondition reports whether the node (or, with instance and peer set,
// that peer) has a condition of the type.
func (s *NodeStatus) HasCondition(typ ConditionType, instance, peer string) bool {
	conds := s.Conditions
	if instance != "" || peer != "" {
		p, ok := s.Peer(instance, peer)
		if !ok {
			return false
		}
		conds = p.Conditions
	}
	return slices.ContainsFunc(conds, func(c Condition) bool { return c.Type == typ })
}

// NodeStatusToModel converts a node status into the protobuf model that
// agents publish (bgpmodel.NodeStatus). Only stable facts go into it (an
// established time, not an uptime), so that an unchanged status encodes to
// the same bytes.
func NodeStatusToModel(s *NodeStatus) *bgpmodel.NodeStatus {
	if s == nil {
		return nil
	}
	m := &bgpmodel.NodeStatus{Node: s.Node, Source: s.Source, Conditions: conditionsToModel(s.Conditions)}
	for _, in := range s.Instances {
		mi := &bgpmodel.InstanceStatus{Name: in.Name, LocalAsn: in.LocalASN, LocalPort: uint32(in.LocalPort)}
		if in.RouterID.IsValid() {
			mi.RouterId = in.RouterID.String()
		}
		for _, p := range in.Peers {
			mp := &bgpmodel.PeerStatus{Name: p.Name, PeerAsn: p.PeerASN, PeeringState: string(p.State), Conditions: conditionsToModel(p.Conditions)}
			if p.PeerAddress.IsValid() {
				mp.PeerAddress = p.PeerAddress.String()
			}
			if !p.Since.IsZero() {
				mp.EstablishedTime = p.Since.UTC().Truncate(time.Second).Format(time.RFC3339)
			}
			if p.HoldTime > 0 || p.KeepaliveTime > 0 {
				mp.Timers = &bgpmodel.PeerTimersState{AppliedHoldTimeSeconds: uint32(p.HoldTime / time.Second),
					AppliedKeepaliveSeconds: uint32(p.KeepaliveTime / time.Second)}
			}
			for _, f := range p.Negotiated {
				afi, safi := f.AFI()
				mp.RouteCount = append(mp.RouteCount, &bgpmodel.FamilyRouteCount{Afi: afi, Safi: safi,
					Advertised: uint32(p.Advertised[f]), Received: uint32(p.Received[f]), Accepted: uint32(p.Accepted[f])})
			}
			mi.Peers = append(mi.Peers, mp)
		}
		m.BgpInstances = append(m.BgpInstances, mi)
	}
	return m
}

func conditionsToModel(cs []Condition) []*bgpmodel.Condition {
	var out []*bgpmodel.Condition
	for _, c := range cs {
		out = append(out, &bgpmodel.Condition{Type: string(c.Type), Object: c.Object, Message: c.Message})
	}
	return out
}

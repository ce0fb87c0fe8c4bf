package policy

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// PodPolicy is the effective NetworkPolicy of one pod of this node: for
// each direction, whether the pod is isolated and, if it is, the traffic
// its policies allow. It is immutable once delivered: renderers may keep
// it.
type PodPolicy struct {
	Pod kubemodel.PodID
	// Addrs are the pod's addresses (both families for a dual-stack pod);
	// empty until the pod has one.
	Addrs []netip.Addr
	// Ingress is the traffic the pod may receive, Egress what it may send.
	Ingress, Egress Direction
	// Policies are the policies that select the pod, sorted.
	Policies []kubemodel.PolicyID
}

// Direction is one direction of a pod's effective policy. When Isolated is
// false every connection is allowed and Rules is empty; when it is true a
// connection is allowed if it matches a rule (and its replies are allowed
// with it), and denied otherwise.
type Direction struct {
	Isolated bool
	// Rules are in a canonical order (equal policies have equal rules),
	// one per distinct port set.
	Rules []Rule
}

// Rule allows connections with a peer in Peers (any address when
// AnyPeer) on one of Ports: the remote end for ingress (its source
// address), the destination for egress (the destination port; the
// destination's address after service translation).
type Rule struct {
	AnyPeer bool
	// Peers are aggregated: the fewest prefixes covering exactly the
	// peers' addresses, IPv4 first.
	Peers []netip.Prefix
	Ports Ports
}

// Equal reports whether r and q are the same rule.
func (r Rule) Equal(q Rule) bool {
	return r.AnyPeer == q.AnyPeer && slices.Equal(r.Peers, q.Peers) && r.Ports.Equal(q.Ports)
}

// String returns e.g. "from 10.1.1.0/24,10.1.2.7/32 tcp/80" (the peers as
// "any" when AnyPeer).
func (r Rule) String() string {
	peers := "any"
	if !r.AnyPeer {
		s := make([]string, len(r.Peers))
		for i, p := range r.Peers {
			s[i] = p.String()
		}
		peers = strings.Join(s, ",")
	}
	return peers + " " + r.Ports.String()
}

// Equal reports whether d and e are the same.
func (d Direction) Equal(e Direction) bool {
	return d.Isolated == e.Isolated && slices.EqualFunc(d.Rules, e.Rules, Rule.Equal)
}

// Allows reports whether d allows a connection with peer on proto/port.
func (d Direction) Allows(peer netip.Addr, proto kubemodel.Protocol, port uint16) bool {
	if !d.Isolated {
		return true
	}
	for _, r := range d.Rules {
		if !r.Ports.Contains(proto, port) {
			continue
		}
		if r.AnyPeer || slices.ContainsFunc(r.Peers, func(p netip.Prefix) bool { return p.Contains(peer) }) {
			return true
		}
	}
	return false
}

// Equal reports whether p and q are the same (both may be nil).
func (p *PodPolicy) Equal(q *PodPolicy) bool {
	if p == nil || q == nil {
		return p == q
	}
	return p.Pod == q.Pod && slices.Equal(p.Addrs, q.Addrs) && p.Ingress.Equal(q.Ingress) &&
		p.Egress.Equal(q.Egress) && slices.Equal(p.Policies, q.Policies)
}

// Isolated reports whether any direction of p is isolated.
func (p *PodPolicy) Isolated() bool { return p.Ingress.Isolated || p.Egress.Isolated }

// ruleSet collects the rules of one direction and builds its canonical
// form: one rule per port set, with the union of its peers.
type ruleSet struct {
	byPorts []ruleAcc
}

type ruleAcc struct {
	ports Ports
	any   bool
	// lists are the peer lists added, each read-only; one list that is
	// already aggregated is used as it is.
	lists      [][]netip.Prefix
	aggregated bool // one list, aggregated
	sorted     bool // every list aggregated (so sorted)
}

// add adds peers (read-only; aggregated says they are Aggregate's output)
// with ports.
func (s *ruleSet) add(anyPeer bool, peers []netip.Prefix, aggregated bool, ports Ports) {
	if ports.IsEmpty() || (!anyPeer && len(peers) == 0) {
		return
	}
	for i := range s.byPorts {
		a := &s.byPorts[i]
		if a.ports.Equal(ports) {
			a.any = a.any || anyPeer
			if len(peers) > 0 {
				a.lists = append(a.lists, peers)
				a.aggregated = false
				a.sorted = a.sorted && aggregated
			}
			return
		}
	}
	a := ruleAcc{ports: ports, any: anyPeer, aggregated: aggregated, sorted: aggregated}
	if len(peers) > 0 {
		a.lists = [][]netip.Prefix{peers}
	}
	s.byPorts = append(s.byPorts, a)
}

func (s *ruleSet) rules() []Rule {
	out := make([]Rule, 0, len(s.byPorts))
	for _, a := range s.byPorts {
		r := Rule{AnyPeer: a.any, Ports: a.ports}
		switch {
		case a.any:
		case len(a.lists) == 1 && a.aggregated:
			r.Peers = a.lists[0]
		case a.sorted:
			r.Peers = mergeAggregated(a.lists)
		default:
			r.Peers = Aggregate(slices.Concat(a.lists...))
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Rule) int { return a.Ports.compare(b.Ports) })
	return out
}

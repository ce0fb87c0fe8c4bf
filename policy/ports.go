package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// PortRange is the ports First..Last, both included.
type PortRange struct {
	First, Last uint16
}

// String returns "80" or "8000-8080".
func (r PortRange) String() string {
	if r.First == r.Last {
		return fmt.Sprint(r.First)
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// allPorts is every port of a protocol.
var allPorts = []PortRange{{0, 65535}}

// Ports is a set of (protocol, port) pairs: every protocol and port (Any:
// ICMP and the other protocols without ports included), or port ranges of
// TCP, UDP and SCTP. Ranges are sorted and neither overlap nor touch, so
// equal sets are equal values ([Ports.Equal]). The zero value is the empty
// set.
//
// A Ports is a value: its methods never modify their receiver or
// arguments, and results share no slices with them.
type Ports struct {
	Any            bool
	TCP, UDP, SCTP []PortRange
}

// AnyPorts is the set of every protocol and port.
func AnyPorts() Ports { return Ports{Any: true} }

// IsEmpty reports whether p contains nothing.
func (p Ports) IsEmpty() bool {
	return !p.Any && len(p.TCP) == 0 && len(p.UDP) == 0 && len(p.SCTP) == 0
}

// Ranges returns the ranges of proto; every port when p.Any.
func (p Ports) Ranges(proto kubemodel.Protocol) []PortRange {
	if p.Any {
		return allPorts
	}
	switch proto {
	case kubemodel.Protocol_TCP:
		return p.TCP
	case kubemodel.Protocol_UDP:
		return p.UDP
	case kubemodel.Protocol_SCTP:
		return p.SCTP
	}
	return nil
}

// Contains reports whether p holds port of proto.
func (p Ports) Contains(proto kubemodel.Protocol, port uint16) bool {
	if p.Any {
		return true
	}
	for _, r := range p.Ranges(proto) {
		if r.First <= port && port <= r.Last {
			return true
		}
	}
	return false
}

// Equal reports whether p and q are the same set.
func (p Ports) Equal(q Ports) bool {
	return p.Any == q.Any && slices.Equal(p.TCP, q.TCP) && slices.Equal(p.UDP, q.UDP) && slices.Equal(p.SCTP, q.SCTP)
}

// Union returns p ∪ q.
func (p Ports) Union(q Ports) Ports {
	if p.Any || q.Any {
		return Ports{Any: true}
	}
	return Ports{
		TCP:  normalize(append(slices.Clip(p.TCP), q.TCP...)),
		UDP:  normalize(append(slices.Clip(p.UDP), q.UDP...)),
		SCTP: normalize(append(slices.Clip(p.SCTP), q.SCTP...)),
	}
}

// Intersect returns p ∩ q. The intersection of Any with a set of port
// ranges is those ranges: Any's other protocols have no counterpart there.
func (p Ports) Intersect(q Ports) Ports {
	switch {
	case p.Any && q.Any:
		return Ports{Any: true}
	case p.Any:
		return q.clone()
	case q.Any:
		return p.clone()
	}
	return Ports{TCP: intersect(p.TCP, q.TCP), UDP: intersect(p.UDP, q.UDP), SCTP: intersect(p.SCTP, q.SCTP)}
}

// Subset reports whether every element of p is in q.
func (p Ports) Subset(q Ports) bool {
	if q.Any {
		return true
	}
	if p.Any {
		return false
	}
	return p.Intersect(q).Equal(p)
}

func (p Ports) clone() Ports {
	return Ports{Any: p.Any, TCP: slices.Clone(p.TCP), UDP: slices.Clone(p.UDP), SCTP: slices.Clone(p.SCTP)}
}

// String returns "any" or e.g. "tcp/80,8000-8080 udp/53", "" for the empty
// set.
func (p Ports) String() string {
	if p.Any {
		return "any"
	}
	var parts []string
	for _, x := range []struct {
		name string
		rs   []PortRange
	}{{"tcp", p.TCP}, {"udp", p.UDP}, {"sctp", p.SCTP}} {
		if len(x.rs) == 0 {
			continue
		}
		s := make([]string, len(x.rs))
		for i, r := range x.rs {
			s[i] = r.String()
		}
		parts = append(parts, x.name+"/"+strings.Join(s, ","))
	}
	return strings.Join(parts, " ")
}

// compare orders port sets (for sorting rules canonically).
func (p Ports) compare(q Ports) int {
	if p.Any != q.Any {
		if p.Any {
			return -1
		}
		return 1
	}
	for _, x := range [][2][]PortRange{{p.TCP, q.TCP}, {p.UDP, q.UDP}, {p.SCTP, q.SCTP}} {
		if c := slices.CompareFunc(x[0], x[1], func(a, b PortRange) int {
			if a.First != b.First {
				return int(a.First) - int(b.First)
			}
			return int(a.Last) - int(b.Last)
		}); c != 0 {
			return c
		}
	}
	return 0
}

// portsOf builds a set of one protocol's ranges.
func portsOf(proto kubemodel.Protocol, rs ...PortRange) Ports {
	rs = normalize(slices.Clone(rs))
	switch proto {
	case kubemodel.Protocol_UDP:
		return Ports{UDP: rs}
	case kubemodel.Protocol_SCTP:
		return Ports{SCTP: rs}
	}
	return Ports{TCP: rs}
}

// normalize sorts rs and merges overlapping and touching ranges, in place.
func normalize(rs []PortRange) []PortRange {
	if len(rs) == 0 {
		return nil
	}
	slices.SortFunc(rs, func(a, b PortRange) int { return int(a.First) - int(b.First) })
	out := rs[:1]
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if uint32(r.First) <= uint32(last.Last)+1 {
			last.Last = max(last.Last, r.Last)
			continue
		}
		out = append(out, r)
	}
	return slices.Clip(out)
}

// intersect returns the intersection of two normalized range lists.
func intersect(a, b []PortRange) []PortRange {
	var out []PortRange
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i].First, b[j].First), min(a[i].Last, b[j].Last)
		if lo <= hi {
			out = append(out, PortRange{lo, hi})
		}
		if a[i].Last < b[j].Last {
			i++
		} else {
			j++
		}
	}
	return out
}

package svcnat

import (
	"cmp"
	"net/netip"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// frontend is where clients reach a service in VPP: protocol, external
// address and port. VPP keeps one mapping per frontend.
type frontend struct {
	proto vppmodel.Nat44Protocol
	addr  netip.AddrPort
}

func cmpFrontend(a, b frontend) int {
	return cmp.Or(cmp.Compare(a.proto, b.proto), a.addr.Compare(b.addr))
}

// backend is one backend of a mapping with its VPP probability.
type backend struct {
	addr netip.AddrPort
	prob uint32
}

// spec is one mapping as the renderer wants it: a static mapping for one
// backend (VPP refuses load-balanced ones with fewer than two), a
// load-balanced one for more. Immutable once built.
type spec struct {
	fe       frontend
	twice    bool   // twice-NAT (external traffic, Cluster policy); else self-twice-NAT
	affinity uint32 // ClientIP affinity timeout (load-balanced mappings only)
	backends []backend
}

func (s *spec) equal(o *spec) bool {
	return s.fe == o.fe && s.twice == o.twice && s.affinity == o.affinity && slices.Equal(s.backends, o.backends)
}

// key returns the driver key of the mapping.
func (s *spec) key() string {
	if len(s.backends) == 1 {
		return vppmodel.Nat44StaticMappingKey(s.fe.proto, s.fe.addr.Addr(), uint32(s.fe.addr.Port()))
	}
	return vppmodel.Nat44LbStaticMappingKey(s.fe.proto, s.fe.addr.Addr(), uint32(s.fe.addr.Port()))
}

// message returns the model value of the mapping. Every mapping is
// out2in-only: it translates traffic towards the service, and the
// replies through the session, never connections the backends open.
func (s *spec) message() proto.Message {
	ext := s.fe.addr
	if len(s.backends) == 1 {
		b := s.backends[0].addr
		return &vppmodel.Nat44StaticMapping{Protocol: s.fe.proto, LocalIp: b.Addr().String(), LocalPort: uint32(b.Port()),
			ExternalIp: ext.Addr().String(), ExternalPort: uint32(ext.Port()),
			Out2InOnly: true, TwiceNat: s.twice, SelfTwiceNat: !s.twice}
	}
	m := &vppmodel.Nat44LbStaticMapping{Protocol: s.fe.proto, ExternalIp: ext.Addr().String(), ExternalPort: uint32(ext.Port()),
		Affinity: s.affinity, Out2InOnly: true, TwiceNat: s.twice, SelfTwiceNat: !s.twice,
		Backends: make([]*vppmodel.Nat44Backend, len(s.backends))}
	all := make([]vppmodel.Nat44Backend, len(s.backends)) // one allocation for all backends
	for i, b := range s.backends {
		all[i].Ip, all[i].Port, all[i].Probability = b.addr.Addr().String(), uint32(b.addr.Port()), b.prob
		m.Backends[i] = &all[i]
	}
	return m
}

// mapping is a spec with its key and model value (built once, so that an
// unchanged mapping is handed to the driver as the same pointer).
type mapping struct {
	spec spec
	key  string
	msg  proto.Message
}

// rendered is what the renderer wants in VPP for one service.
type rendered struct {
	id          kubemodel.ServiceID
	mappings    []*mapping // sorted by frontend
	unsupported int        // ports of a protocol NAT44 cannot translate (SCTP)
	ipv6        int        // IPv6 frontends (NAT44 translates IPv4 only)
}

func (r *rendered) find(fe frontend) *mapping {
	if r == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(r.mappings, fe, func(m *mapping, fe frontend) int { return cmpFrontend(m.spec.fe, fe) })
	if !ok {
		return nil
	}
	return r.mappings[i]
}

func natProtocol(p kubemodel.Protocol) (vppmodel.Nat44Protocol, bool) {
	switch p {
	case kubemodel.Protocol_TCP:
		return vppmodel.Nat44Protocol_TCP, true
	case kubemodel.Protocol_UDP:
		return vppmodel.Nat44Protocol_UDP, true
	}
	return 0, false
}

// builder computes the mappings of services; its scratch space is reused
// between services.
type builder struct {
	localWeight uint32
	all, local  []backend
}

// build computes what service s needs in VPP, with nodeIPs (IPv4, this
// node's) for its node ports. Mappings equal to those of prev keep prev's
// model values.
func (b *builder) build(s *svcprocessor.ContivService, nodeIPs []netip.Addr, prev *rendered) *rendered {
	out := &rendered{id: s.ID}
	extTwice := s.ExternalTrafficPolicy != svcprocessor.LocalTrafficPolicy
	for i := range s.Ports {
		p := &s.Ports[i]
		proto, ok := natProtocol(p.Protocol)
		if !ok {
			out.unsupported++
			continue
		}
		b.backends(p)
		internal, external := b.all, b.all
		if s.InternalTrafficPolicy == svcprocessor.LocalTrafficPolicy {
			internal = b.local
		}
		if !extTwice {
			external = b.local
		}
		for _, ip := range s.ClusterIPs {
			out.add(prev, frontend{proto, netip.AddrPortFrom(ip, p.Port)}, false, s.SessionAffinityTimeout, internal)
		}
		for _, ip := range s.ExternalIPs {
			out.add(prev, frontend{proto, netip.AddrPortFrom(ip, p.Port)}, extTwice, s.SessionAffinityTimeout, external)
		}
		if p.NodePort != 0 {
			for _, ip := range nodeIPs {
				out.add(prev, frontend{proto, netip.AddrPortFrom(ip, p.NodePort)}, extTwice, s.SessionAffinityTimeout, external)
			}
		}
	}
	slices.SortStableFunc(out.mappings, func(a, b *mapping) int { return cmpFrontend(a.spec.fe, b.spec.fe) })
	// A frontend given twice (an external IP that is also the cluster IP,
	// say): the first one wins (cluster IPs, external IPs, node ports, in
	// port order).
	out.mappings = slices.CompactFunc(out.mappings, func(a, b *mapping) bool { return a.spec.fe == b.spec.fe })
	return out
}

// backends fills b.all with the ready IPv4 backends of p and b.local with
// those on this node, sorted and unique by address and port.
func (b *builder) backends(p *svcprocessor.ServicePort) {
	b.all, b.local = b.all[:0], b.local[:0]
	for _, be := range p.Backends {
		if !be.Ready || !be.IP.Is4() {
			continue
		}
		x := backend{addr: netip.AddrPortFrom(be.IP, be.Port), prob: 2}
		if be.Local {
			x.prob = 2 * b.localWeight
		}
		if n := len(b.all); n > 0 && b.all[n-1].addr == x.addr {
			continue // backends are sorted by address and port
		}
		b.all = append(b.all, x)
		if be.Local {
			b.local = append(b.local, x)
		}
	}
}

// add records the mapping of fe unless it has no backend or is not IPv4.
func (r *rendered) add(prev *rendered, fe frontend, twice bool, affinity uint32, backends []backend) {
	if !fe.addr.Addr().Is4() {
		r.ipv6++
		return
	}
	if len(backends) == 0 {
		return
	}
	if len(backends) == 1 {
		affinity = 0 // a static mapping has none
	}
	sp := spec{fe: fe, twice: twice, affinity: affinity, backends: backends}
	if old := prev.find(fe); old != nil && old.spec.equal(&sp) {
		r.mappings = append(r.mappings, old)
		return
	}
	sp.backends = slices.Clone(backends)
	m := &mapping{spec: sp, key: sp.key()}
	m.msg = m.spec.message()
	r.mappings = append(r.mappings, m)
}

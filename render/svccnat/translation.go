package svccnat

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/svcprocessor"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

// frontend is where clients reach a service (or a hostPort) in VPP:
// protocol, virtual address and port. VPP keeps one translation per
// frontend.
type frontend struct {
	proto uint8 // vppmodel.ProtoTCP or ProtoUDP
	addr  netip.AddrPort
}

func cmpFrontend(a, b frontend) int {
	return cmp.Or(cmp.Compare(a.proto, b.proto), a.addr.Compare(b.addr))
}

func (f frontend) String() string {
	return vppmodel.CnatProtocolName(uint32(f.proto)) + " " + f.addr.String()
}

// spec is one translation as the renderer wants it. Immutable once built.
type spec struct {
	fe    frontend
	real  bool // the VIP is an address of this node
	lb    vppmodel.CnatTranslation_LbType
	fhc   uint32
	paths []netip.AddrPort // sorted, unique, of the frontend's family
}

func (s *spec) equal(o *spec) bool {
	return s.fe == o.fe && s.real == o.real && s.lb == o.lb && s.fhc == o.fhc && slices.Equal(s.paths, o.paths)
}

// message returns the model value of the translation.
func (s *spec) message() *vppmodel.CnatTranslation {
	m := &vppmodel.CnatTranslation{Vip: s.fe.addr.Addr().String(), Port: uint32(s.fe.addr.Port()), Protocol: uint32(s.fe.proto),
		LbType: s.lb, RealIp: s.real, FlowHashConfig: s.fhc, Paths: make([]*vppmodel.CnatPath, len(s.paths))}
	all := make([]vppmodel.CnatPath, len(s.paths)) // one allocation for all paths
	for i, p := range s.paths {
		all[i].DstIp, all[i].DstPort = p.Addr().String(), uint32(p.Port())
		m.Paths[i] = &all[i]
	}
	return m
}

// translation is a spec with its key and model value, built once, so
// that an unchanged translation is handed to the driver as the same
// pointer.
type translation struct {
	spec spec
	key  string
	msg  *vppmodel.CnatTranslation
}

// ownerKind orders the claimants of a frontend: services first.
type ownerKind uint8

const (
	ownerService ownerKind = iota
	ownerPod
)

// owner is a service or a pod (hostPorts), the claimant of frontends.
type owner struct {
	kind      ownerKind
	namespace string
	name      string
}

func serviceOwner(id kubemodel.ServiceID) owner {
	return owner{kind: ownerService, namespace: id.Namespace, name: id.Name}
}

func podOwner(id kubemodel.PodID) owner {
	return owner{kind: ownerPod, namespace: id.Namespace, name: id.Name}
}

func cmpOwner(a, b owner) int {
	return cmp.Or(cmp.Compare(a.kind, b.kind), strings.Compare(a.namespace, b.namespace), strings.Compare(a.name, b.name))
}

func (o owner) String() string {
	if o.kind == ownerPod {
		return "pod " + o.namespace + "/" + o.name
	}
	return "service " + o.namespace + "/" + o.name
}

// problem returns a Problem of o.
func (o owner) problem(r Reason, detail string) Problem {
	p := Problem{Reason: r, Detail: detail}
	if o.kind == ownerPod {
		p.Pod = kubemodel.PodID{Namespace: o.namespace, Name: o.name}
	} else {
		p.Service = kubemodel.ServiceID{Namespace: o.namespace, Name: o.name}
	}
	return p
}

// rendered is what the renderer wants in VPP for one service or one pod's
// hostPorts.
type rendered struct {
	owner owner
	svc   *svcprocessor.ContivService // a service's view
	pod   *hostPod                    // a pod's hostPorts
	trs   []*translation              // sorted by frontend
	// problems are the problems of the object itself (not the frontends
	// it lost to others), sorted.
	problems    []Problem
	unsupported int // ports of a protocol cnat does not translate here
	// nodeBound: what is rendered depends on this node's addresses (node
	// ports, external IPs that may be one, hostPorts).
	nodeBound bool
}

func (r *rendered) find(fe frontend) *translation {
	if r == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(r.trs, fe, func(t *translation, fe frontend) int { return cmpFrontend(t.spec.fe, fe) })
	if !ok {
		return nil
	}
	return r.trs[i]
}

// add records the translation of fe unless it has no path.
func (r *rendered) add(prev *rendered, s spec) {
	if len(s.paths) == 0 {
		return // VPP 26.06 dies on a translation without paths
	}
	if old := prev.find(s.fe); old != nil && old.spec.equal(&s) {
		r.trs = append(r.trs, old)
		return
	}
	s.paths = slices.Clone(s.paths)
	t := &translation{spec: s, key: vppmodel.CnatTranslationKey(uint32(s.fe.proto), s.fe.addr.Addr(), uint32(s.fe.addr.Port()))}
	t.msg = t.spec.message()
	r.trs = append(r.trs, t)
}

// finish sorts the translations (a frontend given twice: the first one
// wins) and the problems.
func (r *rendered) finish() {
	slices.SortStableFunc(r.trs, func(a, b *translation) int { return cmpFrontend(a.spec.fe, b.spec.fe) })
	r.trs = slices.CompactFunc(r.trs, func(a, b *translation) bool { return a.spec.fe == b.spec.fe })
	slices.SortFunc(r.problems, compareProblems)
	r.problems = slices.Compact(r.problems)
}

func cnatProtocol(p kubemodel.Protocol) (uint8, bool) {
	switch p {
	case kubemodel.Protocol_TCP:
		return vppmodel.ProtoTCP, true
	case kubemodel.Protocol_UDP:
		return vppmodel.ProtoUDP, true
	}
	return 0, false
}

func familyName(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}

// builder computes the translations of services and pods; its scratch
// space is reused between them.
type builder struct {
	nodeIPs    []netip.Addr // this node's, sorted
	has        [2]bool      // this node has an address of the family [IPv4, IPv6]
	all, local []netip.AddrPort
}

func fam(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

func (b *builder) setNodeIPs(ips []netip.Addr) {
	b.nodeIPs = ips
	b.has = [2]bool{}
	for _, a := range ips {
		b.has[fam(a)] = true
	}
}

func (b *builder) isNodeIP(a netip.Addr) bool {
	_, ok := slices.BinarySearchFunc(b.nodeIPs, a, netip.Addr.Compare)
	return ok
}

// lbOf returns the lb type a service asks for and the problem of an
// unknown value.
func lbOf(s *svcprocessor.ContivService) (vppmodel.CnatTranslation_LbType, string, bool) {
	switch v := s.Annotations[LBAnnotation]; v {
	case "", LBECMP:
		return vppmodel.CnatTranslation_DEFAULT, "", true
	case LBMaglev:
		return vppmodel.CnatTranslation_MAGLEV, "", true
	default:
		return vppmodel.CnatTranslation_DEFAULT, v, false
	}
}

// service computes what service s needs in VPP. Translations equal to
// those of prev keep prev's model values.
func (b *builder) service(s *svcprocessor.ContivService, prev *rendered) *rendered {
	o := serviceOwner(s.ID)
	out := &rendered{owner: o, svc: s, nodeBound: s.HasNodePort() || len(s.ExternalIPs) > 0}
	lb, bad, ok := lbOf(s)
	if !ok {
		out.problems = append(out.problems, o.problem(UnknownLB, bad))
	}
	var fhc uint32
	if s.SessionAffinityTimeout > 0 {
		fhc = vppmodel.CnatFlowHashSrcIP // ClientIP affinity: the client's address alone picks the backend
	}
	var families [2]bool // of the cluster IPs
	for _, ip := range s.ClusterIPs {
		families[fam(ip)] = true
	}
	// External frontends are served by this node's backends, whatever the
	// external traffic policy: a connection from outside to a backend on
	// another node would have to be source-NATed before it enters the
	// tunnel, and VPP 26.06 applies that rewrite again to the VXLAN packet
	// at the uplink (see the package documentation).
	const local = true
	internalLocal := s.InternalTrafficPolicy == svcprocessor.LocalTrafficPolicy
	for i := range s.Ports {
		p := &s.Ports[i]
		proto, ok := cnatProtocol(p.Protocol)
		if !ok {
			out.unsupported++
			out.problems = append(out.problems, o.problem(UnsupportedProtocol,
				fmt.Sprintf("%s/%d", strings.ToLower(p.Protocol.String()), p.Port)))
			continue
		}
		b.backends(p)
		paths := func(a netip.Addr, onlyLocal bool) []netip.AddrPort {
			src := b.all
			if onlyLocal {
				src = b.local
			}
			return familyOf(src, a.Is6())
		}
		for _, ip := range s.ClusterIPs {
			out.add(prev, spec{fe: frontend{proto, netip.AddrPortFrom(ip, p.Port)}, lb: lb, fhc: fhc, paths: paths(ip, internalLocal)})
		}
		for _, ip := range s.ExternalIPs {
			out.add(prev, spec{fe: frontend{proto, netip.AddrPortFrom(ip, p.Port)}, real: b.isNodeIP(ip), lb: lb, fhc: fhc,
				paths: paths(ip, local)})
		}
		if p.NodePort != 0 {
			for _, ip := range b.nodeIPs {
				out.add(prev, spec{fe: frontend{proto, netip.AddrPortFrom(ip, p.NodePort)}, real: true, lb: lb, fhc: fhc,
					paths: paths(ip, local)})
			}
		}
	}
	if s.HasNodePort() {
		for f, want := range families {
			if want && !b.has[f] {
				out.problems = append(out.problems, o.problem(NoNodeAddress, familyName(f == 1)))
			}
		}
	}
	out.finish()
	return out
}

// familyOf returns the addresses of src of one family (src is sorted: the
// IPv4 addresses come first).
func familyOf(src []netip.AddrPort, v6 bool) []netip.AddrPort {
	i, _ := slices.BinarySearchFunc(src, true, func(a netip.AddrPort, _ bool) int {
		if a.Addr().Is4() {
			return -1
		}
		return 1
	})
	if v6 {
		return src[i:]
	}
	return src[:i]
}

// backends fills b.all with the ready backends of p and b.local with those
// on this node, sorted and unique by address and port.
func (b *builder) backends(p *svcprocessor.ServicePort) {
	b.all, b.local = b.all[:0], b.local[:0]
	for _, be := range p.Backends {
		if !be.Ready || !be.IP.IsValid() {
			continue
		}
		x := netip.AddrPortFrom(be.IP, be.Port)
		if n := len(b.all); n > 0 && b.all[n-1] == x {
			continue // backends are sorted by address and port
		}
		b.all = append(b.all, x)
		if be.Local {
			b.local = append(b.local, x)
		}
	}
}

package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// compiledPolicy is a validated NetworkPolicy in the form the processor
// evaluates.
type compiledPolicy struct {
	id      kubemodel.PolicyID
	target  *selector // in id.Namespace; never nil
	ingress bool      // isolates the targets' ingress
	egress  bool      // isolates the targets' egress
	in, eg  []compiledRule
	// namedEgressAnywhere: an egress rule with named ports applies to
	// every pod (no peers) or to the pods inside ipBlocks.
	namedEgressAnywhere bool
}

// compiledRule is one ingress or egress rule.
type compiledRule struct {
	allPeers bool           // the rule lists no peers: every address
	peers    []peerSpec     // pod/namespace selector peers
	blocks   []netip.Prefix // ipBlock peers, except removed, aggregated
	ports    []portSpec     // none: every protocol and port
	named    bool           // some port is named
	sels     []*peerSel     // the interned peers, set when the policy is installed
}

// peerSpec is a pod/namespace selector peer before interning.
type peerSpec struct {
	ns    string    // the policy's namespace (used when nsSel is nil)
	pod   *selector // nil: every pod of the selected namespaces
	nsSel *selector // nil: the policy's namespace only
}

func (p peerSpec) key() string {
	var b strings.Builder
	if p.nsSel == nil {
		b.WriteString("ns=" + p.ns)
	} else {
		b.WriteString("nssel=" + p.nsSel.key)
	}
	if p.pod != nil {
		b.WriteString("|pod=" + p.pod.key)
	}
	return b.String()
}

// portSpec is one port of a rule.
type portSpec struct {
	proto       kubemodel.Protocol
	all         bool // every port of proto
	first, last uint16
	name        string // a named port (first, last unused)
}

// resolve returns the ports of specs for a destination pod with the named
// ports ports (nil for an address that is not a pod: named ports then
// match nothing).
func resolvePorts(specs []portSpec, ports []namedPort) Ports {
	if len(specs) == 0 {
		return AnyPorts()
	}
	var out Ports
	for _, s := range specs {
		switch {
		case s.all:
			out = out.Union(portsOf(s.proto, PortRange{0, 65535}))
		case s.name != "":
			for _, np := range ports {
				if np.name == s.name && np.proto == s.proto {
					out = out.Union(portsOf(s.proto, PortRange{np.port, np.port}))
				}
			}
		default:
			out = out.Union(portsOf(s.proto, PortRange{s.first, s.last}))
		}
	}
	return out
}

// numberedPorts returns the ports of specs that are not named (every
// port when specs is empty).
func numberedPorts(specs []portSpec) Ports {
	if len(specs) == 0 {
		return AnyPorts()
	}
	var out Ports
	for _, s := range specs {
		if s.name != "" {
			continue
		}
		if s.all {
			out = out.Union(portsOf(s.proto, PortRange{0, 65535}))
		} else {
			out = out.Union(portsOf(s.proto, PortRange{s.first, s.last}))
		}
	}
	return out
}

// compilePolicy validates np and compiles it. Every problem is reported
// (joined); a policy with any problem is not compiled.
func compilePolicy(np *kubemodel.NetworkPolicy) (*compiledPolicy, error) {
	var errs []error
	p := &compiledPolicy{id: np.ID()}
	if err := kubemodel.ValidateNamespace(p.id.Namespace); err != nil {
		errs = append(errs, fmt.Errorf("namespace: %w", err))
	}
	target, err := compileSelector(np.GetPodSelector())
	if err != nil {
		errs = append(errs, fmt.Errorf("podSelector: %w", err))
	}
	if target == nil {
		target = &selector{}
	}
	p.target = target
	if len(np.GetPolicyTypes()) == 0 {
		p.ingress, p.egress = true, len(np.GetEgress()) > 0
	}
	for _, t := range np.GetPolicyTypes() {
		switch t {
		case kubemodel.PolicyType_INGRESS:
			p.ingress = true
		case kubemodel.PolicyType_EGRESS:
			p.egress = true
		default:
			errs = append(errs, fmt.Errorf("policyTypes: unknown type %d", t))
		}
	}
	if p.ingress {
		for i, r := range np.GetIngress() {
			cr, err := compileRule(p.id.Namespace, r.GetFrom(), r.GetPorts())
			if err != nil {
				errs = append(errs, fmt.Errorf("ingress[%d]: %w", i, err))
			}
			p.in = append(p.in, cr)
		}
	}
	if p.egress {
		for i, r := range np.GetEgress() {
			cr, err := compileRule(p.id.Namespace, r.GetTo(), r.GetPorts())
			if err != nil {
				errs = append(errs, fmt.Errorf("egress[%d]: %w", i, err))
			}
			p.eg = append(p.eg, cr)
		}
	}
	if len(errs) > 0 {
		return nil, &PolicyError{Policy: p.id, Err: errors.Join(errs...)}
	}
	return p, nil
}

func compileRule(ns string, peers []*kubemodel.NetworkPolicyPeer, ports []*kubemodel.NetworkPolicyPort) (compiledRule, error) {
	var errs []error
	r := compiledRule{allPeers: len(peers) == 0}
	var blocks []netip.Prefix
	for i, peer := range peers {
		if b := peer.GetIpBlock(); b != nil {
			if peer.GetPodSelector() != nil || peer.GetNamespaceSelector() != nil {
				errs = append(errs, fmt.Errorf("peer[%d]: ipBlock cannot be combined with selectors", i))
				continue
			}
			ps, err := compileBlock(b)
			if err != nil {
				errs = append(errs, fmt.Errorf("peer[%d]: ipBlock: %w", i, err))
				continue
			}
			blocks = append(blocks, ps...)
			continue
		}
		if peer.GetPodSelector() == nil && peer.GetNamespaceSelector() == nil {
			errs = append(errs, fmt.Errorf("peer[%d]: empty peer (want podSelector, namespaceSelector or ipBlock)", i))
			continue
		}
		pod, err := compileSelector(peer.GetPodSelector())
		if err != nil {
			errs = append(errs, fmt.Errorf("peer[%d]: podSelector: %w", i, err))
			continue
		}
		nsSel, err := compileSelector(peer.GetNamespaceSelector())
		if err != nil {
			errs = append(errs, fmt.Errorf("peer[%d]: namespaceSelector: %w", i, err))
			continue
		}
		if pod != nil && pod.all() {
			pod = nil // every pod
		}
		r.peers = append(r.peers, peerSpec{ns: ns, pod: pod, nsSel: nsSel})
	}
	r.blocks = Aggregate(blocks)
	for i, pp := range ports {
		s, err := compilePort(pp)
		if err != nil {
			errs = append(errs, fmt.Errorf("ports[%d]: %w", i, err))
			continue
		}
		r.named = r.named || s.name != ""
		r.ports = append(r.ports, s)
	}
	return r, errors.Join(errs...)
}

func compileBlock(b *kubemodel.IPBlock) ([]netip.Prefix, error) {
	cidr, err := netip.ParsePrefix(b.GetCidr())
	if err != nil {
		return nil, fmt.Errorf("cidr %q: %w", b.GetCidr(), err)
	}
	cidr = cidr.Masked()
	var except []netip.Prefix
	for _, s := range b.GetExcept() {
		e, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("except %q: %w", s, err)
		}
		if e.Addr().BitLen() != cidr.Addr().BitLen() || e.Bits() <= cidr.Bits() || !cidr.Contains(e.Addr()) {
			return nil, fmt.Errorf("except %s is not strictly inside cidr %s", e, cidr)
		}
		except = append(except, e.Masked())
	}
	return blockPrefixes(cidr, except), nil
}

func compilePort(pp *kubemodel.NetworkPolicyPort) (portSpec, error) {
	s := portSpec{proto: pp.GetProtocol()}
	switch s.proto {
	case kubemodel.Protocol_TCP, kubemodel.Protocol_UDP, kubemodel.Protocol_SCTP:
	default:
		return s, fmt.Errorf("unknown protocol %d", s.proto)
	}
	port, name, end := pp.GetPort(), pp.GetPortName(), pp.GetEndPort()
	switch {
	case port != 0 && name != "":
		return s, fmt.Errorf("both port %d and port name %q", port, name)
	case name != "":
		if end != 0 {
			return s, fmt.Errorf("endPort %d with the named port %q", end, name)
		}
		if err := validPortName(name); err != nil {
			return s, err
		}
		s.name = name
	case port == 0:
		if end != 0 {
			return s, fmt.Errorf("endPort %d without a port", end)
		}
		s.all = true
	default:
		if port < 1 || port > 65535 {
			return s, fmt.Errorf("port %d out of range 1-65535", port)
		}
		if end == 0 {
			end = port
		}
		if end < port || end > 65535 {
			return s, fmt.Errorf("endPort %d not in %d-65535", end, port)
		}
		s.first, s.last = uint16(port), uint16(end)
	}
	return s, nil
}

// validPortName checks a named port (an IANA service name: 1-15
// lower-case letters, digits and '-', with a letter, no leading, trailing
// or double '-').
func validPortName(n string) error {
	if len(n) > 15 {
		return fmt.Errorf("port name %q longer than 15 characters", n)
	}
	letter := false
	for i, c := range n {
		switch {
		case c >= 'a' && c <= 'z':
			letter = true
		case c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(n)-1 && n[i-1] != '-':
		default:
			return fmt.Errorf("port name %q: invalid character %q", n, c)
		}
	}
	if !letter {
		return fmt.Errorf("port name %q has no letter", n)
	}
	return nil
}

// namedPort is one named container port of a pod.
type namedPort struct {
	name  string
	proto kubemodel.Protocol
	port  uint16
}

func namedPortsOfPeer(ps []*kubemodel.NamedPort) []namedPort {
	var out []namedPort
	for _, p := range ps {
		if p.GetName() == "" || p.GetPort() < 1 || p.GetPort() > 65535 {
			continue
		}
		out = append(out, namedPort{p.GetName(), p.GetProtocol(), uint16(p.GetPort())})
	}
	return sortPorts(out)
}

func namedPortsOfPod(cs []*kubemodel.Container) []namedPort {
	var out []namedPort
	for _, c := range cs {
		for _, p := range c.GetPorts() {
			if p.GetName() == "" || p.GetContainerPort() < 1 || p.GetContainerPort() > 65535 {
				continue
			}
			out = append(out, namedPort{p.GetName(), p.GetProtocol(), uint16(p.GetContainerPort())})
		}
	}
	return sortPorts(out)
}

func sortPorts(ps []namedPort) []namedPort {
	slices.SortFunc(ps, func(a, b namedPort) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if a.proto != b.proto {
			return int(a.proto) - int(b.proto)
		}
		return int(a.port) - int(b.port)
	})
	return slices.Compact(ps)
}

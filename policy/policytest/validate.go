package policytest

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Validate reports (as a [*PolicyError]) every way in which the spec of np
// breaks the rules of the networking.k8s.io/v1 API, which the API server
// enforces at admission:
//
//   - label selectors (podSelector, and a peer's podSelector and
//     namespaceSelector): matchLabels keys are qualified names and values
//     label values; a requirement's operator is In, NotIn, Exists or
//     DoesNotExist; In and NotIn have values, Exists and DoesNotExist none;
//     keys are qualified names and values label values;
//   - policyTypes: Ingress or Egress, each at most once;
//   - a peer has an ipBlock, or a podSelector and/or a namespaceSelector,
//     not both kinds and not neither;
//   - an ipBlock's cidr is a CIDR, and each except is a CIDR of the same
//     family strictly inside it (a longer prefix within cidr);
//   - a port's protocol is TCP, UDP or SCTP; it has a number (1-65535) or
//     a name (an IANA service name: 1-15 lower-case letters, digits and
//     "-", with at least one letter, no "-" at either end and no "--"),
//     not both; an endPort (1-65535) needs a number and is not below it.
//
// Object metadata (the name and namespace) is not checked. A nil policy is
// invalid.
func Validate(np *kubemodel.NetworkPolicy) error {
	if np == nil {
		return &PolicyError{Problems: []string{"nil policy"}}
	}
	var v validator
	v.selector("spec.podSelector", np.GetPodSelector())
	for i, t := range np.GetPolicyTypes() {
		path := fmt.Sprintf("spec.policyTypes[%d]", i)
		if t != kubemodel.PolicyType_INGRESS && t != kubemodel.PolicyType_EGRESS {
			v.add(path, "unknown policy type %d", t)
		}
		if slices.Contains(np.GetPolicyTypes()[:i], t) {
			v.add(path, "duplicate %s", t)
		}
	}
	for i, rule := range np.GetIngress() {
		path := fmt.Sprintf("spec.ingress[%d]", i)
		for j, port := range rule.GetPorts() {
			v.port(fmt.Sprintf("%s.ports[%d]", path, j), port)
		}
		for j, peer := range rule.GetFrom() {
			v.peer(fmt.Sprintf("%s.from[%d]", path, j), peer)
		}
	}
	for i, rule := range np.GetEgress() {
		path := fmt.Sprintf("spec.egress[%d]", i)
		for j, port := range rule.GetPorts() {
			v.port(fmt.Sprintf("%s.ports[%d]", path, j), port)
		}
		for j, peer := range rule.GetTo() {
			v.peer(fmt.Sprintf("%s.to[%d]", path, j), peer)
		}
	}
	if len(v.problems) > 0 {
		return &PolicyError{Policy: np.ID(), Problems: v.problems}
	}
	return nil
}

type validator struct{ problems []string }

func (v *validator) add(path, format string, args ...any) {
	v.problems = append(v.problems, path+": "+fmt.Sprintf(format, args...))
}

func (v *validator) selector(path string, s *kubemodel.LabelSelector) {
	// Sorted keys, so that the problems come in a stable order.
	keys := make([]string, 0, len(s.GetMatchLabels()))
	for k := range s.GetMatchLabels() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if why := qualifiedNameProblem(k); why != "" {
			v.add(path+".matchLabels", "key %q: %s", k, why)
		}
		if why := labelValueProblem(s.GetMatchLabels()[k]); why != "" {
			v.add(path+".matchLabels", "value %q of key %q: %s", s.GetMatchLabels()[k], k, why)
		}
	}
	for i, r := range s.GetMatchExpressions() {
		rpath := fmt.Sprintf("%s.matchExpressions[%d]", path, i)
		switch r.GetOperator() {
		case OpIn, OpNotIn:
			if len(r.GetValues()) == 0 {
				v.add(rpath+".values", "must be given for operator %s", r.GetOperator())
			}
		case OpExists, OpDoesNotExist:
			if len(r.GetValues()) > 0 {
				v.add(rpath+".values", "must be empty for operator %s", r.GetOperator())
			}
		default:
			v.add(rpath+".operator", "%q is not In, NotIn, Exists or DoesNotExist", r.GetOperator())
		}
		if why := qualifiedNameProblem(r.GetKey()); why != "" {
			v.add(rpath+".key", "%q: %s", r.GetKey(), why)
		}
		for j, val := range r.GetValues() {
			if why := labelValueProblem(val); why != "" {
				v.add(fmt.Sprintf("%s.values[%d]", rpath, j), "%q: %s", val, why)
			}
		}
	}
}

func (v *validator) peer(path string, p *kubemodel.NetworkPolicyPeer) {
	hasSelector := p.GetPodSelector() != nil || p.GetNamespaceSelector() != nil
	switch {
	case p.GetIpBlock() != nil && hasSelector:
		v.add(path, "ipBlock may not be combined with podSelector or namespaceSelector")
	case p.GetIpBlock() == nil && !hasSelector:
		v.add(path, "must have a podSelector, a namespaceSelector or an ipBlock")
	}
	if p.GetPodSelector() != nil {
		v.selector(path+".podSelector", p.GetPodSelector())
	}
	if p.GetNamespaceSelector() != nil {
		v.selector(path+".namespaceSelector", p.GetNamespaceSelector())
	}
	if b := p.GetIpBlock(); b != nil {
		cidr, err := netip.ParsePrefix(b.GetCidr())
		if err != nil {
			v.add(path+".ipBlock.cidr", "%q is not a CIDR", b.GetCidr())
		}
		for i, e := range b.GetExcept() {
			epath := fmt.Sprintf("%s.ipBlock.except[%d]", path, i)
			except, err := netip.ParsePrefix(e)
			switch {
			case err != nil:
				v.add(epath, "%q is not a CIDR", e)
			case cidr.IsValid() && !(except.Bits() > cidr.Bits() && cidr.Masked().Contains(except.Addr())):
				v.add(epath, "%q is not strictly inside cidr %q", e, b.GetCidr())
			}
		}
	}
}

func (v *validator) port(path string, p *kubemodel.NetworkPolicyPort) {
	switch p.GetProtocol() {
	case kubemodel.Protocol_TCP, kubemodel.Protocol_UDP, kubemodel.Protocol_SCTP:
	default:
		v.add(path+".protocol", "unknown protocol %d", p.GetProtocol())
	}
	if p.GetPort() != 0 && p.GetPortName() != "" {
		v.add(path+".port", "a number (%d) and a name (%q) at once", p.GetPort(), p.GetPortName())
	}
	if p.GetPort() < 0 || p.GetPort() > 65535 {
		v.add(path+".port", "%d is not in 1-65535", p.GetPort())
	}
	if p.GetPortName() != "" {
		if why := portNameProblem(p.GetPortName()); why != "" {
			v.add(path+".port", "%q: %s", p.GetPortName(), why)
		}
	}
	if end := p.GetEndPort(); end != 0 {
		switch {
		case end < 0 || end > 65535:
			v.add(path+".endPort", "%d is not in 1-65535", end)
		case p.GetPort() == 0:
			v.add(path+".endPort", "needs a numbered port")
		case end < p.GetPort():
			v.add(path+".endPort", "%d is below port %d", end, p.GetPort())
		}
	}
}

var (
	// A label name, the name part of a qualified name and a non-empty label
	// value: alphanumerics at both ends, "-", "_" and "." between.
	labelNameRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	// A DNS subdomain (RFC 1123): lower-case labels separated by dots.
	dnsSubdomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// qualifiedNameProblem tells what is wrong with a label key: an optional
// prefix (a DNS subdomain of at most 253 characters) and "/", then a name
// of 1-63 characters.
func qualifiedNameProblem(key string) string {
	name := key
	if prefix, rest, found := strings.Cut(key, "/"); found {
		if prefix == "" || len(prefix) > 253 || !dnsSubdomainRE.MatchString(prefix) {
			return "the prefix must be a DNS subdomain of at most 253 characters"
		}
		name = rest
	}
	if name == "" || len(name) > 63 || !labelNameRE.MatchString(name) {
		return "the name must be 1-63 characters, alphanumeric at both ends, with '-', '_' and '.' between"
	}
	return ""
}

// labelValueProblem tells what is wrong with a label value: empty, or 1-63
// characters like a label name.
func labelValueProblem(value string) string {
	if value == "" {
		return ""
	}
	if len(value) > 63 || !labelNameRE.MatchString(value) {
		return "must be at most 63 characters, alphanumeric at both ends, with '-', '_' and '.' between"
	}
	return ""
}

// portNameProblem tells what is wrong with a named port (an IANA service
// name).
func portNameProblem(name string) string {
	switch {
	case len(name) > 15:
		return "longer than 15 characters"
	case strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "":
		return "may contain only lower-case letters, digits and '-'"
	case strings.Trim(name, "0123456789-") == "":
		return "must contain a letter"
	case strings.HasPrefix(name, "-") || strings.HasSuffix(name, "-"):
		return "may not start or end with '-'"
	case strings.Contains(name, "--"):
		return "may not contain '--'"
	}
	return ""
}

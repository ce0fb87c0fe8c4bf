package reflector

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// endpointSliceResource names endpoint slices in errors.
const endpointSliceResource = "endpointslice"

// ConvertEndpointSlices returns the endpoints of service namespace/name:
// the merge of the service's EndpointSlices (those labelled
// kubernetes.io/service-name=name), in the shape of a Kubernetes Endpoints
// object. Slices with the same set of ports form one subset; the address
// of an endpoint is its first address (as kube-proxy uses it); an
// endpoint whose conditions.ready is unset or true is ready, any other
// goes to the not-ready addresses, with terminating set from
// conditions.terminating; an address listed in several slices (while a
// slice is being split or merged) appears once, ready if any slice says
// so. Subsets, ports and addresses are sorted, so the result does not
// depend on the order of the slices or their endpoints. Labels are those
// of the first slice by name, without the slice-specific
// kubernetes.io/service-name and endpointslice.kubernetes.io/managed-by.
// Slices of address type FQDN, and ports without a number ("all ports"),
// cannot be expressed and are left out.
//
// A slice with an unparsable address or a port out of range is left out
// of the merge, and the returned error (matching [ErrBadObject], one
// [*ObjectError] per problem) names it; the endpoints of the other slices
// are still returned. The result is nil when no slice could be merged.
// The slices are only read.
func ConvertEndpointSlices(namespace, name string, eps []*discoveryv1.EndpointSlice) (*kubemodel.Endpoints, error) {
	var errs []error
	if err := kubemodel.ValidateNamespace(namespace); err != nil {
		errs = append(errs, &ObjectError{Resource: kubemodel.EndpointsResource, Object: namespace + "/" + name, Field: "metadata.namespace", Value: namespace, Reason: err.Error()})
	}
	if err := kubemodel.ValidateName(name); err != nil {
		errs = append(errs, &ObjectError{Resource: kubemodel.EndpointsResource, Object: namespace + "/" + name, Field: "metadata.labels[" + discoveryv1.LabelServiceName + "]", Value: name, Reason: err.Error()})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sorted := sortedSlices(eps)
	subsets := map[string]*subsetBuilder{}
	var labelsFrom *discoveryv1.EndpointSlice
	for _, s := range sorted {
		if s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		conv, err := convertSlice(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if labelsFrom == nil {
			labelsFrom = s
		}
		if len(conv.addrs) == 0 {
			continue
		}
		b := subsets[conv.sig]
		if b == nil {
			b = &subsetBuilder{ports: conv.ports, addrs: map[netip.Addr]*endpointAddr{}}
			subsets[conv.sig] = b
		}
		for _, a := range conv.addrs {
			if old, ok := b.addrs[a.ip]; ok && (old.ready || !a.ready) {
				continue
			}
			b.addrs[a.ip] = a
		}
	}
	if labelsFrom == nil {
		return nil, errors.Join(errs...)
	}
	m := &kubemodel.Endpoints{Name: name, Namespace: namespace, Labels: sliceLabels(labelsFrom.Labels)}
	sigs := make([]string, 0, len(subsets))
	for sig := range subsets {
		sigs = append(sigs, sig)
	}
	slices.Sort(sigs)
	for _, sig := range sigs {
		m.Subsets = append(m.Subsets, subsets[sig].build())
	}
	return m, errors.Join(errs...)
}

func sortedSlices(in []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func sliceLabels(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k != discoveryv1.LabelServiceName && k != discoveryv1.LabelManagedBy {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

type endpointAddr struct {
	ip    netip.Addr
	ready bool
	pb    *kubemodel.EndpointAddress
}

type convertedSlice struct {
	sig   string
	ports []*kubemodel.EndpointPort
	addrs []*endpointAddr
}

type subsetBuilder struct {
	ports []*kubemodel.EndpointPort
	addrs map[netip.Addr]*endpointAddr
}

func (b *subsetBuilder) build() *kubemodel.EndpointSubset {
	all := make([]*endpointAddr, 0, len(b.addrs))
	for _, a := range b.addrs {
		all = append(all, a)
	}
	slices.SortFunc(all, func(x, y *endpointAddr) int { return x.ip.Compare(y.ip) })
	ss := &kubemodel.EndpointSubset{Ports: b.ports}
	for _, a := range all {
		if a.ready {
			ss.Addresses = append(ss.Addresses, a.pb)
		} else {
			ss.NotReadyAddresses = append(ss.NotReadyAddresses, a.pb)
		}
	}
	return ss
}

// convertSlice converts one slice; its error names every problem.
func convertSlice(s *discoveryv1.EndpointSlice) (*convertedSlice, error) {
	pr := newProblems(endpointSliceResource, s.Namespace, s.Name)
	out := &convertedSlice{}
	for i, p := range s.Ports {
		if p.Port == nil {
			continue
		}
		f := fmt.Sprintf("ports[%d].", i)
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		mp := &kubemodel.EndpointPort{Port: pr.port(f+"port", *p.Port, 1), Protocol: pr.protocol(f+"protocol", proto)}
		if p.Name != nil {
			mp.Name = *p.Name
		}
		out.ports = append(out.ports, mp)
	}
	slices.SortFunc(out.ports, func(a, b *kubemodel.EndpointPort) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
	})
	var sig strings.Builder
	for _, p := range out.ports {
		sig.WriteString(p.Name + "/" + strconv.Itoa(int(p.Port)) + "/" + p.Protocol.String() + ",")
	}
	out.sig = sig.String()
	for i, e := range s.Endpoints {
		f := fmt.Sprintf("endpoints[%d].", i)
		if len(e.Addresses) == 0 {
			pr.add(f+"addresses", nil, "no address")
			continue
		}
		ip, err := netip.ParseAddr(e.Addresses[0])
		if err != nil || ip.Zone() != "" {
			pr.add(f+"addresses[0]", e.Addresses[0], "not an IP address")
			continue
		}
		a := &endpointAddr{
			ip:    ip,
			ready: e.Conditions.Ready == nil || *e.Conditions.Ready,
			pb: &kubemodel.EndpointAddress{
				Ip:          ip.String(),
				Terminating: e.Conditions.Terminating != nil && *e.Conditions.Terminating,
			},
		}
		if e.Hostname != nil {
			a.pb.Hostname = *e.Hostname
		}
		if e.NodeName != nil {
			a.pb.NodeName = *e.NodeName
		}
		if r := e.TargetRef; r != nil {
			a.pb.TargetRef = &kubemodel.ObjectReference{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Uid: string(r.UID)}
		}
		out.addrs = append(out.addrs, a)
	}
	if err := pr.err(); err != nil {
		return nil, err
	}
	return out, nil
}

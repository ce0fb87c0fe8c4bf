package bgp

import (
	"fmt"
	"iter"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
)

// ServicePrefixes returns the host routes (/32 for IPv4, /128 for IPv6) the
// virtual router advertises for services, sorted and without duplicates.
// vr must have its defaults applied ([PeeringPolicy.WithDefaults]).
//
// A service is considered when vr.ServiceSelector matches its labels plus
// [ServiceNamespaceLabel] and [ServiceNameLabel] (a nil selector advertises
// nothing). Of a selected service, each type in vr.ServiceAdvertisements
// contributes:
//
//   - [LoadBalancerIPAddresses]: the LoadBalancerIPs, if the service has no
//     load-balancer class or one listed in vr.LoadBalancerClasses, and,
//     with externalTrafficPolicy Local, only if this node has a ready local
//     backend (HasLocalBackend);
//   - [ExternalIPAddresses]: the ExternalIPs, with the same
//     externalTrafficPolicy rule;
//   - [ClusterIPAddresses]: the ClusterIPs, with internalTrafficPolicy
//     Local only if this node has a ready local backend.
//
// Invalid and unspecified addresses are skipped; IPv4-mapped IPv6 addresses
// count as IPv4. An invalid selector is an error.
func (vr VirtualRouter) ServicePrefixes(services []Service) ([]netip.Prefix, error) {
	return vr.ServicePrefixesOf(func(yield func(*Service) bool) {
		for i := range services {
			if !yield(&services[i]) {
				return
			}
		}
	})
}

// ServicePrefixesOf is [VirtualRouter.ServicePrefixes] over a sequence of
// services, such as a [ServiceRanger]'s RangeServices, which it ranges over
// once and does not keep. A nil sequence has no services.
func (vr VirtualRouter) ServicePrefixesOf(services iter.Seq[*Service]) ([]netip.Prefix, error) {
	m, err := vr.serviceMatcher()
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	if services != nil {
		for svc := range services {
			out = m.appendPrefixes(out, svc)
		}
	}
	slices.SortFunc(out, comparePrefix)
	return slices.Compact(out), nil
}

// serviceMatcher is a virtual router's service selection, compiled once per
// ConfigurePeers call.
type serviceMatcher struct {
	sel     labels.Selector // nil: no service
	lb, ext bool
	cluster bool
	classes []string
}

func (vr VirtualRouter) serviceMatcher() (*serviceMatcher, error) {
	m := &serviceMatcher{classes: vr.LoadBalancerClasses}
	if vr.ServiceSelector == nil {
		return m, nil
	}
	sel, err := vr.ServiceSelector.selector()
	if err != nil {
		return nil, fmt.Errorf("virtual router %d: service selector: %w", vr.LocalASN, err)
	}
	m.sel = sel
	for _, t := range vr.ServiceAdvertisements {
		switch t {
		case LoadBalancerIPAddresses:
			m.lb = true
		case ExternalIPAddresses:
			m.ext = true
		case ClusterIPAddresses:
			m.cluster = true
		}
	}
	return m, nil
}

// serviceLabels presents a service's labels plus the synthetic ones to a
// selector without copying the label map.
type serviceLabels struct{ svc *Service }

func (l serviceLabels) Has(key string) bool {
	switch key {
	case ServiceNamespaceLabel, ServiceNameLabel:
		return true
	}
	_, ok := l.svc.Labels[key]
	return ok
}

func (l serviceLabels) Lookup(key string) (string, bool) {
	switch key {
	case ServiceNamespaceLabel:
		return l.svc.Namespace, true
	case ServiceNameLabel:
		return l.svc.Name, true
	}
	v, ok := l.svc.Labels[key]
	return v, ok
}

func (l serviceLabels) Get(key string) string {
	switch key {
	case ServiceNamespaceLabel:
		return l.svc.Namespace
	case ServiceNameLabel:
		return l.svc.Name
	}
	return l.svc.Labels[key]
}

func (m *serviceMatcher) appendPrefixes(out []netip.Prefix, svc *Service) []netip.Prefix {
	// A service without an address of the advertised kinds (in a large
	// cluster, most: ClusterIP services when LoadBalancer IPs are
	// advertised) is passed over before the selector, which costs more.
	candidate := (m.lb && len(svc.LoadBalancerIPs) > 0) || (m.ext && len(svc.ExternalIPs) > 0) ||
		(m.cluster && len(svc.ClusterIPs) > 0)
	if m.sel == nil || !candidate || !m.sel.Matches(serviceLabels{svc}) {
		return out
	}
	externalOK := !svc.ExternalTrafficPolicyLocal || svc.HasLocalBackend
	if m.lb && externalOK && (svc.LoadBalancerClass == "" || slices.Contains(m.classes, svc.LoadBalancerClass)) {
		out = appendHostRoutes(out, svc.LoadBalancerIPs)
	}
	if m.ext && externalOK {
		out = appendHostRoutes(out, svc.ExternalIPs)
	}
	if m.cluster && (!svc.InternalTrafficPolicyLocal || svc.HasLocalBackend) {
		out = appendHostRoutes(out, svc.ClusterIPs)
	}
	return out
}

func appendHostRoutes(out []netip.Prefix, addrs []netip.Addr) []netip.Prefix {
	for _, a := range addrs {
		if !a.IsValid() || a.IsUnspecified() {
			continue
		}
		a = a.Unmap().WithZone("")
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

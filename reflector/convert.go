package reflector

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// lastAppliedAnnotation is kubectl's copy of the whole applied object. No
// agent reads it, and it would multiply the size of every reflected value,
// so it is the one annotation that is not reflected.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// problems collects the reasons why one object cannot be reflected.
type problems struct {
	resource, object string
	errs             []error
}

func newProblems(resource, namespace, name string) *problems {
	obj := name
	if namespace != "" {
		obj = namespace + "/" + name
	}
	return &problems{resource: resource, object: obj}
}

func (p *problems) add(field string, value any, reason string) {
	p.errs = append(p.errs, &ObjectError{Resource: p.resource, Object: p.object, Field: field, Value: value, Reason: reason})
}

func (p *problems) err() error { return errors.Join(p.errs...) }

// names checks the object's name and, for namespaced objects, namespace
// with the rules that the keys of package kubemodel follow.
func (p *problems) names(namespace, name string, namespaced bool) {
	if namespaced {
		if err := kubemodel.ValidateNamespace(namespace); err != nil {
			p.add("metadata.namespace", namespace, err.Error())
		}
	}
	if err := kubemodel.ValidateName(name); err != nil {
		p.add("metadata.name", name, err.Error())
	}
}

// ip parses an IP address and returns its canonical form.
func (p *problems) ip(field, s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		p.add(field, s, "not an IP address")
		return ""
	}
	return a.String()
}

// optIP is ip for a field that may be empty.
func (p *problems) optIP(field, s string) string {
	if s == "" {
		return ""
	}
	return p.ip(field, s)
}

// port checks a port number against lo..65535.
func (p *problems) port(field string, v int32, lo int32) int32 {
	if v < lo || v > 65535 {
		p.add(field, v, fmt.Sprintf("must be %d..65535", lo))
		return 0
	}
	return v
}

func (p *problems) protocol(field string, v corev1.Protocol) kubemodel.Protocol {
	switch v {
	case "", corev1.ProtocolTCP:
		return kubemodel.Protocol_TCP
	case corev1.ProtocolUDP:
		return kubemodel.Protocol_UDP
	case corev1.ProtocolSCTP:
		return kubemodel.Protocol_SCTP
	}
	p.add(field, v, "unknown protocol")
	return kubemodel.Protocol_TCP
}

// copyLabels returns a copy of m; nil for an empty map, so that nil and
// empty encode alike.
func copyLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

// copyAnnotations is copyLabels without kubectl's last-applied copy.
func copyAnnotations(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k != lastAppliedAnnotation {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// ConvertPod returns the model of a Kubernetes pod: metadata (name,
// namespace, labels, annotations), spec.nodeName, spec.hostNetwork, the
// ports of spec.containers, status.podIP, status.podIPs, status.hostIP, and
// whether the pod is terminating (metadata.deletionTimestamp is set).
// Addresses are stored in canonical form. An unparsable address, a port out
// of range, an unknown protocol or a name that breaks the key scheme is an
// error matching [ErrBadObject] (one [*ObjectError] per problem, joined).
// p is only read.
func ConvertPod(p *corev1.Pod) (*kubemodel.Pod, error) {
	pr := newProblems(kubemodel.PodResource, p.Namespace, p.Name)
	pr.names(p.Namespace, p.Name, true)
	m := &kubemodel.Pod{
		Name:          p.Name,
		Namespace:     p.Namespace,
		Labels:        copyLabels(p.Labels),
		Annotations:   copyAnnotations(p.Annotations),
		IpAddress:     pr.optIP("status.podIP", p.Status.PodIP),
		HostIpAddress: pr.optIP("status.hostIP", p.Status.HostIP),
		NodeName:      p.Spec.NodeName,
		HostNetwork:   p.Spec.HostNetwork,
		Terminating:   p.DeletionTimestamp != nil,
	}
	for i, ip := range p.Status.PodIPs {
		m.IpAddresses = append(m.IpAddresses, pr.ip(fmt.Sprintf("status.podIPs[%d].ip", i), ip.IP))
	}
	for i, c := range p.Spec.Containers {
		mc := &kubemodel.Container{Name: c.Name}
		for j, cp := range c.Ports {
			f := fmt.Sprintf("spec.containers[%d].ports[%d].", i, j)
			mc.Ports = append(mc.Ports, &kubemodel.ContainerPort{
				Name:          cp.Name,
				HostPort:      pr.port(f+"hostPort", cp.HostPort, 0),
				ContainerPort: pr.port(f+"containerPort", cp.ContainerPort, 1),
				Protocol:      pr.protocol(f+"protocol", cp.Protocol),
				HostIp:        pr.optIP(f+"hostIP", cp.HostIP),
			})
		}
		m.Containers = append(m.Containers, mc)
	}
	if err := pr.err(); err != nil {
		return nil, err
	}
	return m, nil
}

var serviceTypes = map[corev1.ServiceType]kubemodel.Service_Type{
	"":                             kubemodel.Service_CLUSTER_IP,
	corev1.ServiceTypeClusterIP:    kubemodel.Service_CLUSTER_IP,
	corev1.ServiceTypeNodePort:     kubemodel.Service_NODE_PORT,
	corev1.ServiceTypeLoadBalancer: kubemodel.Service_LOAD_BALANCER,
	corev1.ServiceTypeExternalName: kubemodel.Service_EXTERNAL_NAME,
}

// ConvertService returns the model of a Kubernetes service: metadata
// (name, namespace, labels, annotations), the selector, ports, type,
// cluster IPs (spec.clusterIPs, or spec.clusterIP when that is empty;
// "None" is kept for headless services), external IPs, the requested
// load-balancer IP, the load-balancer ingress IPs of the status, both
// traffic policies, session affinity with its timeout, the health-check
// node port and the load-balancer class. Addresses are stored in canonical
// form. An unparsable address, a port out of range, an unknown type,
// protocol, policy or affinity, or a name that breaks the key scheme is an
// error matching [ErrBadObject]. s is only read.
func ConvertService(s *corev1.Service) (*kubemodel.Service, error) {
	pr := newProblems(kubemodel.ServiceResource, s.Namespace, s.Name)
	pr.names(s.Namespace, s.Name, true)
	spec := &s.Spec
	m := &kubemodel.Service{
		Name:                s.Name,
		Namespace:           s.Namespace,
		Labels:              copyLabels(s.Labels),
		Annotations:         copyAnnotations(s.Annotations),
		Selector:            copyLabels(spec.Selector),
		LoadBalancerIp:      pr.optIP("spec.loadBalancerIP", spec.LoadBalancerIP),
		HealthCheckNodePort: pr.port("spec.healthCheckNodePort", spec.HealthCheckNodePort, 0),
	}
	if t, ok := serviceTypes[spec.Type]; ok {
		m.Type = t
	} else {
		pr.add("spec.type", spec.Type, "unknown service type")
	}
	for i, sp := range spec.Ports {
		f := fmt.Sprintf("spec.ports[%d].", i)
		mp := &kubemodel.ServicePort{
			Name:     sp.Name,
			Protocol: pr.protocol(f+"protocol", sp.Protocol),
			Port:     pr.port(f+"port", sp.Port, 1),
			NodePort: pr.port(f+"nodePort", sp.NodePort, 0),
		}
		if sp.TargetPort.Type == intstr.String {
			mp.TargetPortName = sp.TargetPort.StrVal
		} else {
			mp.TargetPortNumber = pr.port(f+"targetPort", sp.TargetPort.IntVal, 0)
		}
		m.Ports = append(m.Ports, mp)
	}
	clusterIPs := spec.ClusterIPs
	if len(clusterIPs) == 0 && spec.ClusterIP != "" {
		clusterIPs = []string{spec.ClusterIP}
	}
	for i, ip := range clusterIPs {
		if ip == corev1.ClusterIPNone {
			m.ClusterIps = append(m.ClusterIps, ip)
			continue
		}
		m.ClusterIps = append(m.ClusterIps, pr.ip(fmt.Sprintf("spec.clusterIPs[%d]", i), ip))
	}
	for i, ip := range spec.ExternalIPs {
		m.ExternalIps = append(m.ExternalIps, pr.ip(fmt.Sprintf("spec.externalIPs[%d]", i), ip))
	}
	for i, ing := range s.Status.LoadBalancer.Ingress {
		if ing.IP != "" { // hostname-only ingress points have no IP
			m.LbIngressIps = append(m.LbIngressIps, pr.ip(fmt.Sprintf("status.loadBalancer.ingress[%d].ip", i), ing.IP))
		}
	}
	m.ExternalTrafficPolicy = pr.trafficPolicy("spec.externalTrafficPolicy", string(spec.ExternalTrafficPolicy))
	if spec.InternalTrafficPolicy != nil {
		m.InternalTrafficPolicy = pr.trafficPolicy("spec.internalTrafficPolicy", string(*spec.InternalTrafficPolicy))
	}
	switch spec.SessionAffinity {
	case "", corev1.ServiceAffinityNone:
	case corev1.ServiceAffinityClientIP:
		m.SessionAffinity = kubemodel.Service_CLIENT_IP
		if c := spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			t := *c.ClientIP.TimeoutSeconds
			if t < 0 || t > 86400 {
				pr.add("spec.sessionAffinityConfig.clientIP.timeoutSeconds", t, "must be 0..86400")
			} else {
				m.SessionAffinityTimeout = t
			}
		}
	default:
		pr.add("spec.sessionAffinity", spec.SessionAffinity, "unknown session affinity")
	}
	if spec.LoadBalancerClass != nil {
		m.LoadBalancerClass = *spec.LoadBalancerClass
	}
	if err := pr.err(); err != nil {
		return nil, err
	}
	return m, nil
}

func (p *problems) trafficPolicy(field, v string) kubemodel.Service_TrafficPolicy {
	switch v {
	case "", "Cluster":
		return kubemodel.Service_CLUSTER
	case "Local":
		return kubemodel.Service_LOCAL
	}
	p.add(field, v, "unknown traffic policy")
	return kubemodel.Service_CLUSTER
}

var nodeAddressTypes = map[corev1.NodeAddressType]kubemodel.NodeAddress_Type{
	corev1.NodeHostName:    kubemodel.NodeAddress_HOSTNAME,
	corev1.NodeExternalIP:  kubemodel.NodeAddress_EXTERNAL_IP,
	corev1.NodeInternalIP:  kubemodel.NodeAddress_INTERNAL_IP,
	corev1.NodeExternalDNS: kubemodel.NodeAddress_EXTERNAL_DNS,
	corev1.NodeInternalDNS: kubemodel.NodeAddress_INTERNAL_DNS,
}

// ConvertNode returns the model of a Kubernetes node: metadata (name,
// labels, annotations), the pod CIDRs (spec.podCIDRs, or spec.podCIDR when
// that is empty), status.addresses and spec.providerID. CIDRs and the
// InternalIP/ExternalIP addresses are stored in canonical form; an
// address of an unknown type is kept as UNKNOWN. An unparsable CIDR or IP
// or a name that breaks the key scheme is an error matching
// [ErrBadObject]. n is only read.
func ConvertNode(n *corev1.Node) (*kubemodel.Node, error) {
	pr := newProblems(kubemodel.NodeResource, "", n.Name)
	pr.names("", n.Name, false)
	m := &kubemodel.Node{
		Name:        n.Name,
		Labels:      copyLabels(n.Labels),
		Annotations: copyAnnotations(n.Annotations),
		ProviderId:  n.Spec.ProviderID,
	}
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	for i, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			pr.add(fmt.Sprintf("spec.podCIDRs[%d]", i), c, "not a CIDR")
			continue
		}
		m.PodCidrs = append(m.PodCidrs, p.String())
	}
	for i, a := range n.Status.Addresses {
		t := nodeAddressTypes[a.Type]
		addr := a.Address
		if t == kubemodel.NodeAddress_INTERNAL_IP || t == kubemodel.NodeAddress_EXTERNAL_IP {
			addr = pr.ip(fmt.Sprintf("status.addresses[%d].address", i), a.Address)
		}
		m.Addresses = append(m.Addresses, &kubemodel.NodeAddress{Type: t, Address: addr})
	}
	if err := pr.err(); err != nil {
		return nil, err
	}
	return m, nil
}

// ConvertNamespace returns the model of a Kubernetes namespace: its name
// and labels. A name that is not a DNS label is an error matching
// [ErrBadObject]. ns is only read.
func ConvertNamespace(ns *corev1.Namespace) (*kubemodel.Namespace, error) {
	pr := newProblems(kubemodel.NamespaceResource, "", ns.Name)
	if err := kubemodel.ValidateNamespace(ns.Name); err != nil {
		pr.add("metadata.name", ns.Name, err.Error())
	}
	if err := pr.err(); err != nil {
		return nil, err
	}
	return &kubemodel.Namespace{Name: ns.Name, Labels: copyLabels(ns.Labels)}, nil
}

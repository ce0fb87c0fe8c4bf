package reflector_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/reflector"
)

// Fully populated objects: every field of the models has a source.

func fullPod() *corev1.Pod {
	now := metav1.Now()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web-0", Labels: map[string]string{"app": "web"},
			Annotations:       map[string]string{"a": "b", "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			DeletionTimestamp: &now},
		Spec: corev1.PodSpec{NodeName: "node1", HostNetwork: true, Containers: []corev1.Container{{
			Name: "c1", Image: "not-reflected",
			Ports: []corev1.ContainerPort{{Name: "dns", HostPort: 53, ContainerPort: 5353, Protocol: corev1.ProtocolUDP, HostIP: "192.168.0.1"}},
		}}},
		Status: corev1.PodStatus{PodIP: "10.1.1.2", PodIPs: []corev1.PodIP{{IP: "10.1.1.2"}, {IP: "fd00::0002"}}, HostIP: "192.168.0.1", Phase: corev1.PodRunning},
	}
}

func fullService() *corev1.Service {
	local := corev1.ServiceInternalTrafficPolicyLocal
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web", Labels: map[string]string{"l": "1"}, Annotations: map[string]string{"a": "2"}},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("web"), NodePort: 30080},
				{Name: "sctp", Protocol: corev1.ProtocolSCTP, Port: 9, TargetPort: intstr.FromInt32(9090), NodePort: 30009},
			},
			ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10", "fd00::a"}, ExternalIPs: []string{"1.2.3.4"},
			LoadBalancerIP: "5.6.7.8", ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, InternalTrafficPolicy: &local,
			SessionAffinity: corev1.ServiceAffinityClientIP, HealthCheckNodePort: 31000, LoadBalancerClass: ptr("example.com/lb"),
			SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(600))}},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "5.6.7.8"}, {Hostname: "lb.example.com"}}}},
	}
}

func fullNode() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node1", Labels: map[string]string{"l": "1"}, Annotations: map[string]string{"a": "1"}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.1.1.0/24", PodCIDRs: []string{"10.1.1.0/24", "fd00:1::/64"}, ProviderID: "aws:///i-1"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "192.168.0.1"}, {Type: corev1.NodeHostName, Address: "node1"},
			{Type: corev1.NodeExternalIP, Address: "1.2.3.4"}, {Type: corev1.NodeInternalDNS, Address: "node1.internal"},
			{Type: corev1.NodeExternalDNS, Address: "node1.example.com"},
		}},
	}
}

func fullSlices() []*discoveryv1.EndpointSlice {
	a := slice("ns1", "web-b", "web", 8080, "10.1.1.3", "10.1.1.2")
	a.Labels["l"] = "1"
	a.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
	a.Endpoints[0].Hostname = ptr("web-1")
	a.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "ns1", Name: "web-1", UID: "uid-1"}
	a.Endpoints = append(a.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.1.1.4"},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}})
	v6 := slice("ns1", "web-a", "web", 8080, "fd00::2")
	v6.Labels["l"] = "1"
	v6.AddressType = discoveryv1.AddressTypeIPv6
	other := slice("ns1", "web-c", "web", 9090, "10.1.1.2") // another port set: another subset
	fqdn := slice("ns1", "web-d", "web", 80, "example.com")
	fqdn.AddressType = discoveryv1.AddressTypeFQDN
	return []*discoveryv1.EndpointSlice{a, v6, other, fqdn}
}

func TestConvertFullObjects(t *testing.T) {
	p, err := reflector.ConvertPod(fullPod())
	require.NoError(t, err)
	assertProto(t, &kubemodel.Pod{
		Name: "web-0", Namespace: "ns1", Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"},
		IpAddress: "10.1.1.2", IpAddresses: []string{"10.1.1.2", "fd00::2"}, HostIpAddress: "192.168.0.1", NodeName: "node1", HostNetwork: true,
		Containers: []*kubemodel.Container{{Name: "c1", Ports: []*kubemodel.ContainerPort{
			{Name: "dns", HostPort: 53, ContainerPort: 5353, Protocol: kubemodel.Protocol_UDP, HostIp: "192.168.0.1"}}}},
		Terminating: true,
	}, p)

	s, err := reflector.ConvertService(fullService())
	require.NoError(t, err)
	assertProto(t, &kubemodel.Service{
		Name: "web", Namespace: "ns1", Labels: map[string]string{"l": "1"}, Annotations: map[string]string{"a": "2"},
		Selector: map[string]string{"app": "web"},
		Ports: []*kubemodel.ServicePort{
			{Name: "http", Protocol: kubemodel.Protocol_TCP, Port: 80, TargetPortName: "web", NodePort: 30080},
			{Name: "sctp", Protocol: kubemodel.Protocol_SCTP, Port: 9, TargetPortNumber: 9090, NodePort: 30009},
		},
		Type: kubemodel.Service_LOAD_BALANCER, ClusterIps: []string{"10.96.0.10", "fd00::a"}, ExternalIps: []string{"1.2.3.4"},
		LoadBalancerIp: "5.6.7.8", LbIngressIps: []string{"5.6.7.8"},
		ExternalTrafficPolicy: kubemodel.Service_LOCAL, InternalTrafficPolicy: kubemodel.Service_LOCAL,
		SessionAffinity: kubemodel.Service_CLIENT_IP, SessionAffinityTimeout: 600, HealthCheckNodePort: 31000,
		LoadBalancerClass: "example.com/lb",
	}, s)

	n, err := reflector.ConvertNode(fullNode())
	require.NoError(t, err)
	assertProto(t, &kubemodel.Node{
		Name: "node1", Labels: map[string]string{"l": "1"}, Annotations: map[string]string{"a": "1"},
		PodCidrs: []string{"10.1.1.0/24", "fd00:1::/64"}, ProviderId: "aws:///i-1",
		Addresses: []*kubemodel.NodeAddress{
			{Type: kubemodel.NodeAddress_INTERNAL_IP, Address: "192.168.0.1"}, {Type: kubemodel.NodeAddress_HOSTNAME, Address: "node1"},
			{Type: kubemodel.NodeAddress_EXTERNAL_IP, Address: "1.2.3.4"}, {Type: kubemodel.NodeAddress_INTERNAL_DNS, Address: "node1.internal"},
			{Type: kubemodel.NodeAddress_EXTERNAL_DNS, Address: "node1.example.com"},
		},
	}, n)

	ns, err := reflector.ConvertNamespace(namespace("team-a"))
	require.NoError(t, err)
	assertProto(t, &kubemodel.Namespace{Name: "team-a", Labels: map[string]string{"team": "a"}}, ns)

	ep, err := reflector.ConvertEndpointSlices("ns1", "web", fullSlices())
	require.NoError(t, err)
	http8080 := []*kubemodel.EndpointPort{{Name: "http", Port: 8080}}
	assertProto(t, &kubemodel.Endpoints{Name: "web", Namespace: "ns1", Labels: map[string]string{"l": "1"}, Subsets: []*kubemodel.EndpointSubset{{
		Addresses: []*kubemodel.EndpointAddress{
			{Ip: "10.1.1.2", NodeName: "node1"},
			{Ip: "10.1.1.3", NodeName: "node1", Hostname: "web-1", TargetRef: &kubemodel.ObjectReference{Kind: "Pod", Namespace: "ns1", Name: "web-1", Uid: "uid-1"}},
			{Ip: "fd00::2", NodeName: "node1"},
		},
		NotReadyAddresses: []*kubemodel.EndpointAddress{{Ip: "10.1.1.4", Terminating: true}},
		Ports:             http8080,
	}, {
		Addresses: []*kubemodel.EndpointAddress{{Ip: "10.1.1.2", NodeName: "node1"}},
		Ports:     []*kubemodel.EndpointPort{{Name: "http", Port: 9090}},
	}}}, ep)

	// Every field of every model has a source in the Kubernetes objects:
	// the models are reflected in full.
	assertAllFieldsSet(t, p, s, n, ns, ep)
}

func assertProto(t *testing.T, want, got proto.Message) {
	t.Helper()
	assert.True(t, proto.Equal(want, got), "got  %v\nwant %v", got, want)
}

// fieldsSet records, per message type met in m's tree, which of its
// fields are set somewhere.
func fieldsSet(m protoreflect.Message, seen map[protoreflect.FullName]map[protoreflect.Name]bool) {
	d := m.Descriptor()
	if seen[d.FullName()] == nil {
		seen[d.FullName()] = map[protoreflect.Name]bool{}
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		seen[d.FullName()][fd.Name()] = true
		switch {
		case fd.IsMap() || fd.Kind() != protoreflect.MessageKind:
		case fd.IsList():
			for i := range v.List().Len() {
				fieldsSet(v.List().Get(i).Message(), seen)
			}
		default:
			fieldsSet(v.Message(), seen)
		}
		return true
	})
}

// assertAllFieldsSet checks that every field of every message type in the
// trees of msgs is set somewhere (enum fields may keep their zero value:
// TCP, CLUSTER_IP and the like are legitimate).
func assertAllFieldsSet(t *testing.T, msgs ...proto.Message) {
	t.Helper()
	seen := map[protoreflect.FullName]map[protoreflect.Name]bool{}
	var descs []protoreflect.MessageDescriptor
	for _, m := range msgs {
		fieldsSet(m.ProtoReflect(), seen)
	}
	for _, m := range msgs {
		descs = append(descs, m.ProtoReflect().Descriptor())
	}
	for len(descs) > 0 {
		d := descs[0]
		descs = descs[1:]
		fields := d.Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if !seen[d.FullName()][fd.Name()] && fd.Kind() != protoreflect.EnumKind {
				t.Errorf("%s.%s is never set", d.FullName(), fd.Name())
			}
			if fd.Kind() == protoreflect.MessageKind && !fd.IsMap() && !seen[fd.Message().FullName()]["__visited"] {
				if seen[fd.Message().FullName()] == nil {
					seen[fd.Message().FullName()] = map[protoreflect.Name]bool{}
				}
				seen[fd.Message().FullName()]["__visited"] = true
				descs = append(descs, fd.Message())
			}
		}
	}
}

// TestConvertBadObjects: every problem is named, with its field and value.
func TestConvertBadObjects(t *testing.T) {
	tests := []struct {
		name    string
		convert func() error
		want    []string
	}{
		{"pod IP", func() error {
			p := fullPod()
			p.Status.PodIP = "10.1.1.300"
			_, err := reflector.ConvertPod(p)
			return err
		},
			[]string{`pod ns1/web-0: status.podIP "10.1.1.300": not an IP address`}},
		{"pod IPs and host IP", func() error {
			p := fullPod()
			p.Status.PodIPs[1].IP = "fd00::zz"
			p.Status.HostIP = "x"
			_, err := reflector.ConvertPod(p)
			return err
		}, []string{`status.podIPs[1].ip "fd00::zz"`, `status.hostIP "x"`}},
		{"pod with zone", func() error {
			p := fullPod()
			p.Status.PodIP = "fe80::1%eth0"
			_, err := reflector.ConvertPod(p)
			return err
		},
			[]string{`status.podIP "fe80::1%eth0": not an IP address`}},
		{"container port", func() error {
			p := fullPod()
			p.Spec.Containers[0].Ports[0].ContainerPort = 0
			p.Spec.Containers[0].Ports[0].HostPort = 70000
			p.Spec.Containers[0].Ports[0].Protocol = "ICMP"
			_, err := reflector.ConvertPod(p)
			return err
		}, []string{`spec.containers[0].ports[0].containerPort "0": must be 1..65535`, `hostPort "70000": must be 0..65535`, `protocol "ICMP": unknown protocol`}},
		{"pod name", func() error { p := fullPod(); p.Name = "Web_0"; _, err := reflector.ConvertPod(p); return err },
			[]string{`metadata.name "Web_0"`}},
		{"pod namespace", func() error { p := fullPod(); p.Namespace = "a.b"; _, err := reflector.ConvertPod(p); return err },
			[]string{`metadata.namespace "a.b"`}},
		{"service port", func() error {
			s := fullService()
			s.Spec.Ports[0].Port = 70000
			_, err := reflector.ConvertService(s)
			return err
		},
			[]string{`service ns1/web: spec.ports[0].port "70000": must be 1..65535`}},
		{"service node port and target port", func() error {
			s := fullService()
			s.Spec.Ports[1].NodePort = -1
			s.Spec.Ports[1].TargetPort = intstr.FromInt32(65536)
			_, err := reflector.ConvertService(s)
			return err
		}, []string{`spec.ports[1].nodePort "-1"`, `spec.ports[1].targetPort "65536"`}},
		{"service IPs", func() error {
			s := fullService()
			s.Spec.ClusterIPs[1] = "nope"
			s.Spec.ExternalIPs[0] = "1.2.3"
			s.Spec.LoadBalancerIP = "lb"
			s.Status.LoadBalancer.Ingress[0].IP = "?"
			_, err := reflector.ConvertService(s)
			return err
		}, []string{`spec.clusterIPs[1] "nope"`, `spec.externalIPs[0] "1.2.3"`, `spec.loadBalancerIP "lb"`, `status.loadBalancer.ingress[0].ip "?"`}},
		{"service enums", func() error {
			s := fullService()
			s.Spec.Type = "Magic"
			s.Spec.ExternalTrafficPolicy = "Nearest"
			s.Spec.SessionAffinity = "Cookie"
			_, err := reflector.ConvertService(s)
			return err
		}, []string{`spec.type "Magic"`, `spec.externalTrafficPolicy "Nearest"`, `spec.sessionAffinity "Cookie"`}},
		{"affinity timeout", func() error {
			s := fullService()
			s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptr(int32(86401))
			_, err := reflector.ConvertService(s)
			return err
		}, []string{`timeoutSeconds "86401": must be 0..86400`}},
		{"node CIDR and address", func() error {
			n := fullNode()
			n.Spec.PodCIDRs[1] = "fd00::/129"
			n.Status.Addresses[2].Address = "a.b.c.d"
			_, err := reflector.ConvertNode(n)
			return err
		}, []string{`node node1: spec.podCIDRs[1] "fd00::/129": not a CIDR`, `status.addresses[2].address "a.b.c.d"`}},
		{"namespace name", func() error { _, err := reflector.ConvertNamespace(namespace("Team")); return err },
			[]string{`namespace Team: metadata.name "Team"`}},
		{"slice address and port", func() error {
			sl := fullSlices()
			sl[0].Endpoints[1].Addresses[0] = "10.0.0.999"
			sl[0].Ports[0].Port = ptr(int32(0))
			ep, err := reflector.ConvertEndpointSlices("ns1", "web", sl)
			if ep == nil || len(ep.Subsets) != 2 {
				t.Errorf("the other slices are still merged: %v", ep)
			}
			return err
		}, []string{`endpointslice ns1/web-b: ports[0].port "0": must be 1..65535`, `endpoints[1].addresses[0] "10.0.0.999": not an IP address`}},
		{"slice without addresses", func() error {
			sl := []*discoveryv1.EndpointSlice{slice("ns1", "web-x", "web", 80, "10.0.0.1")}
			sl[0].Endpoints[0].Addresses = nil
			ep, err := reflector.ConvertEndpointSlices("ns1", "web", sl)
			if ep != nil {
				t.Errorf("nothing to merge, got %v", ep)
			}
			return err
		}, []string{`endpoints[0].addresses: no address`}},
		{"service name label", func() error { _, err := reflector.ConvertEndpointSlices("ns1", "Web!", nil); return err },
			[]string{`endpoints ns1/Web!: metadata.labels[kubernetes.io/service-name] "Web!"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.convert()
			require.Error(t, err)
			require.ErrorIs(t, err, reflector.ErrBadObject)
			var oe *reflector.ObjectError
			require.ErrorAs(t, err, &oe)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestConvertEndpointSlicesEdges(t *testing.T) {
	tests := []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		want   *kubemodel.Endpoints // nil: no value
	}{
		{"no slices", nil, nil},
		{"only FQDN", func() []*discoveryv1.EndpointSlice {
			s := slice("ns1", "a", "web", 80, "example.com")
			s.AddressType = discoveryv1.AddressTypeFQDN
			return []*discoveryv1.EndpointSlice{s}
		}(), nil},
		{"empty slice", []*discoveryv1.EndpointSlice{slice("ns1", "a", "web", 80)}, &kubemodel.Endpoints{Name: "web", Namespace: "ns1"}},
		{"duplicate address ready wins", func() []*discoveryv1.EndpointSlice {
			a := slice("ns1", "a", "web", 80, "10.0.0.1")
			a.Endpoints[0].Conditions.Ready = ptr(false)
			b := slice("ns1", "b", "web", 80, "10.0.0.1")
			b.Endpoints[0].Conditions.Ready = nil // unknown counts as ready
			return []*discoveryv1.EndpointSlice{a, b}
		}(), &kubemodel.Endpoints{Name: "web", Namespace: "ns1", Subsets: []*kubemodel.EndpointSubset{{
			Addresses: []*kubemodel.EndpointAddress{{Ip: "10.0.0.1", NodeName: "node1"}},
			Ports:     []*kubemodel.EndpointPort{{Name: "http", Port: 80}},
		}}}},
		{"port without number left out", func() []*discoveryv1.EndpointSlice {
			a := slice("ns1", "a", "web", 80, "10.0.0.1")
			a.Ports = append(a.Ports, discoveryv1.EndpointPort{Name: ptr("all")})
			return []*discoveryv1.EndpointSlice{a}
		}(), &kubemodel.Endpoints{Name: "web", Namespace: "ns1", Subsets: []*kubemodel.EndpointSubset{{
			Addresses: []*kubemodel.EndpointAddress{{Ip: "10.0.0.1", NodeName: "node1"}},
			Ports:     []*kubemodel.EndpointPort{{Name: "http", Port: 80}},
		}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reflector.ConvertEndpointSlices("ns1", "web", tc.slices)
			require.NoError(t, err)
			if tc.want == nil {
				require.Nil(t, got)
				return
			}
			assertProto(t, tc.want, got)
		})
	}

	// The order of slices and endpoints does not matter.
	sl := fullSlices()
	want, err := reflector.ConvertEndpointSlices("ns1", "web", sl)
	require.NoError(t, err)
	rev := []*discoveryv1.EndpointSlice{sl[3], sl[2], sl[1], sl[0]}
	e := rev[3].Endpoints
	e[0], e[1] = e[1], e[0]
	got, err := reflector.ConvertEndpointSlices("ns1", "web", rev)
	require.NoError(t, err)
	assert.Equal(t, encode(t, want), encode(t, got))
}

func TestNewValidates(t *testing.T) {
	_, cli := startEtcd(t)
	k := newKube()
	good := reflector.KubernetesResources(k)
	tests := []struct {
		name string
		res  []reflector.Resource
		cfg  reflector.Config
		want []string
	}{
		{"zero config", good, reflector.Config{}, nil},
		{"no resources", nil, reflector.Config{}, []string{"no resources"}},
		{"bad config", good, reflector.Config{Prefix: "/x", BatchSize: -1, WriteTimeout: -1, RetryMinBackoff: 2, RetryMaxBackoff: 1},
			[]string{`prefix "/x" (Prefix) must end in /`, "BatchSize -1 is negative", "WriteTimeout -1ns is negative", "RetryMaxBackoff"}},
		{"empty resource", append(good[:1:1], reflector.Resource{}), reflector.Config{},
			[]string{"resource name is empty", "key prefix", "ListWatch is nil", "Object is nil", "Convert is nil", "Key is nil"}},
		{"duplicate", append(good[:1:1], good[0]), reflector.Config{}, []string{`resource "node": duplicate name`, "overlap"}},
		{"API backoff", good, reflector.Config{RetryMinBackoff: time.Second, APIRetryMaxBackoff: time.Millisecond},
			[]string{"APIRetryMaxBackoff 1ms is less than RetryMinBackoff 1s"}},
		{"election under a resource", good, reflector.Config{ElectionPrefix: "/vswitchkit/k8s/pod/leader"}, []string{`ElectionPrefix "/vswitchkit/k8s/pod/leader" overlaps the keys of resource "pod"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := reflector.New(cli, tc.res, tc.cfg)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	_, err := reflector.New(nil, good, reflector.Config{})
	require.ErrorContains(t, err, "nil etcd client")
}

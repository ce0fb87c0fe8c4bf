package reflector_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/reflector"
)

func TestConvertNetworkPolicy(t *testing.T) {
	udp, bad := corev1.ProtocolUDP, corev1.Protocol("ICMP")
	port80, named, end := intstr.FromInt32(80), intstr.FromString("http"), int32(90)
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "web"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{
					{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: &metav1.LabelSelector{
						MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"fe"}}}}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}},
				},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port80, EndPort: &end}, {Protocol: &udp, Port: &named}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{}},
		},
	}
	got, err := reflector.ConvertNetworkPolicy(np)
	require.NoError(t, err)
	want := &kubemodel.NetworkPolicy{
		Namespace: "prod", Name: "web",
		PodSelector: &kubemodel.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		PolicyTypes: []kubemodel.PolicyType{kubemodel.PolicyType_INGRESS, kubemodel.PolicyType_EGRESS},
		Ingress: []*kubemodel.NetworkPolicyIngressRule{{
			From: []*kubemodel.NetworkPolicyPeer{
				{NamespaceSelector: &kubemodel.LabelSelector{}, PodSelector: &kubemodel.LabelSelector{
					MatchExpressions: []*kubemodel.LabelSelectorRequirement{{Key: "tier", Operator: "In", Values: []string{"fe"}}}}},
				{IpBlock: &kubemodel.IPBlock{Cidr: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}},
			},
			Ports: []*kubemodel.NetworkPolicyPort{{Port: 80, EndPort: 90}, {Protocol: kubemodel.Protocol_UDP, PortName: "http"}},
		}},
		Egress: []*kubemodel.NetworkPolicyEgressRule{{}},
	}
	assert.True(t, proto.Equal(want, got), "got %v", got)
	assert.Nil(t, got.Ingress[0].From[1].PodSelector, "a missing selector stays missing")
	assert.NotNil(t, got.Ingress[0].From[0].NamespaceSelector, "an empty one stays empty")

	np.Spec.Ingress[0].Ports = append(np.Spec.Ingress[0].Ports, networkingv1.NetworkPolicyPort{Protocol: &bad})
	np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, "Sideways")
	_, err = reflector.ConvertNetworkPolicy(np)
	require.ErrorIs(t, err, reflector.ErrBadObject)
	assert.ErrorContains(t, err, "spec.ingress[0].ports[2].protocol")
	assert.ErrorContains(t, err, "spec.policyTypes[2]")
}

func TestConvertPodPeer(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "web-0", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{"big": "not in the peer record"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 8080}, {ContainerPort: 9090}, {Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}}}}},
		Status: corev1.PodStatus{PodIP: "10.1.1.2", PodIPs: []corev1.PodIP{{IP: "10.1.1.2"}, {IP: "fd00::2"}}},
	}
	got, err := reflector.ConvertPodPeer(pod)
	require.NoError(t, err)
	assert.True(t, proto.Equal(&kubemodel.PodPeer{Namespace: "prod", Name: "web-0", NodeName: "n1",
		Labels: map[string]string{"app": "web"}, IpAddresses: []string{"10.1.1.2", "fd00::2"},
		Ports: []*kubemodel.NamedPort{{Name: "http", Port: 8080}, {Name: "dns", Protocol: kubemodel.Protocol_UDP, Port: 53}}}, got), "got %v", got)

	for name, edit := range map[string]func(*corev1.Pod){
		"no address yet": func(p *corev1.Pod) { p.Status = corev1.PodStatus{} },
		"host network":   func(p *corev1.Pod) { p.Spec.HostNetwork = true },
	} {
		p := pod.DeepCopy()
		edit(p)
		got, err := reflector.ConvertPodPeer(p)
		require.NoError(t, err, name)
		assert.Nil(t, got, "%s: no peer record", name)
	}
	p := pod.DeepCopy()
	p.Status.PodIPs = []corev1.PodIP{{IP: "not-an-ip"}}
	_, err = reflector.ConvertPodPeer(p)
	require.ErrorIs(t, err, reflector.ErrBadObject)
}

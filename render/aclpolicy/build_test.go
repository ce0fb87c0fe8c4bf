package aclpolicy

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/policy"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

func view(name string, addr string, in, eg *policy.Direction) *policy.PodPolicy {
	v := &policy.PodPolicy{Pod: kubemodel.PodID{Namespace: "x", Name: name}, Addrs: []netip.Addr{netip.MustParseAddr(addr)}}
	if in != nil {
		v.Ingress = *in
	}
	if eg != nil {
		v.Egress = *eg
	}
	return v
}

func tcpPorts(ps ...uint16) policy.Ports {
	var out policy.Ports
	for _, p := range ps {
		out = out.Union(policy.Ports{TCP: []policy.PortRange{{First: p, Last: p}}})
	}
	return out
}

func TestBuildNoIsolationNoACLs(t *testing.T) {
	st := build([]pod{{view: view("a", "10.1.1.2", nil, nil), iface: "pod-a"}}, env{exits: []string{"vxlan-2"}})
	assert.Empty(t, st.acls)
	assert.Empty(t, st.attach)
}

// TestBuildSharedACLs: pods with the same policy share their ACLs; a pod
// that is only restricted by a neighbour's egress gets sessions.
func TestBuildSharedACLs(t *testing.T) {
	deny := &policy.Direction{Isolated: true}
	web := &policy.Direction{Isolated: true, Rules: []policy.Rule{{AnyPeer: true, Ports: tcpPorts(80)}}}
	pods := []pod{
		{view: view("a", "10.1.1.2", web, nil), iface: "pod-a"},
		{view: view("b", "10.1.1.3", web, nil), iface: "pod-b"},
		{view: view("c", "10.1.1.4", nil, deny), iface: "pod-c"},
		{view: view("d", "10.1.1.5", nil, nil), iface: "pod-d"},
	}
	st := build(pods, env{exits: []string{"vxlan-2"}, servicePrefixes: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}})
	require.Contains(t, st.attach, "pod-a")
	assert.Equal(t, st.attach["pod-a"].Output, st.attach["pod-b"].Output, "equal rules, one ACL")
	assert.Equal(t, []string{ReflectACL}, st.attach["pod-a"].Input, "not egress-isolated: sessions only")
	require.Contains(t, st.attach, "pod-d", "d's output denies c")
	assert.Equal(t, []string{ReflectACL}, st.attach["pod-d"].Input)
	assert.Equal(t, &vppmodel.ACLInterface{Interface: "vxlan-2", Input: []string{ReflectACL}, Output: []string{EgressACL}}, st.attach["vxlan-2"])

	n := newSimNode(st)
	ep := func(name, addr string) simEndpoint {
		return simEndpoint{node: n, iface: "pod-" + name, addr: netip.MustParseAddr(addr)}
	}
	c := simCluster{}
	a, b, cc, d := ep("a", "10.1.1.2"), ep("b", "10.1.1.3"), ep("c", "10.1.1.4"), ep("d", "10.1.1.5")
	tcp := uint32(vppmodel.ProtoTCP)
	assert.True(t, c.connect(d, a, netip.Addr{}, tcp, 80), "d -> a:80 allowed by a's ingress")
	assert.False(t, c.connect(d, a, netip.Addr{}, tcp, 81), "d -> a:81 denied")
	assert.True(t, c.connect(a, d, netip.Addr{}, tcp, 81), "a -> d: d is open")
	assert.False(t, c.connect(cc, d, netip.Addr{}, tcp, 81), "c may not send")
	assert.True(t, c.connect(d, cc, netip.Addr{}, tcp, 81), "c may receive, and reply")
	assert.False(t, c.connect(cc, a, netip.MustParseAddr("10.96.0.10"), tcp, 80), "c's egress holds after translation")
	assert.True(t, c.connect(b, a, netip.MustParseAddr("10.96.0.10"), tcp, 80), "through a service, to a's port 80")
}

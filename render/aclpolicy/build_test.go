package aclpolicy

import (
	"net/netip"
	"strings"
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

// TestBuildPodACLs: every pod with ACLs has its own two, named after its
// interface, also when its rules equal another pod's; a pod that is only
// restricted by a neighbour's egress gets sessions.
func TestBuildPodACLs(t *testing.T) {
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
	assert.Equal(t, &vppmodel.ACLInterface{Interface: "pod-a", Input: []string{"np-in-pod-a"}, Output: []string{"np-out-pod-a"}}, st.attach["pod-a"])
	assert.Equal(t, []string{"np-out-pod-b"}, st.attach["pod-b"].Output, "equal rules, an ACL of its own")
	assert.Equal(t, st.acls["np-out-pod-a"].Rules, st.acls["np-out-pod-b"].Rules)
	assert.Equal(t, reflectAll(), st.acls["np-in-pod-a"].Rules, "not egress-isolated: sessions only")
	require.Contains(t, st.attach, "pod-d", "d's output denies c")
	assert.Equal(t, reflectAll(), st.acls["np-in-pod-d"].Rules)
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

// TestBuildStableLists: a change of a pod's rules changes its ACLs' rules,
// not the ACL lists of its interface (VPP deletes an interface's sessions
// when its list changes, and keeps them when an ACL is replaced in place);
// so does a change that adds an egress-isolated neighbour, which changes
// every pod's output ACL.
func TestBuildStableLists(t *testing.T) {
	web := &policy.Direction{Isolated: true, Rules: []policy.Rule{{AnyPeer: true, Ports: tcpPorts(80)}}}
	web81 := &policy.Direction{Isolated: true, Rules: []policy.Rule{{AnyPeer: true, Ports: tcpPorts(80, 81)}}}
	deny := &policy.Direction{Isolated: true}
	e := env{exits: []string{"vxlan-2"}}
	before := build([]pod{
		{view: view("a", "10.1.1.2", web, nil), iface: "pod-a"},
		{view: view("b", "10.1.1.3", nil, deny), iface: "pod-b"},
		{view: view("c", "10.1.1.4", nil, nil), iface: "pod-c"},
	}, e)
	after := build([]pod{
		{view: view("a", "10.1.1.2", web81, deny), iface: "pod-a"},
		{view: view("b", "10.1.1.3", nil, deny), iface: "pod-b"},
		{view: view("c", "10.1.1.4", nil, deny), iface: "pod-c"},
	}, e)
	for _, iface := range []string{"pod-a", "pod-b", "pod-c", "vxlan-2"} {
		assert.Equal(t, before.attach[iface], after.attach[iface], "%s keeps its lists", iface)
	}
	for _, name := range []string{"np-in-pod-a", "np-out-pod-a", "np-out-pod-b", "np-in-pod-c", "np-out-pod-c", EgressACL} {
		assert.NotEqual(t, before.acls[name].GetRules(), after.acls[name].GetRules(), "%s replaced in place", name)
	}
	long := strings.Repeat("p", vppmodel.MaxInterfaceNameLen)
	st := build([]pod{{view: view("a", "10.1.1.2", web, nil), iface: long}}, e)
	for _, name := range append(st.attach[long].GetInput(), st.attach[long].GetOutput()...) {
		assert.NoError(t, vppmodel.Validate(st.acls[name]), "a valid name for a long interface name")
	}
}

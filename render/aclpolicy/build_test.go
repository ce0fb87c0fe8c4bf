package aclpolicy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

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

// TestBuildSharedACLs: pods with equal rules share one ACL, named after
// the first of them; a pod that is only restricted by a neighbour's
// egress gets sessions (ReflectACL).
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
	assert.Equal(t, &vppmodel.ACLInterface{Interface: "pod-a", Input: []string{"np-in-pod-a", ReflectACL}, Output: []string{"np-out-pod-a", "np-gout-pod-a"}},
		st.attach["pod-a"], "not egress-isolated: sessions only; its own ACLs are empty")
	assert.Empty(t, st.acls["np-in-pod-a"].GetRules())
	assert.Empty(t, st.acls["np-out-pod-a"].GetRules())
	assert.Equal(t, []string{"np-out-pod-b", "np-gout-pod-a"}, st.attach["pod-b"].Output, "equal rules, one shared ACL")
	require.Contains(t, st.attach, "pod-d", "d's output denies c")
	assert.Equal(t, []string{"np-in-pod-d", ReflectACL}, st.attach["pod-d"].Input)
	assert.Equal(t, []string{"np-in-pod-c", "np-gin-pod-c"}, st.attach["pod-c"].Input)
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

// TestBuildInPlace: no pod's ACL lists change while it has ACLs (VPP
// deletes an interface's sessions when its list changes, and keeps them
// when an ACL is replaced in place). The rules of a shared ACL whose pods
// all change the same way are replaced in place; a pod whose rules part
// from its group's gets them in its own ACL (ending in a deny of
// everything), which is empty again when they match the group's; a group
// left empty goes.
func TestBuildInPlace(t *testing.T) {
	web := &policy.Direction{Isolated: true, Rules: []policy.Rule{{AnyPeer: true, Ports: tcpPorts(80)}}}
	web81 := &policy.Direction{Isolated: true, Rules: []policy.Rule{{AnyPeer: true, Ports: tcpPorts(80, 81)}}}
	deny := &policy.Direction{Isolated: true}
	e := env{exits: []string{"vxlan-2"}}
	var b builder
	pods := func(va, vb, ec *policy.Direction) []pod {
		return []pod{
			{view: view("a", "10.1.1.2", va, nil), iface: "pod-a"},
			{view: view("b", "10.1.1.3", vb, nil), iface: "pod-b"},
			{view: view("c", "10.1.1.4", nil, ec), iface: "pod-c"},
		}
	}
	lists := func(st state) map[string]*vppmodel.ACLInterface { return st.attach }
	s1 := b.build(pods(web, web, nil), e)
	assert.Equal(t, []string{"np-out-pod-b", "np-gout-pod-a"}, s1.attach["pod-b"].Output)

	s2 := b.build(pods(web81, web81, nil), e)
	assert.Equal(t, lists(s1), lists(s2), "no list changes")
	assert.NotEqual(t, s1.keys["np-gout-pod-a"], s2.keys["np-gout-pod-a"], "the shared ACL replaced in place")
	assert.Empty(t, s2.acls["np-out-pod-b"].GetRules())

	s3 := b.build(pods(web81, web, nil), e)
	assert.Equal(t, lists(s2), lists(s3), "no list changes")
	assert.Equal(t, s2.keys["np-gout-pod-a"], s3.keys["np-gout-pod-a"], "a tie keeps the group's rules")
	assert.NotEmpty(t, s3.acls["np-out-pod-b"].GetRules(), "b's own rules in its own ACL")
	own := s3.acls["np-out-pod-b"].GetRules()
	assert.True(t, proto.Equal(&vppmodel.ACL{Rules: denyAll()}, &vppmodel.ACL{Rules: own[len(own)-2:]}), "ending in a deny of everything")

	// c becomes egress-isolated: a's and b's output rules gain c's pair
	// rules; c gets ACLs (its lists appear).
	s4 := b.build(pods(web81, web, deny), e)
	for _, iface := range []string{"pod-a", "pod-b"} {
		assert.Equal(t, s3.attach[iface], s4.attach[iface], "%s keeps its lists", iface)
	}
	assert.Equal(t, []string{"np-in-pod-c", "np-gin-pod-c"}, s4.attach["pod-c"].Input)

	s5 := b.build(pods(web, web, nil), e)
	for _, iface := range []string{"pod-a", "pod-b"} {
		assert.Equal(t, s4.attach[iface], s5.attach[iface], "%s keeps its lists", iface)
	}
	assert.Empty(t, s5.acls["np-out-pod-b"].GetRules(), "equal again: b's own ACL is empty")
	assert.NotContains(t, s5.attach, "pod-c", "c needs no ACL any more")
	assert.NotContains(t, s5.acls, "np-gin-pod-c", "the empty group is gone")

	long := strings.Repeat("p", vppmodel.MaxInterfaceNameLen)
	st := build([]pod{{view: view("a", "10.1.1.2", web, nil), iface: long}}, e)
	require.Contains(t, st.attach, long)
	for _, name := range append(st.attach[long].GetInput(), st.attach[long].GetOutput()...) {
		assert.NoError(t, vppmodel.Validate(st.acls[name]), "a valid name for a long interface name")
	}
}

package vppdriver_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.fd.io/govpp/api"
	"go.fd.io/govpp/binapi/acl"
	"go.fd.io/govpp/binapi/acl_types"
	"go.fd.io/govpp/binapi/interface_types"

	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/internal/vppconv"
	"github.com/vswitchkit/vswitchkit/vppdriver"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppdrivertest"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
	"github.com/vswitchkit/vswitchkit/vppdriver/vppsim"
)

// aclRule returns a permit+reflect rule from src to dst (TCP to port).
func aclRule(src, dst string, port uint32) *vppmodel.ACLRule {
	return &vppmodel.ACLRule{Action: vppmodel.ACLRule_PERMIT_REFLECT, SrcPrefix: src, DstPrefix: dst,
		Protocol: vppmodel.ProtoTCP, SrcPortLast: 65535, DstPortFirst: port, DstPortLast: port}
}

func aclOf(name string, rules ...*vppmodel.ACLRule) *vppmodel.ACL {
	return &vppmodel.ACL{Name: name, Rules: rules}
}

func aclList(iface string, input, output []string) *vppmodel.ACLInterface {
	return &vppmodel.ACLInterface{Interface: iface, Input: input, Output: output}
}

// aclByTag returns the ACL of the snapshot with the tag.
func aclByTag(s vppsim.Snapshot, tag string) (vppsim.ACL, bool) {
	for _, a := range s.ACLs {
		if a.Tag == tag {
			return a, true
		}
	}
	return vppsim.ACL{}, false
}

// aclLists returns the ACL lists of the snapshot by interface tag, as
// "in:<tags> out:<tags>".
func aclLists(s vppsim.Snapshot) map[string]string {
	tags := map[uint32]string{}
	for _, a := range s.ACLs {
		tags[a.Index] = a.Tag
	}
	names := func(idx []uint32) []string {
		var out []string
		for _, i := range idx {
			out = append(out, tags[i])
		}
		return out
	}
	out := map[string]string{}
	for _, l := range s.ACLInterfaces {
		tag := fmt.Sprint("#", l.SwIfIndex)
		for _, i := range s.Interfaces {
			if i.SwIfIndex == l.SwIfIndex {
				tag = i.Tag
			}
		}
		out[tag] = fmt.Sprintf("in:%v out:%v", names(l.Input), names(l.Output))
	}
	return out
}

// TestACLs: ACLs are created with their tag (VPP picks the index),
// changed in place (same index, still applied), applied to interfaces in
// order; an ACL renamed in a pod's list is three requests in order (the
// new ACL, the list, the old ACL's deletion) with no failed request; an
// interface deleted with its lists sends no list request; a resync of the
// same state writes nothing; a VPP restart re-creates everything.
func TestACLs(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	sent := &vppdrivertest.RequestRecorder{}
	d := newRecordedDriver(t, vpp, sent)
	pol1 := aclOf("pol-1", aclRule("10.1.0.0/16", "0.0.0.0/0", 80), aclRule("fd00:1::/64", "::/0", 80))
	reflect := aclOf("reflect", &vppmodel.ACLRule{Action: vppmodel.ACLRule_PERMIT_REFLECT, SrcPrefix: "0.0.0.0/0", DstPrefix: "0.0.0.0/0",
		SrcPortLast: 65535, DstPortLast: 65535})
	state := kv(t, loop("pod-a", true, 0, "10.1.1.1/24"), loop("pod-b", true, 0, "10.1.2.1/24"), pol1, reflect,
		aclList("pod-a", []string{"reflect"}, []string{"pol-1"}),
		aclList("pod-b", nil, []string{"pol-1", "reflect"}))
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	s := vpp.Snapshot()
	require.Len(t, s.ACLs, 2)
	a1, ok := aclByTag(s, "vsk:pol-1")
	require.True(t, ok)
	require.Len(t, a1.Rules, 2)
	assert.Equal(t, netip.MustParsePrefix("fd00:1::/64"), a1.Rules[1].Src)
	assert.Equal(t, [2]uint16{80, 80}, a1.Rules[0].DstPorts)
	assert.Equal(t, map[string]string{
		"vsk:pod-a": "in:[vsk:reflect] out:[vsk:pol-1]",
		"vsk:pod-b": "in:[] out:[vsk:pol-1 vsk:reflect]",
	}, aclLists(s))

	t.Run("a resync of the same state writes nothing", func(t *testing.T) {
		sent.Take()
		commit(t, d, controller.CommitResync, state)
		waitConfigured(t, d, len(state))
		assert.Empty(t, vppdrivertest.Writes(sent.Take()))
	})

	t.Run("an ACL changed in place keeps its index and its place", func(t *testing.T) {
		pol1 = aclOf("pol-1", aclRule("10.1.0.0/16", "0.0.0.0/0", 8080))
		state[vppmodel.ACLKey("pol-1")] = pol1
		sent.Take()
		commit(t, d, controller.CommitUpdate, kv(t, pol1))
		waitConfigured(t, d, len(state))
		assert.Equal(t, []string{"acl_add_replace"}, vppdrivertest.Writes(sent.Take()))
		s := vpp.Snapshot()
		a, _ := aclByTag(s, "vsk:pol-1")
		assert.Equal(t, a1.Index, a.Index)
		assert.Len(t, a.Rules, 1)
		assert.Equal(t, "in:[vsk:reflect] out:[vsk:pol-1]", aclLists(s)["vsk:pod-a"])
	})

	t.Run("an ACL renamed in a list: create, switch, delete", func(t *testing.T) {
		pol2 := aclOf("pol-2", aclRule("10.2.0.0/16", "0.0.0.0/0", 8080))
		change := kv(t, pol2, aclList("pod-a", []string{"reflect"}, []string{"pol-2"}), aclList("pod-b", nil, []string{"pol-2", "reflect"}))
		change[vppmodel.ACLKey("pol-1")] = nil
		sent.Take()
		before := d.Stats().FailedAttempts
		commit(t, d, controller.CommitUpdate, change)
		delete(state, vppmodel.ACLKey("pol-1"))
		for k, v := range change {
			if v != nil {
				state[k] = v
			}
		}
		waitConfigured(t, d, len(state))
		assert.Equal(t, []string{"acl_add_replace", "acl_interface_set_acl_list", "acl_interface_set_acl_list", "acl_del"},
			vppdrivertest.Writes(sent.Take()))
		assert.Equal(t, before, d.Stats().FailedAttempts)
		s := vpp.Snapshot()
		_, ok := aclByTag(s, "vsk:pol-1")
		assert.False(t, ok)
		assert.Equal(t, map[string]string{
			"vsk:pod-a": "in:[vsk:reflect] out:[vsk:pol-2]",
			"vsk:pod-b": "in:[] out:[vsk:pol-2 vsk:reflect]",
		}, aclLists(s))
	})

	t.Run("an interface deleted with its lists: no list request", func(t *testing.T) {
		sent.Take()
		change := controller.KeyValuePairs{vppmodel.InterfaceKey("pod-b"): nil, vppmodel.ACLInterfaceKey("pod-b"): nil}
		commit(t, d, controller.CommitUpdate, change)
		delete(state, vppmodel.InterfaceKey("pod-b"))
		delete(state, vppmodel.ACLInterfaceKey("pod-b"))
		waitConfigured(t, d, len(state))
		assert.Equal(t, []string{"delete_loopback"}, vppdrivertest.Writes(sent.Take()))
		require.NoError(t, d.CheckInvariants())
	})

	t.Run("a VPP restart re-creates everything", func(t *testing.T) {
		vpp.Restart()
		require.Eventually(t, func() bool { return d.Stats().Connects >= 2 }, 10*time.Second, time.Millisecond)
		waitConfigured(t, d, len(state))
		s := vpp.Snapshot()
		assert.Len(t, s.ACLs, 2)
		assert.Equal(t, map[string]string{"vsk:pod-a": "in:[vsk:reflect] out:[vsk:pol-2]"}, aclLists(s))
		require.NoError(t, d.CheckInvariants())
	})

	t.Run("the interface deleted while its lists stay desired: they wait", func(t *testing.T) {
		commit(t, d, controller.CommitUpdate, controller.KeyValuePairs{vppmodel.InterfaceKey("pod-a"): nil})
		st, _ := d.Status(vppmodel.ACLInterfaceKey("pod-a"))
		assert.Equal(t, vppdriver.StatePending, st.State)
		assert.Equal(t, []string{vppmodel.InterfaceKey("pod-a")}, st.PendingOn)
		commit(t, d, controller.CommitResync, controller.KeyValuePairs{})
		waitConfigured(t, d, 0)
		s := vpp.Snapshot()
		assert.Empty(t, s.ACLs)
		assert.Empty(t, s.ACLInterfaces)
		require.NoError(t, d.CheckInvariants())
	})
}

// TestACLOwnership: only ACLs tagged with the driver's prefix are its own;
// a resync to nothing leaves the others (untagged, or tagged by another
// driver) and the lists that name them.
func TestACLOwnership(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	rule := acl_types.ACLRule{IsPermit: acl_types.ACL_ACTION_API_PERMIT, SrcPrefix: vppconv.Prefix(netip.MustParsePrefix("10.0.0.0/8")),
		DstPrefix: vppconv.Prefix(netip.MustParsePrefix("0.0.0.0/0"))}
	reps := foreign(t, vpp,
		&acl.ACLAddReplace{ACLIndex: ^uint32(0), Tag: "other:x", Count: 1, R: []acl_types.ACLRule{rule}},
		&acl.ACLAddReplace{ACLIndex: ^uint32(0), Count: 1, R: []acl_types.ACLRule{rule}},
	)
	for _, r := range reps {
		require.Zero(t, r.(*acl.ACLAddReplaceReply).Retval)
	}
	d := startDriver(t, vpp, testCfg())
	state := kv(t, loop("pod", true, 0), aclOf("mine", aclRule("10.0.0.0/8", "0.0.0.0/0", 22)),
		aclList("pod", []string{"mine"}, nil))
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	assert.Len(t, vpp.Snapshot().ACLs, 3)
	// A foreign ACL on the driver's interface is replaced by the desired
	// list (the list is the driver's), and not deleted.
	pod, _ := ifaceByTag(vpp.Snapshot(), "vsk:pod")
	reps = foreign(t, vpp, &acl.ACLInterfaceSetACLList{SwIfIndex: interface_types.InterfaceIndex(pod.SwIfIndex), Count: 1, NInput: 1, Acls: []uint32{0}})
	require.Zero(t, reps[0].(*acl.ACLInterfaceSetACLListReply).Retval)
	commit(t, d, controller.CommitResync, state)
	waitConfigured(t, d, len(state))
	assert.Equal(t, "in:[vsk:mine] out:[]", aclLists(vpp.Snapshot())["vsk:pod"])

	commit(t, d, controller.CommitResync, controller.KeyValuePairs{})
	waitConfigured(t, d, 0)
	var tags []string
	for _, a := range vpp.Snapshot().ACLs {
		tags = append(tags, a.Tag)
	}
	assert.ElementsMatch(t, []string{"other:x", ""}, tags)
}

// TestACLStatuses: an ACL list waits for its interface and for every ACL
// it names; invalid values are rejected for their keys alone; a list that
// VPP keeps refusing is a failing key of kind "acl".
func TestACLStatuses(t *testing.T) {
	vpp := vppsim.New(vppsim.Config{})
	d := startDriver(t, vpp, testCfg())
	require.Eventually(t, func() bool { return d.Stats().Connected }, 10*time.Second, time.Millisecond)
	commit(t, d, controller.CommitUpdate, kv(t, aclList("pod", []string{"a"}, []string{"b"})))
	st, _ := d.Status(vppmodel.ACLInterfaceKey("pod"))
	assert.Equal(t, vppdriver.StatePending, st.State)
	assert.ElementsMatch(t, []string{vppmodel.InterfaceKey("pod"), vppmodel.ACLKey("a"), vppmodel.ACLKey("b")}, st.PendingOn)
	commit(t, d, controller.CommitUpdate, kv(t, loop("pod", true, 0), aclOf("a")))
	st, _ = d.Status(vppmodel.ACLInterfaceKey("pod"))
	assert.Equal(t, []string{vppmodel.ACLKey("b")}, st.PendingOn)
	commit(t, d, controller.CommitUpdate, kv(t, aclOf("b", aclRule("10.0.0.0/8", "0.0.0.0/0", 1))))
	waitConfigured(t, d, 4)

	bad := controller.KeyValuePairs{vppmodel.ACLKey("c"): aclOf("c", aclRule("10.0.0.1/8", "0.0.0.0/0", 1))}
	_, err := d.Commit(t.Context(), &controller.Commit{Kind: controller.CommitUpdate, Values: bad})
	require.Len(t, controller.KeyErrors(err), 1)
	require.ErrorIs(t, err, vppdriver.ErrInvalidValue)

	vpp.SetInterceptor(func(req api.Message) (int32, bool) {
		if _, ok := req.(*acl.ACLAddReplace); ok {
			return -1, true
		}
		return 0, false
	})
	commit(t, d, controller.CommitUpdate, kv(t, aclOf("b", aclRule("10.0.0.0/8", "0.0.0.0/0", 2))))
	require.Eventually(t, func() bool { return d.Stats().FailingByKind["acl"] == 1 }, 10*time.Second, time.Millisecond)
	assert.ErrorIs(t, d.Degraded(), vppdriver.ErrDegraded)
	vpp.SetInterceptor(nil)
	require.Eventually(t, func() bool { return d.Stats().Failing == 0 }, 10*time.Second, time.Millisecond)
	require.NoError(t, d.CheckInvariants())
}

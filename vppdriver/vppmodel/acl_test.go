package vppmodel_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/vppdriver/vppmodel"
)

func TestACLKeysAndValidation(t *testing.T) {
	rule := func(edit func(*vppmodel.ACLRule)) *vppmodel.ACLRule {
		r := &vppmodel.ACLRule{Action: vppmodel.ACLRule_PERMIT_REFLECT, SrcPrefix: "10.1.0.0/16", DstPrefix: "0.0.0.0/0",
			Protocol: vppmodel.ProtoTCP, SrcPortLast: 65535, DstPortFirst: 80, DstPortLast: 80}
		if edit != nil {
			edit(r)
		}
		return r
	}
	key, err := vppmodel.KeyOf(&vppmodel.ACL{Name: "pol-1", Rules: []*vppmodel.ACLRule{rule(nil)}})
	require.NoError(t, err)
	assert.Equal(t, "vpp/acl/pol-1", key)
	key, err = vppmodel.KeyOf(&vppmodel.ACLInterface{Interface: "pod-web", Input: []string{"reflect"}, Output: []string{"pol-1"}})
	require.NoError(t, err)
	assert.Equal(t, "vpp/acl-interface/pod-web", key)
	for _, k := range []string{"vpp/acl/x", "vpp/acl-interface/x"} {
		_, err := vppmodel.NewValueForKey(k)
		assert.NoError(t, err, k)
	}

	for _, tc := range []struct {
		name string
		msg  any
		want string
	}{
		{"bad name", &vppmodel.ACL{Name: "a/b"}, "acl name"},
		{"mixed families", &vppmodel.ACL{Name: "a", Rules: []*vppmodel.ACLRule{rule(func(r *vppmodel.ACLRule) { r.DstPrefix = "::/0" })}}, "different families"},
		{"host bits", &vppmodel.ACL{Name: "a", Rules: []*vppmodel.ACLRule{rule(func(r *vppmodel.ACLRule) { r.SrcPrefix = "10.1.0.1/16" })}}, "host bits"},
		{"ports", &vppmodel.ACL{Name: "a", Rules: []*vppmodel.ACLRule{rule(func(r *vppmodel.ACLRule) { r.DstPortFirst = 90 })}}, "port range"},
		{"action", &vppmodel.ACL{Name: "a", Rules: []*vppmodel.ACLRule{rule(func(r *vppmodel.ACLRule) { r.Action = 7 })}}, "action"},
		{"no prefix", &vppmodel.ACL{Name: "a", Rules: []*vppmodel.ACLRule{rule(func(r *vppmodel.ACLRule) { r.SrcPrefix = "" })}}, "source prefix"},
		{"twice", &vppmodel.ACLInterface{Interface: "p", Output: []string{"a", "a"}}, "twice"},
		{"bad interface", &vppmodel.ACLInterface{Interface: ""}, "not an interface name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			switch m := tc.msg.(type) {
			case *vppmodel.ACL:
				_, err = vppmodel.KeyOf(m)
			case *vppmodel.ACLInterface:
				_, err = vppmodel.KeyOf(m)
			}
			require.ErrorIs(t, err, vppmodel.ErrInvalid)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

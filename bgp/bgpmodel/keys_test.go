package bgpmodel_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
)

func TestPolicyKey(t *testing.T) {
	require.NoError(t, bgpmodel.PolicyResource().Validate())
	key := bgpmodel.PolicyKey("rack-1")
	assert.Equal(t, "k8s/bgppeeringpolicy/rack-1", key)
	name, err := bgpmodel.ParsePolicyKey(key)
	require.NoError(t, err)
	assert.Equal(t, "rack-1", name)
	for _, bad := range []string{"k8s/node/x", "k8s/bgppeeringpolicy/", "k8s/bgppeeringpolicy/Bad_Name", "k8s/bgppeeringpolicy/a/b"} {
		_, err := bgpmodel.ParsePolicyKey(bad)
		assert.Error(t, err, bad)
	}
	_, ok := bgpmodel.PolicyResource().NewValue().(*bgpmodel.PeeringPolicy)
	assert.True(t, ok)
}

package bgp_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgptest"
)

func setObjects(s *bgp.Store, o *bgp.Objects) {
	for _, c := range o.ClusterConfigs {
		s.SetClusterConfig(c)
	}
	for _, c := range o.PeerConfigs {
		s.SetPeerConfig(c)
	}
	for _, a := range o.Advertisements {
		s.SetAdvertisement(a)
	}
	for _, ov := range o.Overrides {
		s.SetNodeConfigOverride(ov)
	}
	for n, pw := range o.AuthSecrets {
		s.SetAuthSecret(n, pw)
	}
}

// TestControllerAppliesV2: a cluster config reaches the manager through
// ApplySpec; peers left out are in the status with their conditions;
// removing the selection withdraws.
func TestControllerAppliesV2(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mgr := &bgptest.FakeManager{}
		h := startController(t, mgr, bgp.ControllerConfig{})
		h.store.SetNode(node(map[string]string{"bgp": "on"}))
		objs := v2Objects()
		objs.PeerConfigs["pc"].AuthSecretRef = "md5" // missing: tor-a is left out
		setObjects(h.store, objs)
		synctest.Wait()

		spec := mgr.AppliedSpec()
		require.NotNil(t, spec)
		assert.Equal(t, "BGPClusterConfig/cc", spec.Source)
		require.Len(t, spec.Instances[0].Peers, 1)
		assert.Equal(t, "tor-b", spec.Instances[0].Peers[0].Name)
		assert.Equal(t, bgp.ControllerStatus{Policy: "cc", Source: "BGPClusterConfig/cc", Reconciles: h.ctrl.Status().Reconciles}, h.ctrl.Status())

		st, err := h.ctrl.NodeStatus(context.Background())
		require.NoError(t, err)
		assert.Equal(t, "n1", st.Node)
		assert.Equal(t, "BGPClusterConfig/cc", st.Source)
		require.Len(t, st.Instances, 1)
		assert.Equal(t, "10.0.0.1", st.Instances[0].RouterID.String(), "the node's InternalIP")
		require.Len(t, st.Instances[0].Peers, 2)
		a, ok := st.Peer("main", "tor-a")
		require.True(t, ok)
		assert.Equal(t, bgp.SessionNotConfigured, a.State)
		assert.True(t, st.HasCondition(bgp.ConditionMissingAuthSecret, "main", "tor-a"))
		b, _ := st.Peer("main", "tor-b")
		assert.Equal(t, bgp.SessionUnknown, b.State, "the fake manager lists no sessions")
		assert.Empty(t, st.Conditions)

		// The secret appears: both peers.
		h.store.SetAuthSecret("md5", "pw")
		synctest.Wait()
		require.Len(t, mgr.AppliedSpec().Instances[0].Peers, 2)
		st, err = h.ctrl.NodeStatus(context.Background())
		require.NoError(t, err)
		assert.False(t, st.HasCondition(bgp.ConditionMissingAuthSecret, "main", "tor-a"))

		// The node leaves the selection: withdrawn.
		h.store.SetNode(node(map[string]string{"bgp": "off"}))
		synctest.Wait()
		assert.Nil(t, mgr.AppliedSpec())
		st, _ = h.ctrl.NodeStatus(context.Background())
		assert.Empty(t, st.Instances)
		h.stop(t)
	})
}

// TestControllerV1AndV2Conflict: a node selected by a v1 policy and a v2
// cluster config keeps what it had and reports the conflict; when one of
// them goes, the other applies.
func TestControllerV1AndV2Conflict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mgr := &bgptest.FakeManager{}
		h := startController(t, mgr, bgp.ControllerConfig{RetryInterval: -1})
		h.store.SetNode(node(map[string]string{"bgp": "on"}))
		h.store.SetPolicy(policyFor("v1", nil))
		synctest.Wait()
		require.NotNil(t, mgr.Applied())

		setObjects(h.store, v2Objects())
		synctest.Wait()
		st := h.ctrl.Status()
		require.ErrorIs(t, st.LastError, bgp.ErrConflictingConfig)
		assert.Equal(t, "BGPPeeringPolicy/v1", st.Source, "the v1 policy stays applied")
		assert.Equal(t, "v1", mgr.Applied().Name)
		ns, err := h.ctrl.NodeStatus(context.Background())
		require.NoError(t, err)
		assert.True(t, ns.HasCondition(bgp.ConditionConflictingConfig, "", ""))
		assert.True(t, ns.HasCondition(bgp.ConditionReconcileError, "", ""))
		assert.Equal(t, "BGPPeeringPolicy/v1", ns.Source)

		h.store.DeletePolicy("v1")
		synctest.Wait()
		require.NoError(t, h.ctrl.Status().LastError)
		assert.Equal(t, "BGPClusterConfig/cc", mgr.AppliedSpec().Source)
		ns, _ = h.ctrl.NodeStatus(context.Background())
		assert.Empty(t, ns.Conditions)
		h.stop(t)
	})
}

// TestControllerInvalidObjectsInStatus: invalid objects are node
// conditions; the valid configuration keeps working.
func TestControllerInvalidObjectsInStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mgr := &bgptest.FakeManager{}
		h := startController(t, mgr, bgp.ControllerConfig{})
		h.store.SetNode(node(map[string]string{"bgp": "on"}))
		setObjects(h.store, v2Objects())
		h.store.SetInvalidObject(bgp.KindAdvertisement, "bad-communities", errors.New(`BGPAdvertisement "bad-communities": spec.advertisements[0].attributes.communities.standard[0]: community "65536:1": bad`))
		synctest.Wait()
		require.NoError(t, h.ctrl.Status().LastError)
		require.NotNil(t, mgr.AppliedSpec())
		ns, err := h.ctrl.NodeStatus(context.Background())
		require.NoError(t, err)
		require.Len(t, ns.Conditions, 1)
		assert.Equal(t, bgp.Condition{Type: bgp.ConditionInvalidObject, Object: "BGPAdvertisement/bad-communities",
			Message: `BGPAdvertisement "bad-communities": spec.advertisements[0].attributes.communities.standard[0]: community "65536:1": bad`}, ns.Conditions[0])
		m := bgp.NodeStatusToModel(ns)
		assert.Equal(t, "InvalidObject", m.GetConditions()[0].GetType())
		assert.Equal(t, "main", m.GetBgpInstances()[0].GetName())
		h.stop(t)
	})
}

// TestControllerV2NeedsSpecApplier: a manager without ApplySpec cannot
// take v2 configuration, and says so.
func TestControllerV2NeedsSpecApplier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mgr := bgp.ConfigurePeersFunc(func(context.Context, *bgp.PeeringPolicy, *bgp.ControlPlaneState) error { return nil })
		sig := bgp.NewSignaler()
		store := bgp.NewStore(sig)
		ctrl, err := bgp.NewController(mgr, store, store, bgp.ControllerConfig{Signaler: sig})
		require.NoError(t, err)
		store.SetNode(node(map[string]string{"bgp": "on"}))
		setObjects(store, v2Objects())
		err = ctrl.Reconcile(context.Background())
		require.ErrorContains(t, err, "does not implement bgp.SpecApplier")
	})
}

package bgp_test

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/bgptest"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

func modelPolicy(name string, rack string) *bgpmodel.PeeringPolicy {
	return &bgpmodel.PeeringPolicy{
		Name:         name,
		NodeSelector: &bgpmodel.LabelSelector{MatchLabels: map[string]string{"rack": rack}},
		VirtualRouters: []*bgpmodel.VirtualRouter{{
			LocalAsn: 65001, ExportPodCidr: true,
			ServiceSelector:       &bgpmodel.LabelSelector{MatchExpressions: []*bgpmodel.LabelSelectorRequirement{{Key: "lb", Operator: "Exists"}}},
			ServiceAdvertisements: []string{"ClusterIP", "ExternalIP"},
			LoadBalancerClasses:   []string{"example.com/lb"},
			Neighbors: []*bgpmodel.Neighbor{{
				PeerAddress: "10.0.0.254", PeerAsn: 65000, PeerPort: 1790, LocalAddress: "10.0.0.1", EbgpMultihopTtl: 3,
				ConnectRetryTimeSeconds: 5, HoldTimeSeconds: 9, KeepaliveTimeSeconds: 3, Password: "pw",
				GracefulRestart: &bgpmodel.GracefulRestart{Enabled: true, RestartTimeSeconds: 60}, Families: []string{"ipv4-unicast"},
			}},
		}},
	}
}

func TestPolicyFromModel(t *testing.T) {
	p, err := bgp.PolicyFromModel(modelPolicy("a", "r1"))
	require.NoError(t, err)
	want := &bgp.PeeringPolicy{
		Name:         "a",
		NodeSelector: &bgp.LabelSelector{MatchLabels: map[string]string{"rack": "r1"}},
		VirtualRouters: []bgp.VirtualRouter{{
			LocalASN: 65001, ExportPodCIDR: true,
			ServiceSelector:       &bgp.LabelSelector{MatchExpressions: []bgp.LabelSelectorRequirement{{Key: "lb", Operator: bgp.SelectorOpExists}}},
			ServiceAdvertisements: []bgp.ServiceAddressType{bgp.ClusterIPAddresses, bgp.ExternalIPAddresses},
			LoadBalancerClasses:   []string{"example.com/lb"},
			Neighbors: []bgp.Neighbor{{
				PeerAddress: netip.MustParseAddr("10.0.0.254"), PeerASN: 65000, PeerPort: 1790, LocalAddress: netip.MustParseAddr("10.0.0.1"),
				EBGPMultihopTTL: 3, ConnectRetryTime: 5 * time.Second, HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second,
				Password: "pw", GracefulRestart: bgp.GracefulRestart{Enabled: true, RestartTime: time.Minute}, Families: []bgp.Family{bgp.IPv4Unicast},
			}},
		}},
	}
	assert.Equal(t, want, p)
	require.NoError(t, p.WithDefaults().Validate())

	bad := modelPolicy("bad", "r1")
	bad.VirtualRouters[0].Neighbors[0].PeerAddress = "nope"
	bad.VirtualRouters[0].Neighbors[0].LocalAddress = "nope"
	bad.VirtualRouters[0].Neighbors[0].PeerPort = 70000
	bad.VirtualRouters[0].Neighbors[0].EbgpMultihopTtl = 256
	_, err = bgp.PolicyFromModel(bad)
	require.ErrorIs(t, err, bgp.ErrInvalidPolicy)
	for _, f := range []string{".peerAddress", ".localAddress", ".peerPort", ".eBGPMultihopTTL"} {
		assert.ErrorContains(t, err, "virtualRouters[0].neighbors[0]"+f)
	}
	_, err = bgp.PolicyFromModel(nil)
	require.Error(t, err)
}

func TestEventSource(t *testing.T) {
	sig := bgp.NewSignaler()
	src, err := bgp.NewEventSource("n1", sig, nil)
	require.NoError(t, err)
	_, err = bgp.NewEventSource("Bad_Name", sig, nil)
	require.Error(t, err)

	n1 := &kubemodel.Node{Name: "n1", Labels: map[string]string{"rack": "r1"}, PodCidrs: []string{"10.244.1.0/24"}}
	resync := controller.NewDBResync()
	resync.KubeState[kubemodel.NodeResource] = controller.KeyValuePairs{
		kubemodel.NodeKey("n1"): n1,
		kubemodel.NodeKey("n2"): &kubemodel.Node{Name: "n2"},
	}
	resync.KubeState[bgpmodel.PolicyResourceName] = controller.KeyValuePairs{
		bgpmodel.PolicyKey("a"):   modelPolicy("a", "r1"),
		bgpmodel.PolicyKey("b"):   modelPolicy("b", "r2"),
		bgpmodel.PolicyKey("bad"): &bgpmodel.PeeringPolicy{Name: "bad", VirtualRouters: []*bgpmodel.VirtualRouter{{Neighbors: []*bgpmodel.Neighbor{{PeerAddress: "x"}}}}},
	}
	require.True(t, src.HandlesEvent(resync))
	txn := controllertest.NewTxn()
	require.NoError(t, src.Resync(resync, resync.KubeState, 1, txn))
	assert.Empty(t, txn.Keys(), "the source never writes")
	assert.Len(t, sig.Sig, 1)
	<-sig.Sig
	assert.Equal(t, "n1", src.Node().GetName())
	require.Len(t, src.Policies(), 2)
	assert.Contains(t, src.InvalidPolicies(), bgpmodel.PolicyKey("bad"))

	// A controller over the source applies the one matching policy.
	mgr := &bgptest.FakeManager{}
	ctrl, err := bgp.NewController(mgr, src, src, bgp.ControllerConfig{Signaler: sig})
	require.NoError(t, err)
	require.NoError(t, ctrl.Reconcile(context.Background()))
	assert.Equal(t, "a", mgr.Applied().Name)

	// Changes of other nodes are ignored; this node's label change switches policy.
	other := &controller.KubeStateChange{Key: kubemodel.NodeKey("n2"), Resource: kubemodel.NodeResource, NewValue: &kubemodel.Node{Name: "n2", Labels: map[string]string{"x": "y"}}}
	require.True(t, src.HandlesEvent(other))
	desc, err := src.Update(other, txn)
	require.NoError(t, err)
	assert.Empty(t, desc)
	assert.Empty(t, sig.Sig)

	n1b := &kubemodel.Node{Name: "n1", Labels: map[string]string{"rack": "r2"}}
	_, err = src.Update(&controller.KubeStateChange{Key: kubemodel.NodeKey("n1"), Resource: kubemodel.NodeResource, PrevValue: n1, NewValue: n1b}, txn)
	require.NoError(t, err)
	<-sig.Sig
	require.NoError(t, ctrl.Reconcile(context.Background()))
	assert.Equal(t, "b", mgr.Applied().Name)

	// Deleting the policy withdraws.
	_, err = src.Update(&controller.KubeStateChange{Key: bgpmodel.PolicyKey("b"), Resource: bgpmodel.PolicyResourceName, PrevValue: modelPolicy("b", "r2")}, txn)
	require.NoError(t, err)
	<-sig.Sig
	require.NoError(t, ctrl.Reconcile(context.Background()))
	assert.Nil(t, mgr.Applied())

	assert.False(t, src.HandlesEvent(&controller.KubeStateChange{Resource: kubemodel.PodResource}))
	assert.Empty(t, txn.Keys())
}

// TestEventSourceWarnsOncePerInvalidPolicy: a policy that cannot be
// converted is logged at Warn when it appears (or its problem changes),
// not again at every resync or unrelated change.
func TestEventSourceWarnsOncePerInvalidPolicy(t *testing.T) {
	var logs strings.Builder
	sig := bgp.NewSignaler()
	src, err := bgp.NewEventSource("n1", sig, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	bad := func(addr string) *bgpmodel.PeeringPolicy {
		return &bgpmodel.PeeringPolicy{Name: "bad", VirtualRouters: []*bgpmodel.VirtualRouter{{Neighbors: []*bgpmodel.Neighbor{{PeerAddress: addr}}}}}
	}
	resync := controller.NewDBResync()
	resync.KubeState[bgpmodel.PolicyResourceName] = controller.KeyValuePairs{bgpmodel.PolicyKey("bad"): bad("x")}
	txn := controllertest.NewTxn()
	for range 2 {
		require.NoError(t, src.Resync(resync, resync.KubeState, 1, txn))
	}
	_, err = src.Update(&controller.KubeStateChange{Key: bgpmodel.PolicyKey("bad"), Resource: bgpmodel.PolicyResourceName,
		PrevValue: bad("x"), NewValue: bad("x")}, txn)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
	assert.Contains(t, logs.String(), "component=bgp-source")

	_, err = src.Update(&controller.KubeStateChange{Key: bgpmodel.PolicyKey("bad"), Resource: bgpmodel.PolicyResourceName,
		PrevValue: bad("x"), NewValue: bad("y")}, txn)
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(logs.String(), "level=WARN"), "another problem")
	assert.Contains(t, src.InvalidPolicies(), bgpmodel.PolicyKey("bad"))
}

// TestEventSourceV2: the v2 objects arrive through resyncs and changes;
// invalid ones are logged once and listed in Objects().Invalid while the
// others are used.
func TestEventSourceV2(t *testing.T) {
	var logs strings.Builder
	sig := bgp.NewSignaler()
	src, err := bgp.NewEventSource("n1", sig, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	key := bgpmodel.ObjectKey
	resync := controller.NewDBResync()
	resync.KubeState[kubemodel.NodeResource] = controller.KeyValuePairs{kubemodel.NodeKey("n1"): &kubemodel.Node{Name: "n1", Labels: map[string]string{"bgp": "on"}}}
	resync.KubeState[bgpmodel.ClusterConfigResourceName] = controller.KeyValuePairs{
		key(bgpmodel.ClusterConfigResourceName, "cc"): &bgpmodel.ClusterConfig{Name: "cc", NodeSelector: &bgpmodel.LabelSelector{MatchLabels: map[string]string{"bgp": "on"}},
			BgpInstances: []*bgpmodel.ClusterInstance{{Name: "main", LocalAsn: 65001, Peers: []*bgpmodel.ClusterPeer{{Name: "tor", PeerAddress: "10.0.0.254", PeerAsn: 65000,
				PeerConfigRef: &bgpmodel.PeerConfigReference{Name: "pc"}}}}}},
	}
	resync.KubeState[bgpmodel.PeerConfigResourceName] = controller.KeyValuePairs{
		key(bgpmodel.PeerConfigResourceName, "pc"): &bgpmodel.PeerConfig{Name: "pc", AuthSecretRef: "md5"},
	}
	resync.KubeState[bgpmodel.AuthSecretResourceName] = controller.KeyValuePairs{
		key(bgpmodel.AuthSecretResourceName, "md5"): &bgpmodel.AuthSecret{Name: "md5", Password: "pw"},
	}
	resync.KubeState[bgpmodel.AdvertisementResourceName] = controller.KeyValuePairs{
		key(bgpmodel.AdvertisementResourceName, "bad"): &bgpmodel.Advertisement{Name: "bad", Advertisements: []*bgpmodel.AdvertisementEntry{{AdvertisementType: "PodCIDR",
			Attributes: &bgpmodel.Attributes{Communities: &bgpmodel.Communities{Standard: []string{"65536:1"}}}}}},
	}
	txn := controllertest.NewTxn()
	require.NoError(t, src.Resync(resync, resync.KubeState, 1, txn))
	require.NoError(t, src.Resync(resync, resync.KubeState, 2, txn))
	o := src.Objects()
	require.Len(t, o.ClusterConfigs, 1)
	assert.Equal(t, "pw", o.AuthSecrets["md5"])
	require.Len(t, o.Invalid, 1)
	assert.Equal(t, bgp.KindAdvertisement, o.Invalid[0].Kind)
	assert.ErrorContains(t, o.Invalid[0].Err, "communities.standard[0]")
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), "logged once: %s", logs.String())
	assert.Same(t, o, src.Objects(), "the snapshot is kept until a change")

	mgr := &bgptest.FakeManager{}
	ctrl, err := bgp.NewController(mgr, src, src, bgp.ControllerConfig{Signaler: sig})
	require.NoError(t, err)
	require.NoError(t, ctrl.Reconcile(context.Background()))
	require.NotNil(t, mgr.AppliedSpec())
	assert.Equal(t, "pw", mgr.AppliedSpec().Instances[0].Peers[0].Password)

	// The secret goes: the peer is left out, reported.
	ch := &controller.KubeStateChange{Resource: bgpmodel.AuthSecretResourceName, Key: key(bgpmodel.AuthSecretResourceName, "md5"),
		PrevValue: &bgpmodel.AuthSecret{Name: "md5", Password: "pw"}}
	require.True(t, src.HandlesEvent(ch))
	_, err = src.Update(ch, txn)
	require.NoError(t, err)
	require.NoError(t, ctrl.Reconcile(context.Background()))
	assert.Empty(t, mgr.AppliedSpec().Instances[0].Peers)
	ns, err := ctrl.NodeStatus(context.Background())
	require.NoError(t, err)
	assert.True(t, ns.HasCondition(bgp.ConditionMissingAuthSecret, "main", "tor"))
	assert.True(t, ns.HasCondition(bgp.ConditionInvalidObject, "", ""))
	assert.Empty(t, txn.Keys())
}

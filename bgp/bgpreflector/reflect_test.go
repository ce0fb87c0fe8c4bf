package bgpreflector_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/bgpreflector"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	"github.com/vswitchkit/vswitchkit/reflector"
	"github.com/vswitchkit/vswitchkit/watcher"
)

func newDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{bgpreflector.GroupVersionResource(): bgpreflector.ListKind}, objs...)
}

// TestPoliciesReachTheWatcher: a BGPPeeringPolicy created, updated and
// deleted through the dynamic fake client reaches the project's watcher
// as KubeStateChange events of resource bgppeeringpolicy; a bad policy is
// reported and skipped; a change of metadata alone writes nothing.
func TestPoliciesReachTheWatcher(t *testing.T) {
	srv, err := etcdtest.Start(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	cli, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })

	bad := object(t, "apiVersion: vswitchkit.io/v1\nkind: BGPPeeringPolicy\nmetadata: {name: bad}\nspec: {virtualRouters: [{localASN: -5}]}")
	dyn := newDynamic(bad)
	r, err := reflector.New(cli, []reflector.Resource{bgpreflector.Resource(dyn)}, reflector.Config{SessionTTL: 2 * time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	rec := &controllertest.EventRecorder{}
	w, err := watcher.NewWithClient(cli, rec, watcher.Config{Resources: []kubemodel.Resource{bgpmodel.PolicyResource()}})
	require.NoError(t, err)
	wg.Go(func() { _ = w.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer wcancel()
	evs, err := rec.WaitFor(wctx, 1)
	require.NoError(t, err)
	require.IsType(t, &controller.DBResync{}, evs[0])
	n := 1
	next := func() *controller.KubeStateChange {
		t.Helper()
		n++
		evs, err := rec.WaitFor(wctx, n)
		require.NoError(t, err)
		ch, ok := evs[n-1].(*controller.KubeStateChange)
		require.True(t, ok, "%T", evs[n-1])
		assert.Equal(t, bgpmodel.PolicyResourceName, ch.Resource)
		assert.Equal(t, bgpmodel.PolicyKey("rack1"), ch.Key)
		return ch
	}
	pols := dyn.Resource(bgpreflector.GroupVersionResource())
	u := object(t, policyYAML)
	_, err = pols.Create(ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)
	want, err := bgpreflector.Convert(u)
	require.NoError(t, err)
	ch := next()
	assert.Nil(t, ch.PrevValue)
	assert.True(t, proto.Equal(want, ch.NewValue), "%v", ch.NewValue)

	u, err = pols.Get(ctx, "rack1", metav1.GetOptions{})
	require.NoError(t, err)
	u.SetAnnotations(map[string]string{"note": "metadata only"})
	u, err = pols.Update(ctx, u, metav1.UpdateOptions{})
	require.NoError(t, err)
	routers, _, _ := unstructured.NestedSlice(u.Object, "spec", "virtualRouters")
	routers[1].(map[string]any)["localASN"] = int64(65001)
	require.NoError(t, unstructured.SetNestedSlice(u.Object, routers, "spec", "virtualRouters"))
	_, err = pols.Update(ctx, u, metav1.UpdateOptions{})
	require.NoError(t, err)
	ch = next()
	assert.True(t, proto.Equal(want, ch.PrevValue))
	assert.EqualValues(t, 65001, ch.NewValue.(*bgpmodel.PeeringPolicy).GetVirtualRouters()[1].GetLocalAsn())

	require.NoError(t, pols.Delete(ctx, "rack1", metav1.DeleteOptions{}))
	ch = next()
	assert.Nil(t, ch.NewValue)

	// The counters follow the commit that the watcher already saw.
	require.Eventually(t, func() bool { return r.Stats().Resources[bgpmodel.PolicyResourceName].Deletes == 1 }, time.Minute, 5*time.Millisecond)
	s := r.Stats().Resources[bgpmodel.PolicyResourceName]
	assert.Equal(t, 1, s.BadObjects, "the bad policy")
	assert.EqualValues(t, 2, s.Puts, "create and the spec change; the annotation wrote nothing")
	assert.EqualValues(t, 1, s.Deletes)
}

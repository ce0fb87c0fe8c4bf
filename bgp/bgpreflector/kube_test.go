package bgpreflector_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/bgpreflector"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	"github.com/vswitchkit/vswitchkit/internal/kubetest"
	"github.com/vswitchkit/vswitchkit/reflector"
)

// kubeCluster is the package's real API server (no controller manager:
// custom resources need none), started by the first test that needs it.
var kubeCluster = &kubetest.Shared{Etcd: func(dir string) ([]string, func(), error) {
	srv, err := etcdtest.Start(dir)
	if err != nil {
		return nil, nil, err
	}
	return []string{"http://" + srv.Endpoint()}, srv.Close, nil
}}

var installOnce sync.Once

// installCRDs installs every CRD of the repository (kubetest.CRDFiles: the
// YAML files that define them, wherever they are) and the reflector's
// RBAC from deploy/reflector.yaml (with the namespace of its Role,
// deploy/namespace.yaml).
func installCRDs(t *testing.T, c *kubetest.Cluster) {
	t.Helper()
	var err error
	installOnce.Do(func() {
		ctx := context.Background()
		var root string
		if root, err = kubetest.ModuleRoot(); err != nil {
			return
		}
		var files []string
		if files, err = kubetest.CRDFiles(root); err != nil {
			return
		}
		if !slices.Contains(files, filepath.Join(root, "bgp", "bgpreflector", "crd.yaml")) {
			err = os.ErrNotExist
			return
		}
		if err = kubetest.InstallCRDs(ctx, c.AdminConfig(), files...); err != nil {
			return
		}
		var objs []*unstructured.Unstructured
		for _, f := range []string{"namespace.yaml", "reflector.yaml"} {
			var b []byte
			if b, err = os.ReadFile(filepath.Join(root, "deploy", f)); err != nil {
				return
			}
			o, derr := kubetest.DecodeYAML(b)
			if err = derr; err != nil {
				return
			}
			objs = append(objs, o...)
		}
		objs = slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Deployment" })
		_, err = kubetest.Apply(ctx, c.AdminConfig(), objs, kubetest.ApplyOptions{})
	})
	require.NoError(t, err)
}

// TestKubePolicies: BGPPeeringPolicy objects in a real API server, whose
// CRD comes from the repository's YAML, reach etcd through the reflector's
// service account and RBAC (deploy/reflector.yaml). The API server
// validates them against the CRD's schema first, which the fake never
// did: a policy with a negative ASN is refused there (422) and never
// reaches the reflector; one that the schema takes but the model does not
// (an address that does not parse) is the reflector's bad object. A change
// of metadata alone writes nothing; a spec change and the deletion do.
func TestKubePolicies(t *testing.T) {
	c := kubeCluster.Get(t)
	installCRDs(t, c)
	ctx := context.Background()
	srv, err := etcdtest.Start(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	cli, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })

	saCfg, err := c.ServiceAccountConfig(ctx, "kube-system", "vswitchkit-reflector")
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(saCfg)
	require.NoError(t, err)
	r, err := reflector.New(cli, []reflector.Resource{bgpreflector.Resource(dyn)}, reflector.Config{SessionTTL: 2 * time.Second})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(rctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	admin, err := dynamic.NewForConfig(c.AdminConfig())
	require.NoError(t, err)
	pols := admin.Resource(bgpreflector.GroupVersionResource())
	_, err = pols.Create(ctx, object(t, "metadata: {name: negative}\nspec: {virtualRouters: [{localASN: -5}]}"), metav1.CreateOptions{})
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "the CRD's schema refuses it: %v", err)
	_, err = pols.Create(ctx, object(t, "metadata: {name: badpeer}\nspec: {virtualRouters: [{localASN: 64512, neighbors: [{peerAddress: not-an-ip, peerASN: 64500}]}]}"), metav1.CreateOptions{})
	require.NoError(t, err, "the schema takes any string")
	u, err := pols.Create(ctx, object(t, policyYAML), metav1.CreateOptions{})
	require.NoError(t, err)
	want, err := bgpreflector.Convert(u)
	require.NoError(t, err)

	key := reflector.DefaultPrefix + bgpmodel.PolicyKey("rack1")
	get := func() (*bgpmodel.PeeringPolicy, int64) {
		resp, err := cli.Get(ctx, key)
		require.NoError(t, err)
		if len(resp.Kvs) == 0 {
			return nil, 0
		}
		m := &bgpmodel.PeeringPolicy{}
		require.NoError(t, proto.Unmarshal(resp.Kvs[0].Value, m))
		return m, resp.Kvs[0].ModRevision
	}
	require.Eventually(t, func() bool { m, _ := get(); return proto.Equal(want, m) }, time.Minute, 10*time.Millisecond)
	_, rev := get()
	require.Eventually(t, func() bool { return r.Stats().Resources[bgpmodel.PolicyResourceName].BadObjects == 1 }, time.Minute, 10*time.Millisecond)

	u.SetAnnotations(map[string]string{"note": "metadata only"})
	u, err = pols.Update(ctx, u, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = pols.Create(ctx, object(t, "metadata: {name: barrier}\nspec: {virtualRouters: [{localASN: 64512}]}"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		resp, err := cli.Get(ctx, reflector.DefaultPrefix+bgpmodel.PolicyKey("barrier"))
		require.NoError(t, err)
		return len(resp.Kvs) == 1
	}, time.Minute, 10*time.Millisecond)
	_, rev2 := get()
	assert.Equal(t, rev, rev2, "an annotation wrote nothing")

	routers, _, _ := unstructured.NestedSlice(u.Object, "spec", "virtualRouters")
	routers[1].(map[string]any)["localASN"] = int64(65001)
	require.NoError(t, unstructured.SetNestedSlice(u.Object, routers, "spec", "virtualRouters"))
	_, err = pols.Update(ctx, u, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		m, _ := get()
		return m.GetVirtualRouters()[1].GetLocalAsn() == 65001
	}, time.Minute, 10*time.Millisecond)

	for _, name := range []string{"rack1", "badpeer", "barrier"} {
		require.NoError(t, pols.Delete(ctx, name, metav1.DeleteOptions{}))
	}
	require.Eventually(t, func() bool {
		resp, err := cli.Get(ctx, reflector.DefaultPrefix+kubemodel.KeyRoot, clientv3.WithPrefix(), clientv3.WithCountOnly())
		require.NoError(t, err)
		return resp.Count == 0
	}, time.Minute, 10*time.Millisecond)
	s := r.Stats().Resources[bgpmodel.PolicyResourceName]
	assert.Zero(t, s.BadObjects)
	assert.Zero(t, s.APIErrors, "%s", s.LastAPIError)
}

// TestKubeV2Objects: the v2 objects (one of every kind with every field
// set, v2YAML) and an auth secret in a real API server, whose CRDs come
// from crd-v2.yaml, reach etcd through the reflector's service account
// and RBAC as their conversions; the CRD's schema refuses what the fake
// took (a hold time under 3 s). The status writer, through the same
// account, writes a node's status through the real status subresource
// and deletes the object when the status goes.
func TestKubeV2Objects(t *testing.T) {
	c := kubeCluster.Get(t)
	installCRDs(t, c)
	ctx := context.Background()
	srv, err := etcdtest.Start(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	cli, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })

	saCfg, err := c.ServiceAccountConfig(ctx, "kube-system", "vswitchkit-reflector")
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(saCfg)
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfig(saCfg)
	require.NoError(t, err)
	r, err := reflector.New(cli, bgpreflector.V2Resources(dyn, kube, bgpreflector.V2Config{}), reflector.Config{SessionTTL: 2 * time.Second})
	require.NoError(t, err)
	w, err := bgpreflector.NewStatusWriter(cli, dyn, func() bool { return r.Stats().Leader },
		bgpreflector.StatusWriterConfig{MinInterval: -1, MaxWritesPerSecond: -1})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(rctx) })
	wg.Go(func() { _ = w.Run(rctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	admin, err := dynamic.NewForConfig(c.AdminConfig())
	require.NoError(t, err)
	plurals := map[string]string{
		bgpreflector.KindClusterConfig: bgpreflector.PluralClusterConfig, bgpreflector.KindPeerConfig: bgpreflector.PluralPeerConfig,
		bgpreflector.KindAdvertisement: bgpreflector.PluralAdvertisement, bgpreflector.KindNodeConfigOverride: bgpreflector.PluralNodeConfigOverride,
	}
	resources := map[string]string{
		bgpreflector.KindClusterConfig: bgpmodel.ClusterConfigResourceName, bgpreflector.KindPeerConfig: bgpmodel.PeerConfigResourceName,
		bgpreflector.KindAdvertisement: bgpmodel.AdvertisementResourceName, bgpreflector.KindNodeConfigOverride: bgpmodel.NodeConfigOverrideResourceName,
	}
	bad := objects(t, "apiVersion: bgp.vswitchkit.io/v2\nkind: BGPPeerConfig\nmetadata: {name: short}\nspec: {timers: {holdTimeSeconds: 1}}")[0]
	_, err = admin.Resource(bgpreflector.GroupVersionResourceV2(bgpreflector.PluralPeerConfig)).Create(ctx, bad, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "the CRD's schema refuses a hold time of 1 s: %v", err)

	want := map[string]proto.Message{}
	for _, o := range objects(t, v2YAML) {
		u, err := admin.Resource(bgpreflector.GroupVersionResourceV2(plurals[o.GetKind()])).Create(ctx, o, metav1.CreateOptions{})
		require.NoError(t, err, "%s %s", o.GetKind(), o.GetName())
		m, err := convertAny(u)
		require.NoError(t, err)
		want[bgpmodel.ObjectKey(resources[o.GetKind()], o.GetName())] = m
	}
	_, err = c.Admin().CoreV1().Secrets(bgpreflector.DefaultSecretNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: bgpreflector.DefaultSecretNamespace, Name: "tor-md5"},
		Data:       map[string][]byte{"password": []byte("s3cret")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.Admin().CoreV1().Secrets(bgpreflector.DefaultSecretNamespace).Delete(ctx, "tor-md5", metav1.DeleteOptions{})
	})
	want[bgpmodel.ObjectKey(bgpmodel.AuthSecretResourceName, "tor-md5")] = &bgpmodel.AuthSecret{Name: "tor-md5", Password: "s3cret"}
	for key, m := range want {
		require.Eventually(t, func() bool {
			resp, err := cli.Get(ctx, reflector.DefaultPrefix+key)
			require.NoError(t, err)
			if len(resp.Kvs) == 0 {
				return false
			}
			got := m.ProtoReflect().New().Interface()
			require.NoError(t, proto.Unmarshal(resp.Kvs[0].Value, got))
			return proto.Equal(m, got)
		}, time.Minute, 10*time.Millisecond, key)
	}

	// The status writer through the status subresource.
	b, err := proto.Marshal(&bgpmodel.NodeStatus{Node: "node-1", Source: "BGPClusterConfig/rack1"})
	require.NoError(t, err)
	_, err = cli.Put(ctx, bgpmodel.StatusKey("", "node-1"), string(b))
	require.NoError(t, err)
	statuses := admin.Resource(bgpreflector.GroupVersionResourceV2(bgpreflector.PluralNodeStatus))
	require.Eventually(t, func() bool {
		o, err := statuses.Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			return false
		}
		src, _, _ := unstructured.NestedString(o.Object, "status", "source")
		return src == "BGPClusterConfig/rack1"
	}, time.Minute, 10*time.Millisecond, "BGPNodeStatus node-1")
	_, err = cli.Delete(ctx, bgpmodel.StatusKey("", "node-1"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := statuses.Get(ctx, "node-1", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 10*time.Millisecond, "BGPNodeStatus node-1 deleted")
	assert.Zero(t, w.Stats().Errors)

	for _, o := range objects(t, v2YAML) {
		require.NoError(t, admin.Resource(bgpreflector.GroupVersionResourceV2(plurals[o.GetKind()])).Delete(ctx, o.GetName(), metav1.DeleteOptions{}))
	}
	for name, rs := range r.Stats().Resources {
		assert.Zero(t, rs.BadObjects, name)
		assert.Zero(t, rs.APIErrors, "%s: %s", name, rs.LastAPIError)
	}
}

package bgpreflector_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/vswitchkit/vswitchkit/bgp"
	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/bgpreflector"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/controllertest"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"github.com/vswitchkit/vswitchkit/embedetcd/etcdtest"
	"github.com/vswitchkit/vswitchkit/reflector"
	"github.com/vswitchkit/vswitchkit/watcher"
)

// v2YAML holds one object of every v2 kind with every field set.
const v2YAML = `
apiVersion: bgp.vswitchkit.io/v2
kind: BGPClusterConfig
metadata: {name: rack1}
spec:
  nodeSelector: {matchLabels: {rack: "1"}, matchExpressions: [{key: role, operator: In, values: [worker]}]}
  bgpInstances:
  - name: main
    localASN: 65001
    localPort: 1790
    peers:
    - name: tor
      peerAddress: 10.0.0.254
      peerASN: 65000
      peerConfigRef: {name: tor, group: bgp.vswitchkit.io, kind: BGPPeerConfig}
---
apiVersion: bgp.vswitchkit.io/v2
kind: BGPPeerConfig
metadata: {name: tor}
spec:
  transport: {peerPort: 179, passive: true}
  timers: {connectRetryTimeSeconds: 5, holdTimeSeconds: 9, keepAliveTimeSeconds: 3}
  authSecretRef: tor-md5
  ebgpMultihop: 2
  gracefulRestart: {enabled: true, restartTimeSeconds: 120}
  families:
  - afi: ipv4
    safi: unicast
    advertisements: {matchLabels: {advertise: bgp}, matchExpressions: [{key: tier, operator: NotIn, values: [test]}]}
    importPrefixes: [{prefix: 0.0.0.0/0}, {prefix: 10.0.0.0/8, ge: 16, le: 24}]
---
apiVersion: bgp.vswitchkit.io/v2
kind: BGPAdvertisement
metadata: {name: adverts, labels: {advertise: bgp}}
spec:
  advertisements:
  - advertisementType: PodCIDR
    podCIDR: {aggregationLengthIPv4: 16, aggregationLengthIPv6: 48}
    attributes:
      communities: {standard: ["65000:100"], wellKnown: [no-export], large: ["65000:1:2"]}
      localPreference: 200
  - advertisementType: Service
    service: {addresses: [LoadBalancerIP, ClusterIP], aggregationLengthIPv4: 24, aggregationLengthIPv6: 120, loadBalancerClasses: [example.com/lb]}
    selector: {matchLabels: {team: a}, matchExpressions: [{key: bgp, operator: In, values: [blue]}]}
---
apiVersion: bgp.vswitchkit.io/v2
kind: BGPNodeConfigOverride
metadata: {name: node-1}
spec:
  bgpInstances:
  - name: main
    routerID: 10.255.0.1
    localPort: 1791
    localASN: 65011
    peers: [{name: tor, localAddress: 10.0.0.1}]
`

func objects(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(docs, "\n---\n") {
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
		b, err := u.MarshalJSON() // integers as int64, as a client decodes them
		require.NoError(t, err)
		out = append(out, &unstructured.Unstructured{})
		require.NoError(t, out[len(out)-1].UnmarshalJSON(b))
	}
	return out
}

func convertAny(u *unstructured.Unstructured) (proto.Message, error) {
	switch u.GetKind() {
	case bgpreflector.KindClusterConfig:
		return bgpreflector.ConvertClusterConfig(u)
	case bgpreflector.KindPeerConfig:
		return bgpreflector.ConvertPeerConfig(u)
	case bgpreflector.KindAdvertisement:
		return bgpreflector.ConvertAdvertisement(u)
	case bgpreflector.KindNodeConfigOverride:
		return bgpreflector.ConvertNodeConfigOverride(u)
	}
	return nil, nil
}

// assertReachableFieldsSet checks that every field of every message
// reachable from m's type is set somewhere in m's tree.
func assertReachableFieldsSet(t *testing.T, m proto.Message) {
	t.Helper()
	seen := map[protoreflect.FullName]map[protoreflect.Name]bool{}
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		d := m.Descriptor()
		if seen[d.FullName()] == nil {
			seen[d.FullName()] = map[protoreflect.Name]bool{}
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			seen[d.FullName()][fd.Name()] = true
			switch {
			case fd.IsMap() || fd.Kind() != protoreflect.MessageKind:
			case fd.IsList():
				for i := range v.List().Len() {
					walk(v.List().Get(i).Message())
				}
			default:
				walk(v.Message())
			}
			return true
		})
	}
	walk(m.ProtoReflect())
	done := map[protoreflect.FullName]bool{}
	var check func(md protoreflect.MessageDescriptor)
	check = func(md protoreflect.MessageDescriptor) {
		if done[md.FullName()] {
			return
		}
		done[md.FullName()] = true
		for j := range md.Fields().Len() {
			fd := md.Fields().Get(j)
			assert.True(t, seen[md.FullName()][fd.Name()], "%s.%s is not set", md.FullName(), fd.Name())
			if fd.Kind() == protoreflect.MessageKind && !fd.IsMap() {
				check(fd.Message())
			}
		}
	}
	check(m.ProtoReflect().Descriptor())
}

// TestConvertV2: every field of every v2 kind reaches the model, and the
// models pass package bgp's checks.
func TestConvertV2(t *testing.T) {
	for _, u := range objects(t, v2YAML) {
		t.Run(u.GetKind(), func(t *testing.T) {
			m, err := convertAny(u)
			require.NoError(t, err)
			require.NotNil(t, m)
			assertReachableFieldsSet(t, m)
			switch m := m.(type) {
			case *bgpmodel.ClusterConfig:
				_, err = bgp.ClusterConfigFromModel(m)
			case *bgpmodel.PeerConfig:
				_, err = bgp.PeerConfigFromModel(m)
			case *bgpmodel.Advertisement:
				assert.Equal(t, map[string]string{"advertise": "bgp"}, m.GetLabels())
				var a *bgp.Advertisement
				a, err = bgp.AdvertisementFromModel(m)
				if err == nil {
					assert.Equal(t, "communities=[65000:100 65535:65281] large=[65000:1:2] local-pref=200", a.Adverts[0].Attributes.String())
				}
			case *bgpmodel.NodeConfigOverride:
				_, err = bgp.NodeConfigOverrideFromModel(m)
			}
			require.NoError(t, err)
		})
	}
}

// TestConvertV2Errors: structural problems are errors of the reflector;
// semantic ones (a bad community) are left to the agents, which report
// them in their status.
func TestConvertV2Errors(t *testing.T) {
	bad := objects(t, `
apiVersion: bgp.vswitchkit.io/v2
kind: BGPClusterConfig
metadata: {name: Bad_Name}
spec: {bgpInstances: [{name: main, localASN: -1, unknownField: 1, peers: "not a list"}]}
`)[0]
	_, err := bgpreflector.ConvertClusterConfig(bad)
	require.Error(t, err)
	for _, f := range []string{"metadata.name", "spec.bgpInstances[0].localASN", "spec.bgpInstances[0].unknownField", "spec.bgpInstances[0].peers"} {
		assert.ErrorContains(t, err, f)
	}
	var oe *reflector.ObjectError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, bgpmodel.ClusterConfigResourceName, oe.Resource)

	semantic := objects(t, `
apiVersion: bgp.vswitchkit.io/v2
kind: BGPAdvertisement
metadata: {name: a}
spec: {advertisements: [{advertisementType: PodCIDR, attributes: {communities: {standard: ["65536:1"]}}}]}
`)[0]
	m, err := bgpreflector.ConvertAdvertisement(semantic)
	require.NoError(t, err, "reflected: the agents report it")
	_, err = bgp.AdvertisementFromModel(m)
	require.ErrorContains(t, err, "communities.standard[0]")

	s, err := bgpreflector.ConvertAuthSecret(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "md5"}, Data: map[string][]byte{"password": []byte("pw"), "other": []byte("x")}})
	require.NoError(t, err)
	assert.True(t, proto.Equal(&bgpmodel.AuthSecret{Name: "md5", Password: "pw"}, s), "only the password")
}

// TestCRDv2MatchesConversion: for every kind of crd-v2.yaml, an object
// with a value for every leaf the schema declares converts, and sets
// every field of the model.
func TestCRDv2MatchesConversion(t *testing.T) {
	raw, err := os.ReadFile("crd-v2.yaml")
	require.NoError(t, err)
	kinds := map[string]bool{}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var crd map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &crd))
		if crd == nil {
			continue
		}
		spec := crd["spec"].(map[string]any)
		assert.Equal(t, bgpreflector.GroupV2, spec["group"])
		assert.Equal(t, "Cluster", spec["scope"])
		names := spec["names"].(map[string]any)
		kind := names["kind"].(string)
		kinds[kind] = true
		version := spec["versions"].([]any)[0].(map[string]any)
		assert.Equal(t, bgpreflector.VersionV2, version["name"])
		assert.Equal(t, bgpreflector.ListKindsV2()[bgpreflector.GroupVersionResourceV2(names["plural"].(string))], names["listKind"])
		props := version["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)
		if kind == bgpreflector.KindNodeStatus {
			assert.NotNil(t, version["subresources"], "the status is a subresource")
			continue
		}
		var sample func(s map[string]any, path string) any
		sample = func(s map[string]any, path string) any {
			switch s["type"] {
			case "object":
				p, ok := s["properties"].(map[string]any)
				if !ok {
					return map[string]any{"k": "v"}
				}
				out := map[string]any{}
				for k, v := range p {
					out[k] = sample(v.(map[string]any), path+"."+k)
				}
				return out
			case "array":
				return []any{sample(s["items"].(map[string]any), path+"[]")}
			case "integer":
				return int64(1)
			case "boolean":
				return true
			case "string":
				if s["enum"] != nil {
					return s["enum"].([]any)[0]
				}
				return "x"
			}
			t.Fatalf("%s: unexpected schema type %v", path, s["type"])
			return nil
		}
		u := &unstructured.Unstructured{Object: map[string]any{"kind": kind, "metadata": map[string]any{"name": "sample", "labels": map[string]any{"a": "b"}},
			"spec": sample(props["spec"].(map[string]any), "")}}
		m, err := convertAny(u)
		require.NoError(t, err, kind)
		assertReachableFieldsSet(t, m)
	}
	assert.Len(t, kinds, 5)
}

// TestV2ObjectsReachTheWatcher: the v2 objects and the auth secrets of
// the BGP secrets namespace are reflected into etcd and reach an agent's
// watcher; other namespaces' secrets are not.
func TestV2ObjectsReachTheWatcher(t *testing.T) {
	srv, err := etcdtest.Start(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	cli, err := srv.Client()
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })

	var objs []runtime.Object
	for _, u := range objects(t, v2YAML) {
		objs = append(objs, u)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), bgpreflector.ListKindsV2(), objs...)
	kube := kubefake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "bgp-secrets", Name: "tor-md5"}, Data: map[string][]byte{"password": []byte("s3cret")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "unrelated"}, Data: map[string][]byte{"password": []byte("no")}},
	)
	r, err := reflector.New(cli, bgpreflector.V2Resources(dyn, kube, bgpreflector.V2Config{SecretNamespace: "bgp-secrets"}), reflector.Config{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	rec := &controllertest.EventRecorder{}
	w, err := watcher.NewWithClient(cli, rec, watcher.Config{Resources: bgpmodel.V2Resources()})
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); wg.Wait() })

	require.Eventually(t, func() bool {
		st := r.Stats().Resources
		return st[bgpmodel.ClusterConfigResourceName].Objects == 1 && st[bgpmodel.PeerConfigResourceName].Objects == 1 &&
			st[bgpmodel.AdvertisementResourceName].Objects == 1 && st[bgpmodel.NodeConfigOverrideResourceName].Objects == 1 &&
			st[bgpmodel.AuthSecretResourceName].Objects == 1
	}, time.Minute, 10*time.Millisecond)
	wg.Go(func() { _ = w.Run(ctx) })
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	evs, err := rec.WaitFor(wctx, 1)
	require.NoError(t, err)
	rs, ok := evs[0].(*controller.DBResync)
	require.True(t, ok)
	for _, res := range bgpmodel.V2Resources() {
		assert.Len(t, rs.KubeState[res.Name], 1, res.Name)
	}
	sec := rs.KubeState[bgpmodel.AuthSecretResourceName][bgpmodel.ObjectKey(bgpmodel.AuthSecretResourceName, "tor-md5")]
	assert.True(t, proto.Equal(&bgpmodel.AuthSecret{Name: "tor-md5", Password: "s3cret"}, sec))

	// The objects, as an agent's source sees them, resolve for node-1.
	src, err := bgp.NewEventSource("node-1", bgp.NewSignaler(), nil)
	require.NoError(t, err)
	rs.KubeState[kubemodel.NodeResource] = controller.KeyValuePairs{kubemodel.NodeKey("node-1"): &kubemodel.Node{Name: "node-1",
		Labels: map[string]string{"rack": "1", "role": "worker"}}}
	require.NoError(t, src.Resync(rs, rs.KubeState, 1, controllertest.NewTxn()))
	res, err := bgp.Resolve(ctx, src.Node(), src.Objects())
	require.NoError(t, err)
	require.NotNil(t, res.Spec)
	assert.Empty(t, res.Excluded)
	p := res.Spec.Instances[0].Peers[0]
	assert.Equal(t, "s3cret", p.Password)
	assert.Equal(t, uint16(1791), res.Spec.Instances[0].LocalPort, "the override")
	assert.Len(t, p.PeerFamilies[0].Adverts, 2)
}

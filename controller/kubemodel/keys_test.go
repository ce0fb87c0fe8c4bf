package kubemodel_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"google.golang.org/protobuf/proto"
)

func TestParseKeys(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		parse   func(string) (string, error)
		want    string
		wantErr string
	}{
		{"pod", "k8s/pod/default/web-1", podKey, "default/web-1", ""},
		{"pod with dots", "k8s/pod/kube-system/coredns.v1", podKey, "kube-system/coredns.v1", ""},
		{"service", "k8s/service/default/kubernetes", svcKey, "default/kubernetes", ""},
		{"endpoints", "k8s/endpoints/ns/svc", epKey, "ns/svc", ""},
		{"node", "k8s/node/worker-1.example.com", kubemodel.ParseNodeKey, "worker-1.example.com", ""},
		{"wrong prefix", "k8s/service/default/web", podKey, "", `does not start with "k8s/pod/"`},
		{"missing name", "k8s/pod/default", podKey, "", "want <namespace>/<name>"},
		{"empty name", "k8s/pod/default/", podKey, "", "name: empty"},
		{"empty namespace", "k8s/pod//web", podKey, "", "namespace: empty"},
		{"extra segment", "k8s/pod/default/web/x", podKey, "", `invalid character '/'`},
		{"upper case", "k8s/pod/Default/web", podKey, "", `invalid character 'D'`},
		{"dot in namespace", "k8s/pod/a.b/web", podKey, "", `invalid character '.'`},
		{"leading dash", "k8s/pod/default/-web", podKey, "", "must start and end"},
		{"empty label", "k8s/pod/default/a..b", podKey, "", "empty DNS label"},
		{"namespace too long", "k8s/pod/" + strings.Repeat("a", 64) + "/web", podKey, "", "at most 63"},
		{"name too long", "k8s/node/" + strings.Repeat("a", 254), kubemodel.ParseNodeKey, "", "at most 253"},
		{"node with slash", "k8s/node/a/b", kubemodel.ParseNodeKey, "", `invalid character '/'`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.parse(tc.key)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				var ke *kubemodel.KeyError
				require.ErrorAs(t, err, &ke)
				require.Equal(t, tc.key, ke.Key)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func podKey(k string) (string, error) { id, err := kubemodel.ParsePodKey(k); return id.String(), err }
func svcKey(k string) (string, error) {
	id, err := kubemodel.ParseServiceKey(k)
	return id.String(), err
}
func epKey(k string) (string, error) {
	id, err := kubemodel.ParseEndpointsKey(k)
	return id.String(), err
}

func TestResources(t *testing.T) {
	rs := kubemodel.Resources()
	require.Len(t, rs, 7)
	for _, r := range rs {
		require.NoError(t, r.Validate())
		require.NotNil(t, r.NewValue())
	}
	rs[0].Name = "changed"
	require.Equal(t, kubemodel.PodResource, kubemodel.Resources()[0].Name, "Resources returns a copy")
	require.ErrorContains(t, kubemodel.Resource{}.Validate(), "resource name is empty")

	custom := kubemodel.Resource{Name: "policy", KeyPrefix: "k8s/bgppolicy/", NewValue: kubemodel.Resources()[3].NewValue}
	_, name, err := custom.ParseKey("k8s/bgppolicy/default-policy")
	require.NoError(t, err)
	require.Equal(t, "default-policy", name)
}

func TestNamespaceKey(t *testing.T) {
	for _, tc := range []struct {
		key, want, err string
	}{
		{key: kubemodel.NamespaceKey("kube-system"), want: "kube-system"},
		{key: "k8s/namespace/Bad", err: "invalid character"},
		{key: "k8s/namespace/a.b", err: "invalid character"},
		{key: "k8s/node/x", err: "does not start with"},
	} {
		got, err := kubemodel.ParseNamespaceKey(tc.key)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.key)
			continue
		}
		require.NoError(t, err, tc.key)
		require.Equal(t, tc.want, got)
	}
}

func FuzzParsePodKey(f *testing.F) {
	for _, s := range []string{"k8s/pod/default/web", "k8s/pod/a/b/c", "k8s/pod//", "k8s/pod/a.b/c-d.e", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		id, err := kubemodel.ParsePodKey(key)
		if err != nil {
			return
		}
		// A key that parses round-trips exactly and its parts are valid.
		require.Equal(t, key, kubemodel.PodKey(id.Namespace, id.Name))
		require.NoError(t, kubemodel.ValidateNamespace(id.Namespace))
		require.NoError(t, kubemodel.ValidateName(id.Name))
		require.NotContains(t, id.Name, "/")
	})
}

func FuzzParseNodeKey(f *testing.F) {
	for _, s := range []string{"k8s/node/n1", "k8s/node/", "k8s/node/a..b", "k8s/node/x/y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		name, err := kubemodel.ParseNodeKey(key)
		if err != nil {
			return
		}
		require.Equal(t, key, kubemodel.NodeKey(name))
		require.NoError(t, kubemodel.ValidateName(name))
	})
}

func TestEtcdKey(t *testing.T) {
	assert.Equal(t, "/vswitchkit/k8s/pod/default/web", kubemodel.EtcdKey("", kubemodel.PodKey("default", "web")))
	assert.Equal(t, "/c1/k8s/node/n1", kubemodel.EtcdKey("/c1/", kubemodel.NodeKey("n1")))
}

func TestPolicyAndPeerKeys(t *testing.T) {
	id, err := kubemodel.ParseNetworkPolicyKey(kubemodel.NetworkPolicyKey("prod", "deny-all"))
	require.NoError(t, err)
	require.Equal(t, kubemodel.PolicyID{Namespace: "prod", Name: "deny-all"}, id)
	require.Equal(t, "prod/deny-all", (&kubemodel.NetworkPolicy{Namespace: "prod", Name: "deny-all"}).ID().String())
	pod, err := kubemodel.ParsePodPeerKey(kubemodel.PodPeerKey("prod", "web-0"))
	require.NoError(t, err)
	require.Equal(t, kubemodel.PodID{Namespace: "prod", Name: "web-0"}, pod)
	require.Equal(t, "k8s/podpeer/prod/web-0", kubemodel.PodPeerKey("prod", "web-0"))
	_, err = kubemodel.ParseNetworkPolicyKey(kubemodel.PodPeerKey("prod", "web-0"))
	require.Error(t, err)
	_, err = kubemodel.ParsePodPeerKey("k8s/podpeer/prod")
	require.Error(t, err)
}

func TestNodePodKeys(t *testing.T) {
	key := kubemodel.NodePodKey("worker-1.example.com", "default", "web-1")
	require.Equal(t, "k8s/nodepod/worker-1.example.com/default/web-1", key)
	require.True(t, strings.HasPrefix(key, kubemodel.NodePodPrefix("worker-1.example.com")))
	node, pod, err := kubemodel.ParseNodePodKey(key)
	require.NoError(t, err)
	require.Equal(t, "worker-1.example.com", node)
	require.Equal(t, kubemodel.PodID{Namespace: "default", Name: "web-1"}, pod)

	var res kubemodel.Resource
	for _, r := range kubemodel.Resources() {
		if r.Name == kubemodel.PodResource {
			res = r
		}
	}
	require.Equal(t, kubemodel.NodePodKeyPrefix, res.NodeKeyPrefix)
	require.Equal(t, key, res.NodeKey("worker-1.example.com", kubemodel.PodKey("default", "web-1")))
	_, logical, err := res.ParseNodeKey(key)
	require.NoError(t, err)
	require.Equal(t, kubemodel.PodKey("default", "web-1"), logical)

	for _, tc := range []struct{ key, wantErr string }{
		{"k8s/pod/default/web", `does not start with "k8s/nodepod/"`},
		{"k8s/nodepod/node-1", "want <node>/"},
		{"k8s/nodepod/Node/default/web", "node: "},
		{"k8s/nodepod/node-1/default", "want <namespace>/<name>"},
		{"k8s/nodepod/node-1/default/web/x", `invalid character '/'`},
	} {
		_, _, err := kubemodel.ParseNodePodKey(tc.key)
		require.ErrorContains(t, err, tc.wantErr, tc.key)
		var ke *kubemodel.KeyError
		require.ErrorAs(t, err, &ke, tc.key)
		require.Equal(t, tc.key, ke.Key)
	}
	// A resource without a node key prefix stores every key as it is.
	svc := kubemodel.Resource{KeyPrefix: kubemodel.ServiceKeyPrefix}
	require.Equal(t, kubemodel.ServiceKey("a", "b"), svc.NodeKey("node-1", kubemodel.ServiceKey("a", "b")))
}

func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		value   []byte
		want    int
		wantErr bool
	}{
		{nil, kubemodel.LayoutFlat, false},
		{[]byte("1"), kubemodel.LayoutFlat, false},
		{[]byte("2"), kubemodel.LayoutNodePods, false},
		{[]byte("7"), 7, false},
		{[]byte(""), 0, true},
		{[]byte("0"), 0, true},
		{[]byte("-2"), 0, true},
		{[]byte("02"), 0, true},
		{[]byte("two"), 0, true},
	} {
		got, err := kubemodel.ParseLayout(tc.value)
		if tc.wantErr {
			require.Error(t, err, "%q", tc.value)
			continue
		}
		require.NoError(t, err, "%q", tc.value)
		require.Equal(t, tc.want, got, "%q", tc.value)
	}
	got, err := kubemodel.ParseLayout(kubemodel.FormatLayout(kubemodel.CurrentLayout))
	require.NoError(t, err)
	require.Equal(t, kubemodel.CurrentLayout, got)
	require.Equal(t, "k8s/layout", kubemodel.LayoutKey)
}

func TestNodeKeyPrefixValidated(t *testing.T) {
	base := kubemodel.Resource{Name: "x", KeyPrefix: "k8s/x/", NewValue: func() proto.Message { return &kubemodel.Pod{} }}
	require.NoError(t, base.Validate())
	for _, prefix := range []string{"k8s/x/node/", "k8s/", "k8s/nodex"} {
		r := base
		r.NodeKeyPrefix = prefix
		require.Error(t, r.Validate(), prefix)
	}
	r := base
	r.NodeKeyPrefix = "k8s/nodex/"
	require.NoError(t, r.Validate())
}

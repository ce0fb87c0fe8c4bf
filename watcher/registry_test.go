package watcher

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vswitchkit/vswitchkit/controller"
	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func testRegistry(t testing.TB, extra ...kubemodel.Resource) *registry {
	cfg, err := Config{KubeStatePrefix: testKubePrefix, ExternalConfigPrefix: testExtPrefix, Resources: extra}.withDefaults()
	require.NoError(t, err)
	reg, err := newRegistry(cfg)
	require.NoError(t, err)
	return reg
}

func TestRegistryDecode(t *testing.T) {
	policy := kubemodel.Resource{Name: "policy", KeyPrefix: "k8s/pod/policy/", NewValue: func() proto.Message { return &wrapperspb.StringValue{} }}
	reg := testRegistry(t, policy)
	podBytes := mustMarshal(t, pod("ns", "p", "10.0.0.1"))
	for _, tc := range []struct {
		name     string
		key      string
		value    []byte
		kind     keyKind
		rel      string
		resource string
		wantErr  error
	}{
		{name: "pod", key: testKubePrefix + "k8s/pod/ns/p", value: podBytes, kind: kubeKey, rel: "k8s/pod/ns/p", resource: "pod"},
		{name: "node", key: testKubePrefix + "k8s/node/n1", value: nil, kind: kubeKey, rel: "k8s/node/n1", resource: "node"},
		{name: "user resource nested in a built-in prefix", key: testKubePrefix + "k8s/pod/policy/x", value: mustMarshal(t, wrapperspb.String("p")), kind: kubeKey, rel: "k8s/pod/policy/x", resource: "policy"},
		{name: "external", key: testExtPrefix + "a/b", value: mustAny(t, wrapperspb.String("v")), kind: extKey, rel: "a/b"},
		{name: "foreign", key: "/other/k8s/pod/ns/p", value: podBytes, kind: foreignKey},
		{name: "garbage pod", key: testKubePrefix + "k8s/pod/ns/p", value: []byte{0xff}, kind: kubeKey, rel: "k8s/pod/ns/p", wantErr: ErrBadValue},
		{name: "pod key without namespace", key: testKubePrefix + "k8s/pod/p", value: podBytes, kind: kubeKey, rel: "k8s/pod/p", wantErr: ErrBadKey},
		{name: "upper-case name", key: testKubePrefix + "k8s/node/N", kind: kubeKey, rel: "k8s/node/N", wantErr: ErrBadKey},
		{name: "unregistered resource", key: testKubePrefix + "k8s/secret/ns/x", kind: kubeKey, rel: "k8s/secret/ns/x", wantErr: errNoResource},
		{name: "beside the resources' root", key: testKubePrefix + "nodesync/node/n1", value: podBytes, kind: foreignKey},
		{name: "external not an Any", key: testExtPrefix + "a", value: []byte{0xff}, kind: extKey, rel: "a", wantErr: ErrBadValue},
		{name: "external Any without type", key: testExtPrefix + "a", value: mustMarshal(t, &anypb.Any{Value: []byte{1}}), kind: extKey, rel: "a", wantErr: ErrBadValue},
		{name: "external unknown type", key: testExtPrefix + "a", value: mustMarshal(t, &anypb.Any{TypeUrl: "x/no.Such"}), kind: extKey, rel: "a", wantErr: ErrBadValue},
		{name: "external bad payload", key: testExtPrefix + "a", value: mustMarshal(t, &anypb.Any{TypeUrl: "type.googleapis.com/google.protobuf.StringValue", Value: []byte{0xff}}), kind: extKey, rel: "a", wantErr: ErrBadValue},
		{name: "external empty key", key: testExtPrefix, value: mustAny(t, wrapperspb.String("v")), kind: extKey, rel: "", wantErr: ErrBadKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, rel := reg.kindOf(tc.key)
			require.Equal(t, tc.kind, kind)
			assert.Equal(t, tc.rel, rel)
			if kind == foreignKey {
				return
			}
			res, msg, err := reg.decodeRel(kind, rel, tc.value)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Nil(t, msg)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, msg)
			if tc.resource != "" {
				assert.Equal(t, tc.resource, res.Name)
			} else {
				assert.Nil(t, res)
			}
		})
	}
}

func TestCommonRoot(t *testing.T) {
	res := func(prefixes ...string) []kubemodel.Resource {
		var out []kubemodel.Resource
		for _, p := range prefixes {
			out = append(out, kubemodel.Resource{KeyPrefix: p})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		rs   []kubemodel.Resource
		want string
	}{
		{"built-in", kubemodel.Resources(), "k8s/"},
		{"one: the layout key k8s/layout is in the range too", res("k8s/pod/"), "k8s/"},
		{"shared partial segment", res("k8s/pod/", "k8s/policy/"), "k8s/"},
		{"nothing shared", res("k8s/pod/", "custom/x/"), ""},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, commonRoot(tc.rs))
		})
	}
	// A user resource outside k8s/ widens the watched range to the whole
	// Kubernetes-state prefix.
	reg := testRegistry(t, kubemodel.Resource{Name: "x", KeyPrefix: "custom/x/", NewValue: func() proto.Message { return &wrapperspb.StringValue{} }})
	assert.Equal(t, testKubePrefix, reg.kubeWatch)
	kind, rel := reg.kindOf(testKubePrefix + "custom/x/a")
	assert.Equal(t, kubeKey, kind)
	assert.Equal(t, "custom/x/a", rel)
}

func TestRegistryNestedPrefixes(t *testing.T) {
	cfg, err := Config{KubeStatePrefix: "/a/", ExternalConfigPrefix: "/a/ext/"}.withDefaults()
	require.NoError(t, err)
	reg, err := newRegistry(cfg)
	require.NoError(t, err)
	kind, rel := reg.kindOf("/a/ext/x")
	assert.Equal(t, extKey, kind)
	assert.Equal(t, "x", rel)
	kind, rel = reg.kindOf("/a/k8s/pod/ns/p")
	assert.Equal(t, kubeKey, kind)
	assert.Equal(t, "k8s/pod/ns/p", rel)
}

func TestRegistryCustomResolver(t *testing.T) {
	types := new(protoregistry.Types)
	require.NoError(t, types.RegisterMessage((&wrapperspb.Int64Value{}).ProtoReflect().Type()))
	cfg, err := Config{ExternalConfigPrefix: "/e/", ExternalConfigTypes: types}.withDefaults()
	require.NoError(t, err)
	reg, err := newRegistry(cfg)
	require.NoError(t, err)
	_, msg, err := reg.decodeRel(extKey, "n", mustAny(t, wrapperspb.Int64(7)))
	require.NoError(t, err)
	assert.True(t, proto.Equal(wrapperspb.Int64(7), msg))
	_, _, err = reg.decodeRel(extKey, "s", mustAny(t, wrapperspb.String("not registered here")))
	require.ErrorIs(t, err, ErrBadValue)
}

func TestConfigValidation(t *testing.T) {
	newValue := func() proto.Message { return &kubemodel.Pod{} }
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none: valid
	}{
		{name: "zero value"},
		{name: "negative durations", cfg: Config{MirrorFallbackDelay: -1, RetryMinBackoff: -1, QueueFullTimeout: -1, Etcd: EtcdConfig{DialTimeout: -1, KeepAliveTime: -1}},
			want: []string{"MirrorFallbackDelay", "RetryMinBackoff", "QueueFullTimeout", "DialTimeout", "KeepAliveTime"}},
		{name: "max below min", cfg: Config{RetryMinBackoff: time.Second, RetryMaxBackoff: time.Millisecond}, want: []string{"RetryMaxBackoff"}},
		{name: "cert without key", cfg: Config{Etcd: EtcdConfig{CertFile: "c.pem"}}, want: []string{"CertFile"}},
		{name: "user without password", cfg: Config{Etcd: EtcdConfig{Username: "u"}}, want: []string{"Password"}},
		{name: "empty endpoint", cfg: Config{Etcd: EtcdConfig{Endpoints: []string{" "}}}, want: []string{"Endpoints[0]"}},
		{name: "same prefixes", cfg: Config{KubeStatePrefix: "/x/", ExternalConfigPrefix: "/x/"}, want: []string{"ExternalConfigPrefix"}},
		{name: "duplicate resource prefix", cfg: Config{Resources: []kubemodel.Resource{{Name: "mypod", KeyPrefix: kubemodel.PodKeyPrefix, NewValue: newValue}}}, want: []string{"share the key prefix"}},
		{name: "invalid resource", cfg: Config{Resources: []kubemodel.Resource{{Name: "x", KeyPrefix: "no-slash"}}}, want: []string{"must be non-empty and end in /", "NewValue is nil"}},
		{name: "user resource", cfg: Config{Resources: []kubemodel.Resource{{Name: "policy", KeyPrefix: "k8s/policy/", NewValue: newValue, Namespaced: true}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(&recorderStub{}, tc.cfg)
			if len(tc.want) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

type recorderStub struct{}

func (recorderStub) PushEvent(controller.Event) error { return nil }

func TestConfigDefaults(t *testing.T) {
	cfg, err := Config{}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, []string{DefaultEndpoint}, cfg.Etcd.Endpoints)
	assert.Equal(t, DefaultDialTimeout, cfg.Etcd.DialTimeout)
	assert.Equal(t, DefaultKeepAliveTime, cfg.Etcd.KeepAliveTime)
	assert.Equal(t, DefaultKeepAliveTimeout, cfg.Etcd.KeepAliveTimeout)
	assert.Equal(t, DefaultKubeStatePrefix, cfg.KubeStatePrefix)
	assert.Equal(t, controller.RemoteDBSource, cfg.ExternalConfigSource)
	assert.Equal(t, DefaultMirrorFallbackDelay, cfg.MirrorFallbackDelay)
	assert.Equal(t, DefaultQueueFullTimeout, cfg.QueueFullTimeout)
	assert.NotNil(t, cfg.Logger)
	assert.NotNil(t, cfg.ExternalConfigTypes)
}

func TestEtcdConfigNeverShowsThePassword(t *testing.T) {
	ec := EtcdConfig{Endpoints: []string{"127.0.0.1:2379"}, Username: "agent", Password: "s3cret-pw"}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("config", slog.Any("etcd", ec))
	assert.NotContains(t, b.String(), "s3cret-pw")
	assert.Contains(t, b.String(), "agent")
	assert.NotContains(t, ec.String(), "s3cret-pw")
}

func TestTLSConfigFiles(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not pem"), 0o600))
	for _, tc := range []struct {
		name string
		ec   EtcdConfig
		want string
	}{
		{name: "missing CA", ec: EtcdConfig{CAFile: filepath.Join(dir, "none.pem")}, want: "read etcd CA file"},
		{name: "CA without certificates", ec: EtcdConfig{CAFile: bad}, want: "no PEM certificate"},
		{name: "bad key pair", ec: EtcdConfig{CertFile: bad, KeyFile: bad}, want: "load etcd client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.ec.tlsConfig()
			require.ErrorContains(t, err, tc.want)
		})
	}
	cfg, err := EtcdConfig{}.tlsConfig()
	require.NoError(t, err)
	assert.Nil(t, cfg, "no TLS without files")
	// Run reports TLS problems instead of retrying forever.
	w, err := New(&recorderStub{}, Config{Etcd: EtcdConfig{CAFile: bad}})
	require.NoError(t, err)
	err = w.Run(t.Context())
	require.ErrorIs(t, err, ErrClientConfig)
	require.False(t, errors.Is(err, ErrMirror))
}

// FuzzDecode feeds arbitrary keys and values to the registry: it must never
// panic, and a decoded value must re-decode from its own encoding.
func FuzzDecode(f *testing.F) {
	f.Add(testKubePrefix+"k8s/pod/ns/p", mustMarshal(f, pod("ns", "p", "10.0.0.1")))
	f.Add(testKubePrefix+"k8s/node/n", []byte{})
	f.Add(testExtPrefix+"x", mustAny(f, wrapperspb.String("v")))
	f.Add(testKubePrefix+"k8s/pod/", []byte{0xff})
	reg := testRegistry(f)
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		kind, rel := reg.kindOf(key)
		if kind == foreignKey {
			return
		}
		res, msg, err := reg.decodeRel(kind, rel, value)
		if err != nil {
			if !errors.Is(err, ErrBadKey) && !errors.Is(err, ErrBadValue) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if (kind == kubeKey) != (res != nil) {
			t.Fatalf("kind %v with resource %v", kind, res)
		}
		var again []byte
		if kind == extKey {
			again = mustAny(t, msg)
		} else {
			again = mustMarshal(t, msg)
		}
		if _, msg2, err := reg.decodeRel(kind, rel, again); err != nil || !proto.Equal(msg, msg2) {
			t.Fatalf("re-decoding %q: %v", key, err)
		}
	})
}

package bgpreflector_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/vswitchkit/vswitchkit/bgp/bgpmodel"
	"github.com/vswitchkit/vswitchkit/bgp/bgpreflector"
	"github.com/vswitchkit/vswitchkit/reflector"
)

// policyYAML is a BGPPeeringPolicy with every field set.
const policyYAML = `
apiVersion: vswitchkit.io/v1
kind: BGPPeeringPolicy
metadata:
  name: rack1
spec:
  nodeSelector:
    matchLabels: {rack: "1"}
    matchExpressions:
    - {key: role, operator: NotIn, values: [edge, test]}
  virtualRouters:
  - localASN: 4200000000
    exportPodCIDR: true
    serviceSelector:
      matchExpressions: [{key: bgp, operator: Exists}]
    serviceAdvertisements: [LoadBalancerIP, ClusterIP]
    loadBalancerClasses: [vswitchkit.io/bgp, example.com/lb]
    neighbors:
    - peerAddress: 192.168.0.254
      peerPort: 1179
      peerASN: 64500
      localAddress: 192.168.0.1
      passive: true
      eBGPMultihopTTL: 4
      connectRetryTimeSeconds: 5
      holdTimeSeconds: 90
      keepaliveTimeSeconds: 30
      gracefulRestart: {enabled: true, restartTimeSeconds: 120}
      password: s3cret
      families: [ipv4-unicast, ipv6-unicast]
  - localASN: 64512
`

func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
	u.SetAPIVersion(bgpreflector.Group + "/" + bgpreflector.Version)
	u.SetKind(bgpreflector.Kind)
	// The API machinery decodes JSON integers as int64; sigs.k8s.io/yaml
	// gives float64. Convert round-trips through JSON like a client does.
	b, err := u.MarshalJSON()
	require.NoError(t, err)
	out := &unstructured.Unstructured{}
	require.NoError(t, out.UnmarshalJSON(b))
	return out
}

func TestConvert(t *testing.T) {
	got, err := bgpreflector.Convert(object(t, policyYAML))
	require.NoError(t, err)
	want := &bgpmodel.PeeringPolicy{
		Name: "rack1",
		NodeSelector: &bgpmodel.LabelSelector{
			MatchLabels:      map[string]string{"rack": "1"},
			MatchExpressions: []*bgpmodel.LabelSelectorRequirement{{Key: "role", Operator: "NotIn", Values: []string{"edge", "test"}}},
		},
		VirtualRouters: []*bgpmodel.VirtualRouter{{
			LocalAsn: 4200000000, ExportPodCidr: true,
			ServiceSelector:       &bgpmodel.LabelSelector{MatchExpressions: []*bgpmodel.LabelSelectorRequirement{{Key: "bgp", Operator: "Exists"}}},
			ServiceAdvertisements: []string{"LoadBalancerIP", "ClusterIP"},
			LoadBalancerClasses:   []string{"vswitchkit.io/bgp", "example.com/lb"},
			Neighbors: []*bgpmodel.Neighbor{{
				PeerAddress: "192.168.0.254", PeerPort: 1179, PeerAsn: 64500, LocalAddress: "192.168.0.1", Passive: true,
				EbgpMultihopTtl: 4, ConnectRetryTimeSeconds: 5, HoldTimeSeconds: 90, KeepaliveTimeSeconds: 30,
				GracefulRestart: &bgpmodel.GracefulRestart{Enabled: true, RestartTimeSeconds: 120},
				Password:        "s3cret", Families: []string{"ipv4-unicast", "ipv6-unicast"},
			}},
		}, {LocalAsn: 64512}},
	}
	assert.True(t, proto.Equal(want, got), "got  %v\nwant %v", got, want)

	// Float64 numbers (JSON decoded without the integer hint) are accepted
	// when whole.
	u := object(t, policyYAML)
	u.Object["spec"].(map[string]any)["virtualRouters"].([]any)[1].(map[string]any)["localASN"] = float64(64513)
	got, err = bgpreflector.Convert(u)
	require.NoError(t, err)
	assert.EqualValues(t, 64513, got.GetVirtualRouters()[1].GetLocalAsn())

	empty, err := bgpreflector.Convert(object(t, "metadata: {name: all}"))
	require.NoError(t, err)
	assert.True(t, proto.Equal(&bgpmodel.PeeringPolicy{Name: "all"}, empty))
}

func TestConvertErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"bad name", "metadata: {name: Rack_1}", []string{`bgppeeringpolicy Rack_1: metadata.name "Rack_1"`}},
		{"spec not an object", "metadata: {name: a}\nspec: [1]", []string{`spec "[1]": not an object`}},
		{"unknown field", "metadata: {name: a}\nspec: {nodeSelectr: {}}", []string{"spec.nodeSelectr: unknown field"}},
		{"unknown nested field", "metadata: {name: a}\nspec: {virtualRouters: [{localASN: 1, neighbours: []}]}", []string{"spec.virtualRouters[0].neighbours: unknown field"}},
		{"wrong types", `metadata: {name: a}
spec:
  nodeSelector: {matchLabels: {a: 1}, matchExpressions: {}}
  virtualRouters:
  - localASN: "64512"
    exportPodCIDR: "yes"
    neighbors: [{peerAddress: 1, families: [4]}, 7]`, []string{
			`spec.nodeSelector.matchLabels.a "1": not a string`,
			`spec.nodeSelector.matchExpressions "map[]": not a list`,
			`spec.virtualRouters[0].localASN "64512": not a number`,
			`spec.virtualRouters[0].exportPodCIDR "yes": not a boolean`,
			`spec.virtualRouters[0].neighbors[0].peerAddress "1": not a string`,
			`spec.virtualRouters[0].neighbors[0].families[0] "4": not a string`,
			`spec.virtualRouters[0].neighbors[1] "7": not an object`,
		}},
		{"out of range", "metadata: {name: a}\nspec: {virtualRouters: [{localASN: 4294967296}, {localASN: -1}, {localASN: 1.5}]}", []string{
			`spec.virtualRouters[0].localASN "4294967296": must be 0..4294967295`,
			`spec.virtualRouters[1].localASN "-1": must be 0..4294967295`,
			`spec.virtualRouters[2].localASN "1.5": not an integer`,
		}},
		{"bad addresses and ranges (bgp.PolicyFromModel)", `metadata: {name: a}
spec: {virtualRouters: [{localASN: 1, neighbors: [{peerAddress: 10.0.0.300, peerASN: 2, peerPort: 70000, eBGPMultihopTTL: 256}]}]}`, []string{
			`virtualRouters[0].neighbors[0].peerAddress`, `not an IP address`, `peerPort`, `eBGPMultihopTTL`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bgpreflector.Convert(object(t, tc.doc))
			require.Error(t, err)
			require.ErrorIs(t, err, reflector.ErrBadObject)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestEveryModelFieldConverted: the policy with every field set fills
// every field of every bgpmodel message, so a field added to the model
// without a place in the conversion table fails here.
func TestEveryModelFieldConverted(t *testing.T) {
	got, err := bgpreflector.Convert(object(t, policyYAML))
	require.NoError(t, err)
	assertEveryFieldSet(t, got)
}

// assertEveryFieldSet checks that every field of every message of the
// bgpmodel file is set somewhere in m's tree.
func assertEveryFieldSet(t *testing.T, m proto.Message) {
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
	msgs := m.ProtoReflect().Descriptor().ParentFile().Messages()
	require.Positive(t, msgs.Len())
	for i := range msgs.Len() {
		md := msgs.Get(i)
		for j := range md.Fields().Len() {
			fd := md.Fields().Get(j)
			assert.True(t, seen[md.FullName()][fd.Name()], "%s.%s is not set", md.FullName(), fd.Name())
		}
	}
}

// TestCRDMatchesConversion: the CRD in crd.yaml declares exactly the
// fields that Convert understands, at every level.
func TestCRDMatchesConversion(t *testing.T) {
	raw, err := os.ReadFile("crd.yaml")
	require.NoError(t, err)
	var crd map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &crd))
	spec := crd["spec"].(map[string]any)
	assert.Equal(t, bgpreflector.Group, spec["group"])
	assert.Equal(t, "Cluster", spec["scope"])
	names := spec["names"].(map[string]any)
	assert.Equal(t, bgpreflector.Kind, names["kind"])
	assert.Equal(t, bgpreflector.Plural, names["plural"])
	assert.Equal(t, bgpreflector.ListKind, names["listKind"])
	version := spec["versions"].([]any)[0].(map[string]any)
	assert.Equal(t, bgpreflector.Version, version["name"])
	schema := version["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
	specSchema := schema["properties"].(map[string]any)["spec"].(map[string]any)

	// Every declared field converts: a policy built from the schema with a
	// value for every leaf is accepted, and a policy with an undeclared
	// field is not (TestConvertErrors).
	var sample func(s map[string]any, path string) any
	sample = func(s map[string]any, path string) any {
		switch s["type"] {
		case "object":
			props, ok := s["properties"].(map[string]any)
			if !ok { // a map of strings
				return map[string]any{"k": "v"}
			}
			out := map[string]any{}
			for k, v := range props {
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
			switch {
			case s["enum"] != nil:
				return s["enum"].([]any)[0]
			case path == ".virtualRouters[].neighbors[].peerAddress", path == ".virtualRouters[].neighbors[].localAddress":
				return "192.0.2.1"
			}
			return "x"
		}
		t.Fatalf("%s: unexpected schema type %v", path, s["type"])
		return nil
	}
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "sample"}, "spec": sample(specSchema, "")}}
	got, err := bgpreflector.Convert(u)
	require.NoError(t, err)
	// And it sets every field of the model: the schema covers the model.
	assertEveryFieldSet(t, got)
}

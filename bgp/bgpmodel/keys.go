package bgpmodel

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// PolicyResourceName is the resource name of peering policies in
// controller.KubeStateData.
const PolicyResourceName = "bgppeeringpolicy"

// PolicyKeyPrefix is the key prefix of peering policies, relative to the
// Kubernetes-state prefix. Policies are cluster-scoped: the key ends in the
// policy name.
const PolicyKeyPrefix = kubemodel.KeyRoot + PolicyResourceName + "/"

// PolicyResource describes the peering-policy resource for the watcher,
// next to kubemodel.Resources().
func PolicyResource() kubemodel.Resource {
	return kubemodel.Resource{
		Name:      PolicyResourceName,
		KeyPrefix: PolicyKeyPrefix,
		NewValue:  func() proto.Message { return &PeeringPolicy{} },
	}
}

// PolicyKey returns the key of the policy with the given name. It does not
// validate the name; keys built from invalid names fail [ParsePolicyKey].
func PolicyKey(name string) string { return PolicyKeyPrefix + name }

// ParsePolicyKey parses a key built by [PolicyKey] and returns the name.
func ParsePolicyKey(key string) (string, error) {
	_, name, err := PolicyResource().ParseKey(key)
	return name, err
}

// Resource names of the v2 configuration objects in
// controller.KubeStateData. Like the peering policy, they are
// cluster-scoped: each key ends in the object's name.
const (
	ClusterConfigResourceName      = "bgpclusterconfig"
	PeerConfigResourceName         = "bgppeerconfig"
	AdvertisementResourceName      = "bgpadvertisement"
	NodeConfigOverrideResourceName = "bgpnodeconfigoverride"
	// AuthSecretResourceName: the TCP-MD5 passwords of the Secrets in the
	// BGP secrets namespace, by secret name.
	AuthSecretResourceName = "bgpauthsecret"
)

// Key prefixes of the v2 configuration objects, relative to the
// Kubernetes-state prefix.
const (
	ClusterConfigKeyPrefix      = kubemodel.KeyRoot + ClusterConfigResourceName + "/"
	PeerConfigKeyPrefix         = kubemodel.KeyRoot + PeerConfigResourceName + "/"
	AdvertisementKeyPrefix      = kubemodel.KeyRoot + AdvertisementResourceName + "/"
	NodeConfigOverrideKeyPrefix = kubemodel.KeyRoot + NodeConfigOverrideResourceName + "/"
	AuthSecretKeyPrefix         = kubemodel.KeyRoot + AuthSecretResourceName + "/"
)

// V2Resources describes the v2 configuration resources for the watcher:
// cluster configs, peer configs, advertisements, node overrides and auth
// secrets, in this order.
func V2Resources() []kubemodel.Resource {
	return []kubemodel.Resource{
		{Name: ClusterConfigResourceName, KeyPrefix: ClusterConfigKeyPrefix, NewValue: func() proto.Message { return &ClusterConfig{} }},
		{Name: PeerConfigResourceName, KeyPrefix: PeerConfigKeyPrefix, NewValue: func() proto.Message { return &PeerConfig{} }},
		{Name: AdvertisementResourceName, KeyPrefix: AdvertisementKeyPrefix, NewValue: func() proto.Message { return &Advertisement{} }},
		{Name: NodeConfigOverrideResourceName, KeyPrefix: NodeConfigOverrideKeyPrefix, NewValue: func() proto.Message { return &NodeConfigOverride{} }},
		{Name: AuthSecretResourceName, KeyPrefix: AuthSecretKeyPrefix, NewValue: func() proto.Message { return &AuthSecret{} }},
	}
}

// Resources returns every BGP resource for the watcher: the v1 peering
// policy ([PolicyResource]) and the v2 resources ([V2Resources]).
func Resources() []kubemodel.Resource {
	return append([]kubemodel.Resource{PolicyResource()}, V2Resources()...)
}

// ObjectKey returns the key of the object of a BGP resource (one of the
// resource names above, or [PolicyResourceName]) with the given name; ""
// for an unknown resource.
func ObjectKey(resource, name string) string {
	for _, r := range Resources() {
		if r.Name == resource {
			return r.KeyPrefix + name
		}
	}
	return ""
}

// ParseObjectKey parses a key built by [ObjectKey] and returns the
// resource name and the object name.
func ParseObjectKey(key string) (resource, name string, err error) {
	for _, r := range Resources() {
		if strings.HasPrefix(key, r.KeyPrefix) {
			_, name, err := r.ParseKey(key)
			return r.Name, name, err
		}
	}
	return "", "", fmt.Errorf("bgpmodel: %q is not the key of a BGP object", key)
}

// DefaultStatusPrefix is the etcd prefix under which each agent publishes
// its node's BGP status (a [NodeStatus]): the key of node n is
// DefaultStatusPrefix + n. It lies outside the Kubernetes-state range that
// the reflector owns and the watcher reads.
const DefaultStatusPrefix = "/vswitchkit/bgpstatus/"

// StatusKey returns the etcd key of a node's BGP status under prefix (""
// means [DefaultStatusPrefix]).
func StatusKey(prefix, node string) string {
	if prefix == "" {
		prefix = DefaultStatusPrefix
	}
	return prefix + node
}

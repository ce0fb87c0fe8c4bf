package bgpmodel

import (
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

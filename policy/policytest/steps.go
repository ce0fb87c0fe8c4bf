package policytest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Step is one change of a [Case]: a policy put or deleted, a pod's labels
// or ports changed, a pod deleted, a namespace's labels changed. The
// concrete types are [PutPolicy], [DeletePolicy], [SetPodLabels],
// [SetPodPorts], [DeletePod] and [SetNamespaceLabels]; a harness that
// drives another implementation switches on them, applies the step to its
// own Cluster with Apply and reads the changed object from the Cluster.
type Step interface {
	// Apply makes the change in c. It fails (wrapping [ErrInvalidCluster])
	// when the object to change is not there.
	Apply(c *Cluster) error
	// String describes the change in a few words.
	String() string
}

// PutPolicy adds Policy, or replaces the policy of its namespace and name.
type PutPolicy struct{ Policy *kubemodel.NetworkPolicy }

// Apply implements [Step].
func (s PutPolicy) Apply(c *Cluster) error { c.PutPolicy(s.Policy); return nil }

func (s PutPolicy) String() string { return "put policy " + s.Policy.ID().String() }

// DeletePolicy deletes a policy.
type DeletePolicy struct{ Policy kubemodel.PolicyID }

// Apply implements [Step].
func (s DeletePolicy) Apply(c *Cluster) error { return c.DeletePolicy(s.Policy) }

func (s DeletePolicy) String() string { return "delete policy " + s.Policy.String() }

// SetPodLabels replaces the labels of a pod.
type SetPodLabels struct {
	Pod    kubemodel.PodID
	Labels map[string]string
}

// Apply implements [Step].
func (s SetPodLabels) Apply(c *Cluster) error { return c.SetPodLabels(s.Pod, s.Labels) }

func (s SetPodLabels) String() string {
	return fmt.Sprintf("pod %s labels %s", s.Pod, formatLabels(s.Labels))
}

// SetPodPorts replaces the container ports of a pod by Ports (in one
// container, "main"); see [Cluster.SetPodPorts].
type SetPodPorts struct {
	Pod   kubemodel.PodID
	Ports []*kubemodel.ContainerPort
}

// Apply implements [Step].
func (s SetPodPorts) Apply(c *Cluster) error { return c.SetPodPorts(s.Pod, s.Ports) }

func (s SetPodPorts) String() string {
	var ports []string
	for _, p := range s.Ports {
		ports = append(ports, fmt.Sprintf("%s=%s/%d", p.GetName(), p.GetProtocol(), p.GetContainerPort()))
	}
	return fmt.Sprintf("pod %s ports [%s]", s.Pod, strings.Join(ports, " "))
}

// DeletePod deletes a pod.
type DeletePod struct{ Pod kubemodel.PodID }

// Apply implements [Step].
func (s DeletePod) Apply(c *Cluster) error { return c.DeletePod(s.Pod) }

func (s DeletePod) String() string { return "delete pod " + s.Pod.String() }

// SetNamespaceLabels replaces the labels of a namespace.
type SetNamespaceLabels struct {
	Namespace string
	Labels    map[string]string
}

// Apply implements [Step].
func (s SetNamespaceLabels) Apply(c *Cluster) error {
	return c.SetNamespaceLabels(s.Namespace, s.Labels)
}

func (s SetNamespaceLabels) String() string {
	return fmt.Sprintf("namespace %s labels %s", s.Namespace, formatLabels(s.Labels))
}

// formatLabels returns labels as "{k1=v1,k2=v2}", sorted by key.
func formatLabels(labels map[string]string) string {
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, k+"="+labels[k])
	}
	return "{" + strings.Join(pairs, ",") + "}"
}

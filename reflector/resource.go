package reflector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/vswitchkit/vswitchkit/controller/kubemodel"
)

// Resource describes one kind of Kubernetes object that the reflector
// reflects: where its objects come from, how one object becomes a stored
// value, and under which key. [KubernetesResources] returns the built-in
// ones; package bgp/bgpreflector shows a user resource (a CRD read with the
// dynamic client).
//
// The zero value is not usable. A Resource is a plain value that the
// reflector only reads: safe for concurrent use as long as nobody modifies
// it.
type Resource struct {
	// Name identifies the resource in [Stats] and logs, e.g. "pod". It
	// should equal the name under which the watcher delivers the keys
	// (kubemodel.Resource.Name).
	Name string

	// KeyPrefix is the common prefix of the resource's keys relative to
	// [Config.Prefix], ending in "/", e.g. kubemodel.PodKeyPrefix. The
	// reflector owns every key under Config.Prefix + KeyPrefix: a
	// reconcile deletes those that no current object maps to. Key
	// prefixes of different resources must not contain one another.
	KeyPrefix string

	// ListWatch lists and watches the objects, typically a
	// *cache.ListWatch around a typed or dynamic client. The reflector
	// builds an informer (a client-go reflector and a cache) on it in
	// Run. Wrap a *cache.ListWatch with
	// cache.ToListWatcherWithWatchListSemantics, as client-go's generated
	// informers do, so that client-go's fake clientsets work.
	ListWatch cache.ListerWatcher

	// Object is an empty object of the listed type, e.g. &corev1.Pod{} or
	// &unstructured.Unstructured{}.
	Object runtime.Object

	// Convert returns the value to store for obj, an object of the type of
	// Object taken from the informer's cache, which it must not modify.
	// An error means the object cannot be reflected: it is logged, counted
	// in [ResourceStats.BadObjects] and skipped, and a key that an earlier
	// version of the object had is deleted. Return an [*ObjectError] (or
	// several, joined) to name the field. A nil message and nil error
	// leave the object out (a filter). Convert is called from the
	// reflector's writer goroutine only, never concurrently with itself.
	Convert func(obj any) (proto.Message, error)

	// Key returns the key of the object namespace/name (namespace empty
	// for cluster-scoped objects) relative to [Config.Prefix]; it must
	// start with KeyPrefix, e.g. kubemodel.PodKey.
	Key func(namespace, name string) string

	// NodeKeyPrefix and Node, set together, store the resource per node
	// (kubemodel.Resource.NodeKeyPrefix; the pods of KubernetesResources):
	// the value of an object that Key puts at KeyPrefix + <rest> is stored
	// at NodeKeyPrefix + Node(obj) + "/" + <rest>, so that a node's agent
	// reads its own node's objects alone; an object whose Node is "" (a
	// pod not scheduled yet) is left out. The reflector owns both
	// prefixes: a reconcile deletes the keys under KeyPrefix (what a
	// reflector of the flat layout wrote) after it wrote the per-node keys
	// and the layout key (see the package documentation). NodeKeyPrefix
	// must end in "/" and overlap no key prefix.
	NodeKeyPrefix string
	Node          func(obj any) string

	// SharedWith names an earlier resource of the same reflector whose
	// informer this one uses instead of its own (ListWatch and Object are
	// then ignored): one watch and one cache for two kinds of values made
	// of the same objects, as the pod peer records are made of the pods.
	SharedWith string

	// merged, set only by KubernetesResources for endpoints, replaces
	// Convert and Key: many EndpointSlices make one value.
	merged bool
}

func (r *Resource) validate() []error {
	var errs []error
	if r.Name == "" {
		errs = append(errs, errors.New("resource name is empty"))
	}
	if r.KeyPrefix == "" || !strings.HasSuffix(r.KeyPrefix, "/") || strings.HasPrefix(r.KeyPrefix, "/") {
		errs = append(errs, fmt.Errorf("resource %q: key prefix %q must be non-empty, end in / and not start with /", r.Name, r.KeyPrefix))
	}
	if r.ListWatch == nil && r.SharedWith == "" {
		errs = append(errs, fmt.Errorf("resource %q: ListWatch is nil", r.Name))
	}
	if r.Object == nil && r.SharedWith == "" {
		errs = append(errs, fmt.Errorf("resource %q: Object is nil", r.Name))
	}
	if (r.NodeKeyPrefix == "") != (r.Node == nil) {
		errs = append(errs, fmt.Errorf("resource %q: NodeKeyPrefix and Node must be set together", r.Name))
	}
	if r.NodeKeyPrefix != "" && (!strings.HasSuffix(r.NodeKeyPrefix, "/") || strings.HasPrefix(r.NodeKeyPrefix, "/")) {
		errs = append(errs, fmt.Errorf("resource %q: node key prefix %q must end in / and not start with /", r.Name, r.NodeKeyPrefix))
	}
	if r.merged && r.NodeKeyPrefix != "" {
		errs = append(errs, fmt.Errorf("resource %q: merged values cannot be stored per node", r.Name))
	}
	if !r.merged {
		if r.Convert == nil {
			errs = append(errs, fmt.Errorf("resource %q: Convert is nil", r.Name))
		}
		if r.Key == nil {
			errs = append(errs, fmt.Errorf("resource %q: Key is nil", r.Name))
		}
	}
	return errs
}

// KubernetesResources returns the built-in resources, read through kube:
// nodes, pods, pod peer records (made of the pods, from the same
// informer), services, endpoints (the merge of the EndpointSlices of
// discovery.k8s.io/v1 per service, see [ConvertEndpointSlices]),
// namespaces and network policies, all namespaces, converted with
// [ConvertNode], [ConvertPod], [ConvertPodPeer], [ConvertService],
// [ConvertNamespace] and [ConvertNetworkPolicy] and stored under the keys of
// package kubemodel (kubemodel.NodeKey and so on). Their names are the
// kubemodel resource names. The endpoints resource cannot be rebuilt from
// its exported fields (its Convert and Key are nil); pass it on as
// returned. KubernetesResources does no I/O.
func KubernetesResources(kube kubernetes.Interface) []Resource {
	return []Resource{
		{
			Name:      kubemodel.NodeResource,
			KeyPrefix: kubemodel.NodeKeyPrefix,
			ListWatch: typedListWatch(kube,
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return kube.CoreV1().Nodes().List(ctx, o)
				},
				func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					return kube.CoreV1().Nodes().Watch(ctx, o)
				}),
			Object:  &corev1.Node{},
			Convert: typed(ConvertNode),
			Key:     func(_, name string) string { return kubemodel.NodeKey(name) },
		},
		{
			// Stored per node (kubemodel.LayoutNodePods): a node's agent
			// reads its own node's pods, and the others' peer records.
			Name:          kubemodel.PodResource,
			KeyPrefix:     kubemodel.PodKeyPrefix,
			NodeKeyPrefix: kubemodel.NodePodKeyPrefix,
			Node: func(obj any) string {
				if p, ok := obj.(*corev1.Pod); ok {
					return p.Spec.NodeName
				}
				return ""
			},
			ListWatch: typedListWatch(kube,
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return kube.CoreV1().Pods("").List(ctx, o)
				},
				func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					return kube.CoreV1().Pods("").Watch(ctx, o)
				}),
			Object:  &corev1.Pod{},
			Convert: typed(ConvertPod),
			Key:     kubemodel.PodKey,
		},
		{
			// Every pod as other pods' NetworkPolicies see it, from the
			// pods' informer.
			Name:       kubemodel.PodPeerResource,
			KeyPrefix:  kubemodel.PodPeerKeyPrefix,
			SharedWith: kubemodel.PodResource,
			Convert:    typed(ConvertPodPeer),
			Key:        kubemodel.PodPeerKey,
		},
		{
			Name:      kubemodel.ServiceResource,
			KeyPrefix: kubemodel.ServiceKeyPrefix,
			ListWatch: typedListWatch(kube,
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return kube.CoreV1().Services("").List(ctx, o)
				},
				func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					return kube.CoreV1().Services("").Watch(ctx, o)
				}),
			Object:  &corev1.Service{},
			Convert: typed(ConvertService),
			Key:     kubemodel.ServiceKey,
		},
		{
			Name:      kubemodel.EndpointsResource,
			KeyPrefix: kubemodel.EndpointsKeyPrefix,
			ListWatch: typedListWatch(kube,
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return kube.DiscoveryV1().EndpointSlices("").List(ctx, o)
				},
				func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					return kube.DiscoveryV1().EndpointSlices("").Watch(ctx, o)
				}),
			Object: &discoveryv1.EndpointSlice{},
			merged: true,
		},
		{
			Name:      kubemodel.NamespaceResource,
			KeyPrefix: kubemodel.NamespaceKeyPrefix,
			ListWatch: typedListWatch(kube,
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return kube.CoreV1().Namespaces().List(ctx, o)
				},
				func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					return kube.CoreV1().Namespaces().Watch(ctx, o)
				}),
			Object:  &corev1.Namespace{},
			Convert: typed(ConvertNamespace),
			Key:     func(_, name string) string { return kubemodel.NamespaceKey(name) },
		},
		{
			Name:      kubemodel.NetworkPolicyResource,
			KeyPrefix: kubemodel.NetworkPolicyKeyPrefix,
			ListWatch: typedListWatch(kube,
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return kube.NetworkingV1().NetworkPolicies("").List(ctx, o)
				},
				func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					return kube.NetworkingV1().NetworkPolicies("").Watch(ctx, o)
				}),
			Object:  &networkingv1.NetworkPolicy{},
			Convert: typed(ConvertNetworkPolicy),
			Key:     kubemodel.NetworkPolicyKey,
		},
	}
}

// typedListWatch builds a list-watch the way client-go's generated
// informers do, so that fake clientsets opt out of WatchList.
func typedListWatch(client any, list cache.ListWithContextFunc, w cache.WatchFuncWithContext) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: w}, client)
}

// typed adapts a converter of one object type to Resource.Convert.
func typed[T any, M proto.Message](f func(T) (M, error)) func(any) (proto.Message, error) {
	return func(obj any) (proto.Message, error) {
		o, ok := obj.(T)
		if !ok {
			return nil, fmt.Errorf("reflector: unexpected object type %T", obj)
		}
		m, err := f(o)
		if err != nil {
			return nil, err
		}
		if !m.ProtoReflect().IsValid() {
			return nil, nil // a nil *M: the object is left out
		}
		return m, nil
	}
}

// countingListWatch wraps a ListerWatcher to count and log its failed
// requests; client-go's reflector retries them (with the reflector's
// backoff, see Config.APIRetryMaxBackoff). It keeps the wrapped WatchList
// capability. Its requests come from one goroutine, the client-go
// reflector's.
type countingListWatch struct {
	inner       cache.ListerWatcherWithContext
	unsupported bool
	r           *Reflector
	rs          *resState

	failing      bool // the latest request failed (a failing state is being logged)
	failingSince time.Time
	failures     int
}

func newCountingListWatch(lw cache.ListerWatcher, r *Reflector, rs *resState) *countingListWatch {
	c := &countingListWatch{inner: cache.ToListerWatcherWithContext(lw), r: r, rs: rs}
	if u, ok := lw.(interface{ IsWatchListSemanticsUnSupported() bool }); ok {
		c.unsupported = u.IsWatchListSemanticsUnSupported()
	}
	return c
}

// List implements cache.Lister.
func (c *countingListWatch) List(o metav1.ListOptions) (runtime.Object, error) {
	return c.ListWithContext(context.Background(), o)
}

// Watch implements cache.Watcher.
func (c *countingListWatch) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return c.WatchWithContext(context.Background(), o)
}

// ListWithContext implements cache.ListerWithContext.
func (c *countingListWatch) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	obj, err := c.inner.ListWithContext(ctx, o)
	c.note(ctx, "list", err)
	return obj, err
}

// WatchWithContext implements cache.WatcherWithContext.
func (c *countingListWatch) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := c.inner.WatchWithContext(ctx, o)
	c.note(ctx, "watch", err)
	return w, err
}

// IsWatchListSemanticsUnSupported passes the wrapped list-watch's answer on
// to client-go's reflector.
func (c *countingListWatch) IsWatchListSemanticsUnSupported() bool { return c.unsupported }

// note counts a failed request and logs a failing state once when it
// starts and once when it ends (CONTRIBUTING R10).
func (c *countingListWatch) note(ctx context.Context, verb string, err error) {
	if err == nil {
		if c.failing {
			c.failing = false
			c.r.log.Info("kubernetes API answers again", slog.String("resource", c.rs.Name),
				slog.Int("failures", c.failures), slog.Duration("after", time.Since(c.failingSince)))
		}
		return
	}
	if ctx.Err() != nil {
		return
	}
	c.rs.apiErrors.Add(1)
	msg := err.Error()
	c.rs.lastAPIError.Store(&msg)
	if !c.failing {
		c.failing, c.failingSince, c.failures = true, time.Now(), 0
		c.r.log.Warn("kubernetes API request failing; retrying", slog.String("resource", c.rs.Name),
			slog.String("verb", verb), slog.Any("error", err))
	}
	c.failures++
}

package kubemodel

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
)

// Resource names of the built-in Kubernetes models. They are the keys of
// controller.KubeStateData.
const (
	PodResource       = "pod"
	ServiceResource   = "service"
	EndpointsResource = "endpoints"
	NodeResource      = "node"
	NamespaceResource = "namespace"
	// NetworkPolicyResource: networking.k8s.io/v1 NetworkPolicy objects.
	NetworkPolicyResource = "networkpolicy"
	// PodPeerResource: the compact record of every pod that policies may
	// name as a peer (addresses, labels, named ports).
	PodPeerResource = "podpeer"
)

// KeyRoot is the first segment of every built-in key.
const KeyRoot = "k8s/"

// DefaultPrefix is the default Kubernetes-state prefix: the etcd key of an
// object is DefaultPrefix followed by its key, e.g.
// "/vswitchkit/k8s/pod/default/web". The reflector writes there and the
// watcher reads there by default. Other components keep their records beside
// the "k8s/" root (for example nodesync under "/vswitchkit/nodesync/"), never
// inside it.
const DefaultPrefix = "/vswitchkit/"

// EtcdKey returns the full etcd key of key (a key built by this package, or
// of a user resource) under the Kubernetes-state prefix; an empty prefix
// means [DefaultPrefix]. For example EtcdKey("", PodKey("default", "web")) is
// "/vswitchkit/k8s/pod/default/web". The prefix is used as given: it should
// end in "/".
func EtcdKey(prefix, key string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return prefix + key
}

// Key prefixes of the built-in resources, relative to the Kubernetes-state prefix.
const (
	PodKeyPrefix       = KeyRoot + PodResource + "/"
	ServiceKeyPrefix   = KeyRoot + ServiceResource + "/"
	EndpointsKeyPrefix = KeyRoot + EndpointsResource + "/"
	NodeKeyPrefix      = KeyRoot + NodeResource + "/"
	NamespaceKeyPrefix = KeyRoot + NamespaceResource + "/"
	// NetworkPolicyKeyPrefix is where NetworkPolicy objects are stored.
	NetworkPolicyKeyPrefix = KeyRoot + NetworkPolicyResource + "/"
	// PodPeerKeyPrefix is where PodPeer records are stored.
	PodPeerKeyPrefix = KeyRoot + PodPeerResource + "/"
	// NodePodKeyPrefix is where pods are stored in the per-node layout
	// ([LayoutNodePods]): under NodePodKeyPrefix + <node> + "/" +
	// <namespace>/<name> (see [NodePodKey]), so that a node's agent reads
	// and watches its own node's pods alone.
	NodePodKeyPrefix = KeyRoot + "nodepod/"
)

// Key layouts: where the reflector stores what. The layout of the
// Kubernetes state in etcd is the decimal value of [LayoutKey]; without
// it, the state is in LayoutFlat.
const (
	// LayoutFlat stores every object under its key (k8s/pod/<ns>/<name>
	// for pods): every agent reads and watches every pod of the cluster.
	// It is the layout of reflectors that write no LayoutKey.
	LayoutFlat = 1
	// LayoutNodePods stores pods per node, under [NodePodKey], and every
	// other object under its key: an agent reads and watches its node's
	// pods and the cluster-wide rest (services, endpoints, nodes,
	// namespaces, network policies, the compact pod peer records).
	LayoutNodePods = 2
	// CurrentLayout is the layout the reflector of this module writes.
	CurrentLayout = LayoutNodePods
)

// LayoutKey is the key, relative to the Kubernetes-state prefix, whose
// value (the decimal layout number, see [FormatLayout]) tells the layout
// of the Kubernetes state. The reflector writes it; the watcher reads it
// and refuses a layout it does not know.
const LayoutKey = KeyRoot + "layout"

// FormatLayout returns the value of LayoutKey for layout.
func FormatLayout(layout int) []byte { return []byte(strconv.Itoa(layout)) }

// ParseLayout parses a value of LayoutKey; a missing key (nil) is
// LayoutFlat. It returns an error for anything but a positive decimal
// number; whether the layout is known is the reader's business.
func ParseLayout(value []byte) (int, error) {
	if value == nil {
		return LayoutFlat, nil
	}
	n, err := strconv.Atoi(string(value))
	if err != nil || n <= 0 || strconv.Itoa(n) != string(value) {
		return 0, fmt.Errorf("kubemodel: layout %q is not a positive decimal number", value)
	}
	return n, nil
}

// Resource describes one kind of Kubernetes object stored under a key prefix.
// The zero value is not usable; see [Resource.Validate].
type Resource struct {
	// Name identifies the resource in controller.KubeStateData, e.g. "pod".
	Name string
	// KeyPrefix is the common prefix of the resource's keys, relative to the
	// Kubernetes-state prefix, ending in "/", e.g. "k8s/pod/".
	KeyPrefix string
	// NewValue returns a new empty message of the resource's type.
	NewValue func() proto.Message
	// Namespaced tells whether keys carry a namespace segment
	// (<prefix><namespace>/<name>) or only a name (<prefix><name>).
	Namespaced bool
	// NodeKeyPrefix, when set, is where the resource's values are stored
	// in the per-node layout ([LayoutNodePods]): the value of key
	// KeyPrefix + <rest> of an object on node N is stored under
	// NodeKeyPrefix + N + "/" + <rest> ([Resource.NodeKey]), so that an
	// agent reads its own node's alone. Keys in controller.KubeStateData
	// and in events stay KeyPrefix + <rest> in either layout. Only pods
	// have one ([NodePodKeyPrefix]).
	NodeKeyPrefix string
}

// NodeKey returns where the value of key (KeyPrefix + <rest>) of an
// object on node is stored in the per-node layout: NodeKeyPrefix + node
// + "/" + <rest>. It returns key unchanged for a resource without
// NodeKeyPrefix.
func (r Resource) NodeKey(node, key string) string {
	rest, ok := strings.CutPrefix(key, r.KeyPrefix)
	if r.NodeKeyPrefix == "" || !ok {
		return key
	}
	return r.NodeKeyPrefix + node + "/" + rest
}

// ParseNodeKey is the inverse of [Resource.NodeKey]: it returns the node
// and the object's key (KeyPrefix + <rest>) of a key under NodeKeyPrefix,
// checked against the key scheme.
func (r Resource) ParseNodeKey(stored string) (node, key string, err error) {
	rest, ok := strings.CutPrefix(stored, r.NodeKeyPrefix)
	if r.NodeKeyPrefix == "" || !ok {
		return "", "", &KeyError{Key: stored, Reason: fmt.Sprintf("does not start with %q", r.NodeKeyPrefix)}
	}
	node, rest, ok = strings.Cut(rest, "/")
	if !ok {
		return "", "", &KeyError{Key: stored, Reason: "want <node>/ after the prefix"}
	}
	if err := checkName(node); err != nil {
		return "", "", &KeyError{Key: stored, Reason: "node: " + err.Error()}
	}
	key = r.KeyPrefix + rest
	if _, _, err := r.ParseKey(key); err != nil {
		return "", "", &KeyError{Key: stored, Reason: err.(*KeyError).Reason}
	}
	return node, key, nil
}

// Validate reports what makes r unusable.
func (r Resource) Validate() error {
	var errs []error
	if r.Name == "" {
		errs = append(errs, errors.New("resource name is empty"))
	}
	if r.KeyPrefix == "" || !strings.HasSuffix(r.KeyPrefix, "/") {
		errs = append(errs, fmt.Errorf("resource %q: key prefix %q must be non-empty and end in /", r.Name, r.KeyPrefix))
	}
	if r.NewValue == nil {
		errs = append(errs, fmt.Errorf("resource %q: NewValue is nil", r.Name))
	}
	if r.NodeKeyPrefix != "" && (!strings.HasSuffix(r.NodeKeyPrefix, "/") || strings.HasPrefix(r.NodeKeyPrefix, r.KeyPrefix) || strings.HasPrefix(r.KeyPrefix, r.NodeKeyPrefix)) {
		errs = append(errs, fmt.Errorf("resource %q: node key prefix %q must end in / and not overlap the key prefix %q", r.Name, r.NodeKeyPrefix, r.KeyPrefix))
	}
	return errors.Join(errs...)
}

// ParseKey returns the namespace (empty for cluster-scoped resources) and the
// name encoded in key, which must start with r.KeyPrefix.
func (r Resource) ParseKey(key string) (namespace, name string, err error) {
	rest, ok := strings.CutPrefix(key, r.KeyPrefix)
	if !ok {
		return "", "", &KeyError{Key: key, Reason: fmt.Sprintf("does not start with %q", r.KeyPrefix)}
	}
	if !r.Namespaced {
		if err := checkName(rest); err != nil {
			return "", "", &KeyError{Key: key, Reason: "name: " + err.Error()}
		}
		return "", rest, nil
	}
	namespace, name, ok = strings.Cut(rest, "/")
	if !ok {
		return "", "", &KeyError{Key: key, Reason: "want <namespace>/<name> after the prefix"}
	}
	if err := checkNamespace(namespace); err != nil {
		return "", "", &KeyError{Key: key, Reason: "namespace: " + err.Error()}
	}
	if err := checkName(name); err != nil {
		return "", "", &KeyError{Key: key, Reason: "name: " + err.Error()}
	}
	return namespace, name, nil
}

// Resources returns descriptors of the built-in resources: pod, service,
// endpoints, node, namespace, network policy and pod peer. The returned
// slice is a new copy on every call.
func Resources() []Resource {
	return []Resource{
		{Name: PodResource, KeyPrefix: PodKeyPrefix, NewValue: func() proto.Message { return &Pod{} }, Namespaced: true, NodeKeyPrefix: NodePodKeyPrefix},
		{Name: ServiceResource, KeyPrefix: ServiceKeyPrefix, NewValue: func() proto.Message { return &Service{} }, Namespaced: true},
		{Name: EndpointsResource, KeyPrefix: EndpointsKeyPrefix, NewValue: func() proto.Message { return &Endpoints{} }, Namespaced: true},
		{Name: NodeResource, KeyPrefix: NodeKeyPrefix, NewValue: func() proto.Message { return &Node{} }, Namespaced: false},
		{Name: NamespaceResource, KeyPrefix: NamespaceKeyPrefix, NewValue: func() proto.Message { return &Namespace{} }, Namespaced: false},
		{Name: NetworkPolicyResource, KeyPrefix: NetworkPolicyKeyPrefix, NewValue: func() proto.Message { return &NetworkPolicy{} }, Namespaced: true},
		{Name: PodPeerResource, KeyPrefix: PodPeerKeyPrefix, NewValue: func() proto.Message { return &PodPeer{} }, Namespaced: true},
	}
}

// KeyError reports a key that does not follow the key scheme.
type KeyError struct {
	Key    string
	Reason string
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("malformed key %q: %s", e.Key, e.Reason)
}

// PodID identifies a pod by namespace and name. The zero value identifies no pod.
// PodID is comparable and can be used as a map key.
type PodID struct {
	Namespace string
	Name      string
}

// String returns "namespace/name".
func (id PodID) String() string { return id.Namespace + "/" + id.Name }

// Compare orders pod IDs by namespace, then name (for slices.SortFunc).
func (id PodID) Compare(o PodID) int { return compareIDs(id.Namespace, id.Name, o.Namespace, o.Name) }

func compareIDs(ns1, n1, ns2, n2 string) int {
	if c := strings.Compare(ns1, ns2); c != 0 {
		return c
	}
	return strings.Compare(n1, n2)
}

// ID returns the identifier of p.
func (p *Pod) ID() PodID { return PodID{Namespace: p.GetNamespace(), Name: p.GetName()} }

// ServiceID identifies a service (and its endpoints) by namespace and name.
// ServiceID is comparable and can be used as a map key.
type ServiceID struct {
	Namespace string
	Name      string
}

// String returns "namespace/name".
func (id ServiceID) String() string { return id.Namespace + "/" + id.Name }

// Compare orders service IDs by namespace, then name (for
// slices.SortFunc).
func (id ServiceID) Compare(o ServiceID) int {
	return compareIDs(id.Namespace, id.Name, o.Namespace, o.Name)
}

// PolicyID identifies a network policy by namespace and name. PolicyID is
// comparable and can be used as a map key.
type PolicyID struct {
	Namespace string
	Name      string
}

// String returns "namespace/name".
func (id PolicyID) String() string { return id.Namespace + "/" + id.Name }

// Compare orders policy IDs by namespace, then name (for
// slices.SortFunc).
func (id PolicyID) Compare(o PolicyID) int {
	return compareIDs(id.Namespace, id.Name, o.Namespace, o.Name)
}

// ID returns the identifier of np.
func (np *NetworkPolicy) ID() PolicyID {
	return PolicyID{Namespace: np.GetNamespace(), Name: np.GetName()}
}

// ID returns the identifier of the pod that p describes.
func (p *PodPeer) ID() PodID { return PodID{Namespace: p.GetNamespace(), Name: p.GetName()} }

// ID returns the identifier of s.
func (s *Service) ID() ServiceID { return ServiceID{Namespace: s.GetNamespace(), Name: s.GetName()} }

// ID returns the identifier of the service that e belongs to.
func (e *Endpoints) ID() ServiceID { return ServiceID{Namespace: e.GetNamespace(), Name: e.GetName()} }

// PodKey returns the key of pod namespace/name: its key in
// controller.KubeStateData and in events, and where [LayoutFlat] stores
// it ([LayoutNodePods] stores it under [NodePodKey]). It does not
// validate its arguments; keys built from invalid names fail
// [ParsePodKey].
func PodKey(namespace, name string) string { return PodKeyPrefix + namespace + "/" + name }

// NodePodKey returns where [LayoutNodePods] stores pod namespace/name of
// node: NodePodKeyPrefix + node/namespace/name.
func NodePodKey(node, namespace, name string) string {
	return NodePodKeyPrefix + node + "/" + namespace + "/" + name
}

// NodePodPrefix returns the prefix of the pods of node in
// [LayoutNodePods]: what that node's agent reads and watches of the pods.
func NodePodPrefix(node string) string { return NodePodKeyPrefix + node + "/" }

// ParseNodePodKey parses a key built by [NodePodKey].
func ParseNodePodKey(key string) (node string, pod PodID, err error) {
	r := Resource{KeyPrefix: PodKeyPrefix, NodeKeyPrefix: NodePodKeyPrefix, Namespaced: true}
	node, podKey, err := r.ParseNodeKey(key)
	if err != nil {
		return "", PodID{}, err
	}
	pod, err = ParsePodKey(podKey)
	return node, pod, err
}

// ServiceKey returns the key of service namespace/name.
func ServiceKey(namespace, name string) string { return ServiceKeyPrefix + namespace + "/" + name }

// EndpointsKey returns the key of the endpoints namespace/name.
func EndpointsKey(namespace, name string) string { return EndpointsKeyPrefix + namespace + "/" + name }

// NodeKey returns the key of node name.
func NodeKey(name string) string { return NodeKeyPrefix + name }

// NamespaceKey returns the key of namespace name.
func NamespaceKey(name string) string { return NamespaceKeyPrefix + name }

// NetworkPolicyKey returns the key of network policy namespace/name.
func NetworkPolicyKey(namespace, name string) string {
	return NetworkPolicyKeyPrefix + namespace + "/" + name
}

// PodPeerKey returns the key of the peer record of pod namespace/name.
func PodPeerKey(namespace, name string) string { return PodPeerKeyPrefix + namespace + "/" + name }

// ParseNetworkPolicyKey parses a key built by [NetworkPolicyKey].
func ParseNetworkPolicyKey(key string) (PolicyID, error) {
	ns, name, err := parseNamespaced(key, NetworkPolicyKeyPrefix)
	return PolicyID{Namespace: ns, Name: name}, err
}

// ParsePodPeerKey parses a key built by [PodPeerKey].
func ParsePodPeerKey(key string) (PodID, error) {
	ns, name, err := parseNamespaced(key, PodPeerKeyPrefix)
	return PodID{Namespace: ns, Name: name}, err
}

// ParsePodKey parses a key built by [PodKey].
func ParsePodKey(key string) (PodID, error) {
	ns, name, err := parseNamespaced(key, PodKeyPrefix)
	return PodID{Namespace: ns, Name: name}, err
}

// ParseServiceKey parses a key built by [ServiceKey].
func ParseServiceKey(key string) (ServiceID, error) {
	ns, name, err := parseNamespaced(key, ServiceKeyPrefix)
	return ServiceID{Namespace: ns, Name: name}, err
}

// ParseEndpointsKey parses a key built by [EndpointsKey].
func ParseEndpointsKey(key string) (ServiceID, error) {
	ns, name, err := parseNamespaced(key, EndpointsKeyPrefix)
	return ServiceID{Namespace: ns, Name: name}, err
}

// ParseNodeKey parses a key built by [NodeKey] and returns the node name.
func ParseNodeKey(key string) (string, error) {
	_, name, err := Resource{KeyPrefix: NodeKeyPrefix}.ParseKey(key)
	return name, err
}

// ParseNamespaceKey parses a key built by [NamespaceKey] and returns the
// namespace name.
func ParseNamespaceKey(key string) (string, error) {
	rest, ok := strings.CutPrefix(key, NamespaceKeyPrefix)
	if !ok {
		return "", &KeyError{Key: key, Reason: fmt.Sprintf("does not start with %q", NamespaceKeyPrefix)}
	}
	if err := checkNamespace(rest); err != nil {
		return "", &KeyError{Key: key, Reason: "namespace: " + err.Error()}
	}
	return rest, nil
}

func parseNamespaced(key, prefix string) (string, string, error) {
	ns, name, err := Resource{KeyPrefix: prefix, Namespaced: true}.ParseKey(key)
	if err != nil {
		return "", "", err
	}
	return ns, name, nil
}

// ValidateName checks name against the Kubernetes rules for object names
// (an RFC 1123 DNS subdomain: at most 253 characters of lower-case letters,
// digits, '-' and '.', starting and ending with a letter or digit).
func ValidateName(name string) error { return checkName(name) }

// ValidateNamespace checks ns against the Kubernetes rules for namespaces
// (an RFC 1123 DNS label: at most 63 characters of lower-case letters,
// digits and '-', starting and ending with a letter or digit).
func ValidateNamespace(ns string) error { return checkNamespace(ns) }

func checkName(s string) error {
	if len(s) > 253 {
		return fmt.Errorf("%d characters, at most 253 allowed", len(s))
	}
	return checkDNS(s, true)
}

func checkNamespace(s string) error {
	if len(s) > 63 {
		return fmt.Errorf("%d characters, at most 63 allowed", len(s))
	}
	return checkDNS(s, false)
}

func checkDNS(s string, dots bool) error {
	if s == "" {
		return errors.New("empty")
	}
	if dots {
		for label := range strings.SplitSeq(s, ".") {
			if err := checkLabel(label); err != nil {
				return fmt.Errorf("%q: %w", s, err)
			}
		}
		return nil
	}
	if err := checkLabel(s); err != nil {
		return fmt.Errorf("%q: %w", s, err)
	}
	return nil
}

func checkLabel(l string) error {
	if l == "" {
		return errors.New("empty DNS label")
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-':
			if i == 0 || i == len(l)-1 {
				return errors.New("a DNS label must start and end with a lower-case letter or digit")
			}
		default:
			return fmt.Errorf("invalid character %q", c)
		}
	}
	return nil
}

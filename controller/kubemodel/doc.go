// Package kubemodel holds the protobuf models of the Kubernetes state that the
// vswitchkit packages consume (pods, pod peer records, services, endpoints,
// nodes, namespaces, network policies), and the key scheme and layouts
// under which a reflector stores them.
//
// # Keys
//
// Every object has a key that starts with the root "k8s/". In etcd it lives
// under the Kubernetes-state prefix that the application chooses, by default
// [DefaultPrefix] ("/vswitchkit/"); [EtcdKey] builds the full key, for
// example "/vswitchkit/k8s/service/default/web". Keys in
// controller.KubeStateData and in events are the keys without the prefix:
//
//	k8s/pod/<namespace>/<name>
//	k8s/podpeer/<namespace>/<name>
//	k8s/service/<namespace>/<name>
//	k8s/endpoints/<namespace>/<name>
//	k8s/node/<name>
//	k8s/namespace/<name>
//	k8s/networkpolicy/<namespace>/<name>
//
// The Key functions build keys and the Parse functions take them apart. Both
// validate names with the Kubernetes rules (RFC 1123 DNS subdomains for
// object names, DNS labels for namespaces), so a malformed key is reported
// with an error naming what is wrong rather than silently misparsed.
//
// # Layouts
//
// Where an object is stored in etcd depends on the layout, whose number is
// the value of [LayoutKey] ("k8s/layout"; [FormatLayout], [ParseLayout]):
//
//   - [LayoutNodePods] (2, what the reflector writes, [CurrentLayout]):
//     pods are stored per node, under [NodePodKey]
//     (k8s/nodepod/<node>/<namespace>/<name>); everything else under its
//     key. A node's agent reads and watches its own node's pods
//     ([NodePodPrefix]) and the cluster-wide rest: of the other nodes'
//     pods it sees only the compact peer records (k8s/podpeer/) that
//     NetworkPolicy needs, so a pod change reaches every other agent as at
//     most one small peer record, or not at all when the peer record did
//     not change.
//   - [LayoutFlat] (1, no LayoutKey: reflectors before layouts existed):
//     pods under k8s/pod/<namespace>/<name>, read by every agent.
//
// Either way a pod's key in controller.KubeStateData and in events is
// [PodKey]; [Resource.NodeKeyPrefix] tells the watcher where the
// per-node layout stores a resource.
//
// # Resources
//
// [Resources] describes the built-in resources (name, key prefix, a
// constructor for the value) for packages such as the etcd watcher that need
// to decode keys they have not seen before. Applications extend the set with
// their own [Resource] values.
//
// # Regenerating
//
// kubemodel.pb.go is generated from proto/vswitchkit/kubemodel/v1/kubemodel.proto
// (at the module root) by `go generate` with protoc (Debian's
// protobuf-compiler) and the protoc-gen-go version pinned as a tool in go.mod.
// The generated file is committed.
//
// # Concurrency
//
// All functions are safe for concurrent use. Generated messages follow the
// protobuf rules: safe for concurrent reads, not for concurrent mutation.
package kubemodel

// Package kubemodel holds the protobuf models of the Kubernetes state that the
// vswitchkit packages consume (pods, services, endpoints, nodes, namespaces),
// and the key scheme under which a reflector stores them.
//
// # Keys
//
// Every object has a key that starts with the root "k8s/". In etcd it lives
// under the Kubernetes-state prefix that the application chooses, by default
// [DefaultPrefix] ("/vswitchkit/"); [EtcdKey] builds the full key, for
// example "/vswitchkit/k8s/pod/default/web". Keys in controller.KubeStateData
// and in events are the keys without the prefix:
//
//	k8s/pod/<namespace>/<name>
//	k8s/service/<namespace>/<name>
//	k8s/endpoints/<namespace>/<name>
//	k8s/node/<name>
//	k8s/namespace/<name>
//
// The Key functions build keys and the Parse functions take them apart. Both
// validate names with the Kubernetes rules (RFC 1123 DNS subdomains for
// object names, DNS labels for namespaces), so a malformed key is reported
// with an error naming what is wrong rather than silently misparsed.
//
// # Resources
//
// [Resources] describes the five built-in resources (name, key prefix, a
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

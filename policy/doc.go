// Package policy computes Kubernetes NetworkPolicy (networking.k8s.io/v1)
// for the pods of one node: from the cluster's namespaces, network
// policies and pods it keeps, for every local pod, its effective policy
// ([PodPolicy]) — per direction whether the pod is isolated and which
// connections (peer prefixes × protocols × port ranges) its policies allow
// — and tells registered renderers what changed, the way svcprocessor
// feeds service renderers. render/aclpolicy renders it onto VPP's ACL
// plugin.
//
// # Semantics
//
// All of networking.k8s.io/v1: the policy's podSelector (labels and
// expressions), policyTypes (explicit, or inferred: Ingress, plus Egress
// when the policy has egress rules), ingress from and egress to pod
// selectors, namespace selectors, both in one peer (AND) and ipBlocks with
// except; ports by protocol (TCP, UDP, SCTP), number, range (endPort) or
// name. A named port is resolved against the pod it names a port of: for
// ingress the local pod, for egress each destination pod (so one rule may
// mean different ports to different pods; a named port never matches an
// address that is not a known pod). A rule without peers allows every
// address, one without ports every protocol and port; a policy without
// rules of a direction it isolates denies that direction. Policies add up.
// A pod selected by no policy of a direction is not isolated in it.
// ipBlocks match pod addresses like any other address.
//
// What the package does not decide, because it depends on the data plane,
// is documented by the renderer: connections are stateful (the replies to
// an allowed connection are allowed), and traffic from the node itself to
// its pods is allowed.
//
// # Bad input
//
// A policy that the Kubernetes API server would have refused (an invalid
// selector operator, CIDR, except outside its CIDR, port, range or port
// name) is ignored as a whole, reported by [Processor.PolicyErrors] (a
// [PolicyError] naming every problem), counted in [Stats] and logged at
// Warn once when it becomes invalid. A named port that no pod declares is
// not an error: it matches nothing, and [Processor.PolicyStatuses] lists
// it with the policy (beside each policy's error and the local pods it
// selects).
//
// # Peers and memory
//
// Every pod of the cluster may be a peer. The processor keeps of each the
// compact [kubemodel.PodPeer] record (namespace, labels, addresses, named
// ports) that the reflector writes, and of this node's pods their full
// [kubemodel.Pod] records; a new local pod's address comes from
// Config.PodAddrs (IPAM) before Kubernetes reports it, so its policy is
// in place with its first packet.
//
// # Incremental work
//
// Pod and namespace selectors of peers are interned: one per distinct
// (namespace, selectors) with its current members and their aggregated
// addresses. A pod or namespace change re-evaluates the selectors of that
// namespace and the cross-namespace ones; a selector whose members change
// recomputes only the local pods targeted by the policies that use it. A
// policy change recomputes the local pods it selected before and after.
// Renderers get only the pods whose effective policy changed.
//
// # Concurrency
//
// Events are processed one at a time on the loop's goroutine through
// [Processor.Handler]; [Processor.PodPolicy], [Processor.PolicyErrors] and
// [Processor.Stats] are safe for concurrent use.
package policy

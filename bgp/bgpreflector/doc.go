// Package bgpreflector reflects the BGP peering policies of a cluster — the
// custom resource BGPPeeringPolicy of group vswitchkit.io, version v1 —
// into etcd as bgpmodel.PeeringPolicy values under bgpmodel.PolicyKey, so
// that package bgp receives them through the etcd watcher and the event
// loop. It joins reflector, which knows nothing of BGP, to the BGP
// model: [Resource] is a reflector.Resource read with
// client-go's dynamic client.
//
//	resources := append(reflector.KubernetesResources(kube), bgpreflector.Resource(dyn))
//	r, err := reflector.New(etcdClient, resources, reflector.Config{})
//
// The watcher must know the resource too:
// watcher.Config{Resources: []kubemodel.Resource{bgpmodel.PolicyResource()}}.
//
// # The custom resource
//
// crd.yaml in this directory is the CustomResourceDefinition (cluster-scoped,
// plural bgppeeringpolicies). Its spec mirrors bgpmodel.PeeringPolicy field
// by field in the usual Kubernetes spelling:
//
//	apiVersion: vswitchkit.io/v1
//	kind: BGPPeeringPolicy
//	metadata:
//	  name: rack1
//	spec:
//	  nodeSelector: {matchLabels: {rack: "1"}}
//	  virtualRouters:
//	  - localASN: 64512
//	    exportPodCIDR: true
//	    serviceSelector: {matchExpressions: [{key: bgp, operator: Exists}]}
//	    neighbors:
//	    - peerAddress: 192.168.0.254
//	      peerASN: 64500
//	      holdTimeSeconds: 90
//	      gracefulRestart: {enabled: true, restartTimeSeconds: 120}
//
// [Convert] documents the mapping. An object that does not convert (a field
// of the wrong type, an unknown field, a number out of range, an address
// that does not parse — see bgp.PolicyFromModel) is reported and skipped
// by the reflector.
//
// # Concurrency
//
// All functions are safe for concurrent use.
package bgpreflector
